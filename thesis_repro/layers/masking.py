"""Which steps of a padded batch count: the masks and the masked softmax every layer uses.

- ``sequence_mask``: boolean (batch, T) mask from a Keras mask and/or per-sequence ``lengths``.
- ``masked_softmax``: the softmax over time of Raffel & Ellis eq. 1 in which padded steps get
  exactly zero weight.
- ``LengthMask``: ``sequence_mask`` as a layer, to mask a Keras layer (e.g. ``LSTM``) from a
  ``lengths`` input in a functional model.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from thesis_repro.layers._common import PACKAGE


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


def sequence_keep(x: Any, mask: Any | None, lengths: Any | None, layer: str) -> Any | None:
    """``sequence_mask`` over the time axis of ``x`` (batch, T, ...), its static length when
    known, checked to cover ``x``'s batch (a ``ValueError`` naming ``layer`` otherwise)."""
    steps = x.shape[1] if x.shape[1] is not None else ops.shape(x)[1]
    keep = sequence_mask(steps, mask, lengths)
    _check_batch(keep, x.shape[0], layer)
    return keep


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
class LengthMask(keras.layers.Layer):
    """Boolean (batch, T) mask, True on the first ``lengths[b]`` steps of each sequence."""

    def call(self, x: keras.KerasTensor, lengths: keras.KerasTensor) -> keras.KerasTensor:
        return sequence_mask(keras.ops.shape(x)[1], lengths=lengths)

    def compute_output_spec(self, x: keras.KerasTensor, lengths: keras.KerasTensor) -> Any:
        return keras.KerasTensor(tuple(x.shape[:2]), dtype="bool")
