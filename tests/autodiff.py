"""Gradients on whichever Keras backend the tests run under (``KERAS_BACKEND``).

``gradients(fn, *arrays)`` differentiates a scalar ``fn`` of backend tensors with respect to each
of its arguments, with the backend's own autodiff (``tf.GradientTape``, ``jax.grad`` or
``torch.autograd``), so the layer tests check the gradients that training really uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np


def gradients(fn: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """d fn / d arrays[i] for every i, as NumPy arrays (float32 inputs)."""
    arrays = tuple(np.asarray(a, dtype="float32") for a in arrays)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(a) for a in arrays]
        with tf.GradientTape() as tape:
            for t in tensors:
                tape.watch(t)
            loss = fn(*tensors)
        return [np.asarray(g) for g in tape.gradient(loss, tensors)]
    if backend == "jax":
        import jax

        grads = jax.grad(fn, argnums=tuple(range(len(arrays))))(*arrays)
        return [np.asarray(g) for g in grads]
    if backend == "torch":
        import torch

        tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
        fn(*tensors).backward()
        return [t.grad.detach().cpu().numpy() for t in tensors]
    raise NotImplementedError(f"no gradient helper for the {backend} backend")


def layer_gradients(
    layer: keras.layers.Layer, loss: Callable[[Any], Any], x: np.ndarray, **call_kwargs: Any
) -> list[np.ndarray]:
    """Gradients of ``loss(layer(x))`` with respect to ``x`` and each trainable weight
    (``layer.trainable_weights`` order), through ``stateless_call``."""
    weights = [np.asarray(w.value) for w in layer.trainable_weights]
    fixed = [w.value for w in layer.non_trainable_weights]

    def fn(x, *trainable):
        out, _ = layer.stateless_call(list(trainable), fixed, x, **call_kwargs)
        return loss(out)

    return gradients(fn, x, *weights)
