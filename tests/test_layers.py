"""The custom layers against NumPy implementations of the papers' equations (tests/reference.py)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

import reference as ref
from autodiff import gradients, layer_gradients
from thesis_repro.layers import (
    AttentionGatedLSTM,
    AttentionGatedLSTMCell,
    AttentionPooling,
    ChunkedFeedForwardPooling,
    MeanPooling,
    PrefixAttentionPooling,
    scaled_sigmoid,
)
from thesis_repro.layers.fused_pooling import _CHUNKED_KERNELS, _unfused_pool
from thesis_repro.layers.masking import sequence_mask

ATOL = 1e-5


def padded_batch(rng: np.random.Generator, lengths: list[int], features: int) -> np.ndarray:
    """Random sequences of the given lengths, zero-padded to the longest."""
    x = np.zeros((len(lengths), max(lengths), features), dtype="float32")
    for row, length in enumerate(lengths):
        x[row, :length] = rng.uniform(0.1, 1.0, size=(length, features))  # no all-zero real step
    return x


def randomize_weights(layer: keras.layers.Layer, rng: np.random.Generator) -> None:
    """Non-zero weights everywhere (biases too) so that every term of the equations matters."""
    for weight in layer.weights:
        weight.assign(rng.normal(0.0, 0.5, size=weight.shape).astype("float32"))


def roundtrip(model: keras.Model, tmp_path) -> keras.Model:
    path = tmp_path / "model.keras"
    model.save(path)
    return keras.saving.load_model(path)


# --- scaled sigmoid -------------------------------------------------------------------------


def test_scaled_sigmoid_matches_thesis_formula():
    x = np.array([-30.0, -2.0, -0.5, 0.0, 0.7, 3.0, 30.0], dtype="float32")
    np.testing.assert_allclose(scaled_sigmoid(x), ref.thesis_gate(x), atol=1e-6)
    # Known values: s(0) = 0.5 and the saturation limits -0.1 and 1.1.
    np.testing.assert_allclose(
        scaled_sigmoid(np.float32([0.0, -50.0, 50.0])), [0.5, -0.1, 1.1], atol=1e-6
    )


# --- attention pooling ----------------------------------------------------------------------


def test_attention_pooling_matches_equation_1(rng):
    lengths = [9, 4, 6]
    h = padded_batch(rng, lengths, features=5)
    layer = AttentionPooling(return_attention=True)
    layer(h)
    randomize_weights(layer, rng)
    w, b = (v.numpy() for v in layer.weights)
    c, alpha, e = (np.asarray(t) for t in layer(h, lengths=np.array(lengths)))
    for row, length in enumerate(lengths):
        c_ref, alpha_ref, e_ref = ref.attention_pool(h[row], w, float(b[0]), length)
        np.testing.assert_allclose(c[row], c_ref, atol=ATOL)
        np.testing.assert_allclose(alpha[row, :length], alpha_ref, atol=ATOL)
        np.testing.assert_allclose(e[row, :length], e_ref, atol=ATOL)
        assert np.all(alpha[row, length:] == 0.0), "padded steps must get exactly zero weight"


def test_attention_pooling_padded_batch_equals_each_sequence_alone(rng):
    lengths = [12, 3, 7, 1]
    h = padded_batch(rng, lengths, features=4)
    layer = AttentionPooling()
    layer(h)
    randomize_weights(layer, rng)
    batched = np.asarray(layer(h, mask=np.arange(12)[None, :] < np.array(lengths)[:, None]))
    for row, length in enumerate(lengths):
        alone = np.asarray(layer(h[row : row + 1, :length]))
        np.testing.assert_allclose(batched[row], alone[0], atol=ATOL)


def test_attention_pooling_uses_keras_mask_in_a_model(rng):
    lengths = [8, 5]
    x = padded_batch(rng, lengths, features=3)
    inputs = keras.Input((None, 3))
    masked = keras.layers.Masking(0.0)(inputs)
    c = AttentionPooling()(masked)
    model = keras.Model(inputs, c)
    randomize_weights(model, rng)
    layer = model.layers[-1]
    w, b = (v.numpy() for v in layer.weights)
    out = np.asarray(model(x))
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(
            out[row], ref.attention_pool(x[row], w, b[0], length)[0], atol=ATOL
        )


def test_attention_pooling_stable_at_100k_steps(rng):
    steps = 100_000
    h = rng.normal(0.0, 30.0, size=(2, steps, 3)).astype("float32")
    layer = AttentionPooling(return_attention=True)
    layer(h)
    randomize_weights(layer, rng)
    c, alpha, _ = (np.asarray(t) for t in layer(h, lengths=np.array([steps, steps // 3])))
    assert np.isfinite(c).all() and np.isfinite(alpha).all()
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, atol=1e-4)
    w, b = (v.numpy() for v in layer.weights)
    np.testing.assert_allclose(
        c[1], ref.attention_pool(h[1], w, b[0], steps // 3)[0], rtol=1e-3, atol=1e-3
    )


def test_masked_softmax_does_not_overflow_with_unbounded_energies(rng):
    h = rng.normal(size=(1, 50, 2)).astype("float32")
    layer = AttentionPooling(return_attention=True, energy_activation="linear")
    layer(h)
    layer.kernel.assign(np.float32([[500.0], [300.0]]))  # energies of order 1e3: exp overflows
    c, alpha, e = (np.asarray(t) for t in layer(h))
    assert np.isfinite(c).all()
    expected = np.exp(e[0] - e[0].max()) / np.exp(e[0] - e[0].max()).sum()
    np.testing.assert_allclose(alpha[0], expected, atol=1e-6)


def test_attention_pooling_gradients_reach_weights_and_inputs(rng):
    h = padded_batch(rng, [6, 4], features=3)
    layer = AttentionPooling()
    layer(h)
    grads = layer_gradients(layer, lambda c: ops.sum(c**2), h, lengths=np.array([6, 4]))
    assert all(np.abs(g).sum() > 0 for g in grads)
    assert np.all(grads[0][1, 4:] == 0.0), "no gradient may flow into padded steps"


def test_attention_pooling_rejects_bad_input(rng):
    layer = AttentionPooling()
    with pytest.raises(ValueError, match="rank 3"):
        layer(np.zeros((4, 5), "float32"))
    with pytest.raises(ValueError, match="lengths"):
        AttentionPooling()(np.zeros((2, 5, 3), "float32"), lengths=np.array([3, 9]))
    with pytest.raises(ValueError, match="sequences"):
        AttentionPooling()(np.zeros((2, 5, 3), "float32"), lengths=np.array([3, 4, 5]))


# --- mean pooling ---------------------------------------------------------------------------


def test_mean_pooling_matches_equation_2_with_masks(rng):
    lengths = [7, 2, 5]
    h = padded_batch(rng, lengths, features=4)
    out = np.asarray(MeanPooling()(h, lengths=np.array(lengths)))
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(out[row], ref.mean_pool(h[row], length), atol=ATOL)
        alone = np.asarray(MeanPooling()(h[row : row + 1, :length]))[0]
        np.testing.assert_allclose(out[row], alone, atol=ATOL)
    with pytest.raises(ValueError, match="rank 3"):
        MeanPooling()(np.zeros((3,), "float32"))


# --- attention-gated LSTM -------------------------------------------------------------------


def gated_lstm_and_weights(rng, units=5, features=2, **kwargs):
    layer = AttentionGatedLSTM(units, return_sequences=True, **kwargs)
    layer([np.zeros((1, 3, features), "float32"), np.zeros((1, 3), "float32")])
    randomize_weights(layer, rng)
    return layer, [w.numpy() for w in layer.lstm_cell.weights]


def test_gated_lstm_matches_thesis_equations(rng):
    lengths = [11, 6]
    x = padded_batch(rng, lengths, features=2)
    e = rng.uniform(-1.0, 1.0, size=x.shape[:2]).astype("float32")
    layer, (kernel, recurrent, bias) = gated_lstm_and_weights(rng)
    out = np.asarray(layer([x, e], lengths=np.array(lengths)))
    for row, length in enumerate(lengths):
        expected = ref.gated_lstm(x[row], e[row], kernel, recurrent, bias, length=length)
        np.testing.assert_allclose(out[row, :length], expected, atol=ATOL)


def test_gated_lstm_energy_enters_input_gate_only(rng):
    """Adding e to the input gate equals adding it to b_i; any other placement would differ."""
    x = padded_batch(rng, [8], features=2)
    layer, (kernel, recurrent, bias) = gated_lstm_and_weights(rng)
    out = np.asarray(layer([x, np.full((1, 8), 0.8, "float32")]))[0]
    shifted_bias = bias.copy()
    shifted_bias[:5] += 0.8  # block i of (i, f, g, o)
    expected = ref.gated_lstm(x[0], np.zeros(8), kernel, recurrent, shifted_bias)
    np.testing.assert_allclose(out, expected, atol=ATOL)
    without = np.asarray(layer([x, np.zeros((1, 8), "float32")]))[0]
    assert np.abs(out - without).max() > 1e-3


def test_gated_lstm_reduces_to_keras_lstm(rng):
    x = padded_batch(rng, [10, 10], features=3)
    layer, _ = gated_lstm_and_weights(rng, units=4, features=3, gate_activation="sigmoid")
    keras_lstm = keras.layers.LSTM(4, return_sequences=True)
    keras_lstm(x)
    for theirs, ours in zip(keras_lstm.cell.weights, layer.lstm_cell.weights, strict=True):
        theirs.assign(ours)
    np.testing.assert_allclose(layer([x, np.zeros((2, 10), "float32")]), keras_lstm(x), atol=ATOL)


def test_unit_forget_bias_starts_the_forget_gate_at_one_like_keras(rng, tmp_path):
    x = padded_batch(rng, [7], features=2)
    e = np.zeros((1, 7), "float32")
    layer = AttentionGatedLSTM(3, unit_forget_bias=True, bias_initializer="zeros")
    layer([x, e])
    np.testing.assert_array_equal(layer.lstm_cell.bias.numpy(), [0] * 3 + [1] * 3 + [0] * 6)
    keras_lstm = keras.layers.LSTM(3, unit_forget_bias=True)
    keras_lstm(x)
    np.testing.assert_array_equal(layer.lstm_cell.bias.numpy(), keras_lstm.cell.bias.numpy())
    assert AttentionGatedLSTM(3)([x, e]) is not None  # default: the thesis's zero biases
    x_in, e_in = keras.Input((None, 2)), keras.Input((None,))
    model = keras.Model([x_in, e_in], AttentionGatedLSTM(3, unit_forget_bias=True)([x_in, e_in]))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.layers[-1].lstm_cell.unit_forget_bias
    np.testing.assert_allclose(loaded([x, e]), model([x, e]), atol=ATOL)


def test_gated_lstm_respects_keras_mask_and_padding(rng):
    lengths = [9, 4]
    x = padded_batch(rng, lengths, features=2)
    e = rng.uniform(-1.0, 1.0, size=x.shape[:2]).astype("float32")
    x_in, e_in = keras.Input((None, 2)), keras.Input((None,))
    final = AttentionGatedLSTM(5)([keras.layers.Masking(0.0)(x_in), e_in])
    model = keras.Model([x_in, e_in], final)
    randomize_weights(model, rng)
    out = np.asarray(model([x, e]))
    for row, length in enumerate(lengths):
        alone = np.asarray(model([x[row : row + 1, :length], e[row : row + 1, :length]]))[0]
        np.testing.assert_allclose(out[row], alone, atol=ATOL)


def test_gated_lstm_rejects_lengths_of_another_batch(rng):
    """As the pooling layers (``layers.masking.sequence_keep``): lengths or a mask that cover
    another number of sequences than the inputs are a clear error, not a broadcast."""
    x = padded_batch(rng, [5, 3], features=2)
    e = rng.uniform(-1.0, 1.0, size=x.shape[:2]).astype("float32")
    with pytest.raises(ValueError, match="AttentionGatedLSTM: mask/lengths cover 3 sequences"):
        AttentionGatedLSTM(4)([x, e], lengths=np.array([5, 3, 2]))


def test_gated_lstm_cell_accepts_packed_step_input(rng):
    cell = AttentionGatedLSTMCell(3)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = padded_batch(rng, [6], features=2)
    e = rng.uniform(-1, 1, size=(1, 6, 1)).astype("float32")
    out = np.asarray(rnn(np.concatenate([x, e], axis=-1)))[0]
    kernel, recurrent, bias = (w.numpy() for w in cell.weights)
    np.testing.assert_allclose(
        out, ref.gated_lstm(x[0], e[0, :, 0], kernel, recurrent, bias), atol=ATOL
    )


def test_gradients_reach_the_energies(rng):
    x = padded_batch(rng, [7], features=2)
    e = rng.uniform(-1, 1, size=(1, 7)).astype("float32")
    layer, (kernel, recurrent, bias) = gated_lstm_and_weights(rng)
    grad = gradients(lambda energies: ops.sum(layer([x, energies])[:, -1]), e)[0][0]
    # Central finite differences through the NumPy reference (float64).
    step = 1e-5
    numeric = np.zeros(7)
    for t in range(7):
        plus, minus = e[0].astype(np.float64), e[0].astype(np.float64)
        plus[t] += step
        minus[t] -= step
        f = lambda en: ref.gated_lstm(x[0], en, kernel, recurrent, bias)[-1].sum()  # noqa: E731
        numeric[t] = (f(plus) - f(minus)) / (2 * step)
    assert np.abs(numeric).min() > 0
    np.testing.assert_allclose(grad, numeric, rtol=1e-3, atol=1e-5)


def test_gated_lstm_rejects_bad_input(rng):
    layer = AttentionGatedLSTM(3)
    x = np.zeros((2, 5, 2), "float32")
    with pytest.raises(ValueError, match="length T"):
        layer([x, np.zeros((2, 6), "float32")])
    with pytest.raises(ValueError, match="rank 3"):
        AttentionGatedLSTM(3)([np.zeros((2, 5), "float32"), np.zeros((2, 5), "float32")])
    with pytest.raises(ValueError, match=r"layer\(\[x, energies\]\)"):
        AttentionGatedLSTM(3)(x)
    with pytest.raises(ValueError, match="batch size"):
        AttentionGatedLSTM(3)([x, np.zeros((3, 5), "float32")])
    with pytest.raises(ValueError, match="positive"):
        AttentionGatedLSTM(0)


# --- serialization --------------------------------------------------------------------------


def test_keras_file_roundtrip_of_every_layer(rng, tmp_path):
    x_in = keras.Input((None, 2))
    masked = keras.layers.Masking(0.0)(x_in)
    h = keras.layers.Dense(6, activation="relu")(masked)
    c, alpha, e = AttentionPooling(return_attention=True)(h)
    mean = MeanPooling()(h)
    lstm_out = AttentionGatedLSTM(4, return_sequences=True)([masked, e])
    lstm_last = AttentionGatedLSTM(3, gate_activation="sigmoid")([masked, e])
    packed = keras.layers.Concatenate()([masked, keras.layers.Reshape((-1, 1))(e)])
    cell_out = keras.layers.RNN(AttentionGatedLSTMCell(2))(packed)
    model = keras.Model(x_in, [c, alpha, mean, lstm_out, lstm_last, cell_out])
    randomize_weights(model, rng)
    x = padded_batch(rng, [9, 5], features=2)
    loaded = roundtrip(model, tmp_path)
    for before, after in zip(model(x), loaded(x), strict=True):
        np.testing.assert_array_equal(np.asarray(before), np.asarray(after))
    lstm = next(layer for layer in loaded.layers if isinstance(layer, AttentionGatedLSTM))
    assert lstm.lstm_cell.gate_activation is scaled_sigmoid


# --- fused chunked feed-forward pooling -----------------------------------------------------


@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_chunked_pooling_matches_equations_and_unfused_gradients(rng, pooling):
    lengths = [37, 20, 5, 30]
    x = padded_batch(rng, lengths, features=2) - 0.5  # both signs: both leaky-ReLU branches
    fused = ChunkedFeedForwardPooling(6, pooling=pooling, chunk_size=8)
    fused(x, lengths=np.array(lengths))
    randomize_weights(fused, rng)
    kernel, bias, w, b = (v.numpy() for v in fused.weights)
    out = np.asarray(fused(x, lengths=np.array(lengths)))
    for row, length in enumerate(lengths):
        a = x[row, :length].astype(np.float64) @ kernel + bias
        h = np.maximum(a, 0.01 * a)
        expected = (
            ref.attention_pool(h, w, float(b))[0] if pooling == "attention" else (ref.mean_pool(h))
        )
        np.testing.assert_allclose(out[row], expected, atol=ATOL)

    # Gradients equal those of the unfused composition Dense -> pooling layer.
    dense = keras.layers.Dense(6, lambda t: keras.activations.leaky_relu(t, 0.01))
    pool = AttentionPooling() if pooling == "attention" else MeanPooling()
    pool(dense(x), lengths=np.array(lengths))
    dense.kernel.assign(kernel)
    dense.bias.assign(bias)
    if pooling == "attention":
        pool.kernel.assign(w[:, None])
        pool.bias.assign(np.float32([b]))
    n = np.array(lengths)
    fused_grads = layer_gradients(fused, lambda c: ops.sum(ops.sin(c)), x, lengths=n)

    def plain_loss(x, kernel, bias, *pool_weights):
        h, _ = dense.stateless_call([kernel, bias], [], x)
        c, _ = pool.stateless_call(list(pool_weights), [], h, lengths=n)
        return ops.sum(ops.sin(c))

    plain_grads = gradients(plain_loss, x, kernel, bias, *(np.asarray(w) for w in pool.weights))
    for ours, theirs in zip(fused_grads, plain_grads, strict=False):
        np.testing.assert_allclose(np.ravel(ours), np.ravel(theirs), atol=1e-5)


@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_chunked_pooling_in_bfloat16_accumulates_in_float32(rng, pooling):
    """Under ``mixed_bfloat16`` (issue 14) the sums over T and the weights' gradients accumulate
    in float32. Measured against float32 on the same (bfloat16-rounded) inputs, so that what is
    left is bfloat16 arithmetic: on rows of 1,500 to 3,000 steps the output stays within 0.5 %
    (0.38 % measured) and the gradients within 1 % (0.45 %); with the sums in bfloat16 the
    output is off by 0.8-1.8 % and the kernel's and bias's gradients by 1.4-4.4 % (measured, TF
    2.21 and JAX 0.10). The gradients are taken at slope 1: a leaky-ReLU kink turns a bfloat16
    rounding of ``a`` near 0 into a 100x change of one element's gradient, whatever the
    accumulator (8 % of the largest kernel gradient at slope 0.01, measured)."""
    lengths = np.array([3000, 2500, 1500, 10])
    long_rows = lengths >= 1500
    bf16 = [
        ops.convert_to_numpy(ops.cast(ops.cast(a, "bfloat16"), "float32"))
        for a in (
            rng.normal(size=(4, 3000, 2)),
            rng.normal(0, 0.7, (2, 64)),
            rng.normal(0, 0.1, 64),
            rng.normal(0, 0.1, 64 if pooling == "attention" else 0),
            0.05,
        )
    ]
    kernel_fn = _CHUNKED_KERNELS.get(keras.backend.backend(), _unfused_pool)
    keep = sequence_mask(3000, lengths=lengths)

    def pool(dtype: str, slope: float, *arrays):
        x, kernel, bias, w, b = (ops.cast(t, dtype) for t in arrays)
        return kernel_fn(x, keep, kernel, bias, w, b, slope, pooling == "attention", 64)

    def loss(dtype: str):
        def total(*arrays):
            return ops.sum(ops.sin(ops.cast(pool(dtype, 1.0, *arrays), "float32")) * 100)

        return total

    out = {}
    for dtype in ("float32", "bfloat16"):
        c = ops.convert_to_numpy(pool(dtype, 0.01, *bf16))
        assert c.dtype.name == dtype, "the output keeps the compute dtype"
        out[dtype] = c.astype("float32")[long_rows]
    scale = np.abs(out["float32"]).max(axis=1)
    assert (np.abs(out["bfloat16"] - out["float32"]).max(axis=1) / scale).max() < 5e-3
    exact = gradients(loss("float32"), *bf16)
    mixed = gradients(loss("bfloat16"), *bf16)
    for name, ours, theirs in zip(("x", "kernel", "bias", "w", "b"), mixed, exact, strict=True):
        assert ours.dtype == np.float32
        if theirs.size:
            error = np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-12)
            assert error < 1e-2, (name, error)


@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_chunked_pooling_honours_a_keras_mask(rng, pooling):
    """A Keras mask (from ``Masking``, or one with holes) counts as in the pooling layers: the
    fused layer gives what ``Dense`` + ``AttentionPooling``/``MeanPooling`` give on the same
    mask, and a mask equal to ``lengths`` gives the ``lengths`` result; with both, a step counts
    where both keep it."""
    lengths = np.array([37, 20, 5, 30])
    x = padded_batch(rng, lengths.tolist(), features=2) - 0.5
    fused = ChunkedFeedForwardPooling(6, pooling=pooling, chunk_size=8)
    fused(x)
    randomize_weights(fused, rng)
    kernel, bias, w, b = (v.numpy() for v in fused.weights)
    dense = keras.layers.Dense(6, lambda t: keras.activations.leaky_relu(t, 0.01))
    plain = AttentionPooling() if pooling == "attention" else MeanPooling()
    plain(dense(x))
    dense.kernel.assign(kernel)
    dense.bias.assign(bias)
    if pooling == "attention":
        plain.kernel.assign(w[:, None])
        plain.bias.assign(np.float32([b]))
    holes = rng.random(x.shape[:2]) < 0.7
    holes[:, 0] = True
    for mask in (sequence_mask(x.shape[1], lengths=lengths), holes):
        expected = np.asarray(plain(dense(x), mask=mask))
        np.testing.assert_allclose(np.asarray(fused(x, mask=mask)), expected, atol=ATOL)
    by_lengths = np.asarray(fused(x, lengths=lengths))
    np.testing.assert_allclose(
        np.asarray(fused(x, mask=sequence_mask(x.shape[1], lengths=lengths))), by_lengths, atol=ATOL
    )
    both = np.asarray(fused(x, mask=holes, lengths=lengths))
    expected = np.asarray(plain(dense(x), mask=holes, lengths=lengths))
    np.testing.assert_allclose(both, expected, atol=ATOL)

    # In a functional model, through Masking: padded steps (all-zero rows) drop out.
    x_in = keras.Input((None, 2))
    model = keras.Model(x_in, fused(keras.layers.Masking(0.0)(x_in)))
    zeroed = np.where(sequence_mask(x.shape[1], lengths=lengths)[..., None], x, 0.0)
    np.testing.assert_allclose(np.asarray(model(zeroed)), by_lengths, atol=ATOL)


def test_chunked_pooling_saves_and_rejects_bad_input(rng, tmp_path):
    x_in, n_in = keras.Input((None, 2)), keras.Input((), dtype="int32")
    model = keras.Model(
        [x_in, n_in], ChunkedFeedForwardPooling(4, chunk_size=3)(x_in, lengths=n_in)
    )
    randomize_weights(model, rng)
    x, n = padded_batch(rng, [7, 4], features=2), np.array([7, 4], "int32")
    np.testing.assert_array_equal(
        np.asarray(model([x, n])), np.asarray(roundtrip(model, tmp_path)([x, n]))
    )
    with pytest.raises(ValueError, match="pooling"):
        ChunkedFeedForwardPooling(4, pooling="max")
    with pytest.raises(ValueError, match="rank 3"):
        ChunkedFeedForwardPooling(4)(np.zeros((2, 5), "float32"))


def test_importing_the_package_registers_every_custom_layer(rng, tmp_path):
    """A model saved with the custom layers loads in a fresh process after ``import
    thesis_repro`` alone (no import of ``thesis_repro.layers``)."""
    import subprocess
    import sys

    x_in, n_in = keras.Input((None, 2)), keras.Input((), dtype="int32")
    h = ChunkedFeedForwardPooling(3, chunk_size=4)(x_in, lengths=n_in)
    pooled = AttentionPooling()(keras.layers.Dense(4)(x_in))
    prefix = PrefixAttentionPooling(5, position_aware="bias")(keras.layers.Dense(4)(x_in[:, :5]))
    lstm = AttentionGatedLSTM(2)([x_in, x_in[:, :, 0]])
    model = keras.Model([x_in, n_in], [h, pooled, prefix, lstm, MeanPooling()(x_in)])
    path = tmp_path / "model.keras"
    model.save(path)
    script = (
        "import keras, thesis_repro; "
        f"m = keras.saving.load_model({str(path)!r}); "
        "print(sorted({type(layer).__name__ for layer in m.layers}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("ChunkedFeedForwardPooling", "AttentionPooling", "PrefixAttentionPooling"):
        assert name in done.stdout
