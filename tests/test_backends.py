"""The same layer tests and a smoke ``reproduce`` under the other Keras backend.

Keras picks its backend once per process, so the other backend (JAX when this session runs
TensorFlow, and the reverse) runs in a pytest subprocess with ``KERAS_BACKEND`` set; both are
dependencies of the project, so neither may be skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest

ROOT = Path(__file__).resolve().parent.parent
OTHER = "jax" if keras.backend.backend() != "jax" else "tensorflow"
# Two groups, so that pytest-xdist workers can run them side by side.
UNDER_BOTH = {
    "layers": [
        "tests/test_layers.py",
        # A Raffel & Ellis run through the fused chunked layer (padded length >= 2000) and unfused.
        "tests/test_ffattention.py::"
        "test_chunk_size_setting_picks_the_implementation_and_the_record_says_which",
        # A checkpoint of one implementation going on in the other (a GPU runs JAX).
        "tests/test_ffattention.py::"
        "test_training_state_carries_between_the_fused_and_the_unfused_network",
    ],
    "reproduce": [
        "tests/test_reproduce.py::test_reproduce_tiny_writes_report_figures_and_readme_blocks"
    ],
}
# The GPU machines of issue 15 have JAX but no TensorFlow. The subprocesses that run JAX find
# TensorFlow missing, so an import of it outside the TensorFlow backend fails here first.
NO_TENSORFLOW = """
import importlib.abc
import sys


class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, NoTensorFlow())
"""


def backend_env(backend: str, folder: Path, **variables: str) -> dict[str, str]:
    """The environment of a subprocess under ``backend``; under JAX TensorFlow cannot be
    imported there (a ``sitecustomize`` in ``folder`` put first on ``PYTHONPATH``)."""
    env = {**os.environ, "KERAS_BACKEND": backend, **variables}
    if backend == "jax":
        (folder / "sitecustomize.py").write_text(NO_TENSORFLOW)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("group", sorted(UNDER_BOTH))
def test_layers_and_smoke_reproduce_pass_under_the_other_backend(group, tmp_path):
    env = backend_env(OTHER, tmp_path)
    # `-n 0`: one process; the workers of this session already fill the machine.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0"]
    command += UNDER_BOTH[group]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, output
    assert f"keras backend: {OTHER}" in done.stdout, output
    assert "skipped" not in done.stdout.splitlines()[-1], output


DATA_PARALLEL = """
import json, sys
try:
    import tensorflow
    sys.exit("TensorFlow can be imported here: the test would not see a stray import of it")
except ModuleNotFoundError:
    pass
from pathlib import Path
from thesis_repro import lm
from thesis_repro.training import use_data_parallel

from thesis_repro import ffattention

source = lm.resolve_corpus(None, "synthetic", None)
config = lm.make_config(source, "smoke", "runs", 5, 5, epochs=1)
attention = ffattention.RunConfig(
    "table1", "addition", 50, "attention", 1e-3, max_epochs=2, steps_per_epoch=5, test_size=100
)
out = Path(sys.argv[1])
one = [lm.run(config, source, out / "one", verbose=0), ffattention.run(attention, out / "one", 0)]
devices = use_data_parallel()
two = [lm.run(config, source, out / "two", verbose=0), ffattention.run(attention, out / "two", 0)]
print(json.dumps({"devices": devices, "one": one, "two": two}))
"""


def test_data_parallel_runs_match_one_device(tmp_path):
    """``--data-parallel`` (Keras ``DataParallel`` over 2 virtual CPU devices under JAX) gives
    the single-device run's losses and scores within float rounding: an LM run and a Raffel &
    Ellis run."""
    devices = "--xla_force_host_platform_device_count=2"
    # XLA's in-process CPU all-reduce between the two virtual devices can deadlock on a loaded
    # 2-core host: one device waits at the first all-reduce, the other's program never starts
    # (seen with a training and a second test process beside the test, 2026-11-27 and -28: 600
    # s of waiting changed nothing). It is XLA's thread pool, not the model: end such a stuck
    # run after 120 s and start it again, at most three times. A jaxlib that predates the flag
    # rejects it; then run without.
    bounded = f"{devices} --xla_cpu_collective_call_terminate_timeout_seconds=120"
    flags = bounded
    for attempt in range(3):
        folder = tmp_path / f"attempt{attempt}"  # a stuck attempt's records are not resumed
        folder.mkdir()
        command = [sys.executable, "-c", DATA_PARALLEL, str(folder)]
        env = backend_env("jax", tmp_path, XLA_FLAGS=flags)
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
        )
        if "Unknown flag in XLA_FLAGS" in done.stderr and flags == bounded:
            flags = devices
        elif "Termination timeout for `all reduce" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    (lm_one, ff_one), (lm_two, ff_two) = out["one"], out["two"]
    for one, two, keys in [
        (lm_one, lm_two, ("train_loss", "valid_perplexity")),
        (ff_one, ff_two, ("train_loss", "test_loss", "test_accuracy")),
    ]:
        assert two["hardware"]["devices"] == 2 and "devices" not in one["hardware"]
        assert len(one["epochs"]) == len(two["epochs"]) > 0
        for a, b in zip(one["epochs"], two["epochs"], strict=True):
            for key in keys:
                assert abs(a[key] - b[key]) <= 1e-4 * max(1.0, abs(a[key])), (key, a, b)
    test = lm_one["summary"]["test_perplexity"], lm_two["summary"]["test_perplexity"]
    assert abs(test[0] / test[1] - 1) < 1e-4, test


def test_records_say_how_an_accelerator_multiplies_float32_matrices():
    """On a GPU both backends compute float32 matmuls in TF32 by default; a record made there
    stores the setting (``hardware.matmul_precision``) and the report shows it. JAX: its
    ``jax_default_matmul_precision`` (``default`` when unset); TensorFlow: its TF32 switch. A CPU
    record has none (a CPU multiplies in float32 whatever the setting)."""
    import jax
    import tensorflow as tf

    from thesis_repro.records import (
        compute_device,
        float32_matmul_precision,
        format_hardware,
        machine,
    )

    assert float32_matmul_precision("jax") == "default"
    with jax.default_matmul_precision("float32"):
        assert float32_matmul_precision("jax") == "float32"
    enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        for switch, expected in ((False, "float32"), (True, "tf32")):
            tf.config.experimental.enable_tensor_float_32_execution(switch)
            assert float32_matmul_precision("tensorflow") == expected
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(enabled)
    assert compute_device()["device"] == "cpu" and "matmul_precision" not in compute_device()
    gpu = {**machine(), "backend": "jax", "device": "NVIDIA H200", "dtype_policy": "float32"}
    assert format_hardware(gpu).endswith("on NVIDIA H200, dtype policy float32")
    shown = format_hardware({**gpu, "matmul_precision": "default"})
    assert shown.endswith("on NVIDIA H200, dtype policy float32, float32 matmuls: default")
