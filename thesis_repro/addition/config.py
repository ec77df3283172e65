"""Malik (2016) 3.1 as data: the thesis's numbers, run configurations, presets, and the summary
of a run that the tables report ("learning starts", thesis 3.1.1).

A leaf module: it imports nothing else of the package.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from thesis_repro import tasks
from thesis_repro.records import Record

NAME = "addition"
MODELS = ("lstm", "gated-pretrained", "gated-joint")
EVAL_LENGTHS = (500, 1000, 2000, 3000, 4000, 5000, 6000)
BASELINE_MSE = tasks.BASELINE_MSE_THESIS_ADDITION
LEARNING_THRESHOLD = 0.1  # see the package docstring
# Thesis 3.1.1: step at which learning starts (read off Figs 3.1 and 3.2).
PAPER_LEARNING_STARTS = {"lstm": 8000, "gated-pretrained": 2000, "gated-joint": 2000}
MODEL_LABELS = {
    "lstm": "LSTM (thesis Fig 3.1)",
    "gated-pretrained": "attention-gated LSTM, pretrained energies (Fig 3.2)",
    "gated-joint": "attention-gated LSTM, joint training",
}
EVAL_SEED = 2016  # generalisation sets: the same sequences for every run
GATE_SEED = 3101  # sequences of the gate analysis
PRETRAIN_STREAM = 1_000_003  # offset of the pretraining data stream's seed
EVAL_STEPS_PER_BATCH = 300_000  # batch * length of one prediction batch (memory bound)
MIN_LENGTH = tasks.MIN_LENGTH_THESIS  # one marker in each half (tasks.thesis_addition)
# What a finished record's ``gates`` holds (``train.gate_statistics``; energies: gated models).
GATE_KEYS = (
    "input_gate_marked",
    "input_gate_other",
    "input_gate_open_ratio",
    "energy_marked",
    "energy_other",
)


@dataclass(frozen=True)
class RunConfig:
    """One training run of thesis 3.1 (defaults: the thesis's protocol)."""

    model: str
    seed: int = 0
    steps: int = 15000
    steps_per_epoch: int = 100
    batch_size: int = 50
    learning_rate: float = 1e-3
    min_length: int = 500
    max_length: int = 550
    units: int = 64
    hidden: int = 100
    pretrain_steps: int = 2000
    pretrain_learning_rate: float = 1e-3
    eval_lengths: tuple[int, ...] = EVAL_LENGTHS
    eval_size: int = 1000
    gate_size: int = 100
    jit_compile: bool = True  # XLA: about twice as fast per step; off saves compile time
    unit_forget_bias: bool = False  # forget-gate bias 1 at start (Keras's default, not thesis 3.1)

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        counts = ("steps", "steps_per_epoch", "batch_size", "pretrain_steps", "eval_size")
        for field in (*counts, "gate_size", "units", "hidden"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
        if not self.learning_rate > 0 or not self.pretrain_learning_rate > 0:
            raise ValueError("learning rates must be above 0")
        if min(self.min_length, *self.eval_lengths) < MIN_LENGTH:
            raise ValueError(f"sequence lengths must be at least {MIN_LENGTH}")
        if self.max_length < self.min_length:
            raise ValueError(
                f"max_length ({self.max_length}) must be at least min_length ({self.min_length})"
            )
        if self.steps % self.steps_per_epoch:
            raise ValueError(
                f"steps ({self.steps}) must be a multiple of steps_per_epoch "
                f"({self.steps_per_epoch})"
            )

    @property
    def name(self) -> str:
        forget = "-forgetbias1" if self.unit_forget_bias else ""
        return (
            f"{self.model}{forget}-T{self.min_length}-{self.max_length}-{self.steps}steps-"
            f"seed{self.seed}"
        )

    @property
    def epochs(self) -> int:
        return self.steps // self.steps_per_epoch

    def as_record(self) -> dict[str, Any]:
        """The config as it reads back from JSON (tuples become lists); ``unit_forget_bias``,
        added later, only when set, so earlier records keep matching their configs."""
        record = json.loads(json.dumps(asdict(self)))
        if not self.unit_forget_bias:
            del record["unit_forget_bias"]
        return record


@dataclass(frozen=True)
class Preset:
    """A named set of runs: ``seeds`` runs of each of ``models`` with the given protocol."""

    description: str
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int
    steps_per_epoch: int = 100
    min_length: int = 500
    max_length: int = 550
    pretrain_steps: int = 2000
    eval_lengths: tuple[int, ...] = EVAL_LENGTHS
    eval_size: int = 1000
    gate_size: int = 100
    jit_compile: bool = True
    unit_forget_bias: bool = False


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        description=(
            "about 30 s (no XLA): one run per model, 40 steps on lengths 20..25, generalisation "
            "at 20 and 40; for the tests, no result"
        ),
        models=MODELS,
        seeds=(0,),
        steps=40,
        steps_per_epoch=10,
        min_length=20,
        max_length=25,
        pretrain_steps=20,
        eval_lengths=(20, 40),
        eval_size=20,
        gate_size=8,
        jit_compile=False,
    ),
    "cpu": Preset(
        description=(
            "the thesis's full 15000 steps, 3 runs of each model (LSTM, gated-pretrained, "
            "gated-joint) instead of the thesis's 5: about 2.5 h on this 2-core CPU (measured: "
            "50-80 ms per training step with XLA, so 13-20 min per run, plus 20 s of "
            "pretraining and 22 s of evaluation). Full pretraining (2000 steps) and "
            "generalisation test (1000 sequences per length, 500..6000). Its runs are the "
            "paper preset's seeds 0-2 (same configurations, same records)"
        ),
        models=MODELS,
        seeds=(0, 1, 2),
        steps=15000,
    ),
    "paper": Preset(
        description=(
            "the thesis's protocol: 5 runs of each model, 15000 steps; about 4.5 h on this "
            "2-core CPU, 1.7 h after the cpu preset, whose runs it reuses; GPU not measured (the "
            "550-step recurrence is "
            "latency-bound, expect little gain)"
        ),
        models=MODELS,
        seeds=(0, 1, 2, 3, 4),
        steps=15000,
    ),
    "cpu-forget-bias": Preset(
        description=(
            "beyond the thesis: the cpu preset's LSTM and gated-pretrained runs with the "
            "forget-gate bias starting at 1 (Keras's default since Keras 1, "
            "`forget_bias_init='one'`; the thesis says all biases start at zero). Tests whether "
            "the later learning here (vs the thesis's ~2000 / ~8000 steps) comes from forget "
            "gates starting at 0.5. 6 runs, about 1.5 h on this CPU"
        ),
        models=("lstm", "gated-pretrained"),
        seeds=(0, 1, 2),
        steps=15000,
        unit_forget_bias=True,
    ),
}


def preset_runs(preset: Preset, models: tuple[str, ...] = ()) -> list[RunConfig]:
    """Every run of a preset, seed by seed (an interrupted grid has comparable runs per model);
    ``models``: only these (default: all of the preset's)."""
    return [
        RunConfig(
            model,
            seed,
            steps=preset.steps,
            steps_per_epoch=preset.steps_per_epoch,
            min_length=preset.min_length,
            max_length=preset.max_length,
            pretrain_steps=preset.pretrain_steps,
            eval_lengths=preset.eval_lengths,
            eval_size=preset.eval_size,
            gate_size=preset.gate_size,
            jit_compile=preset.jit_compile,
            unit_forget_bias=preset.unit_forget_bias,
        )
        for seed in preset.seeds
        for model in preset.models
        if not models or model in models
    ]


def runs(preset: str) -> list[RunConfig]:
    """Every run of the preset named ``preset``, all its models (:func:`preset_runs`)."""
    return preset_runs(PRESETS[preset])


# --- what the tables report of a run (thesis 3.1.1) ---------------------------------------


def first_step_below(
    epochs: list[dict], steps_per_epoch: int, threshold: float = LEARNING_THRESHOLD
) -> int | None:
    """The last step of the first epoch whose mean training MSE is below ``threshold``, or None."""
    for entry in epochs:
        if entry["train_loss"] < threshold:
            return entry["epoch"] * steps_per_epoch
    return None


def first_step_staying_below(
    epochs: list[dict], steps_per_epoch: int, threshold: float = LEARNING_THRESHOLD
) -> int | None:
    """The last step of the first epoch from which every epoch's mean training MSE stays below
    ``threshold`` to the end of the run ("learned for good"), or None. Unlike
    ``first_step_below`` it ignores passing dips (e.g. to 1/12 when one value is briefly
    carried)."""
    start = None
    for entry in epochs:
        if entry["train_loss"] >= threshold:
            start = None
        elif start is None:
            start = entry["epoch"] * steps_per_epoch
    return start


def summarize(record: Record) -> dict[str, Any]:
    """Steps run, first step below the threshold, first step from which the training MSE stays
    below it, and final training MSE of a record (all from its epochs)."""
    epochs = record["epochs"]
    steps_per_epoch = record["config"]["steps_per_epoch"]
    return {
        "steps_run": len(epochs) * steps_per_epoch,
        "first_step_below_threshold": first_step_below(epochs, steps_per_epoch),
        "stays_below_threshold_from": first_step_staying_below(epochs, steps_per_epoch),
        "threshold": LEARNING_THRESHOLD,
        "final_train_mse": epochs[-1]["train_loss"] if epochs else None,
    }
