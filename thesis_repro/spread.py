"""Mean ± standard deviation over instances, as every table reports it (sample standard
deviation, ``ddof = 1``; one value has none)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NONE = "–"  # the cell of a statistic over no values


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof = 1; None for a single value)."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        raise ValueError("mean_std of no values")
    return float(array.mean()), (float(array.std(ddof=1)) if array.size > 1 else None)


def format_spread(
    values: Sequence[float], spec: str = ".2f", scale: float = 1.0, with_range: bool = False
) -> str:
    """``mean ± std`` of ``values`` times ``scale``, each number formatted with ``spec``; the mean
    alone for one value, ``NONE`` for none. ``with_range`` appends ``[min, max]`` (two or more
    values)."""
    if len(values) == 0:
        return NONE
    mean, std = mean_std(values)
    if std is None:
        return format(scale * mean, spec)
    text = f"{format(scale * mean, spec)} ± {format(scale * std, spec)}"
    if with_range:
        text += f" [{format(scale * min(values), spec)}, {format(scale * max(values), spec)}]"
    return text
