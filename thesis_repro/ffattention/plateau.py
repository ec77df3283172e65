"""The plateau of Raffel & Ellis Table 1's attention runs: the epochs from the first at
``PLATEAU_FROM`` test accuracy to 100% of the run each cell and seed reports, as a table for
:mod:`thesis_repro.ffattention.report` and per seed for ``scripts/plateau_lengths.py``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from thesis_repro.ffattention.cells import (
    PRESET_ORDER,
    all_finished,
    best_over_learning_rates,
    cell_of,
    coverage_notes,
    summary_of,
)
from thesis_repro.ffattention.config import TABLE1_TASKS
from thesis_repro.markdown import table_head, table_row
from thesis_repro.records import Record, split_failed

#: Where the plateau of a Table 1 run starts: its first epoch at this test accuracy or more.
PLATEAU_FROM = 0.95


class Plateau(NamedTuple):
    """One cell-seed's reported run: its learning rate, the epoch (1-based) its test accuracy
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


def plateau(runs: list[Record], threshold: float = PLATEAU_FROM) -> Plateau | None:
    """The plateau of the run Table 1 reports for one cell-seed (``runs``: its learning rates,
    :func:`best_over_learning_rates`), or None when that run did not get to 100%."""
    (best,) = best_over_learning_rates(runs)
    solved = summary_of(best)["epochs_to_100"]
    if solved is None:
        return None
    above = first_epoch((e["test_accuracy"] for e in best["epochs"]), threshold)
    return Plateau(best["config"]["learning_rate"], above or solved, solved)


def plateau_presets(records: list[Record]) -> list[tuple[str, list[Record]]]:
    """The float32 Table 1 attention runs of each preset with several seeds (the plateau is a
    statement about seeds), by preset in table order."""
    by_preset: dict[str, list[Record]] = {}
    for record in split_failed(records)[0]:
        config = record["config"]
        if (
            record.get("epochs")
            and (config["experiment"], config["pooling"]) == ("table1", "attention")
            and config["dtype_policy"] == "float32"
        ):
            by_preset.setdefault(config["preset"], []).append(record)
    order = [p for p in PRESET_ORDER if p in by_preset] + sorted(set(by_preset) - {*PRESET_ORDER})
    return [
        (preset, by_preset[preset])
        for preset in order
        if len({r["config"]["seed"] for r in by_preset[preset]}) > 1
    ]


def plateau_table(preset: str, runs: list[Record]) -> str:
    """Markdown: per task and padding (masked, unmasked) and T0, the epochs from the first at
    ``PLATEAU_FROM`` test accuracy to 100% of the run Table 1 reports, median [range] over the
    seeds that got to 100%; a cell missing seeds or learning rates says so (as Table 1)."""
    t0s = sorted({r["config"]["t0"] for r in runs})
    table_seeds = sorted({r["config"]["seed"] for r in runs})
    lines = [
        f"### Epochs from {PLATEAU_FROM:.0%} to 100% test accuracy (Raffel & Ellis Table 1, "
        f"attention; preset `{preset}`)",
        "",
        f"The run each cell and seed reports in Table 1 (its best learning rate): the epochs "
        f"from its first epoch at {PLATEAU_FROM:.0%} or more to its epoch at 100%, median "
        "[range] over the seeds that got to 100%, with the padding masked (SPEC's default) and "
        "fed to the network (Raffel's script). Per seed: `python scripts/plateau_lengths.py "
        "[--task multiplication]`.",
        "",
        *table_head(["task, padding"] + [f"T0 = {t}" for t in t0s]),
    ]
    for task in TABLE1_TASKS:
        for masked in (True, False):
            padded = [r for r in runs if r["config"]["mask_padding"] == masked]
            cells = [cell_of(padded, task, "attention", t0) for t0 in t0s]
            if any(cells):
                padding = "masked" if masked else "unmasked"
                texts = [_plateau_cell(cell, table_seeds) for cell in cells]
                lines.append(table_row([f"{task}, {padding}", *texts]))
    return "\n".join(lines) + "\n"


def _plateau_cell(cell: list[Record], table_seeds: list[int]) -> str:
    if not cell:
        return "–"
    seeds = sorted({r["config"]["seed"] for r in cell})
    found = [plateau([r for r in cell if r["config"]["seed"] == s]) for s in seeds]
    epochs = sorted(p.epochs for p in found if p is not None)
    notes = list(coverage_notes(cell, table_seeds))
    if len(epochs) < len(seeds):
        notes.insert(0, f"{len(epochs)} of {len(seeds)} seeds at 100%")
    if not all_finished(cell):
        notes.append("unfinished")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not epochs:
        return f"–{tail}"
    if len(epochs) == 1:
        return f"{epochs[0]}{tail}"
    return f"{float(np.median(epochs)):g} [{epochs[0]}–{epochs[-1]}]{tail}"
