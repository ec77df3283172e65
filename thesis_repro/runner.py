"""Running a grid: every run in order, and ``--jobs N`` runs of one grid at once.

A run is claimed by its lock file (``run_lock.claim``) before it trains, so two processes never
train the same run: the second sees ``RunBusy`` and moves on to the next run of its grid.

``--jobs N`` starts N copies of the same grid command (``--jobs 1``), each walking the grid in
order and taking the runs nobody holds. On a GPU, N processes share the device: JAX is told to
take 1/N of its memory each and TensorFlow to grow its memory on demand.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from thesis_repro.cli import positive_int
from thesis_repro.records import (
    CorruptRecord,
    Record,
    RunConflict,
    RunFailed,
    command_line,
    grid_failures,
)
from thesis_repro.run_lock import RunBusy
from thesis_repro.settings import COMMAND_ENV
from thesis_repro.training import DTYPE_POLICIES, use_data_parallel

if TYPE_CHECKING:  # the contract names the runner; the runner only needs the type
    from thesis_repro.experiment import Experiment

Config = TypeVar("Config")


def walk_grid(
    configs: Sequence[Config],
    run_one: Callable[[Config], dict],
    describe: Callable[[Config], str],
    verbose: int = 1,
) -> list[dict]:
    """Run every config of a grid in order and return the records of those done here.

    ``run_one`` skips a finished run and resumes an interrupted one (each experiment's ``run``);
    a run that another process holds (``RunBusy``) is left to it; a failed run (``RunFailed``)
    is reported in one line, its record returned, and the grid goes on
    (``records.grid_failures`` words the error).
    """
    records = []
    for index, config in enumerate(configs, 1):
        if verbose:
            print(f"=== {index}/{len(configs)} {describe(config)}", flush=True)
        try:
            records.append(run_one(config))
        except RunBusy as busy:
            print(f"[busy] {busy}: left to it", flush=True)
        except RunFailed as failed:
            print(f"[failed] {failed}", flush=True)
            records.append(failed.record)
    return records


def run_grid(
    experiment: Experiment, configs: Sequence[Any], results_dir: Path, verbose: int = 1
) -> list[dict]:
    """Every run of ``configs`` with ``experiment.run``, in order (:func:`walk_grid`)."""
    return walk_grid(
        configs, lambda c: experiment.run(c, results_dir, verbose), experiment.describe, verbose
    )


def run_command(run_one: Callable[[], Record], show: Callable[[Record], str]) -> int:
    """The ``run`` command of every experiment: train one run and print ``show(record)``;
    returns the exit status: 1 for a failed run (loss NaN or infinite, now or before), 2 for a
    run another process holds, a record with other settings or an unreadable record."""
    try:
        record = run_one()
    except RunFailed as failed:
        print(f"error: {failed}", file=sys.stderr)
        return 1
    except (RunConflict, CorruptRecord, RunBusy) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(show(record))
    return 0


def grid_command(
    experiment: Experiment,
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    configs: Sequence[Any],
    run_one: Callable[[Any], dict] | None = None,
    render: Callable[[], str] | None = None,
) -> int:
    """The ``grid`` command of every experiment; returns its exit status.

    ``--jobs N`` > 1 starts N workers (:func:`run_jobs`); otherwise the grid is walked here with
    ``run_one`` (default ``experiment.run``). Then the report is rendered (``render``, default
    ``experiment.report``) unless ``--no-report``. A record with other settings or an
    unreadable one gives status 2, a failed run status 1 (after the report).
    """
    if args.jobs > 1:
        argv = list(sys.argv[1:] if argv is None else argv)
        status, records = run_jobs(experiment.package, argv, args.jobs, command_line()), []
    else:
        one = run_one or (lambda c: experiment.run(c, args.results, args.verbose))
        try:
            records = walk_grid(configs, one, experiment.describe, args.verbose)
        except (RunConflict, CorruptRecord) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        status = 0
    if not args.no_report:
        print(render() if render else experiment.report(args.results, args.figures))
    failures = grid_failures(records)
    if failures:
        print(f"error: {failures}", file=sys.stderr)
        return 1
    return status


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    """``--jobs N`` of every grid command."""
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="train N runs of the grid at once, in N processes sharing the device (a GPU: "
        "one run leaves it mostly idle); each run is claimed by a lock file, so a second "
        "grid command on the same results never trains the same run (default: 1)",
    )


def without_jobs(argv: Sequence[str]) -> list[str]:
    """``argv`` with any ``--jobs N`` / ``--jobs=N`` removed."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--jobs":
            skip = True
        elif not arg.startswith("--jobs="):
            out.append(arg)
    return out


def worker_env(jobs: int, command: str) -> dict[str, str]:
    """Environment of one of ``jobs`` workers sharing a device (the user's settings win)."""
    env = dict(os.environ)
    env.setdefault(COMMAND_ENV, command)
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / jobs:.3f}")
    env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    return env


def run_jobs(module: str, argv: Sequence[str], jobs: int, command: str) -> int:
    """Run ``python -m module *argv --jobs 1 --no-report`` in ``jobs`` processes at once; return
    their worst exit status (the caller renders the report once, after all of them).

    Each worker walks the whole grid and trains the runs no other worker holds (:func:`claim`),
    so the grid ends when every worker has found nothing left to take.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    cmd = [sys.executable, "-m", module, *without_jobs(argv), "--jobs", "1", "--no-report"]
    env = worker_env(jobs, command)
    workers = [subprocess.Popen(cmd, env=env) for _ in range(jobs)]
    try:
        codes = [w.wait() for w in workers]
    except KeyboardInterrupt:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait()
        raise
    return max(codes, key=abs)


def add_dtype_policy_option(parser: argparse.ArgumentParser) -> None:
    """``--dtype-policy`` of the run and grid commands (``training.dtype_policy``)."""
    parser.add_argument(
        "--dtype-policy",
        choices=DTYPE_POLICIES,
        default="float32",
        help="Keras dtype policy: float32 (default, every published result) or mixed "
        "precision, mixed_bfloat16 (GPUs/TPUs with bfloat16) or mixed_float16; part of the "
        "run's identity (its own record, name suffix)",
    )


def add_data_parallel_option(parser: argparse.ArgumentParser) -> None:
    """``--data-parallel`` of the run and grid commands (``training.use_data_parallel``)."""
    parser.add_argument(
        "--data-parallel",
        action="store_true",
        help="train each run data-parallel over all local devices (Keras distribution API; "
        "KERAS_BACKEND=jax only); the batch is split across them, the results stay the same "
        "within float rounding",
    )


def start_data_parallel(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Apply ``--data-parallel`` (one run over every local device) before any work; it cannot
    be combined with ``--jobs`` (several runs on one device)."""
    if not getattr(args, "data_parallel", False):
        return
    if getattr(args, "jobs", 1) > 1:
        parser.error("--data-parallel spreads one run over every device: not with --jobs")
    try:
        print(f"data-parallel over {use_data_parallel()} devices", flush=True)
    except ValueError as error:
        parser.error(str(error))
