"""The Raffel & Ellis (2015) feed-forward attention network (section 2.1)."""

from __future__ import annotations

import re
from typing import Literal

import keras
import numpy as np

from thesis_repro.ffattention.config import POOLINGS
from thesis_repro.layers import (
    LEAKY_SLOPE,
    AttentionPooling,
    ChunkedFeedForwardPooling,
    MeanPooling,
    leaky_relu,
    normal_fan_in,
)

Pooling = Literal["attention", "mean"]  # config.POOLINGS as a type


def raffel_model(
    features: int = 2,
    hidden: int = 100,
    pooling: Pooling = "attention",
    classes: int | None = None,
    seed: int | None = None,
    name: str | None = None,
    chunked: bool = False,
    chunk_size: int = 64,
) -> keras.Model:
    """Raffel & Ellis 2.1 feed-forward attention network (thesis 2.1.2 "Attention mechanism").

    ``h_t = f(W_xh x_t + b)``; ``c`` = attention (eq. 1) or mean (eq. 2) pooling of h over the
    sequence's true length; ``s = f(W_cs c + b)``; ``y = f(W_sy s + b)`` with f the leaky ReLU
    everywhere, the output included. With ``classes`` the output is a softmax over that many
    classes instead (the temporal-order task). Inputs: ``x`` (batch, T, features) and
    ``lengths`` (batch,).

    ``chunked=True`` computes h and the pooling with the fused ``ChunkedFeedForwardPooling``
    (same function, same initialisation; memory independent of T, several times faster at long
    T; see ``benchmarks/bench_ffattention.py``). Its weights live in one layer named "pool".
    The output layer computes in float32 whatever the global dtype policy (mixed precision:
    the prediction and the loss stay float32).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}.")
    seeds = iter(range(0 if seed is None else seed * 10, 10**9))

    def init(fan_in: int) -> keras.initializers.Initializer:
        return normal_fan_in(fan_in, None if seed is None else next(seeds))

    x = keras.Input((None, features), name="x")
    lengths = keras.Input((), dtype="int32", name="lengths")
    if chunked:
        c = ChunkedFeedForwardPooling(
            hidden,
            pooling=pooling,
            negative_slope=LEAKY_SLOPE,
            chunk_size=chunk_size,
            kernel_initializer=init(features),
            attention_initializer=init(hidden),
            name="pool",
        )(x, lengths=lengths)
    else:
        c = _unfused_pooling(x, lengths, hidden, pooling, init)
    s = keras.layers.Dense(hidden, leaky_relu, kernel_initializer=init(hidden), name="s")(c)
    if classes is None:
        y = keras.layers.Dense(
            1, leaky_relu, kernel_initializer=init(hidden), name="y", dtype="float32"
        )(s)
        y = keras.layers.Reshape((), name="prediction", dtype="float32")(y)
    else:
        y = keras.layers.Dense(
            classes, "softmax", kernel_initializer=init(hidden), name="prediction", dtype="float32"
        )(s)
    return keras.Model({"x": x, "lengths": lengths}, y, name=name or f"raffel_{pooling}")


def _unfused_pooling(x, lengths, hidden: int, pooling: Pooling, init) -> keras.KerasTensor:
    """``h = f(W_xh x + b)`` as a Dense layer "h", then the pooling layer of eq. 1 or eq. 2."""
    h = keras.layers.Dense(hidden, leaky_relu, kernel_initializer=init(x.shape[-1]), name="h")(x)
    if pooling == "attention":
        return AttentionPooling(kernel_initializer=init(hidden), name="attention")(
            h, lengths=lengths
        )
    return MeanPooling(name="mean")(h, lengths=lengths)


# The fused layer's weights under the names of the Dense "h" + pooling layer they equal.
_FUSED_AS_LAYERS = {
    "pool/kernel": "h/kernel",
    "pool/bias": "h/bias",
    "pool/attention_kernel": "attention/kernel",
    "pool/attention_bias": "attention/bias",
}


def _weight_key(path: str) -> str:
    return _FUSED_AS_LAYERS.get(path, path)


def _slot_key(path: str) -> str:
    """An optimizer variable (``adam_1/pool_kernel_momentum``, ``adam/iteration``) named as in
    the unfused network, by the optimizer that holds it without the number Keras appends to
    make names unique or the scope it was built in (``loss_scale_optimizer/adam/…`` when built
    in a train step): ``loss_scale_optimizer/…`` and its inner ``adam/…`` stay apart under
    mixed_float16."""
    scope, _, name = path.rpartition("/")
    owner = scope.rpartition("/")[2]
    for fused, layers in _FUSED_AS_LAYERS.items():
        prefix = fused.replace("/", "_") + "_"
        if name.startswith(prefix):
            name = layers.replace("/", "_") + "_" + name[len(prefix) :]
            break
    return f"{re.sub(r'_[0-9]+$', '', owner)}/{name}"


_ATTENTION_WEIGHT = re.compile(r"(^|/)attention[/_]")  # "attention/kernel", "adam/attention_…"


def _unused_by_mean(name: str, other: dict) -> bool:
    """``name`` is the fused mean pooling's attention weight (or its slot), which the other
    network, with no attention weights at all, has no use for."""
    found = _ATTENTION_WEIGHT.search
    return bool(found(name)) and not any(found(n) for n in other)


def transfer_training_state(source: keras.Model, target: keras.Model) -> None:
    """Copy the weights and the optimizer state (Adam's moments, its update count) of a compiled
    :func:`raffel_model` into ``target``, the same network (section 2.1) built with the other
    implementation of h and the pooling (fused ``pool`` layer, or Dense ``h`` + pooling layer) or
    another chunk size: a run checkpointed on one device goes on in the implementation that is
    fastest on another, on the same trajectory.

    Raises ValueError where the two are not the same network: a weight of one without a
    counterpart of the same size in the other. Only the fused mean pooling's attention weights
    (empty, and a bias it never uses) may lack one.
    """
    target.optimizer.build(target.trainable_variables)
    assignments = []
    for into, out_of, key in (
        (target.weights, source.weights, _weight_key),
        (target.optimizer.variables, source.optimizer.variables, _slot_key),
    ):
        ours = {key(v.path): v for v in into}
        theirs = {key(v.path): v for v in out_of}
        for name in ours.keys() ^ theirs.keys():
            if not _unused_by_mean(name, theirs if name in ours else ours):
                raise ValueError(
                    f"cannot carry {source.name}'s training state into {target.name}: "
                    f"{name} is in only one of them."
                )
        for name in ours.keys() & theirs.keys():
            value = keras.ops.convert_to_numpy(theirs[name].value)
            if value.size != int(np.prod(ours[name].shape)):
                raise ValueError(
                    f"cannot carry {source.name}'s training state into {target.name}: "
                    f"{name} has shape {value.shape} there and {tuple(ours[name].shape)} here."
                )
            assignments.append((ours[name], value.reshape(ours[name].shape)))
    for variable, value in assignments:  # all checked first: no half-carried state
        variable.assign(value)
