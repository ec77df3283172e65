"""Running a grid: one claim per run, and ``--jobs N`` runs of one grid at once.

A run is claimed by its lock file ``<record>.json.lock`` (created atomically, holding
``host pid``) before it trains, so two processes never train the same run: the second sees
:class:`RunBusy` and moves on to the next run of its grid. A lock whose process is gone (same
host) is stale and taken over; a lock of another host must be deleted by hand.

``--jobs N`` starts N copies of the same grid command (``--jobs 1``), each walking the grid in
order and taking the runs nobody holds. On a GPU, N processes share the device: JAX is told to
take 1/N of its memory each and TensorFlow to grow its memory on demand.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Set for the workers of ``--jobs``: the command the user typed (what their records store).
COMMAND_ENV = "THESIS_REPRO_COMMAND"


class RunBusy(RuntimeError):
    """Another live process holds the run."""


def lock_path(record_path: str | os.PathLike) -> Path:
    record_path = Path(record_path)
    return record_path.with_name(record_path.name + ".lock")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim(record_path: str | os.PathLike) -> Path:
    """Take the lock of the run recorded at ``record_path`` (re-entrant within a process).

    Raises :class:`RunBusy` while another live process holds it. The lock is released by
    :func:`release` or when this process exits.
    """
    lock = lock_path(record_path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    host, me = socket.gethostname(), f"{socket.gethostname()} {os.getpid()}"
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = lock.read_text().strip()
            except FileNotFoundError:
                continue  # released between our open and read: try again
            if owner == me:
                return lock
            owner_host, _, pid = owner.partition(" ")
            if owner_host == host and pid.isdigit() and not _alive(int(pid)):
                lock.unlink(missing_ok=True)  # stale: its process is gone
                continue
            raise RunBusy(
                f"{Path(record_path).name} is being run by process {pid or '?'} on "
                f"{owner_host or '?'} (if no such process runs, delete {lock})"
            ) from None
        with os.fdopen(fd, "w") as handle:
            handle.write(me)
        atexit.register(release, record_path)
        return lock
    raise RunBusy(f"could not take {lock}: it keeps changing hands")


def release(record_path: str | os.PathLike) -> None:
    """Drop this process's lock of the run at ``record_path`` (no-op if it is not ours)."""
    lock = lock_path(record_path)
    try:
        if lock.read_text().strip() == f"{socket.gethostname()} {os.getpid()}":
            lock.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


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
    """Run ``python -m module *argv --jobs 1`` in ``jobs`` processes at once; their worst status.

    Each worker walks the whole grid and trains the runs no other worker holds (:func:`claim`),
    so the grid ends when every worker has found nothing left to take.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, not {jobs}")
    cmd = [sys.executable, "-m", module, *without_jobs(argv), "--jobs", "1"]
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
