"""thesis_repro: Keras 3 reproduction of Malik (2016) and Raffel & Ellis (2015).

Feed-forward attention for distant dependencies in sequences. See README.md for the map of the
package; ``thesis_repro.layers`` holds the reusable Keras layers.
"""

__version__ = "0.1.0"
