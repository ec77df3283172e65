"""How long do the Raffel & Ellis `paper` runs sit just short of 100%? From the committed records.

    python scripts/plateau_lengths.py [--task addition] [--pooling attention] [--threshold 0.95]

The README's masked-padding explanation (``scripts/padding_length_bias.py``): a masked model
gets above ~95% test accuracy quickly and then spends epochs on the last few test sequences,
because its readout does not recover the sequence length. This reads the Table 1 records of
the ``paper`` preset (no training) and, for every cell and seed (task, T0, pooling, masked or
unmasked, seed), takes the run the table reports (``ffattention.cells.best_over_learning_rates``:
fewest epochs to 100%; among tied rates the table's choice) and prints the epoch its test
accuracy first reached ``--threshold``, the epoch it reached 100%, and the epochs between (the
plateau), then the median plateau per T0. A cell-seed whose reported run never got to 100%
prints ``-``. The report renders the medians (``ffattention.plateau``, "epochs from 95% to 100%").
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from thesis_repro.ffattention.plateau import PLATEAU_FROM, plateau
from thesis_repro.records import Record, load_records

RECORDS = Path("results/ffattention/table1")


def cells(
    records: Iterable[Record], task: str, pooling: str
) -> dict[tuple[bool, int, int], list[Record]]:
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


def table(grouped: Mapping[tuple[bool, int, int], list[Record]], threshold: float) -> list[str]:
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
    parser.add_argument("--threshold", type=float, default=PLATEAU_FROM)
    parser.add_argument("--records", type=Path, default=RECORDS)
    args = parser.parse_args()
    grouped = cells(load_records(args.records), args.task, args.pooling)
    print("\n".join(table(grouped, args.threshold)))


if __name__ == "__main__":
    main()
