"""The language models' loss: the negative log-likelihood of the next word (thesis 3.2.2)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from thesis_repro.layers._common import PACKAGE


@keras.saving.register_keras_serializable(package=PACKAGE)
def sparse_nll(y_true: Any, logits: Any) -> Any:
    """``-log softmax(logits)[y]`` per example, computed as ``logsumexp(logits) - logits[y]``
    in float32: the numbers of Keras's sparse categorical cross-entropy from logits, without
    the (batch, V) one-hot matrix its JAX version builds (measured at batch 1000, V = 7,251 on
    this CPU, loss and gradient: 10 ms instead of 43 ms under JAX, 9 ms instead of 16 ms under
    TensorFlow with XLA)."""
    logits = ops.cast(logits, "float32")
    y = ops.cast(ops.reshape(y_true, (-1, 1)), "int32")
    return ops.logsumexp(logits, axis=-1) - ops.take_along_axis(logits, y, axis=-1)[:, 0]
