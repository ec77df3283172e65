"""Shared test set-up: quiet TensorFlow, fixed seeds."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def pytest_report_header() -> str:
    import keras

    return f"keras backend: {keras.backend.backend()}"
