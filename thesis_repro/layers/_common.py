"""Helpers shared by the layer modules: the Keras package name every layer is registered
under, the rank check of layer inputs, and (de)serialisation of activation arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras

PACKAGE = "thesis_repro"


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
