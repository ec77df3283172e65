"""The thesis's custom Keras layers: feed-forward attention pooling and the attention-gated LSTM.

- ``AttentionPooling``: Raffel & Ellis (2015) eq. 1; thesis 2.1.2 and 2.2.2.
- ``MeanPooling``: Raffel & Ellis eq. 2, the unweighted baseline.
- ``scaled_sigmoid``: the gate non-linearity of thesis ch. 3, ``1.2*sigmoid(x) - 0.1``.
- ``AttentionGatedLSTMCell`` / ``AttentionGatedLSTM``: the LSTM of thesis 2.1.2 whose input gate
  receives an external attention energy e_t.

All layers are registered under the Keras package name ``thesis_repro`` so that models using them
save to and load from ``.keras`` files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
from keras import ops

PACKAGE = "thesis_repro"
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


def _serialize_activation(activation: str | Callable | None) -> Any:
    if activation is None or isinstance(activation, str):
        return activation
    return keras.saving.serialize_keras_object(activation)


def _deserialize_activation(config: Any) -> Any:
    if config is None or isinstance(config, str):
        return config
    return keras.saving.deserialize_keras_object(config)


def _check_rank(shape: tuple, rank: int, what: str, layer: str) -> None:
    if len(shape) != rank:
        raise ValueError(
            f"{layer} expects {what} of rank {rank}, got shape {tuple(shape)} (rank {len(shape)})."
        )


def sequence_mask(
    steps: int | Any, mask: Any | None = None, lengths: Any | None = None
) -> Any | None:
    """Boolean (batch, steps) mask from a Keras mask and/or per-sequence ``lengths``.

    Both may be given; a step is kept only if both keep it. Returns None when neither is given.
    """
    if lengths is not None:
        lengths = ops.convert_to_tensor(lengths)
        if len(lengths.shape) != 1:
            raise ValueError(
                f"lengths must be a vector (batch,), got shape {tuple(lengths.shape)}."
            )
        if not isinstance(steps, int) or _is_concrete(lengths):
            _check_lengths_values(lengths, steps)
        positions = ops.arange(steps, dtype="int32")
        from_lengths = ops.less(positions[None, :], ops.cast(lengths, "int32")[:, None])
        mask = (
            from_lengths if mask is None else ops.logical_and(ops.cast(mask, "bool"), from_lengths)
        )
    elif mask is not None:
        mask = ops.cast(mask, "bool")
    return mask


def _is_concrete(x: Any) -> bool:
    try:
        ops.convert_to_numpy(x)
    except Exception:  # symbolic tensor inside a traced function
        return False
    return True


def _check_lengths_values(lengths: Any, steps: int | Any) -> None:
    if not (_is_concrete(lengths) and isinstance(steps, int)):
        return
    values = ops.convert_to_numpy(lengths)
    if values.size and (values.min() < 0 or values.max() > steps):
        raise ValueError(
            f"lengths must lie in [0, {steps}] (the padded sequence length), "
            f"got values in [{values.min()}, {values.max()}]."
        )


def _check_batch(mask: Any | None, batch: Any, layer: str) -> None:
    if mask is None or not isinstance(batch, int) or not isinstance(mask.shape[0], int):
        return
    if mask.shape[0] != batch:
        raise ValueError(f"{layer}: mask/lengths cover {mask.shape[0]} sequences, inputs {batch}.")


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionPooling(keras.layers.Layer):
    """Feed-forward attention pooling, Raffel & Ellis (2015) eq. 1 (thesis 2.1.2, 2.2.2).

    Over a state sequence ``h`` of shape (batch, T, D)::

        e_t = tanh(w . h_t + b)        # energies (the thesis's "logits of attention layer")
        alpha = softmax_t(e)           # over the unmasked steps only
        c = sum_t alpha_t h_t          # context, shape (batch, D)

    Call as ``layer(h)``, ``layer(h, mask=m)`` or ``layer(h, lengths=n)``; padded steps get a weight
    of exactly zero. With ``return_attention=True`` the layer returns ``(c, alpha, e)``; the
    energies
    of padded steps are returned as computed (they carry no weight).

    The softmax subtracts the per-sequence maximum energy, so it cannot overflow for any T.
    """

    def __init__(
        self,
        return_attention: bool = False,
        energy_activation: str | Callable = "tanh",
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.return_attention = return_attention
        self.energy_activation = keras.activations.get(energy_activation)
        self._energy_activation_config = _serialize_activation(energy_activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape: tuple) -> None:
        _check_rank(input_shape, 3, "a state sequence (batch, T, D)", "AttentionPooling")
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], 1), initializer=self.kernel_initializer
        )
        self.bias = self.add_weight(name="bias", shape=(1,), initializer=self.bias_initializer)

    def energies(self, h: Any) -> Any:
        """``e_t = tanh(w . h_t + b)`` for every step: (batch, T, D) -> (batch, T)."""
        return self.energy_activation(ops.squeeze(ops.matmul(h, self.kernel), -1) + self.bias)

    def call(self, h: Any, mask: Any | None = None, lengths: Any | None = None) -> Any:
        _check_rank(h.shape, 3, "a state sequence (batch, T, D)", "AttentionPooling")
        keep = sequence_mask(
            h.shape[1] if h.shape[1] is not None else ops.shape(h)[1], mask, lengths
        )
        _check_batch(keep, h.shape[0], "AttentionPooling")
        e = self.energies(h)
        alpha = masked_softmax(e, keep)
        c = ops.einsum("bt,btd->bd", alpha, h)
        if self.return_attention:
            return c, alpha, e
        return c

    def compute_mask(self, inputs: Any, mask: Any | None = None) -> None:
        return None

    def compute_output_shape(self, input_shape: tuple) -> Any:
        c_shape = (input_shape[0], input_shape[2])
        if self.return_attention:
            return c_shape, tuple(input_shape[:2]), tuple(input_shape[:2])
        return c_shape

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "return_attention": self.return_attention,
            "energy_activation": self._energy_activation_config,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }

    @classmethod
    def from_config(cls, config: dict) -> AttentionPooling:
        config = dict(config)
        config["energy_activation"] = _deserialize_activation(config["energy_activation"])
        return cls(**config)


def masked_softmax(e: Any, keep: Any | None) -> Any:
    """Softmax over axis 1 in which steps where ``keep`` is False get exactly zero weight.

    The maximum over kept steps is subtracted first (no overflow at any T); a sequence with no kept
    step gets all-zero weights rather than NaN.
    """
    if keep is None:
        weights = ops.exp(e - ops.max(e, axis=1, keepdims=True))
        return weights / ops.sum(weights, axis=1, keepdims=True)
    very_negative = ops.full_like(e, -1e30)
    shifted = ops.where(keep, e, very_negative)
    shifted = shifted - ops.max(shifted, axis=1, keepdims=True)
    weights = ops.where(keep, ops.exp(shifted), ops.zeros_like(e))
    total = ops.sum(weights, axis=1, keepdims=True)
    return weights / ops.maximum(total, ops.cast(1e-30, e.dtype))


@keras.saving.register_keras_serializable(package=PACKAGE)
class MeanPooling(keras.layers.Layer):
    """Unweighted mean over time, Raffel & Ellis (2015) eq. 2: ``c = (1/T) sum_t h_t``.

    Mask- and lengths-aware like ``AttentionPooling``: T counts the unpadded steps only.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape: tuple) -> None:
        _check_rank(input_shape, 3, "a state sequence (batch, T, D)", "MeanPooling")

    def call(self, h: Any, mask: Any | None = None, lengths: Any | None = None) -> Any:
        _check_rank(h.shape, 3, "a state sequence (batch, T, D)", "MeanPooling")
        keep = sequence_mask(
            h.shape[1] if h.shape[1] is not None else ops.shape(h)[1], mask, lengths
        )
        _check_batch(keep, h.shape[0], "MeanPooling")
        if keep is None:
            return ops.mean(h, axis=1)
        weights = ops.cast(keep, h.dtype)
        count = ops.maximum(ops.sum(weights, axis=1, keepdims=True), ops.cast(1.0, h.dtype))
        return ops.einsum("bt,btd->bd", weights / count, h)

    def compute_mask(self, inputs: Any, mask: Any | None = None) -> None:
        return None

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], input_shape[2])


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
        mask = sequence_mask(
            x.shape[1] if x.shape[1] is not None else ops.shape(x)[1], mask, lengths
        )
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


__all__ = [
    "AttentionGatedLSTM",
    "AttentionGatedLSTMCell",
    "AttentionPooling",
    "MeanPooling",
    "masked_softmax",
    "scaled_sigmoid",
    "sequence_mask",
]


def _chunked_pool_tf(x, lengths, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """Fused ``h = lrelu(x W + b)`` + pooling over T in chunks, with a recomputing gradient.

    Forward: ``p_t = mask_t * exp(e_t)`` (attention; ``e_t = tanh(w.h_t + b)`` lies in [-1, 1],
    so ``exp`` cannot overflow and no running maximum is needed) or ``p_t = mask_t`` (mean);
    ``c = N / Z`` with ``N = sum_t p_t h_t`` and ``Z = sum_t p_t``, accumulated chunk by chunk in
    a ``tf.while_loop``. Backward: each chunk's h is recomputed from x, so nothing of size
    (batch, T, D) is ever kept.
    """
    import tensorflow as tf

    batch, steps, features = tf.shape(x)[0], tf.shape(x)[1], x.shape[2]
    n_chunks = (steps + chunk - 1) // chunk
    pad = n_chunks * chunk - steps
    mask = tf.cast(tf.range(steps)[None, :] < tf.cast(lengths, tf.int32)[:, None], x.dtype)
    # (n_chunks, batch, chunk, ...) so that chunk i is x_chunks[i].
    x_chunks = tf.transpose(
        tf.reshape(tf.pad(x, [[0, 0], [0, pad], [0, 0]]), (batch, n_chunks, chunk, features)),
        (1, 0, 2, 3),
    )
    mask_chunks = tf.transpose(
        tf.reshape(tf.pad(mask, [[0, 0], [0, pad]]), (batch, n_chunks, chunk)), (1, 0, 2)
    )

    def chunk_forward(i, kernel, bias, w, b):
        x_k, mask_k = x_chunks[i], mask_chunks[i]
        a = tf.einsum("btf,fd->btd", x_k, kernel) + bias
        h = tf.where(a > 0, a, slope * a)
        e = tf.tanh(tf.einsum("btd,d->bt", h, w) + b) if attend else None
        p = mask_k * tf.exp(e) if attend else mask_k
        return x_k, a, h, e, p

    @tf.custom_gradient
    def pool(x, kernel, bias, w, b):
        def accumulate(i, numerator, normaliser):
            _, _, h, _, p = chunk_forward(i, kernel, bias, w, b)
            numerator += tf.einsum("bt,btd->bd", p, h)
            normaliser += tf.reduce_sum(p, axis=1, keepdims=True)
            return i + 1, numerator, normaliser

        _, numerator, normaliser = tf.while_loop(
            lambda i, *_: i < n_chunks,
            accumulate,
            (0, tf.zeros((batch, kernel.shape[1]), x.dtype), tf.zeros((batch, 1), x.dtype)),
        )
        normaliser = tf.maximum(normaliser, 1e-30)
        c = numerator / normaliser

        def grad(g_c):
            g_numerator = g_c / normaliser
            g_normaliser = -tf.reduce_sum(g_c * c, axis=1, keepdims=True) / normaliser

            def backward(i, g_kernel, g_bias, g_w, g_b, g_x):
                x_k, a, h, e, p = chunk_forward(i, kernel, bias, w, b)
                g_h = p[:, :, None] * g_numerator[:, None, :]
                if attend:
                    g_p = tf.einsum("btd,bd->bt", h, g_numerator) + g_normaliser
                    g_s = g_p * p * (1.0 - e * e)
                    g_h += g_s[:, :, None] * w
                    g_w += tf.einsum("bt,btd->d", g_s, h)
                    g_b += tf.reduce_sum(g_s)
                g_a = tf.where(a > 0, g_h, slope * g_h)
                g_kernel += tf.einsum("btf,btd->fd", x_k, g_a)
                g_bias += tf.reduce_sum(g_a, axis=(0, 1))
                g_x = g_x.write(i, tf.einsum("btd,fd->btf", g_a, kernel))
                return i + 1, g_kernel, g_bias, g_w, g_b, g_x

            initial = (
                0,
                *(tf.zeros_like(v) for v in (kernel, bias, w, b)),
                tf.TensorArray(x.dtype, size=n_chunks),
            )
            _, g_kernel, g_bias, g_w, g_b, g_x = tf.while_loop(
                lambda i, *_: i < n_chunks, backward, initial
            )
            g_x = tf.reshape(tf.transpose(g_x.stack(), (1, 0, 2, 3)), (batch, -1, features))
            return g_x[:, :steps], g_kernel, g_bias, g_w, g_b

        return c, grad

    # Pass the weights as tensors (identity reads): custom_gradient then owns their gradients.
    return pool(x, *(tf.identity(v) for v in (kernel, bias, w, b)))


def _chunked_pool_jax(x, lengths, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """The same computation as :func:`_chunked_pool_tf` for JAX: ``lax.scan`` over the chunks
    and a ``jax.custom_vjp`` whose backward scan recomputes each chunk's h (nothing of size
    (batch, T, units) is kept; the carries are (batch, units))."""
    import jax
    import jax.numpy as jnp

    batch, steps, features = x.shape
    n_chunks = -(-steps // chunk)
    pad = n_chunks * chunk - steps
    mask = (jnp.arange(steps)[None, :] < jnp.asarray(lengths).astype("int32")[:, None]).astype(
        x.dtype
    )
    # (n_chunks, batch, chunk, ...) so that chunk i is x_chunks[i].
    x_chunks = jnp.pad(x, ((0, 0), (0, pad), (0, 0))).reshape(batch, n_chunks, chunk, features)
    x_chunks = x_chunks.transpose(1, 0, 2, 3)
    mask_chunks = jnp.pad(mask, ((0, 0), (0, pad))).reshape(batch, n_chunks, chunk)
    mask_chunks = mask_chunks.transpose(1, 0, 2)

    # Plain 2-D matmuls over the (batch x chunk) rows: XLA on a CPU runs them far faster than
    # the equivalent batched einsums.
    def rows(t):
        return t.reshape(-1, t.shape[-1])

    def chunk_forward(x_k, mask_k, kernel, bias, w, b):
        a = (rows(x_k) @ kernel).reshape(batch, chunk, -1) + bias
        h = jnp.maximum(a, slope * a)  # leaky ReLU for 0 <= slope <= 1 (a select is slower)
        e = jnp.tanh(h @ w + b) if attend else None
        p = mask_k * jnp.exp(e) if attend else mask_k
        return a, h, e, p

    def forward(x_chunks, mask_chunks, kernel, bias, w, b):
        def accumulate(carry, inputs):
            numerator, normaliser = carry
            _, h, _, p = chunk_forward(*inputs, kernel, bias, w, b)
            numerator += jnp.sum(p[:, :, None] * h, axis=1)
            normaliser += jnp.sum(p, axis=1, keepdims=True)
            return (numerator, normaliser), None

        initial = (jnp.zeros((batch, kernel.shape[1]), x.dtype), jnp.zeros((batch, 1), x.dtype))
        (numerator, normaliser), _ = jax.lax.scan(accumulate, initial, (x_chunks, mask_chunks))
        normaliser = jnp.maximum(normaliser, 1e-30)
        return numerator / normaliser, normaliser

    @jax.custom_vjp
    def pool(x_chunks, mask_chunks, kernel, bias, w, b):
        return forward(x_chunks, mask_chunks, kernel, bias, w, b)[0]

    def pool_forward(x_chunks, mask_chunks, kernel, bias, w, b):
        c, normaliser = forward(x_chunks, mask_chunks, kernel, bias, w, b)
        return c, (x_chunks, mask_chunks, kernel, bias, w, b, c, normaliser)

    def pool_backward(saved, g_c):
        x_chunks, mask_chunks, kernel, bias, w, b, c, normaliser = saved
        g_numerator = g_c / normaliser
        g_normaliser = -jnp.sum(g_c * c, axis=1, keepdims=True) / normaliser

        def backward(grads, inputs):
            g_kernel, g_bias, g_w, g_b = grads
            x_k, mask_k = inputs
            a, h, e, p = chunk_forward(x_k, mask_k, kernel, bias, w, b)
            g_h = p[:, :, None] * g_numerator[:, None, :]
            if attend:
                g_p = jnp.sum(h * g_numerator[:, None, :], axis=2) + g_normaliser
                g_s = g_p * p * (1.0 - e * e)
                g_h += g_s[:, :, None] * w
                g_w += g_s.reshape(-1) @ rows(h)
                g_b += jnp.sum(g_s)
            # d lrelu / da = 1 (a > 0) or slope (a < 0), written without a select; at a == 0
            # (measure zero; padded steps have g_h == 0) it gives the mean of the two.
            g_a = g_h * ((1 + slope) / 2 + (1 - slope) / 2 * jnp.sign(a))
            g_kernel += rows(x_k).T @ rows(g_a)
            g_bias += jnp.sum(g_a, axis=(0, 1))
            return (g_kernel, g_bias, g_w, g_b), (rows(g_a) @ kernel.T).reshape(x_k.shape)

        initial = tuple(jnp.zeros_like(v) for v in (kernel, bias, w, b))
        grads, g_x = jax.lax.scan(backward, initial, (x_chunks, mask_chunks))
        return (g_x, jnp.zeros_like(mask_chunks), *grads)

    pool.defvjp(pool_forward, pool_backward)
    return pool(x_chunks, mask_chunks, kernel, bias, w, b)


def _unfused_pool(x, lengths, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """Any other backend: the plain composition in ``keras.ops`` (same equations, but it keeps
    h of size (batch, T, units) for the gradient: no memory saving)."""
    a = ops.matmul(x, kernel) + bias
    h = ops.where(a > 0, a, slope * a)
    keep = sequence_mask(ops.shape(x)[1], lengths=lengths)
    if attend:
        weights = masked_softmax(ops.tanh(ops.matmul(h, w) + b), keep)
    else:
        keep = ops.cast(keep, x.dtype)
        weights = keep / ops.maximum(ops.sum(keep, axis=1, keepdims=True), 1.0)
    return ops.sum(weights[:, :, None] * h, axis=1)


_CHUNKED_KERNELS = {"tensorflow": _chunked_pool_tf, "jax": _chunked_pool_jax}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ChunkedFeedForwardPooling(keras.layers.Layer):
    """``h_t = lrelu(W x_t + b)`` then attention (eq. 1) or mean (eq. 2) pooling, fused.

    Computes exactly ``AttentionPooling()(Dense(units, lrelu)(x), lengths=...)`` (or the mean),
    but in chunks of ``chunk_size`` steps with a gradient that recomputes h chunk by chunk:
    memory beyond the input is O(batch x units) instead of O(batch x T x units), and the work
    stays in cache. One kernel per backend, the same equations: TensorFlow
    (``tf.custom_gradient`` over a ``tf.while_loop``) and JAX (``jax.custom_vjp`` over a
    ``lax.scan``); on other backends (PyTorch) it falls back to the unfused composition, which
    gives the same values and gradients without the memory saving.
    Called as ``layer(x, lengths=n)``; weights: ``kernel``, ``bias`` (the h layer) and, for
    attention, ``attention_kernel`` (D,), ``attention_bias``.
    """

    def __init__(
        self,
        units: int,
        pooling: str = "attention",
        negative_slope: float = 0.01,
        chunk_size: int = 64,
        kernel_initializer: Any = "glorot_uniform",
        attention_initializer: Any = "glorot_uniform",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if pooling not in ("attention", "mean"):
            raise ValueError(f"pooling must be 'attention' or 'mean', got {pooling!r}.")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}.")
        self.units = int(units)
        self.pooling = pooling
        self.negative_slope = float(negative_slope)
        self.chunk_size = int(chunk_size)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.attention_initializer = keras.initializers.get(attention_initializer)

    def build(self, input_shape: tuple) -> None:
        _check_rank(input_shape, 3, "x of shape (batch, T, features)", "ChunkedFeedForwardPooling")
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], self.units), initializer=self.kernel_initializer
        )
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        shape = (self.units,) if self.pooling == "attention" else (0,)
        self.attention_kernel = self.add_weight(
            name="attention_kernel", shape=shape, initializer=self.attention_initializer
        )
        self.attention_bias = self.add_weight(name="attention_bias", shape=(), initializer="zeros")

    def call(self, x: Any, lengths: Any | None = None) -> Any:
        _check_rank(x.shape, 3, "x of shape (batch, T, features)", "ChunkedFeedForwardPooling")
        if lengths is None:
            lengths = ops.full((ops.shape(x)[0],), ops.shape(x)[1], dtype="int32")
        weights = (self.kernel, self.bias, self.attention_kernel, self.attention_bias)
        kernel = _CHUNKED_KERNELS.get(keras.backend.backend(), _unfused_pool)
        if kernel is _chunked_pool_jax and not 0.0 <= self.negative_slope <= 1.0:
            kernel = _unfused_pool  # the JAX kernel's select-free leaky ReLU needs 0 <= slope <= 1
        return kernel(
            x,
            lengths,
            *(w.value for w in weights),
            self.negative_slope,
            self.pooling == "attention",
            self.chunk_size,
        )

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.units)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "pooling": self.pooling,
            "negative_slope": self.negative_slope,
            "chunk_size": self.chunk_size,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "attention_initializer": keras.initializers.serialize(self.attention_initializer),
        }
