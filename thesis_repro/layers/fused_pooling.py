"""``ChunkedFeedForwardPooling``: the feed-forward layer of Raffel & Ellis fused with attention
(eq. 1) or mean (eq. 2) pooling, computed in chunks so that memory does not grow with T.

One kernel per backend computes the same equations: ``_chunked_pool_tf`` (TensorFlow) and
``_chunked_pool_jax`` (JAX); any other backend uses ``_unfused_pool``, the plain composition.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from thesis_repro.layers._common import PACKAGE, _check_rank
from thesis_repro.layers.masking import masked_softmax, sequence_keep


def _chunked_pool_tf(x, keep, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """Fused ``h = lrelu(x W + b)`` + pooling over T in chunks, with a recomputing gradient.

    ``keep``: boolean (batch, T), the steps that count (``masking.sequence_mask``).

    Forward: ``p_t = mask_t * exp(e_t)`` (attention; ``e_t = tanh(w.h_t + b)`` lies in [-1, 1],
    so ``exp`` cannot overflow and no running maximum is needed) or ``p_t = mask_t`` (mean);
    ``c = N / Z`` with ``N = sum_t p_t h_t`` and ``Z = sum_t p_t``, accumulated chunk by chunk in
    a ``tf.while_loop``. Backward: each chunk's h is recomputed from x, so nothing of size
    (batch, T, D) is ever kept. Under a mixed-precision policy (x and the weights in bfloat16 or
    float16) the sums over T and the gradients accumulate in float32 (``acc``).
    """
    import tensorflow as tf

    acc = tf.float32 if x.dtype in (tf.bfloat16, tf.float16) else x.dtype
    batch, steps, features = tf.shape(x)[0], tf.shape(x)[1], x.shape[2]
    n_chunks = (steps + chunk - 1) // chunk
    pad = n_chunks * chunk - steps
    mask = tf.cast(keep, x.dtype)
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
            numerator += tf.einsum("bt,btd->bd", tf.cast(p, acc), tf.cast(h, acc))
            normaliser += tf.reduce_sum(tf.cast(p, acc), axis=1, keepdims=True)
            return i + 1, numerator, normaliser

        _, numerator, normaliser = tf.while_loop(
            lambda i, *_: i < n_chunks,
            accumulate,
            (0, tf.zeros((batch, kernel.shape[1]), acc), tf.zeros((batch, 1), acc)),
        )
        normaliser = tf.maximum(normaliser, 1e-30)
        c = numerator / normaliser

        def grad(g_c):
            g_c = tf.cast(g_c, acc)
            g_numerator = g_c / normaliser
            g_normaliser = -tf.reduce_sum(g_c * c, axis=1, keepdims=True) / normaliser

            def backward(i, g_kernel, g_bias, g_w, g_b, g_x):
                x_k, a, h, e, p = chunk_forward(i, kernel, bias, w, b)
                x_k, h, p = tf.cast(x_k, acc), tf.cast(h, acc), tf.cast(p, acc)
                g_h = p[:, :, None] * g_numerator[:, None, :]
                if attend:
                    g_p = tf.einsum("btd,bd->bt", h, g_numerator) + g_normaliser
                    e = tf.cast(e, acc)
                    g_s = g_p * p * (1.0 - e * e)
                    g_h += g_s[:, :, None] * tf.cast(w, acc)
                    g_w += tf.einsum("bt,btd->d", g_s, h)
                    g_b += tf.reduce_sum(g_s)
                g_a = tf.where(a > 0, g_h, slope * g_h)
                g_kernel += tf.einsum("btf,btd->fd", x_k, g_a)
                g_bias += tf.reduce_sum(g_a, axis=(0, 1))
                g_x = g_x.write(i, tf.einsum("btd,fd->btf", g_a, tf.cast(kernel, acc)))
                return i + 1, g_kernel, g_bias, g_w, g_b, g_x

            initial = (
                0,
                *(tf.zeros(tf.shape(v), acc) for v in (kernel, bias, w, b)),
                tf.TensorArray(acc, size=n_chunks),
            )
            _, g_kernel, g_bias, g_w, g_b, g_x = tf.while_loop(
                lambda i, *_: i < n_chunks, backward, initial
            )
            g_x = tf.reshape(tf.transpose(g_x.stack(), (1, 0, 2, 3)), (batch, -1, features))
            grads = (g_x[:, :steps], g_kernel, g_bias, g_w, g_b)
            primals = (x, kernel, bias, w, b)
            return tuple(tf.cast(g, v.dtype) for g, v in zip(grads, primals, strict=True))

        return tf.cast(c, x.dtype), grad

    # Pass the weights as tensors (identity reads): custom_gradient then owns their gradients.
    return pool(x, *(tf.identity(v) for v in (kernel, bias, w, b)))


def _chunked_pool_jax(x, keep, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """The same computation as :func:`_chunked_pool_tf` for JAX: ``lax.scan`` over the chunks
    and a ``jax.custom_vjp`` whose backward scan recomputes each chunk's h (nothing of size
    (batch, T, units) is kept; the carries are (batch, units)); float32 accumulators under a
    mixed-precision policy, as there."""
    import jax
    import jax.numpy as jnp

    acc = jnp.promote_types(x.dtype, jnp.float32)

    batch, steps, features = x.shape
    n_chunks = -(-steps // chunk)
    pad = n_chunks * chunk - steps
    mask = jnp.asarray(keep).astype(x.dtype)
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
            p = p.astype(acc)
            numerator += jnp.sum(p[:, :, None] * h.astype(acc), axis=1)
            normaliser += jnp.sum(p, axis=1, keepdims=True)
            return (numerator, normaliser), None

        initial = (jnp.zeros((batch, kernel.shape[1]), acc), jnp.zeros((batch, 1), acc))
        (numerator, normaliser), _ = jax.lax.scan(accumulate, initial, (x_chunks, mask_chunks))
        normaliser = jnp.maximum(normaliser, 1e-30)
        return numerator / normaliser, normaliser

    @jax.custom_vjp
    def pool(x_chunks, mask_chunks, kernel, bias, w, b):
        return forward(x_chunks, mask_chunks, kernel, bias, w, b)[0].astype(x.dtype)

    def pool_forward(x_chunks, mask_chunks, kernel, bias, w, b):
        c, normaliser = forward(x_chunks, mask_chunks, kernel, bias, w, b)
        return c.astype(x.dtype), (x_chunks, mask_chunks, kernel, bias, w, b, c, normaliser)

    def pool_backward(saved, g_c):
        x_chunks, mask_chunks, kernel, bias, w, b, c, normaliser = saved
        g_c = g_c.astype(acc)
        g_numerator = g_c / normaliser
        g_normaliser = -jnp.sum(g_c * c, axis=1, keepdims=True) / normaliser

        def backward(grads, inputs):
            g_kernel, g_bias, g_w, g_b = grads
            x_k, mask_k = inputs
            a, h, e, p = chunk_forward(x_k, mask_k, kernel, bias, w, b)
            h, p = h.astype(acc), p.astype(acc)
            g_h = p[:, :, None] * g_numerator[:, None, :]
            if attend:
                g_p = jnp.sum(h * g_numerator[:, None, :], axis=2) + g_normaliser
                g_s = g_p * p * (1.0 - e.astype(acc) ** 2)
                g_h += g_s[:, :, None] * w.astype(acc)
                g_w += g_s.reshape(-1) @ rows(h)
                g_b += jnp.sum(g_s)
            # d lrelu / da = 1 (a > 0) or slope (a < 0), written without a select; at a == 0
            # (measure zero; padded steps have g_h == 0) it gives the mean of the two.
            g_a = g_h * ((1 + slope) / 2 + (1 - slope) / 2 * jnp.sign(a))
            g_kernel += rows(x_k).astype(acc).T @ rows(g_a)
            g_bias += jnp.sum(g_a, axis=(0, 1))
            g_x_k = (rows(g_a) @ kernel.astype(acc).T).reshape(x_k.shape).astype(x_k.dtype)
            return (g_kernel, g_bias, g_w, g_b), g_x_k

        weights = (kernel, bias, w, b)
        initial = tuple(jnp.zeros(v.shape, acc) for v in weights)
        grads, g_x = jax.lax.scan(backward, initial, (x_chunks, mask_chunks))
        grads = tuple(g.astype(v.dtype) for g, v in zip(grads, weights, strict=True))
        return (g_x, jnp.zeros_like(mask_chunks), *grads)

    pool.defvjp(pool_forward, pool_backward)
    return pool(x_chunks, mask_chunks, kernel, bias, w, b)


def _unfused_pool(x, keep, kernel, bias, w, b, slope: float, attend: bool, chunk: int):
    """Any other backend: the plain composition in ``keras.ops`` (same equations, but it keeps
    h of size (batch, T, units) for the gradient: no memory saving)."""
    a = ops.matmul(x, kernel) + bias
    h = ops.where(a > 0, a, slope * a)
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
    Called as ``layer(x, lengths=n)`` or on a masked input (a Keras mask, e.g. from ``Masking``;
    with both, a step counts where both keep it, as in the pooling layers). Weights:
    ``kernel``, ``bias`` (the h layer) and, for attention, ``attention_kernel`` (D,),
    ``attention_bias``.
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
        self.supports_masking = True

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

    def call(self, x: Any, mask: Any | None = None, lengths: Any | None = None) -> Any:
        _check_rank(x.shape, 3, "x of shape (batch, T, features)", "ChunkedFeedForwardPooling")
        keep = sequence_keep(x, mask, lengths, "ChunkedFeedForwardPooling")
        if keep is None:
            keep = ops.ones(ops.shape(x)[:2], dtype="bool")
        weights = (self.kernel, self.bias, self.attention_kernel, self.attention_bias)
        kernel = _CHUNKED_KERNELS.get(keras.backend.backend(), _unfused_pool)
        if kernel is _chunked_pool_jax and not 0.0 <= self.negative_slope <= 1.0:
            kernel = _unfused_pool  # the JAX kernel's select-free leaky ReLU needs 0 <= slope <= 1
        return kernel(
            x,
            keep,
            *(w.value for w in weights),
            self.negative_slope,
            self.pooling == "attention",
            self.chunk_size,
        )

    def compute_mask(self, inputs: Any, mask: Any | None = None) -> None:
        return None  # the output has no time axis

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
