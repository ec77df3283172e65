"""Pooling a state sequence over time: feed-forward attention and the unweighted mean.

- ``AttentionPooling``: Raffel & Ellis (2015) eq. 1; thesis 2.1.2 and 2.2.2.
- ``MeanPooling``: Raffel & Ellis eq. 2, the unweighted baseline.
- ``PrefixAttentionPooling``: ``AttentionPooling`` over a language model's prefix, optionally
  told how far back each prefix word is (thesis 4.2).
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
from thesis_repro.layers.masking import masked_softmax, sequence_keep, sequence_mask

POSITION_AWARE = ("none", "bias", "embedding")  # thesis 4.2: how attention sees distance


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
        keep = sequence_keep(h, mask, lengths, "AttentionPooling")
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
        keep = sequence_keep(h, mask, lengths, "MeanPooling")
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
class PrefixAttentionPooling(AttentionPooling):
    """Attention over the prefix (thesis 2.2.2), optionally aware of distance (thesis 4.2).

    The prefix comes nearest word first, so step ``j`` is the word ``n + j`` positions before
    the predicted one. ``prefix`` is the trained prefix length p: distances seen in training are
    ``j = 0 .. p-1``; longer prefixes reuse the parameter of ``j = p-1`` (clipped), so the layer
    accepts any length T. ``position_aware``:

    - ``"none"``: ``AttentionPooling`` exactly (``e_j = tanh(W_hc h_j + b_hc)``, ``alpha =
      softmax(e)``, ``c = sum_j alpha_j h_j``), the thesis's model.
    - ``"bias"`` (the primary method): ``e_j = tanh(W_hc h_j + b_hc) + beta_{min(j, p-1)}``,
      one learned scalar per distance (weight ``distance_bias``, shape (p,), zeros at start).
      Why: ``alpha_j ~ exp(beta_j) exp(content energy)``, so ``beta`` is a learned log-prior
      over distances multiplied into the content attention -- interpretable (plot ``beta``),
      p parameters, and it is added outside the tanh, so position can outweigh the content
      energies (which the tanh bounds to [-1, 1], a weight ratio of at most e^2). ``c`` stays a
      convex combination of the same word features h_j, and with ``beta = 0`` the model is
      the thesis's, so plain and position-aware runs differ only in this term. Clipping keeps
      it defined at distances never trained. Caveat: like ``W_hc``, ``beta`` learns only as
      fast as the content attention does; under the thesis's plain SGD its gradients start
      near 1e-6 (the prefix words' h_j barely differ at initialisation), so it needs many
      updates to move.
    - ``"embedding"``: ``h'_j = h_j + P_{min(j, p-1)}`` (weight ``distance_embedding``,
      shape (p, S), zeros at start) and the thesis's attention over ``h'``; this also moves
      the context vector ``c = sum_j alpha_j h'_j`` (the head sees the weighted distances),
      and ``P`` gets the gradient of ``c`` directly, so it moves from the first updates.

    With ``return_attention=True`` returns ``(c, alpha, e)``, ``e`` including the bias.
    """

    def __init__(self, prefix: int, position_aware: str = "none", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if position_aware not in POSITION_AWARE:
            raise ValueError(
                f"position_aware must be one of {POSITION_AWARE}, got {position_aware!r}."
            )
        if prefix < 1:
            raise ValueError(f"prefix must be at least 1, got {prefix}.")
        self.prefix = int(prefix)
        self.position_aware = position_aware

    def build(self, input_shape: tuple) -> None:
        super().build(input_shape)
        if self.position_aware == "bias":
            self.distance_bias = self.add_weight(
                name="distance_bias", shape=(self.prefix,), initializer="zeros"
            )
        elif self.position_aware == "embedding":
            self.distance_embedding = self.add_weight(
                name="distance_embedding", shape=(self.prefix, input_shape[-1]), initializer="zeros"
            )

    def distance_index(self, steps: Any) -> Any:
        """``min(j, p-1)`` for ``j = 0 .. steps-1``: which distance parameter step j uses."""
        return ops.minimum(ops.arange(steps), self.prefix - 1)

    def call(self, h: Any, mask: Any | None = None, lengths: Any | None = None) -> Any:
        if self.position_aware == "none":
            return super().call(h, mask=mask, lengths=lengths)
        steps = h.shape[1] if h.shape[1] is not None else ops.shape(h)[1]
        index = self.distance_index(steps)
        if self.position_aware == "embedding":
            h = h + ops.expand_dims(ops.take(self.distance_embedding, index, axis=0), 0)
        e = self.energies(h)
        if self.position_aware == "bias":
            e = e + ops.expand_dims(ops.take(self.distance_bias, index, axis=0), 0)
        alpha = masked_softmax(e, sequence_mask(steps, mask, lengths))
        c = ops.einsum("bt,btd->bd", alpha, h)
        return (c, alpha, e) if self.return_attention else c

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "prefix": self.prefix,
            "position_aware": self.position_aware,
        }
