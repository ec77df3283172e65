"""The papers' leaky ReLU and their weight initialisation, shared by every model."""

from __future__ import annotations

import keras

from thesis_repro.layers._common import PACKAGE

LEAKY_SLOPE = 0.01


def normal_fan_in(fan_in: int, seed: int | None = None) -> keras.initializers.Initializer:
    """N(0, 1/sqrt(fan_in)): Raffel & Ellis 2.1 ("for W in R^{M x N}, std 1/sqrt(N)")."""
    return keras.initializers.RandomNormal(0.0, 1.0 / float(fan_in) ** 0.5, seed=seed)


@keras.saving.register_keras_serializable(package=PACKAGE, name="leaky_relu_001")
def leaky_relu(x: keras.KerasTensor) -> keras.KerasTensor:
    """f(x) = max(x, 0.01 x), the non-linearity of Raffel & Ellis 2.1 and thesis 2.1.

    Registered under its own name: Keras's built-in ``leaky_relu`` has slope 0.2, and an
    unregistered function of the same name would load back as that one.
    """
    return keras.activations.leaky_relu(x, negative_slope=LEAKY_SLOPE)
