"""Compare a retrained run's record with its first training, kept in git history.

A run retrained with the same seed and code should repeat its first training bit for bit on
one host (``test_same_seed_trains_bit_identically``); across hosts, kernels chosen for other
vector instructions round differently (``scripts/isa_rounding.py``). This prints, for every
per-epoch metric and summary score the two records share (timings left out), whether they are
identical, the first epoch at which they differ and the largest relative difference, with the
host and CPU each record names: the figures the README quotes for the PTB retrains::

    python scripts/compare_retrain.py results/lm/ptb/ptb/paper-5gram+5-momentum-seed1.json
    python scripts/compare_retrain.py RECORD --first REV   # the first training at REV

Without ``--first``, the first training is the record as committed before the last commit
that changed it (or as committed at HEAD, while the retrained record is not yet committed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Wall-clock measurements: they differ between any two runs and say nothing about the math.
TIMINGS = frozenset({"train_seconds", "ms_per_step", "seconds", "wall_seconds"})


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def first_training_revision(path: Path) -> str:
    """HEAD while ``path`` differs from it; else the parent of the last commit that changed it."""
    if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", str(path)]).returncode:
        return "HEAD"
    last = _git("log", "-n1", "--format=%H", "--", str(path)).strip()
    if not last:
        raise SystemExit(f"error: {path} has no commit in git history")
    return f"{last}^"


def record_at(revision: str, path: Path) -> dict[str, Any]:
    """The record ``path`` as committed at ``revision``."""
    try:
        text = _git("show", f"{revision}:{path.as_posix()}")
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"error: no {path} at {revision}: {error.stderr.strip()}") from None
    return json.loads(text)


def _numbers(row: dict[str, Any]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in row.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and key not in TIMINGS
    }


def relative(a: float, b: float) -> float:
    """|a - b| / |a| (0 where both are 0)."""
    return abs(a - b) / abs(a) if a else float(a != b)


def compare(first: dict[str, Any], again: dict[str, Any]) -> list[str]:
    """Lines describing how ``again`` differs from ``first`` (see the module docstring)."""
    lines = []
    for name, record in (("first", first), ("retrained", again)):
        hardware = record.get("hardware", {})
        lines.append(
            f"{name:>9}: {hardware.get('system', '?')}, processor {hardware.get('processor', '?')}"
        )
    epochs = list(zip(first.get("epochs", []), again.get("epochs", []), strict=False))
    metrics = sorted(
        set.intersection(*(set(_numbers(a)) & set(_numbers(b)) for a, b in epochs)) - {"epoch"}
        if epochs
        else set()
    )
    counts = len(first.get("epochs", [])), len(again.get("epochs", []))
    if counts[0] != counts[1]:
        lines.append(
            f"  epochs: {counts[0]} first, {counts[1]} retrained; the first {len(epochs)} compared"
        )
    identical = True
    for metric in metrics:
        pairs = [(_numbers(a)[metric], _numbers(b)[metric]) for a, b in epochs]
        differing = [i for i, (a, b) in enumerate(pairs) if a != b]
        if not differing:
            lines.append(f"  {metric}: identical over {len(pairs)} epochs")
            continue
        identical = False
        i = differing[0]
        worst = max(relative(a, b) for a, b in pairs)
        lines.append(
            f"  {metric}: differs from epoch {i + 1} on ({pairs[i][0]:.6g} first, "
            f"{pairs[i][1]:.6g} retrained); largest relative difference {worst:.2g}"
        )
    first_summary, again_summary = (
        _numbers(first.get("summary", {})),
        _numbers(again.get("summary", {})),
    )
    for key in sorted(set(first_summary) & set(again_summary)):
        a, b = first_summary[key], again_summary[key]
        identical &= a == b
        verdict = "identical" if a == b else f"relative difference {relative(a, b):.2g}"
        lines.append(f"  summary {key}: {a:.6g} first, {b:.6g} retrained ({verdict})")
    if not identical:
        lines.append("not bit-identical")
    elif counts[0] != counts[1]:
        lines.append(f"identical in the {len(epochs)} epochs both have")
    else:
        lines.append("bit-identical")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", type=Path, help="the retrained record (a JSON file in the tree)")
    parser.add_argument(
        "--first",
        metavar="REV",
        help="git revision holding the first training (default: see the module docstring)",
    )
    args = parser.parse_args(argv)
    if not args.record.is_file():
        parser.error(f"no record at {args.record}")
    tracked = _git("ls-files", "--full-name", "--", str(args.record)).strip()
    if not tracked:
        parser.error(f"{args.record} is not in git: there is no first training to compare with")
    revision = args.first or first_training_revision(args.record)
    first = record_at(revision, Path(tracked))
    again = json.loads(args.record.read_text())
    print(f"{args.record}: retrained, against its first training at {revision}")
    print("\n".join(compare(first, again)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
