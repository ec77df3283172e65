"""Figure plumbing shared by the experiments: a headless pyplot and an atomic PDF save."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thesis_repro.files import atomic_path


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (works without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Save ``fig`` to ``path`` (format from the suffix) via a temporary file, then close it.

    PDFs carry no creation date, so re-rendering unchanged records leaves the files unchanged.
    """
    path = Path(path)
    metadata = {"CreationDate": None} if path.suffix.lower() == ".pdf" else None
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, metadata=metadata, format=path.suffix.lstrip(".") or None)
    finally:
        pyplot().close(fig)
    return path
