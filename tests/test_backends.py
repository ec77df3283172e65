"""The same layer tests and a smoke ``reproduce`` under the other Keras backend.

Keras picks its backend once per process, so the other backend (JAX when this session runs
TensorFlow, and the reverse) runs in a pytest subprocess with ``KERAS_BACKEND`` set; both are
dependencies of the project, so neither may be skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import keras

ROOT = Path(__file__).resolve().parent.parent
OTHER = "jax" if keras.backend.backend() != "jax" else "tensorflow"
UNDER_BOTH = [
    "tests/test_layers.py",
    "tests/test_reproduce.py::test_reproduce_tiny_writes_report_figures_and_readme_blocks",
]


def test_layers_and_smoke_reproduce_pass_under_the_other_backend():
    env = {**os.environ, "KERAS_BACKEND": OTHER}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *UNDER_BOTH]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, output
    assert f"keras backend: {OTHER}" in done.stdout, output
    assert "skipped" not in done.stdout.splitlines()[-1], output
