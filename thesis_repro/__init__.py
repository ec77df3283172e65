"""thesis_repro: Keras 3 reproduction of Malik (2016) and Raffel & Ellis (2015).

Feed-forward attention for distant dependencies in sequences. See README.md for the map of the
package; ``thesis_repro.layers`` holds the reusable Keras layers.

Importing the package registers every custom Keras object (all of them live in
``thesis_repro.layers``), so ``keras.saving.load_model("model.keras")`` works after ``import
thesis_repro``. TensorFlow's C++ start-up lines (absl/oneDNN/CUDA notices written straight to the
process's stderr while Keras imports it) are held back; set ``THESIS_REPRO_SHOW_IMPORT_LOGS=1`` to
see them. If the import fails, they are printed with the error.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from thesis_repro.settings import show_import_logs


@contextlib.contextmanager
def _hold_back_native_stderr() -> Iterator[None]:
    """Point file descriptor 2 at a temporary file for the duration (native libraries write
    there directly, so ``sys.stderr`` alone cannot catch them); replay it on an exception."""
    if show_import_logs():
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _start_backend_quietly() -> None:
    """Under TensorFlow, look up the devices now, while stderr is held back: that is when
    TensorFlow prints its CUDA probe (``failed call to cuInit`` on a machine without a GPU)."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.list_physical_devices()


with _hold_back_native_stderr():
    from thesis_repro import layers

    _start_backend_quietly()

__version__ = "0.1.0"
__all__ = ["layers"]
