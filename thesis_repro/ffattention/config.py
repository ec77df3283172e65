"""Raffel & Ellis (2015) as data: the paper's numbers, run configurations, presets, and the
summary of a run that the tables report.

A leaf module: it imports nothing else of the package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from thesis_repro.tasks import MIN_LENGTH_RAFFEL

NAME = "ffattention"
EXPERIMENTS = ("table1", "variable", "temporal_order")  # the three experiments of the paper
TABLE1_TASKS = ("addition", "multiplication")  # the regression tasks of Table 1 and 2.3
POOLINGS = ("attention", "mean")  # eq. 1 and eq. 2 (model.Pooling is its type)
LEARNING_RATES = (3e-4, 1e-3, 3e-3, 1e-2)
PAPER_T0S = (50, 100, 500, 1000, 5000, 10000)
VARIABLE_MIN, VARIABLE_MAX = 50, 10000
PAD_MULTIPLE = 512
MIN_T0 = MIN_LENGTH_RAFFEL  # shortest Raffel addition sequence: the markers need room
CUSTOM = "custom"  # the preset of a single `run` (its settings come from the command line)
# From this padded length on, the fused chunked implementation is faster on a CPU
# (bench_ffattention.py; on an accelerator it is off by default: settings.ff_chunk_size).
CHUNKED_FROM_LENGTH = 2000

# Raffel & Ellis Table 1: epochs to 100% test accuracy (int) or accuracy after 100 epochs (float).
PAPER_TABLE1: dict[tuple[str, str], dict[int, int | float]] = {
    ("addition", "attention"): {50: 1, 100: 1, 500: 1, 1000: 1, 5000: 2, 10000: 3},
    ("addition", "mean"): {50: 1, 100: 1, 500: 1, 1000: 2, 5000: 8, 10000: 17},
    ("multiplication", "attention"): {50: 1, 100: 2, 500: 4, 1000: 2, 5000: 15, 10000: 6},
    ("multiplication", "mean"): {50: 2, 100: 2, 500: 8, 1000: 33, 5000: 0.898, 10000: 0.808},
}
# Raffel & Ellis 2.3: test accuracy after 100 epochs of the variable-length model.
PAPER_VARIABLE = {
    ("addition", "attention"): 0.999,
    ("multiplication", "attention"): 0.994,
    ("addition", "mean"): 0.774,
    ("multiplication", "mean"): 0.555,
}


@dataclass(frozen=True)
class RunConfig:
    """One training run. ``experiment``: ``table1``, ``variable`` or ``temporal_order``."""

    experiment: str
    task: str
    t0: int
    pooling: str
    learning_rate: float
    seed: int = 0
    max_epochs: int = 100
    steps_per_epoch: int = 1000
    batch_size: int = 100
    test_size: int = 1000
    max_length: int = VARIABLE_MAX  # longest sequence of the variable-length experiment
    dtype_policy: str = "float32"  # Keras dtype policy of the layers (training.DTYPE_POLICIES)
    preset: str = CUSTOM  # the preset whose grid the run belongs to; CUSTOM: a single `run`
    # False: Raffel's published script instead of SPEC's masking (the paper is silent) for the
    # padding (Table 1 and temporal order only): every batch is padded to his fixed width
    # int(ceil(1.1 T0)) and the padded steps enter the attention and the mean
    # (tasks.raffel_padded_width).
    mask_padding: bool = True

    def __post_init__(self) -> None:
        if not self.mask_padding and self.experiment == "variable":
            raise ValueError(
                "mask_padding=False is defined for Table 1 and the temporal-order task (one "
                "fixed width per T0); the variable-length batches are padded to a multiple "
                f"of {PAD_MULTIPLE} steps, which the padding would dominate"
            )

    @property
    def name(self) -> str:
        """``<preset>-<task>-T<t0>-<pooling>-lr<lr>[-<policy>][-unmasked]-seed<seed>``: the
        preset keeps a `cpu` run (epoch cap 10) apart from the `paper` run of the same cell
        (cap 100)."""
        t0 = "var" if self.experiment == "variable" else f"T{self.t0}"
        precision = "" if self.dtype_policy == "float32" else f"-{self.dtype_policy}"
        padding = "" if self.mask_padding else "-unmasked"
        lr = f"lr{self.learning_rate:g}"
        return (
            f"{self.preset}-{self.task}-{t0}-{self.pooling}-{lr}{precision}{padding}"
            f"-seed{self.seed}"
        )


@dataclass(frozen=True)
class Preset:
    """A named set of runs; ``epoch_caps`` maps T0 to the epoch cap used for it."""

    description: str
    tasks: tuple[str, ...]
    t0s: tuple[int, ...]
    learning_rates: dict[int, tuple[float, ...]]
    epoch_caps: dict[int, int]
    steps_per_epoch: int = 1000
    test_size: int = 1000
    variable_epochs: int = 100
    variable_learning_rates: tuple[float, ...] = (1e-3,)
    variable_max: int = VARIABLE_MAX
    temporal_t0: int = 100
    temporal_epochs: int = 10
    temporal_learning_rate: float = 1e-3
    seeds: tuple[int, ...] = (0,)  # of every Table 1 cell and variable-length run
    temporal_seeds: tuple[int, ...] = (0,)  # the temporal-order demo has no spread to report
    #: ``reproduce`` (and ``status``) also run its Table 1 and temporal-order runs with the
    #: padding unmasked, as Raffel's script feeds it (:func:`reproduced_runs`).
    unmasked_too: bool = False


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        description="seconds: one tiny cell per experiment, for the tests",
        tasks=("addition",),
        t0s=(50,),
        learning_rates={50: (1e-2,)},
        epoch_caps={50: 2},
        steps_per_epoch=20,
        test_size=100,
        variable_epochs=1,
        variable_max=200,
        temporal_t0=50,
        temporal_epochs=1,
    ),
    "cpu": Preset(
        description=(
            "about 2 h on 2 CPU cores (7048 s measured, under extra load): T0 up to 5000 "
            "(10000 left out), learning rates {1e-3, 3e-3} of the paper's four (3e-3 alone at "
            "5000), epoch caps 10 (T0 <= 1000) and 3 (T0 = 5000), the variable-length model "
            "for 3 epochs, the temporal-order demo for 5 epochs"
        ),
        tasks=TABLE1_TASKS,
        t0s=(50, 100, 500, 1000, 5000),
        learning_rates={
            50: (1e-3, 3e-3),
            100: (1e-3, 3e-3),
            500: (1e-3, 3e-3),
            1000: (1e-3, 3e-3),
            5000: (3e-3,),
        },
        epoch_caps={50: 10, 100: 10, 500: 10, 1000: 10, 5000: 3},
        variable_epochs=3,
        variable_learning_rates=(3e-3,),
        temporal_epochs=5,
    ),
    "paper": Preset(
        description="Raffel & Ellis's full protocol: every T0, four learning rates, 100 epochs",
        tasks=TABLE1_TASKS,
        t0s=PAPER_T0S,
        learning_rates={t0: LEARNING_RATES for t0 in PAPER_T0S},
        epoch_caps={t0: 100 for t0 in PAPER_T0S},
        variable_epochs=100,
        # Raffel's variable_length_experiments.py tries the four rates of Table 1 (Adam) and
        # keeps the best: "the same architecture as used in the previous experiment" (2.3).
        variable_learning_rates=LEARNING_RATES,
        temporal_epochs=100,
        # The paper reports one (best) run per cell; we report the spread over three seeds.
        seeds=(0, 1, 2),
        # The paper is silent on the padding; SPEC masks it, Raffel's script does not: both.
        unmasked_too=True,
    ),
}


def preset_runs(preset: Preset, name: str) -> list[RunConfig]:
    """Every run of ``preset`` (named ``name`` in the runs' names), cheapest first, and within the
    costly Table 1 cells (T0 > 1000) one seed after another: an interrupted grid has the cheap
    cells, then a whole table per seed."""
    common = {"steps_per_epoch": preset.steps_per_epoch, "test_size": preset.test_size}
    temporal = [
        RunConfig(
            "temporal_order",
            "temporal_order",
            preset.temporal_t0,
            "attention",
            preset.temporal_learning_rate,
            seed,
            preset.temporal_epochs,
            preset=name,
            **common,
        )
        for seed in preset.temporal_seeds
    ]
    table1 = [
        RunConfig(
            "table1", task, t0, pooling, lr, seed, preset.epoch_caps[t0], preset=name, **common
        )
        for seed in preset.seeds
        for t0 in preset.t0s
        for task in preset.tasks
        for pooling in POOLINGS
        for lr in likely_best_first(preset.learning_rates[t0])
    ]
    variable = [
        RunConfig(
            "variable",
            task,
            VARIABLE_MIN,
            pooling,
            lr,
            seed,
            preset.variable_epochs,
            max_length=preset.variable_max,
            preset=name,
            **common,
        )
        for seed in preset.seeds
        for task in preset.tasks
        for pooling in POOLINGS
        for lr in likely_best_first(preset.variable_learning_rates)
    ]
    cheap = sorted((run for run in table1 if run.t0 <= 1000), key=lambda run: run.t0)
    return temporal + cheap + variable + [run for run in table1 if run.t0 > 1000]


def runs(
    preset: str,
    dtype_policy: str = "float32",
    seeds: tuple[int, ...] | None = None,
    mask_padding: bool = True,
) -> list[RunConfig]:
    """Every run of the preset named ``preset`` (:func:`preset_runs`), under ``dtype_policy``;
    ``seeds``: run these instead of the preset's (the temporal-order demo only if its seed is
    among them); ``mask_padding=False``: the Table 1 and temporal-order runs with the padding
    unmasked (:class:`RunConfig`), without the variable-length runs."""
    chosen = PRESETS[preset]
    if seeds is not None:
        temporal = tuple(s for s in chosen.temporal_seeds if s in seeds)
        chosen = replace(chosen, seeds=tuple(seeds), temporal_seeds=temporal)
    return [
        replace(c, dtype_policy=dtype_policy, mask_padding=mask_padding)
        for c in preset_runs(chosen, preset)
        if mask_padding or c.experiment != "variable"
    ]


def reproduced_runs(preset: str) -> list[RunConfig]:
    """Every run that ``reproduce --preset <preset>`` trains and ``status`` counts: the
    preset's runs (:func:`runs`), then, where it says so (``Preset.unmasked_too``: `paper`),
    its Table 1 and temporal-order runs again with the padding unmasked, a table of their own.
    ``grid`` runs one or the other (``--unmasked``)."""
    unmasked = runs(preset, mask_padding=False) if PRESETS[preset].unmasked_too else []
    return runs(preset) + unmasked


def likely_best_first(rates: tuple[float, ...]) -> list[float]:
    """``rates`` nearest to 3e-3 first (by ratio): in the committed `cpu` records 3e-3 is the
    best or tied-best learning rate of every solved cell, so a grid walked in order gets the
    cell's best early and stops its rivals sooner (:func:`rivals`)."""
    return sorted(rates, key=lambda lr: abs(math.log(lr / 3e-3)))


def preset_learning_rates(preset: str, t0: int, experiment: str = "table1") -> tuple[float, ...]:
    """The learning rates that preset ``preset`` runs at ``t0`` in Table 1 (``experiment``
    ``variable``: in the variable-length experiment); none for the temporal-order demo and for
    a name that is not in :data:`PRESETS` (a single ``run``: preset ``custom``)."""
    if preset not in PRESETS or experiment == "temporal_order":
        return ()
    if experiment == "variable":
        return PRESETS[preset].variable_learning_rates
    return PRESETS[preset].learning_rates.get(t0, ())


def rivals(config: RunConfig) -> list[RunConfig]:
    """The runs ``config`` competes with for its Table 1 cell (or variable-length cell): the
    same task, T0, pooling and seed of its preset at the preset's other learning rates. Raffel
    & Ellis report "the best result achieved using any learning rate" (2.2), so once a rival is
    at 100% after ``b`` epochs, epochs after ``b`` cannot change the cell (``train.run`` stops
    there; Raffel's scripts stop a rate's run there too). None for the temporal-order demo and
    for a single ``run`` (preset ``custom``)."""
    rates = preset_learning_rates(config.preset, config.t0, config.experiment)
    return [replace(config, learning_rate=lr) for lr in rates if lr != config.learning_rate]


def summarize(epochs: list[dict]) -> dict[str, Any]:
    """Epochs to 100% test accuracy (None if never), final and best accuracy."""
    solved = [e["epoch"] for e in epochs if e["test_accuracy"] >= 1.0]
    return {
        "epochs_run": len(epochs),
        "epochs_to_100": solved[0] if solved else None,
        "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None,
        "best_test_accuracy": max((e["test_accuracy"] for e in epochs), default=None),
    }
