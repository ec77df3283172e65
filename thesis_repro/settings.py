"""Every path and environment variable the package reads, in one place.

``THESIS_REPRO_RESULTS``
    records of the grids (default ``results/``, committed)
``THESIS_REPRO_RUNS``
    records of single ad-hoc runs (default ``runs/``, git-ignored)
``THESIS_REPRO_DATA``
    folder of the real corpora (``eltec-pol/``, ``ptb/``)
``THESIS_REPRO_CACHE``
    prepared-corpus cache (default ``~/.cache/thesis_repro``)
``THESIS_REPRO_CHECKPOINT_SECONDS``
    seconds between mid-epoch checkpoints (default 300)
``THESIS_REPRO_STEPS_PER_EXECUTION``
    most updates per compiled call in LM and Raffel & Ellis training (default: 1 on a CPU, 16
    on an accelerator; ``training.set_steps_per_execution``)
``THESIS_REPRO_DATA_WORKERS``
    threads generating Raffel & Ellis minibatches ahead of training (default: 1 on a CPU, 8 on
    an accelerator; ``training.FreshBatches``)
``THESIS_REPRO_FF_CHUNK_SIZE``
    time steps per chunk of the fused ``ChunkedFeedForwardPooling`` in Raffel & Ellis runs of
    padded length >= 2000 (default: 64 on a CPU, 0 on an accelerator); ``0``: the unfused Keras
    layers at every length (on an H100 they were faster at T0 = 10,000 than chunks of 64, with
    1.2 GB per run to spare)
``THESIS_REPRO_COMMAND``
    set for the workers of ``--jobs``: the command the user typed
``THESIS_REPRO_SHOW_IMPORT_LOGS``
    ``1``: show the backends' native start-up logs
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

RESULTS_ENV = "THESIS_REPRO_RESULTS"
RUNS_ENV = "THESIS_REPRO_RUNS"
DATA_ENV = "THESIS_REPRO_DATA"
CACHE_ENV = "THESIS_REPRO_CACHE"
CHECKPOINT_SECONDS_ENV = "THESIS_REPRO_CHECKPOINT_SECONDS"
STEPS_PER_EXECUTION_ENV = "THESIS_REPRO_STEPS_PER_EXECUTION"
DATA_WORKERS_ENV = "THESIS_REPRO_DATA_WORKERS"
FF_CHUNK_SIZE_ENV = "THESIS_REPRO_FF_CHUNK_SIZE"
COMMAND_ENV = "THESIS_REPRO_COMMAND"
SHOW_IMPORT_LOGS_ENV = "THESIS_REPRO_SHOW_IMPORT_LOGS"

T = TypeVar("T", int, float)

#: Records of the grids: what the tables are rendered from.
RESULTS_DIR = Path(os.environ.get(RESULTS_ENV, "results"))
#: Where single ad-hoc runs (``run``/``train`` commands) write unless ``--results`` is given, so
#: that only grids write into the committed tree (``runs/`` is git-ignored).
RUNS_DIR = Path(os.environ.get(RUNS_ENV, "runs"))
#: Rendered figures (PDF).
FIGURES_DIR = Path("figures")
REPORT_PATH = Path("REPORT.md")
README_PATH = Path("README.md")
#: Seconds between mid-epoch checkpoints (``training.MidEpochCheckpoint``).
DEFAULT_CHECKPOINT_SECONDS = 300.0


class SettingError(ValueError):
    """An environment variable of this list holds a value the package cannot use (the command
    lines print it as ``error: ...``: ``check_environment``)."""


def _setting(
    env: str, parse: Callable[[str], T], valid: Callable[[T], bool], wanted: str
) -> T | None:
    """``$env`` parsed by ``parse`` (None when unset or empty); ``SettingError`` unless the value
    parses and is ``valid`` (``wanted`` says what is)."""
    text = os.environ.get(env)
    if not text:
        return None
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise SettingError(f"{env} must be {wanted}, got {text!r}")
    return value


def checkpoint_seconds() -> float:
    """``$THESIS_REPRO_CHECKPOINT_SECONDS`` (a number > 0), else 300."""
    value = _setting(CHECKPOINT_SECONDS_ENV, float, lambda v: v > 0, "seconds > 0")
    return DEFAULT_CHECKPOINT_SECONDS if value is None else value


#: Most updates Keras runs per compiled call (``steps_per_execution``) on an accelerator.
ACCELERATOR_STEPS_PER_EXECUTION = 16


def steps_per_execution(device: str) -> int:
    """``$THESIS_REPRO_STEPS_PER_EXECUTION`` if set, else 1 on a CPU (the update's compute
    dwarfs Keras's per-update overhead) and ``ACCELERATOR_STEPS_PER_EXECUTION`` on an
    accelerator (where it does not: the host would wait on the device after every update)."""
    return _count_setting(STEPS_PER_EXECUTION_ENV, device, ACCELERATOR_STEPS_PER_EXECUTION)


#: Threads that generate a Raffel & Ellis run's minibatches on an accelerator.
ACCELERATOR_DATA_WORKERS = 8


def data_workers(device: str) -> int:
    """``$THESIS_REPRO_DATA_WORKERS`` if set, else 1 on a CPU (its cores are busy training) and
    ``ACCELERATOR_DATA_WORKERS`` on an accelerator (whose steps are faster than one host thread
    generates long sequences)."""
    return _count_setting(DATA_WORKERS_ENV, device, ACCELERATOR_DATA_WORKERS)


#: Time steps per chunk of the fused pooling layer on a CPU (``bench_ffattention.py``: fastest
#: there). On an accelerator the default is 0, the unfused layers: faster at T0 = 10,000 on an
#: H100 (6.3 ms per step against 11.4 with chunks of 64) and an H200 (5.4 against 6.1 with
#: chunks of 1024), at about 1 GB of device memory (README, "Measured on one H100/H200").
DEFAULT_FF_CHUNK_SIZE = 64


def ff_chunk_size(device: str = "cpu") -> int:
    """``$THESIS_REPRO_FF_CHUNK_SIZE`` (a whole number >= 0; 0: never fused), else
    ``DEFAULT_FF_CHUNK_SIZE`` on a CPU and 0 on an accelerator."""
    value = _setting(FF_CHUNK_SIZE_ENV, int, lambda v: v >= 0, "a whole number >= 0")
    if value is not None:
        return value
    return DEFAULT_FF_CHUNK_SIZE if device == "cpu" else 0


def _count_setting(env: str, device: str, accelerator: int) -> int:
    """A whole number >= 1 from ``$env``, else 1 on a CPU and ``accelerator`` elsewhere."""
    value = _setting(env, int, lambda v: v >= 1, "a whole number >= 1")
    if value is not None:
        return value
    return 1 if device == "cpu" else accelerator


def check_environment() -> None:
    """Raise ``SettingError`` for the first environment variable above with an unusable value
    (called by every command line before it starts work)."""
    checkpoint_seconds()
    steps_per_execution("cpu")
    data_workers("cpu")
    ff_chunk_size()


def data_dir() -> str | None:
    """``$THESIS_REPRO_DATA`` (the corpora's folder), or None when unset."""
    return os.environ.get(DATA_ENV) or None


def cache_dir() -> Path:
    """``$THESIS_REPRO_CACHE`` if set, else ``~/.cache/thesis_repro``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "thesis_repro"


def show_import_logs() -> bool:
    return os.environ.get(SHOW_IMPORT_LOGS_ENV) == "1"
