"""The attention-gated LSTM of thesis 2.1.2 and the gate non-linearity of thesis ch. 3.

- ``scaled_sigmoid``: ``1.2*sigmoid(x) - 0.1``, the gate activation of thesis ch. 3.
- ``AttentionGatedLSTMCell`` / ``AttentionGatedLSTM``: the LSTM of thesis 2.1.2 whose input gate
  receives an external attention energy e_t.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
from keras import ops

from thesis_repro.layers._common import (
    PACKAGE,
    _check_rank,
    _deserialize_activation,
    _serialize_activation,
)
from thesis_repro.layers.masking import sequence_keep

SCALED_SIGMOID_SCALE = 1.2
SCALED_SIGMOID_SHIFT = 0.1


@keras.saving.register_keras_serializable(package=PACKAGE)
def scaled_sigmoid(x: Any) -> Any:
    """Gate activation of thesis ch. 3: ``1.2*sigmoid(x) - 0.1``, range (-0.1, 1.1).

    The widened range lets a gate reach exactly 0 or 1 ("to enable gates' saturation").
    """
    return SCALED_SIGMOID_SCALE * ops.sigmoid(x) - SCALED_SIGMOID_SHIFT


def _get_activation(activation: str | Callable | None) -> Callable:
    """Resolve an activation name or callable; ``"scaled_sigmoid"`` names the thesis's gate."""
    if activation == "scaled_sigmoid":
        return scaled_sigmoid
    return keras.activations.get(activation)


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionGatedLSTMCell(keras.layers.Layer):
    """LSTM cell of thesis 2.1.2 whose input gate takes an external attention energy e_t.

    With s the gate activation (default ``scaled_sigmoid``, thesis ch. 3)::

        i_t = s(W_xi x_t + W_hi h_{t-1} + b_i + e_t)     # <- the extra e_t
        f_t = s(W_xf x_t + W_hf h_{t-1} + b_f)
        g_t = tanh(W_xg x_t + W_hg h_{t-1} + b_g)
        o_t = s(W_xo x_t + W_ho h_{t-1} + b_o)
        c_t = f_t * c_{t-1} + i_t * g_t,   h_t = o_t * tanh(c_t)

    Keras 3 RNN cells take one tensor per step, so the cell's per-step input is ``x_t`` with the
    energy appended as its last feature: ``concat([x_t, e_t[..., None]], -1)``. Weights use the
    gate order and layout of ``keras.layers.LSTMCell`` (i, f, g, o), so weights copy across.
    ``AttentionGatedLSTM`` hides the packing behind ``layer([x, energies])``.
    ``unit_forget_bias=True`` adds 1 to the forget-gate bias at initialisation, as
    ``keras.layers.LSTMCell`` does by default (the thesis's "all biases zero" is the default here).
    """

    def __init__(
        self,
        units: int,
        gate_activation: str | Callable = "scaled_sigmoid",
        activation: str | Callable = "tanh",
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        unit_forget_bias: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if units < 1:
            raise ValueError(f"units must be a positive integer, got {units}.")
        self.units = int(units)
        self.unit_forget_bias = bool(unit_forget_bias)
        self._gate_activation_config = _serialize_activation(gate_activation)
        self._activation_config = _serialize_activation(activation)
        self.gate_activation = _get_activation(gate_activation)
        self.activation = _get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.state_size = [self.units, self.units]
        self.output_size = self.units

    def build(self, input_shape: tuple) -> None:
        """``input_shape[-1]`` is the number of input features plus one (the packed energy)."""
        features = input_shape[-1] - 1
        if features < 1:
            raise ValueError(
                "AttentionGatedLSTMCell expects inputs [x_t, e_t] packed on the last axis "
                f"(features + 1 >= 2 channels), got {input_shape[-1]}."
            )
        self.kernel = self.add_weight(
            name="kernel", shape=(features, 4 * self.units), initializer=self.kernel_initializer
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=(self.units, 4 * self.units),
            initializer=self.recurrent_initializer,
        )
        bias_initializer = self.bias_initializer
        if self.unit_forget_bias:
            units, base = self.units, self.bias_initializer

            def bias_initializer(shape: tuple, dtype: Any = None) -> Any:
                """``bias_initializer`` with 1 added to the forget-gate block (i, f, g, o)."""
                return base(shape, dtype) + ops.concatenate(
                    [ops.zeros((units,)), ops.ones((units,)), ops.zeros((2 * units,))]
                )

        self.bias = self.add_weight(
            name="bias", shape=(4 * self.units,), initializer=bias_initializer
        )

    def input_kernel(self) -> Any:
        """``W_x`` with one extra row for e_t: 1 in the input-gate block, 0 elsewhere.

        ``[x_t, e_t] @ input_kernel()`` is ``x_t W_x`` plus e_t on the input gate only, so the
        energy costs no extra operation inside the time loop.
        """
        energy_row = ops.concatenate(
            [ops.ones((1, self.units)), ops.zeros((1, 3 * self.units))], axis=-1
        )
        return ops.concatenate([self.kernel, ops.cast(energy_row, self.kernel.dtype)], axis=0)

    def project_inputs(self, x: Any, energies: Any) -> Any:
        """Input part of all four pre-activations: ``x W_x + b`` plus e_t on the input gate.

        Works on one step (batch, F) or a whole sequence (batch, T, F).
        """
        packed = ops.concatenate([x, ops.expand_dims(energies, -1)], axis=-1)
        return ops.matmul(packed, self.input_kernel()) + self.bias

    def recurrent_step(self, z_x: Any, states: list) -> tuple[Any, list]:
        """One step given the projected input ``z_x`` (see ``project_inputs``)."""
        h_prev, c_prev = states
        z = z_x + ops.matmul(h_prev, self.recurrent_kernel)
        z_i, z_f, z_g, z_o = ops.split(z, 4, axis=-1)
        i = self.gate_activation(z_i)
        f = self.gate_activation(z_f)
        g = self.activation(z_g)
        o = self.gate_activation(z_o)
        c = f * c_prev + i * g
        h = o * self.activation(c)
        return h, [h, c]

    def call(self, inputs: Any, states: list, training: bool | None = None) -> tuple[Any, list]:
        z_x = ops.matmul(inputs, self.input_kernel()) + self.bias
        return self.recurrent_step(z_x, states)

    def get_initial_state(self, batch_size: Any = None) -> list:
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype) for _ in range(2)]

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "gate_activation": self._gate_activation_config,
            "activation": self._activation_config,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "unit_forget_bias": self.unit_forget_bias,
        }

    @classmethod
    def from_config(cls, config: dict) -> AttentionGatedLSTMCell:
        config = dict(config)
        for key in ("gate_activation", "activation"):
            config[key] = _deserialize_activation(config[key])
        return cls(**config)


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionGatedLSTM(keras.layers.RNN):
    """Sequence layer of ``AttentionGatedLSTMCell``, called as ``layer([x, energies])``.

    ``x``: (batch, T, F); ``energies``: (batch, T) or (batch, T, 1), e.g. the ``e`` returned by
    ``AttentionPooling(return_attention=True)``. Honours a Keras mask on ``x`` (masked steps keep
    the previous state), or ``lengths=``. ``x`` and ``e`` are packed into one step input
    ``[x_t, e_t]`` for the cell, whose input kernel carries e_t to the input gate
    (``AttentionGatedLSTMCell.input_kernel``). The projection runs inside the time loop: with a
    few input features that is faster on CPU than projecting all steps beforehand, which makes
    the loop carry and differentiate a (batch, T, 4*units) sequence
    (``benchmarks/bench_lstm.py``).
    """

    def __init__(
        self,
        units: int,
        gate_activation: str | Callable = "scaled_sigmoid",
        activation: str | Callable = "tanh",
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        unit_forget_bias: bool = False,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        unroll: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("cell", None)
        self.lstm_cell = AttentionGatedLSTMCell(
            units,
            gate_activation=gate_activation,
            activation=activation,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias,
            name="cell",
        )
        super().__init__(
            self.lstm_cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            unroll=unroll,
            **kwargs,
        )
        self.units = self.lstm_cell.units
        self.supports_masking = True

    @staticmethod
    def _split_inputs(inputs: Any) -> tuple[Any, Any]:
        if not isinstance(inputs, list | tuple) or len(inputs) != 2:
            raise ValueError(
                "AttentionGatedLSTM is called as layer([x, energies]) with x of shape "
                "(batch, T, features) and energies of shape (batch, T)."
            )
        return inputs[0], inputs[1]

    @staticmethod
    def _check_shapes(x_shape: tuple, e_shape: tuple) -> None:
        _check_rank(x_shape, 3, "x of shape (batch, T, features)", "AttentionGatedLSTM")
        if len(e_shape) == 3 and e_shape[-1] == 1:
            e_shape = e_shape[:2]
        _check_rank(e_shape, 2, "energies of shape (batch, T)", "AttentionGatedLSTM")
        for axis, name in ((0, "batch size"), (1, "length T")):
            a, b = x_shape[axis], e_shape[axis]
            if a is not None and b is not None and a != b:
                raise ValueError(
                    f"AttentionGatedLSTM: x and energies differ in {name}: {a} vs {b}."
                )

    def build(self, input_shape: Any) -> None:
        x_shape, e_shape = self._split_inputs(input_shape)
        self._check_shapes(tuple(x_shape), tuple(e_shape))
        super().build((*x_shape[:-1], x_shape[-1] + 1))

    def compute_output_shape(self, input_shape: Any) -> Any:
        x_shape, _ = self._split_inputs(input_shape)
        return super().compute_output_shape(tuple(x_shape))

    def compute_mask(self, inputs: Any, mask: Any | None = None) -> Any:
        if isinstance(mask, list | tuple):
            mask = mask[0]
        return super().compute_mask(inputs[0], mask)

    def call(
        self,
        inputs: Any,
        initial_state: Any = None,
        mask: Any | None = None,
        training: bool | None = None,
        lengths: Any | None = None,
    ) -> Any:
        x, energies = self._split_inputs(inputs)
        energies = ops.convert_to_tensor(energies, dtype=x.dtype)
        self._check_shapes(tuple(x.shape), tuple(energies.shape))
        if len(energies.shape) == 3:
            energies = ops.squeeze(energies, -1)
        if isinstance(mask, list | tuple):
            mask = mask[0]
        mask = sequence_keep(x, mask, lengths, type(self).__name__)
        packed = ops.concatenate([x, ops.expand_dims(energies, -1)], axis=-1)
        return super().call(packed, initial_state=initial_state, mask=mask, training=training)

    def get_config(self) -> dict:
        config = keras.layers.Layer.get_config(self)  # RNN's own would serialize the step
        config.update(
            return_sequences=self.return_sequences,
            return_state=self.return_state,
            go_backwards=self.go_backwards,
            unroll=self.unroll,
        )
        cell_config = self.lstm_cell.get_config()
        for key in (
            "units",
            "gate_activation",
            "activation",
            "kernel_initializer",
            "recurrent_initializer",
            "bias_initializer",
            "unit_forget_bias",
        ):
            config[key] = cell_config[key]
        return config

    @classmethod
    def from_config(cls, config: dict) -> AttentionGatedLSTM:
        config = dict(config)
        for key in ("gate_activation", "activation"):
            config[key] = _deserialize_activation(config[key])
        return cls(**config)
