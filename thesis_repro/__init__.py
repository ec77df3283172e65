"""thesis_repro: Keras 3 reproduction of Malik (2016) and Raffel & Ellis (2015).

Feed-forward attention for distant dependencies in sequences. See README.md for the map of the
package; ``thesis_repro.layers`` holds the reusable Keras layers.

Importing the package registers every custom Keras object (the layers and the models' custom
pieces), so ``keras.saving.load_model("model.keras")`` works after ``import thesis_repro``.
"""

from thesis_repro import language_models, layers, models

__version__ = "0.1.0"
__all__ = ["language_models", "layers", "models"]
