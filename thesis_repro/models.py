"""Model builders: the Raffel & Ellis attention network and the thesis addition LSTMs.

Each builder cites the section it implements. Initialisation follows the papers: weights drawn
from N(0, 1/sqrt(fan_in)) (Raffel & Ellis 2.1), biases zero.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Literal

import keras

from thesis_repro.layers import (
    LEAKY_SLOPE,
    AttentionGatedLSTM,
    AttentionPooling,
    ChunkedFeedForwardPooling,
    LengthMask,
    MeanPooling,
    leaky_relu,
    normal_fan_in,
    scaled_sigmoid,
)

Pooling = Literal["attention", "mean"]


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
    """
    if pooling not in ("attention", "mean"):
        raise ValueError(f"pooling must be 'attention' or 'mean', got {pooling!r}.")
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
        y = keras.layers.Dense(1, leaky_relu, kernel_initializer=init(hidden), name="y")(s)
        y = keras.layers.Reshape((), name="prediction")(y)
    else:
        y = keras.layers.Dense(
            classes, "softmax", kernel_initializer=init(hidden), name="prediction"
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


# --------------------------------------------------------------------------------------------
# Thesis addition problem (Malik 2016, 2.1 and 3.1): LSTM and attention-gated LSTM
# --------------------------------------------------------------------------------------------


THESIS_UNITS = 64
THESIS_HIDDEN = 100


def normal_output_dim(output_dim: int, seed: int | None = None) -> keras.initializers.Initializer:
    """N(0, 1/sqrt(output_dim)): thesis 3.1 ("std 1/sqrt(output_dim)"), unlike Raffel's fan_in.

    For a Keras kernel of shape (input_dim, output_dim). The LSTM's matrices are taken per gate
    as thesis 2.1.2 writes them (``W_xi``, ``W_hi``, ... each with ``units`` outputs), so their
    output_dim is ``units``, not the ``4*units`` columns of Keras's packed kernel.
    """
    return keras.initializers.RandomNormal(0.0, 1.0 / float(output_dim) ** 0.5, seed=seed)


def thesis_reinitialize(model: keras.Model, seed: int | None = None) -> keras.Model:
    """Redraw every Dense and attention kernel of ``model`` from N(0, 1/sqrt(output_dim)) (3.1).

    Biases stay zero. Used on ``raffel_model`` (built with Raffel's fan_in rule) to give the
    attention network of thesis 2.1.2 the thesis's initialisation. Returns ``model``.
    """
    for index, layer in enumerate(model.layers):
        kernel = getattr(layer, "kernel", None)
        if isinstance(layer, keras.layers.Dense | AttentionPooling) and kernel is not None:
            init = normal_output_dim(kernel.shape[-1], None if seed is None else seed * 100 + index)
            kernel.assign(init(kernel.shape))
    return model


def _thesis_inputs(features: int) -> tuple[keras.KerasTensor, keras.KerasTensor]:
    return keras.Input((None, features), name="x"), keras.Input((), dtype="int32", name="lengths")


def _thesis_readout(h_final: keras.KerasTensor, seed: int | None) -> keras.KerasTensor:
    """``y = LReLU(W_out h_final + b_out)``, W_out in R^{1 x units} (thesis 2.1.1)."""
    y = keras.layers.Dense(1, leaky_relu, kernel_initializer=normal_output_dim(1, seed), name="y")(
        h_final
    )
    return keras.layers.Reshape((), name="prediction")(y)


def thesis_lstm_model(
    features: int = 2,
    units: int = THESIS_UNITS,
    gate_activation: str | Callable = "scaled_sigmoid",
    seed: int | None = None,
    name: str = "lstm",
    unit_forget_bias: bool = False,
) -> keras.Model:
    """The plain LSTM of thesis 2.1.1: one 64-unit layer, ``y = LReLU(W_out h_final + b_out)``.

    ``keras.layers.LSTM`` with the scaled sigmoid of thesis ch. 3 in its gates (pass
    ``gate_activation="sigmoid"`` for the textbook cell), weights N(0, 1/sqrt(output_dim)), all
    biases zero (``unit_forget_bias=True``: forget-gate bias 1, the Keras default then and now,
    not the thesis's). ``h_final`` is the state after each sequence's last true step: the padding
    is masked from ``lengths``. Inputs: ``x`` (batch, T, features), ``lengths``.
    """
    x, lengths = _thesis_inputs(features)
    seeds = _seeds(seed)
    gate = scaled_sigmoid if gate_activation == "scaled_sigmoid" else gate_activation
    h_final = keras.layers.LSTM(
        units,
        recurrent_activation=gate,
        kernel_initializer=normal_output_dim(units, next(seeds)),
        recurrent_initializer=normal_output_dim(units, next(seeds)),
        unit_forget_bias=unit_forget_bias,
        name="lstm",
    )(x, mask=LengthMask(name="mask")(x, lengths))
    y = _thesis_readout(h_final, next(seeds))
    return keras.Model({"x": x, "lengths": lengths}, y, name=name)


def attention_gated_lstm_model(
    attention: keras.Model | None = None,
    freeze_attention: bool = True,
    features: int = 2,
    units: int = THESIS_UNITS,
    hidden: int = THESIS_HIDDEN,
    gate_activation: str | Callable = "scaled_sigmoid",
    seed: int | None = None,
    name: str = "gated",
    unit_forget_bias: bool = False,
) -> keras.Model:
    """The attention-gated LSTM of thesis 2.1.2: Raffel energies e_t added to the input gate.

    The attention network's first half, ``h_t = LReLU(W_xh x_t + b)`` and
    ``e_t = tanh(W_hc h_t + b)`` (layers ``h`` and ``attention`` of :func:`raffel_model`),
    computes the energies; ``AttentionGatedLSTM`` (64 units, scaled-sigmoid gates) adds e_t to its
    input-gate pre-activation; ``y = LReLU(W_out h_final + b_out)`` as in thesis 2.1.1.

    - ``attention`` given (a trained ``raffel_model``): its ``h`` and ``attention`` weights are
      copied in and, with ``freeze_attention``, frozen -- the "pretrained" reading of SPEC E3.
    - ``attention=None``: a fresh attention network with N(0, 1/sqrt(output_dim)) weights,
      trained end to end through the LSTM's loss (its own output layers are not used) -- the
      "joint" reading.

    LSTM and readout weights are N(0, 1/sqrt(output_dim)), biases zero (``unit_forget_bias``:
    forget-gate bias 1). Inputs: ``x`` (batch, T, features) and ``lengths``; padded steps are
    masked in the LSTM.
    """
    seeds = _seeds(seed)
    x, lengths = _thesis_inputs(features)
    h_layer = keras.layers.Dense(
        hidden, leaky_relu, kernel_initializer=normal_output_dim(hidden, next(seeds)), name="h"
    )
    pooling = AttentionPooling(
        return_attention=True,
        kernel_initializer=normal_output_dim(1, next(seeds)),
        name="attention",
    )
    _, _, energies = pooling(h_layer(x), lengths=lengths)
    if attention is not None:
        for layer in (h_layer, pooling):
            layer.set_weights(attention.get_layer(layer.name).get_weights())
            layer.trainable = not freeze_attention
    h_final = AttentionGatedLSTM(
        units,
        gate_activation=gate_activation,
        kernel_initializer=normal_output_dim(units, next(seeds)),
        recurrent_initializer=normal_output_dim(units, next(seeds)),
        unit_forget_bias=unit_forget_bias,
        name="lstm",
    )([x, energies], lengths=lengths)
    y = _thesis_readout(h_final, next(seeds))
    return keras.Model({"x": x, "lengths": lengths}, y, name=name)


def _seeds(seed: int | None) -> Iterator[int | None]:
    """Distinct initializer seeds derived from ``seed`` (all None when ``seed`` is None)."""
    return (None if seed is None else seed * 1000 + index for index in itertools.count())
