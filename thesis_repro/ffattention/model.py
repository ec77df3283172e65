"""The Raffel & Ellis (2015) feed-forward attention network (section 2.1)."""

from __future__ import annotations

from typing import Literal

import keras

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
