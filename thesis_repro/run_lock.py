"""One process per run: a lock file beside its record (``RUN.json.lock``, holding ``"host pid"``).

``claim`` takes it before a run trains (``records.RunRecord.start``), so two processes (two
``--jobs`` workers, two shells) never train the same run: the second gets :class:`RunBusy`.
A lock whose process is gone on this host is stale and taken over; one from another host
counts as held.
"""

from __future__ import annotations

import atexit
import os
import socket
from pathlib import Path


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


def held(record_path: str | os.PathLike) -> bool:
    """Whether a process holds the run at ``record_path``: its lock exists and, when taken on
    this host, its process is alive (a lock from another host counts as held)."""
    try:
        owner = lock_path(record_path).read_text().strip()
    except FileNotFoundError:
        return False
    return not _stale(owner)


def _stale(owner: str) -> bool:
    """Whether the lock owner ``"host pid"`` is a process of this host that is gone."""
    owner_host, _, pid = owner.partition(" ")
    return owner_host == socket.gethostname() and pid.isdigit() and not _alive(int(pid))


def claim(record_path: str | os.PathLike) -> Path:
    """Take the lock of the run recorded at ``record_path`` (re-entrant within a process).

    Raises :class:`RunBusy` while another live process holds it. The lock is released by
    :func:`release` or when this process exits.
    """
    lock = lock_path(record_path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    me = f"{socket.gethostname()} {os.getpid()}"
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
            if _stale(owner):
                lock.unlink(missing_ok=True)  # its process is gone
                continue
            owner_host, _, pid = owner.partition(" ")
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
