"""The models of thesis 3.1 (Malik 2016, 2.1): the LSTM and the attention-gated LSTM.

Each builder cites the section it implements. Initialisation follows thesis 3.1: weights drawn
from N(0, 1/sqrt(output_dim)), biases zero (Raffel & Ellis's N(0, 1/sqrt(fan_in)) is
``thesis_repro.layers.normal_fan_in``). The attention network of 2.1.2 is
``thesis_repro.ffattention.model.raffel_model``, re-initialised by :func:`thesis_reinitialize`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import keras

from thesis_repro.layers import (
    AttentionGatedLSTM,
    AttentionPooling,
    LengthMask,
    leaky_relu,
    scaled_sigmoid,
)

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
    ``e_t = tanh(W_hc h_t + b)`` (layers ``h`` and ``attention`` of
    ``ffattention.model.raffel_model``), computes the energies; ``AttentionGatedLSTM`` (64
    units, scaled-sigmoid gates) adds e_t to its input-gate pre-activation;
    ``y = LReLU(W_out h_final + b_out)`` as in thesis 2.1.1.

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
