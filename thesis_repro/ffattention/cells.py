"""Which runs make a cell of the Raffel & Ellis tables, and which run a cell reports: the
paper's statistic (the best learning rate of each seed, 2.2), what a partial cell lacks, and
which table (preset, dtype policy, padding) a run belongs to. Shared by the tables and the
figures of :mod:`thesis_repro.ffattention.report`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from thesis_repro.ffattention.config import preset_learning_rates, summarize
from thesis_repro.records import Record

PRESET_ORDER = ("smoke", "cpu", "paper")  # tables in this order; other presets after them


def summary_of(record: Record) -> dict:
    return record["summary"] or summarize(record["epochs"])


def epochs_to_100(record: Record) -> float:
    """Epochs to 100% test accuracy; infinite for a run that has not got there."""
    return summary_of(record)["epochs_to_100"] or math.inf


def median_epochs_to_100(best: list[Record]) -> float:
    """Median epochs to 100% over the seeds' best runs (:func:`best_over_learning_rates`), a
    seed that never got there counting as never: infinite when fewer than half did, and the
    cell gives the best accuracy instead."""
    return float(np.median([epochs_to_100(r) for r in best]))


def _run_key(record: Record) -> tuple:
    """Raffel & Ellis report "the best result achieved using any learning rate" (2.2): fewest
    epochs to 100%, else the highest test accuracy of any epoch within the cap (Raffel's
    published scripts keep the best of their tests, one per 1000 updates)."""
    return (epochs_to_100(record), -(summary_of(record)["best_test_accuracy"] or 0.0))


def best_over_learning_rates(records: list[Record]) -> list[Record]:
    """The best run (:func:`_run_key`) of each seed among ``records`` (one cell of Table 1),
    sorted by seed: the paper's statistic, once per seed; empty for none. A run stopped because
    a rival got to 100% first (``beaten_by``) loses to that rival."""
    by_seed: dict[int, list[Record]] = {}
    for record in records:
        by_seed.setdefault(record["config"]["seed"], []).append(record)
    return [min(by_seed[seed], key=_run_key) for seed in sorted(by_seed)]


def rates_text(seeds: list[Record]) -> str:
    """``lr 0.001`` when every seed's best learning rate is the same, else one per seed."""
    rates = [f"{r['config']['learning_rate']:g}" for r in seeds]
    return f"lr {rates[0]}" if len(set(rates)) == 1 else f"lr {'/'.join(rates)}"


def all_finished(records: list[Record]) -> bool:
    """Whether every run has reached its end; a table marks the others ``unfinished`` (the
    report reads records, not processes: a parked or interrupted run reads the same)."""
    return all(r.get("finished") for r in records)


def coverage_notes(cell: list[Record], table_seeds: list[int]) -> tuple[str, ...]:
    """What a Table 1 cell still lacks, so a partial grid never reads as a finished cell: the
    seeds it has where the table has more (``seed 0 only``, ``seeds 0, 1 only``), and learning
    rates of the preset not yet run for some seed (``1 of 4 learning rates run``: a rate still
    to run could beat the cell's value; none for a preset without a list of rates)."""
    if not cell:
        return ()
    notes = []
    seeds = sorted({r["config"]["seed"] for r in cell})
    if set(table_seeds) - set(seeds):
        named = "seed" if len(seeds) == 1 else "seeds"
        notes.append(f"{named} {', '.join(map(str, seeds))} only")
    config = cell[0]["config"]
    expected = set(preset_learning_rates(config["preset"], config["t0"], config["experiment"]))
    if expected:
        run = min(
            len({r["config"]["learning_rate"] for r in cell if r["config"]["seed"] == s} & expected)
            for s in seeds
        )
        if run < len(expected):
            notes.append(f"{run} of {len(expected)} learning rates run")
    return tuple(notes)


class CellRuns(NamedTuple):
    """What a table reports of one cell's runs: the best run of each seed
    (:func:`best_over_learning_rates`), what the cell still lacks (:func:`coverage_notes`) and
    whether every run reached its end (:func:`all_finished`)."""

    best: list[Record]
    notes: tuple[str, ...]
    finished: bool

    @property
    def complete(self) -> bool:
        """Every seed and learning rate of the table run to its end: a cell to set against
        the paper."""
        return bool(self.best) and not self.notes and self.finished


def cell_runs(runs: list[Record], table_seeds: list[int]) -> CellRuns:
    """:class:`CellRuns` of one cell's ``runs`` in a table over ``table_seeds``."""
    return CellRuns(
        best_over_learning_rates(runs), coverage_notes(runs, table_seeds), all_finished(runs)
    )


def cell_of(records: list[Record], task: str, pooling: str, t0: int) -> list[Record]:
    return [
        r
        for r in records
        if (r["config"]["task"], r["config"]["pooling"], r["config"]["t0"]) == (task, pooling, t0)
    ]


def table_key(config: Mapping[str, Any]) -> str:
    """The table a run belongs to: its preset (``paper``), with its dtype policy where that is
    not float32 (``paper-mixed_bfloat16``) and ``unmasked`` where the padding was not masked
    (``paper-unmasked``), so neither kind of run ever joins a cell of the default runs; also
    the figure's name (``report.figure_name``)."""
    policy = config["dtype_policy"]
    return (
        config["preset"]
        + ("" if policy == "float32" else f"-{policy}")
        + ("" if config["mask_padding"] else "-unmasked")
    )


def table_title(config: Mapping[str, Any], markdown: bool = True) -> str:
    """``preset `paper``` or ``preset `paper`, dtype policy mixed_bfloat16, padding unmasked``
    (without the backticks for a figure): the words for :func:`table_key`."""
    preset = f"`{config['preset']}`" if markdown else config["preset"]
    policy = config["dtype_policy"]
    return (
        f"preset {preset}"
        + ("" if policy == "float32" else f", dtype policy {policy}")
        + ("" if config["mask_padding"] else ", padding unmasked (Raffel's script)")
    )


def tables_of(records: list[Record]) -> dict[str, list[Record]]:
    """``records`` split by :func:`table_key`, in table order (presets as in ``PRESET_ORDER``,
    each preset's default runs before its mixed-precision or unmasked ones)."""
    tables: dict[str, list[Record]] = {}
    for record in records:
        tables.setdefault(table_key(record["config"]), []).append(record)

    def order(key: str) -> tuple[int, str, int, str]:
        config = tables[key][0]["config"]
        preset = config["preset"]
        rank = PRESET_ORDER.index(preset) if preset in PRESET_ORDER else len(PRESET_ORDER)
        return rank, preset, key != preset, key

    return {key: tables[key] for key in sorted(tables, key=order)}
