"""How long do the Raffel & Ellis `paper` runs sit just short of 100%? From the committed records.

    python scripts/plateau_lengths.py [--task addition] [--pooling attention] [--threshold 0.95]

The README's masked-padding explanation (``scripts/padding_length_bias.py``): a masked model
gets above ~95% test accuracy quickly and then spends epochs on the last few test sequences,
because its readout does not recover the sequence length. This reads the Table 1 records of
the ``paper`` preset (no training) and, for every cell and seed (task, T0, pooling, masked or
unmasked, seed), takes the learning rate that got to 100% first (the run the table reports;
ties: the one above the threshold first) and prints the epoch its test accuracy first reached
``--threshold``, the epoch it reached 100%, and the epochs between (the plateau), then the
median plateau per T0. Runs of a cell that did not get to 100% are ignored; a cell-seed with
no such run prints ``-``. A run stopped by the grid's pruning never got to 100% and is ignored.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from thesis_repro.records import load_records

RECORDS = Path("results/ffattention/table1")


class Plateau(NamedTuple):
    """One cell-seed's fastest run: its learning rate, the epoch (1-based) its test accuracy
    first reached the threshold and the epoch it reached 100%."""

    learning_rate: float
    first_above: int
    solved: int

    @property
    def epochs(self) -> int:
        return self.solved - self.first_above


def first_epoch(accuracies: Iterable[float], at_least: float) -> int | None:
    """1-based index of the first accuracy >= ``at_least``; None if there is none."""
    return next((i for i, a in enumerate(accuracies, 1) if a >= at_least), None)


def plateau(runs: Iterable[Mapping[str, Any]], threshold: float) -> Plateau | None:
    """The fastest of one cell-seed's runs (records) to 100% test accuracy, or None."""
    found = []
    for run in runs:
        accuracies = [e["test_accuracy"] for e in run["epochs"]]
        solved = first_epoch(accuracies, 1.0)
        if solved is not None:
            above = first_epoch(accuracies, threshold)
            found.append(Plateau(run["config"]["learning_rate"], above, solved))
    return min(found, key=lambda p: (p.solved, p.first_above), default=None)


def cells(
    records: Iterable[Mapping[str, Any]], task: str, pooling: str
) -> dict[tuple[bool, int, int], list[Mapping[str, Any]]]:
    """The ``paper`` Table 1 records of ``task`` and ``pooling`` by (masked, T0, seed)."""
    grouped = defaultdict(list)
    for record in records:
        config = record["config"]
        if (config.get("preset"), config.get("task"), config.get("pooling")) == (
            "paper",
            task,
            pooling,
        ):
            grouped[(config.get("mask_padding", True), config["t0"], config["seed"])].append(record)
    return grouped


def table(grouped: Mapping[tuple[bool, int, int], list], threshold: float) -> list[str]:
    """Markdown: one row per cell-seed, then the median plateau per padding and T0."""
    lines = [
        f"| padding | T0 | seed | learning rate | first >= {threshold:.0%} | 100% | plateau |",
        "|---|---|---|---|---|---|---|",
    ]
    medians = defaultdict(list)
    for (masked, t0, seed), runs in sorted(
        grouped.items(), key=lambda kv: (not kv[0][0], *kv[0][1:])
    ):
        found = plateau(runs, threshold)
        padding = "masked" if masked else "unmasked"
        if found is None:
            lines.append(f"| {padding} | {t0} | {seed} | - | - | - | - |")
            continue
        medians[(padding, t0)].append(found.epochs)
        lines.append(
            f"| {padding} | {t0} | {seed} | {found.learning_rate:g} | {found.first_above} | "
            f"{found.solved} | {found.epochs} |"
        )
    lines += ["", "| padding | T0 | seeds | median plateau [range] |", "|---|---|---|---|"]
    for (padding, t0), epochs in medians.items():
        lines.append(
            f"| {padding} | {t0} | {len(epochs)} | {statistics.median(epochs):g} "
            f"[{min(epochs)}-{max(epochs)}] |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=("addition", "multiplication"), default="addition")
    parser.add_argument("--pooling", choices=("attention", "mean"), default="attention")
    parser.add_argument("--threshold", type=float, default=0.95)
    parser.add_argument("--records", type=Path, default=RECORDS)
    args = parser.parse_args()
    grouped = cells(load_records(args.records), args.task, args.pooling)
    print("\n".join(table(grouped, args.threshold)))


if __name__ == "__main__":
    main()
