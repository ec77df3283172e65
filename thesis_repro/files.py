"""Atomic file writing: the one way this package writes a file that others may read.

A file is written under a temporary name in its own folder (unique to this process) and renamed
over the target with ``os.replace``, so a reader or a killed run never sees a half-written record,
checkpoint, figure or corpus cache, and two processes never share a temporary file.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def temporary_name(target: Path) -> Path:
    """``.<name>.<pid>.<random>.tmp<suffix>`` beside ``target`` (suffix kept for writers that
    pick the format from it, e.g. ``.keras``, ``.pdf``)."""
    token = f"{os.getpid()}.{secrets.token_hex(4)}"
    return target.with_name(f".{target.stem}.{token}.tmp{target.suffix}")


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it replaces ``target`` (mode 0644,
    like any file written with the usual umask), on error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(target)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(target: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (flushed to disk before the rename)."""
    with atomic_path(target) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as JSON (indent 1, NumPy scalars and arrays as numbers) atomically."""
    text = json.dumps(obj, indent=1, sort_keys=False, default=_json_default) + "\n"
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
