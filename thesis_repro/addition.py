"""Malik (2016) 3.1: the addition problem, LSTM against the attention-gated LSTM.

    python -m thesis_repro.addition grid --preset cpu      # every run of a preset, resumable
    python -m thesis_repro.addition run --model gated-pretrained --seed 0 --steps 15000
    python -m thesis_repro.addition report --preset cpu    # table + figures from the records

Methods (thesis 2.1, 3.1; SPEC E3):
- Task: ``tasks.thesis_addition``: pairs (value in [0, 1], marker), two markers (one per half),
  target = sum of the two marked values; lengths uniform in 500..550, zero-padded to 550 and the
  padding masked. Predicting the mean gives MSE 1/6 (the baseline of every figure).
- Models (``thesis_repro.models``): ``lstm``, one 64-unit LSTM layer and
  ``y = LReLU(W_out h_final + b_out)`` (2.1.1); ``gated-*``, the same with the energies e_t of a
  Raffel attention network (D = 100) added to the input gate (2.1.2). Gates use the scaled
  sigmoid ``1.2 sigmoid(x) - 0.1`` (ch. 3). Weights N(0, 1/sqrt(output_dim)), biases zero (3.1).
  The thesis says only that the attention network "was trained"; two readings:
  ``gated-pretrained`` (default reading of SPEC E3) trains the full Raffel network on the same
  task first (``pretrain_steps`` Adam steps, batch 50), then freezes it and feeds its energies;
  ``gated-joint`` trains the energy network end to end through the LSTM's loss.
- Protocol: Adam (lr 1e-3), MSE, minibatches of 50 fresh sequences, 15000 steps (``paper``).
  An "epoch" is 100 steps: its record entry ``train_loss`` is the mean training MSE over those
  steps, and a checkpoint is written after it, so a killed run resumes from there.
- After training: generalisation MSE at lengths 500, 1000, 2000, ..., 6000 on 1000 fresh
  sequences each (the same seeded sets for every run; thesis Fig 3.3), and what the input gates
  do: mean input-gate value at the marked steps and at the other steps (``gate_statistics``).
- Outputs (``report``): ``figures/addition_training.pdf`` (thesis Figs 3.1, 3.2: every run's
  training curve, one panel per model, shared log y axis), ``figures/addition_generalisation.pdf``
  (Fig 3.3) and ``results/addition/table.md``.

"Learning starts" (thesis 3.1.1: about step 2000 with attention, 8000 without) is measured as the
first step at which the 100-step mean training MSE falls below ``LEARNING_THRESHOLD`` = 0.1.
Why 0.1: a model that ignores the marked values sits at 1/6 = 0.167 (the 100-step mean of an
unlearned model fluctuates by about 0.003, so 0.1 is no accident), and a model that has picked up
one of the two marked values reaches 1/12 = 0.083 (the other value's variance); 0.1 lies between
the two, so crossing it means the network has begun to carry a marked value to the end. Runs
can dip below it and climb back (one value carried for a while), so the table also gives the
step from which the training MSE stays below 0.1 to the end ("for good").

Every run writes ``results/addition/<model>/<run>.json`` after each epoch; the last checkpoint
is kept beside it (``checkpoints/``, git-ignored) for further analysis. A run whose training (or
pretraining) loss becomes NaN or infinite stops there and is recorded as failed
(``training.FailOnNonFiniteLoss``; ``run`` exits with one ``error:`` line); the tables and
figures leave it out and name it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro import tasks
from thesis_repro.cli import (
    experiment_parser,
    int_at_least,
    positive_float,
    positive_int,
    results_folder,
    run_main,
    seed_int,
)
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import (
    CorruptRecord,
    RunBusy,
    RunConflict,
    RunFailed,
    RunRecord,
    command_line,
    failed_note,
    grid_failures,
    load_record,
    load_records,
    produced_by,
    split_failed,
    warn_corrupt,
)
from thesis_repro.runner import add_jobs_option, run_jobs, walk_grid
from thesis_repro.settings import FIGURES_DIR, RESULTS_DIR

EXPERIMENT = "addition"
MODELS = ("lstm", "gated-pretrained", "gated-joint")
EVAL_LENGTHS = (500, 1000, 2000, 3000, 4000, 5000, 6000)
BASELINE_MSE = tasks.BASELINE_MSE_THESIS_ADDITION
LEARNING_THRESHOLD = 0.1  # see the module docstring
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
MIN_LENGTH = 2  # shortest sequence of the task: one marker in each half (tasks.thesis_addition)


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
    """Every run of a preset, seed by seed (an interrupted grid has comparable runs per model)."""
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


# --- data ---------------------------------------------------------------------------------


def _inputs(batch: tasks.Batch) -> dict[str, np.ndarray]:
    return {"x": batch.x, "lengths": batch.lengths}


def train_batch_fn(config: RunConfig) -> Callable[[np.random.Generator], tuple[dict, Any]]:
    """Fresh training minibatches, padded to ``max_length`` (one shape: one XLA compilation)."""

    def make(rng: np.random.Generator) -> tuple[dict, Any]:
        batch = tasks.thesis_addition(
            rng, config.batch_size, config.min_length, config.max_length, pad_to=config.max_length
        )
        return _inputs(batch), batch.y

    return make


def generalisation_set(length: int, size: int) -> tasks.Batch:
    """``size`` fresh sequences of exactly ``length`` steps, the same for every run (seeded)."""
    return tasks.thesis_addition(np.random.default_rng([EVAL_SEED, length]), size, length, length)


def gate_set(config: RunConfig) -> tasks.Batch:
    """Training-length sequences for the gate analysis (seeded apart from the training data)."""
    rng = np.random.default_rng([GATE_SEED, config.seed])
    return tasks.thesis_addition(rng, config.gate_size, config.min_length, config.max_length)


# --- models -------------------------------------------------------------------------------


def pretrain_attention(
    config: RunConfig, verbose: int = 0, record: RunRecord | None = None
) -> tuple[Any, dict[str, float]]:
    """Train the Raffel network (thesis 2.1.2, D = ``hidden``) on the task; return it and stats.

    Thesis initialisation (N(0, 1/sqrt(output_dim))), Adam, MSE, minibatches of
    ``config.batch_size``, ``config.pretrain_steps`` steps. The stats: its MSE on 1000 held-out
    training-length sequences and its mean energy at the marked and at the other steps (of 200
    of them). With ``record``, a NaN or infinite pretraining loss fails the run (``RunFailed``).
    """
    import keras

    from thesis_repro.models import raffel_model, thesis_reinitialize
    from thesis_repro.training import FailOnNonFiniteLoss, fresh_batches, raise_if_failed

    started = time.time()
    model = thesis_reinitialize(
        raffel_model(hidden=config.hidden, seed=config.seed, chunked=False), seed=config.seed
    )
    model.compile(
        keras.optimizers.Adam(config.pretrain_learning_rate),
        "mse",
        jit_compile=config.jit_compile,
    )
    history = model.fit(
        fresh_batches(train_batch_fn(config), config.seed + PRETRAIN_STREAM),
        steps_per_epoch=config.pretrain_steps,
        epochs=1,
        callbacks=[FailOnNonFiniteLoss(record, config.pretrain_steps, "pretraining loss")]
        if record is not None
        else [],
        shuffle=False,
        verbose=verbose,
    )
    if record is not None:
        raise_if_failed(record)
    held_out = tasks.thesis_addition(
        np.random.default_rng([EVAL_SEED, config.seed, 1]),
        1000,
        config.min_length,
        config.max_length,
        pad_to=config.max_length,
    )
    predicted = np.asarray(model.predict(_inputs(held_out), batch_size=250, verbose=0))
    some = tasks.Batch(held_out.x[:200], held_out.y[:200], held_out.lengths[:200])
    energies = np.asarray(model.get_layer("attention").energies(model.get_layer("h")(some.x)))
    marked, other = _marked_and_other(some)
    stats = {
        "steps": config.pretrain_steps,
        "train_loss": float(history.history["loss"][-1]),
        "test_mse": float(np.mean((predicted.reshape(-1) - held_out.y) ** 2)),
        "energy_marked": float(energies[marked].mean()),
        "energy_other": float(energies[other].mean()),
        "seconds": time.time() - started,
    }
    return model, stats


def build_model(config: RunConfig, attention: Any = None) -> Any:
    """The uncompiled model of ``config`` (``attention``: the pretrained Raffel network)."""
    from thesis_repro.models import attention_gated_lstm_model, thesis_lstm_model

    if config.model == "lstm":
        return thesis_lstm_model(
            units=config.units, seed=config.seed, unit_forget_bias=config.unit_forget_bias
        )
    if config.model == "gated-pretrained" and attention is None:
        raise ValueError("gated-pretrained needs the pretrained attention network")
    return attention_gated_lstm_model(
        attention if config.model == "gated-pretrained" else None,
        units=config.units,
        hidden=config.hidden,
        seed=config.seed,
        unit_forget_bias=config.unit_forget_bias,
    )


# --- analysis -----------------------------------------------------------------------------


def _marked_and_other(batch: tasks.Batch) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (batch, T) masks: the two marked steps; the other true (unpadded) steps."""
    marked = batch.x[..., 1] > 0.5
    return marked, batch.mask & ~marked


def input_gates(model: Any, batch: tasks.Batch) -> tuple[np.ndarray, np.ndarray | None]:
    """The input gate i_t (batch, T, units) of ``model``'s LSTM on ``batch``, and the energies.

    Replays the trained layer step by step with the cell of ``thesis_repro.layers``
    (``project_inputs`` + ``recurrent_step``); a ``keras.layers.LSTM`` is replayed through an
    ``AttentionGatedLSTMCell`` holding its weights (same layout) and zero energies. Energies are
    None for the plain LSTM. Steps beyond a sequence's length are computed but meaningless.
    """
    import keras
    from keras import ops

    from thesis_repro.layers import AttentionGatedLSTM, AttentionGatedLSTMCell

    layer = model.get_layer("lstm")
    inputs = _inputs(batch)
    if isinstance(layer, AttentionGatedLSTM):
        cell = layer.lstm_cell
        energy_model = keras.Model(model.input, model.get_layer("attention").output[2])
        energies = np.asarray(energy_model(inputs))
    else:
        cell = AttentionGatedLSTMCell(
            layer.units,
            gate_activation=layer.cell.recurrent_activation,
            activation=layer.cell.activation,
        )
        cell.build((None, batch.x.shape[-1] + 1))
        cell.set_weights(layer.cell.get_weights())
        energies = None
    e = np.zeros(batch.x.shape[:2], "float32") if energies is None else energies
    z_x = cell.project_inputs(ops.convert_to_tensor(batch.x), ops.convert_to_tensor(e))
    states = cell.get_initial_state(batch.x.shape[0])
    gates = []
    for t in range(batch.x.shape[1]):
        z = z_x[:, t] + ops.matmul(states[0], cell.recurrent_kernel)
        gates.append(np.asarray(cell.gate_activation(z[:, : cell.units])))
        _, states = cell.recurrent_step(z_x[:, t], states)
    return np.stack(gates, axis=1), energies


def gate_statistics(model: Any, batch: tasks.Batch) -> dict[str, float]:
    """What the input gates do (SPEC E3): mean i_t at the marked steps and at the other steps.

    Means over sequences, steps and units; ``input_gate_open_ratio`` is the fraction of units
    whose mean gate is higher at the marked steps than elsewhere. For the gated models also the
    mean energy e_t at marked and other steps.
    """
    gates, energies = input_gates(model, batch)
    marked, other = _marked_and_other(batch)
    stats = {
        "input_gate_marked": float(gates[marked].mean()),
        "input_gate_other": float(gates[other].mean()),
        "input_gate_open_ratio": float(
            np.mean(gates[marked].mean(axis=0) > gates[other].mean(axis=0))
        ),
    }
    if energies is not None:
        stats["energy_marked"] = float(energies[marked].mean())
        stats["energy_other"] = float(energies[other].mean())
    return stats


def generalisation(model: Any, lengths: tuple[int, ...], size: int) -> dict[str, float]:
    """MSE at each length on ``size`` fresh sequences (thesis 3.1.2, Fig 3.3)."""
    scores = {}
    for length in lengths:
        batch = generalisation_set(length, size)
        batch_size = max(1, min(size, EVAL_STEPS_PER_BATCH // length))
        predicted = np.asarray(model.predict(_inputs(batch), batch_size=batch_size, verbose=0))
        scores[str(length)] = float(np.mean((predicted.reshape(-1) - batch.y) ** 2))
    return scores


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


def summarize(record: dict) -> dict[str, Any]:
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


# --- one run ------------------------------------------------------------------------------


def record_path(config: RunConfig, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / EXPERIMENT / config.model / f"{config.name}.json"


def adopt_shorter_run(
    config: RunConfig, record: RunRecord, results_dir: Path = RESULTS_DIR, verbose: int = 1
) -> str | None:
    """Start ``record`` from the furthest checkpoint of the same run with fewer ``steps``.

    Training is the same for the first k epochs whatever the total number of steps (Adam with a
    constant learning rate, batch ``k`` drawn from ``(seed, k)`` by ``fresh_batches``, the same
    pretraining), so a 15000-step run continues a finished or interrupted 6000-step run of the
    same configuration: its logged epochs, pretraining statistics and last checkpoint are copied
    (the shorter run's files are left as they are). Returns the adopted run's name, or None.
    """
    import shutil

    from thesis_repro.training import checkpoint_path

    best: tuple[int, RunRecord, Path] | None = None
    wanted = config.as_record()
    for path in sorted(record.path.parent.glob(f"{config.model}-*.json")):
        try:
            other = load_record(path)
        except CorruptRecord as error:
            warn_corrupt(error)  # another run's record: it does not stop this one
            continue
        if other is None or path == record.path or other.get("failed"):
            continue
        steps = other["config"].get("steps", config.steps)
        if steps >= config.steps or {**other["config"], "steps": config.steps} != wanted:
            continue
        shorter = RunRecord(path, other["config"])
        shorter.data = other
        done = shorter.completed_epochs()
        checkpoint = checkpoint_path(shorter, done)
        if done and checkpoint.exists() and (best is None or done > best[0]):
            best = (done, shorter, checkpoint)
    if best is None:
        return None
    done, shorter, checkpoint = best
    target = checkpoint_path(record, done)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(checkpoint, target)
    record.data["epochs"] = [dict(entry) for entry in shorter.data["epochs"][:done]]
    if "pretrain" in shorter.data:
        record.data["pretrain"] = shorter.data["pretrain"]
    record.data["wall_seconds"] = float(shorter.data.get("wall_seconds", 0.0))
    record.data["continued_from"] = {"run": shorter.path.stem, "epochs": done}
    record.save()
    if verbose:
        print(f"[continue] {config.name}: from {shorter.path.stem} after epoch {done}", flush=True)
    return shorter.path.stem


def run(
    config: RunConfig,
    results_dir: Path = RESULTS_DIR,
    verbose: int = 1,
    stop_after_epochs: int | None = None,
) -> dict:
    """Train one configuration (resuming from its checkpoint), evaluate it, return its record.

    ``stop_after_epochs``: train at most this many epochs in this call and leave the run
    unfinished (a time slice; the next call continues from the checkpoint). Raises
    ``RunFailed`` when the (pre)training loss becomes NaN or infinite (the record says so:
    ``records``), or when the run failed before.
    """
    import keras

    from thesis_repro import models  # noqa: F401  (registers the custom objects of checkpoints)
    from thesis_repro.training import (
        EpochCheckpoint,
        FailOnNonFiniteLoss,
        fresh_batches,
        raise_if_failed,
        resume,
        set_seed,
    )

    record = RunRecord(record_path(config, results_dir), config.as_record()).start()
    if record.finished:
        if verbose:
            print(f"[skip] {config.name}: finished ({record.path})")
        return record.data
    set_seed(config.seed)

    def build() -> keras.Model:
        attention = None
        if config.model == "gated-pretrained":
            attention, stats = pretrain_attention(config, 2 if verbose else 0, record)
            record.data["pretrain"] = stats
            record.save()
            if verbose:
                print(f"[pretrain] {config.name}: {stats}", flush=True)
        model = build_model(config, attention)
        model.compile(
            optimizer=keras.optimizers.Adam(config.learning_rate),
            loss="mse",
            jit_compile=config.jit_compile,
        )
        return model

    if record.completed_epochs() == 0:
        adopt_shorter_run(config, record, results_dir, verbose)
    model, done = resume(record, build)
    if verbose:
        where = f"resuming after epoch {done}" if done else "starting"
        print(f"[run] {config.name}: {where} -> {record.path}", flush=True)
    target = config.epochs
    if stop_after_epochs is not None:
        target = min(target, done + stop_after_epochs)
    if done < target:
        model.fit(
            fresh_batches(train_batch_fn(config), config.seed, done * config.steps_per_epoch),
            steps_per_epoch=config.steps_per_epoch,
            epochs=target,
            initial_epoch=done,
            callbacks=[
                FailOnNonFiniteLoss(record, config.steps_per_epoch),
                EpochCheckpoint(record, evaluate=lambda m: {}),
            ],
            shuffle=False,  # (a generator: nothing to shuffle)
            verbose=verbose,
        )
    raise_if_failed(record)
    if record.completed_epochs() < config.epochs:
        return record.data
    started = time.time()
    record.data["generalisation"] = generalisation(model, config.eval_lengths, config.eval_size)
    record.data["gates"] = gate_statistics(model, gate_set(config))
    record.data["eval_seconds"] = time.time() - started
    record.finish(**summarize(record.data))
    if verbose:
        print(f"[done] {config.name}: {record.data['summary']}", flush=True)
    return record.data


def run_grid(
    preset: str,
    results_dir: Path = RESULTS_DIR,
    models: tuple[str, ...] = (),
    verbose: int = 1,
    stop_after_epochs: int | None = None,
) -> list[dict]:
    """Every run of ``preset`` (optionally only some models); finished runs are skipped.

    A failed run (``RunFailed``) is reported in one line and the grid goes on; its record is
    among those returned (``records.grid_failures`` words the error).
    """
    configs = preset_runs(PRESETS[preset], models)
    return walk_grid(
        configs,
        lambda c: run(c, results_dir, verbose, stop_after_epochs),
        lambda c: c.name,
        verbose,
    )


# --- outputs ------------------------------------------------------------------------------


def _select(records: list[dict], preset: str | None) -> list[dict]:
    """The records of ``preset``'s runs (all records when ``preset`` is None)."""
    if preset is None:
        return records
    wanted = [c.as_record() for c in preset_runs(PRESETS[preset])]
    return [r for r in records if r["config"] in wanted]


def _groups(records: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """Records by (model, steps), in the order of ``MODELS``."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for record in sorted(
        records, key=lambda r: (MODELS.index(r["config"]["model"]), r["config"]["steps"])
    ):
        groups.setdefault((record["config"]["model"], record["config"]["steps"]), []).append(record)
    return groups


def _spread(values: list[float], digits: str = ".3g") -> str:
    """``mean ± std [min, max]`` (``mean`` alone for one value; an en dash for none)."""
    if not values:
        return "–"
    if len(values) == 1:
        return format(values[0], digits)
    return (
        f"{format(statistics.mean(values), digits)} ± {format(statistics.stdev(values), digits)}"
        f" [{format(min(values), digits)}, {format(max(values), digits)}]"
    )


def render_table(records: list[dict]) -> str:
    """Markdown: per run, per model, generalisation and gate tables (from the records); failed
    runs are left out and named at the end."""
    everything = records
    records, failed = split_failed(records)
    threshold = f"{LEARNING_THRESHOLD:g}"
    per_epoch = "/".join(str(n) for n in _values(records, "steps_per_epoch")) or "100"
    lines = [
        "### Thesis 3.1: addition problem, LSTM vs attention-gated LSTM",
        "",
        f'"Learning starts" = first step at which the mean training MSE over {per_epoch} steps '
        f"is below "
        f"{threshold} (the baseline of predicting 1 is 1/6 = 0.167; having learned one of the "
        f'two values gives 1/12 = 0.083); "for good" = first step from which it stays below '
        f"{threshold} to the end of the run (passing dips excluded). Thesis: learning starts "
        f"at about 2000 steps with attention, about 8000 without.",
        "",
        "| model | steps | runs | below " + threshold + " at some point | learning starts at "
        "step: mean ± std [min, max] | below " + threshold + " for good | for good from step "
        "| thesis | final training MSE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups = _groups(records)
    for (model, steps), group in groups.items():
        summaries = [summarize(r) for r in group]
        starts = [s["first_step_below_threshold"] for s in summaries]
        learned = [s for s in starts if s is not None]
        kept = [
            s["stays_below_threshold_from"]
            for s in summaries
            if s["stays_below_threshold_from"] is not None
        ]
        finals = [s["final_train_mse"] for s in summaries if s["final_train_mse"] is not None]
        running = sum(not r.get("finished") for r in group)
        lines.append(
            f"| {model} | {steps} | {len(group)}{f' ({running} running)' if running else ''} "
            f"| {len(learned)} of {len(group)} | {_spread(learned, '.0f')} "
            f"| {len(kept)} of {len(group)} | {_spread(kept, '.0f')} "
            f"| ~{PAPER_LEARNING_STARTS[model]} | {_spread(finals)} |"
        )
    finished = [r for r in records if r.get("generalisation")]
    if finished:
        lengths = sorted({int(k) for r in finished for k in r["generalisation"]})
        lines += [
            "",
            "#### Generalisation MSE by sequence length (mean ± std [min, max] over runs; "
            "baseline 0.167)",
            "",
            "| model | steps | " + " | ".join(str(n) for n in lengths) + " |",
            "|---|---|" + "---|" * len(lengths),
        ]
        for (model, steps), group in _groups(finished).items():
            cells = [
                _spread(
                    [r["generalisation"][str(n)] for r in group if str(n) in r["generalisation"]]
                )
                for n in lengths
            ]
            lines.append(f"| {model} | {steps} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "#### What the input gates do (after training; mean over runs)",
            "",
            "Input gate i_t and energy e_t averaged over the two marked steps and over the other "
            f"steps of {'/'.join(str(n) for n in _values(finished, 'gate_size'))} "
            'training-length sequences; "units opening at markers" = fraction of the '
            f"{'/'.join(str(n) for n in _values(finished, 'units'))} units whose mean i_t is "
            "higher at the marked steps. The pretrained Raffel "
            "network's own held-out MSE and energies are given where it exists.",
            "",
            "| model | steps | i_t marked | i_t other | units opening at markers | e_t marked "
            "| e_t other | pretrained net: MSE, e_t marked / other |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for (model, steps), group in _groups(finished).items():
            gates = [_mean(group, "gates", key) for key in GATE_KEYS]
            pre = [r for r in group if "pretrain" in r]
            pretrained = (
                f"{_mean(pre, 'pretrain', 'test_mse')}, {_mean(pre, 'pretrain', 'energy_marked')}"
                f" / {_mean(pre, 'pretrain', 'energy_other')}"
                if pre
                else "–"
            )
            lines.append(f"| {model} | {steps} | " + " | ".join(gates) + f" | {pretrained} |")
    lines += [
        "",
        "#### Runs",
        "",
        f"| run | learning starts (< {threshold}) | for good from | final training MSE | MSE at "
        "shortest / longest test length | i_t marked / other | minutes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_run_row(r) for group in groups.values() for r in group]
    if failed:
        lines += ["", failed_note(failed, " of these tables and the figures") + "."]
    lines += ["", produced_by(everything)]
    return "\n".join(lines) + "\n"


def _count(number: int, noun: str) -> str:
    """``1 run``, ``3 runs``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _values(records: list[dict], key: str) -> list:
    """The distinct values of ``config[key]`` among ``records``, sorted."""
    return sorted({r["config"][key] for r in records})


def _run_row(record: dict) -> str:
    """One line of the runs table."""
    summary = summarize(record)
    gen = record.get("generalisation", {})
    gates = record.get("gates", {})
    final = summary["final_train_mse"]
    lengths = sorted(gen, key=int)
    ends = [lengths[0], lengths[-1]] if len(lengths) > 1 else lengths
    cells = [
        Path(record["path"]).stem + ("" if record.get("finished") else " (running)"),
        str(summary["first_step_below_threshold"] or "–"),
        str(summary["stays_below_threshold_from"] or "–"),
        "–" if final is None else f"{final:.3g}",
        " / ".join(f"{gen[k]:.3g}" for k in ends) or "–",
        f"{gates['input_gate_marked']:.3g} / {gates['input_gate_other']:.3g}" if gates else "–",
        f"{_minutes(record):.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


GATE_KEYS = (
    "input_gate_marked",
    "input_gate_other",
    "input_gate_open_ratio",
    "energy_marked",
    "energy_other",
)


def _mean(records: list[dict], source: str, key: str) -> str:
    """Mean of ``record[source][key]`` over the records that have it, as text."""
    values = [r[source][key] for r in records if key in r.get(source, {})]
    return f"{statistics.mean(values):.3g}" if values else "–"


def _minutes(record: dict) -> float:
    """Wall time of a run: training epochs, pretraining and evaluation."""
    seconds = record.get("wall_seconds", 0.0) + record.get("eval_seconds", 0.0)
    return (seconds + record.get("pretrain", {}).get("seconds", 0.0)) / 60


def render_training_figure(records: list[dict], path: Path) -> Path | None:
    """Thesis Figs 3.1 and 3.2: every run's training MSE, one panel per model, shared axes."""
    plt = pyplot()

    groups = _groups([r for r in records if r["epochs"]])
    if not groups:
        return None
    fig, axes = plt.subplots(
        1, len(groups), figsize=(4.2 * len(groups), 3.4), squeeze=False, sharey=True
    )
    for ax, ((model, steps), group) in zip(axes[0], groups.items(), strict=True):
        for r in group:
            per_epoch = r["config"]["steps_per_epoch"]
            ax.plot(
                [e["epoch"] * per_epoch for e in r["epochs"]],
                [e["train_loss"] for e in r["epochs"]],
                lw=1,
                label=f"seed {r['config']['seed']}",
            )
        ax.axhline(BASELINE_MSE, color="k", ls="--", lw=1, label="baseline 1/6")
        ax.axhline(LEARNING_THRESHOLD, color="grey", ls=":", lw=1, label="threshold 0.1")
        if PAPER_LEARNING_STARTS[model] <= steps:
            ax.axvline(PAPER_LEARNING_STARTS[model], color="C3", ls=":", lw=1, label="thesis start")
        ax.set_yscale("log")
        ax.set_title(f"{MODEL_LABELS[model]}\n{_count(len(group), 'run')}", fontsize=8)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    per_epoch = "/".join(str(n) for n in _values(records, "steps_per_epoch"))
    axes[0][0].set_ylabel(f"training MSE (mean over {per_epoch} steps)")
    fig.tight_layout()
    return save_figure(fig, path)


def render_generalisation_figure(records: list[dict], path: Path) -> Path | None:
    """Thesis Fig 3.3: mean generalisation MSE against length (bars: min..max over runs)."""
    plt = pyplot()

    groups = _groups([r for r in records if r.get("generalisation")])
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for index, ((model, steps), group) in enumerate(groups.items()):
        lengths = sorted({int(k) for r in group for k in r["generalisation"]})
        values = [  # runs may differ in --eval-lengths: each length's runs only
            [r["generalisation"][str(n)] for r in group if str(n) in r["generalisation"]]
            for n in lengths
        ]
        means = np.array([np.mean(v) for v in values])
        low = means - np.array([min(v) for v in values])
        high = np.array([max(v) for v in values]) - means
        ax.errorbar(
            lengths,
            means,
            yerr=[low, high],
            fmt="o-",
            ms=3,
            capsize=2,
            color=f"C{index}",
            label=f"{model} ({steps} steps, {_count(len(group), 'run')})",
        )
    ax.axhline(BASELINE_MSE, color="k", ls="--", lw=1, label="baseline 1/6")
    ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel("MSE (mean over runs; bars min..max)")
    ax.set_title("Generalisation to longer sequences (thesis Fig 3.3)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def report(
    results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR, preset: str | None = None
) -> str:
    """Write ``<results>/addition/table.md`` and the two figures from the records; runs with
    the forget-gate bias at 1 (preset ``cpu-forget-bias``) get their own tables and figures
    (``addition_*_forgetbias1.pdf``), after the thesis's."""
    records = _select(load_records(Path(results_dir) / EXPERIMENT), preset)
    parts = []
    for forget_bias in (False, True):
        subset = [r for r in records if r["config"].get("unit_forget_bias", False) == forget_bias]
        if not subset and (forget_bias or parts):
            continue
        suffix = "_forgetbias1" if forget_bias else ""
        text = render_table(subset)
        subset, _ = split_failed(subset)  # the figures leave failed runs out (the table says so)
        if forget_bias:
            text = text.replace(
                "### Thesis 3.1: addition problem, LSTM vs attention-gated LSTM",
                "### Beyond thesis 3.1: the same with the forget-gate bias starting at 1",
                1,
            )
        parts.append(text)
        render_training_figure(subset, Path(figures_dir) / f"addition_training{suffix}.pdf")
        render_generalisation_figure(
            subset, Path(figures_dir) / f"addition_generalisation{suffix}.pdf"
        )
    table = "\n".join(parts)
    (Path(results_dir) / EXPERIMENT).mkdir(parents=True, exist_ok=True)
    (Path(results_dir) / EXPERIMENT / "table.md").write_text(table)
    return table


# --- command line -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    defaults = RunConfig("lstm")
    parser = experiment_parser("python -m thesis_repro.addition", __doc__, PRESETS)
    sub = parser.add_subparsers(
        dest="command", required=True, help="run: one run; grid: a preset; report: outputs"
    )

    one = sub.add_parser("run", help="train and evaluate one configuration (resumable)")
    one.add_argument("--model", choices=MODELS, default="gated-pretrained", help="which model")
    one.add_argument("--seed", type=seed_int, default=0, help="seed of weights and training data")
    one.add_argument(
        "--steps",
        type=positive_int,
        default=defaults.steps,
        help="training steps, a multiple of --steps-per-epoch (default %(default)s)",
    )
    one.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        default=defaults.steps_per_epoch,
        help="steps per logged epoch and checkpoint (default %(default)s)",
    )
    one.add_argument(
        "--lr",
        type=positive_float,
        default=defaults.learning_rate,
        help="Adam learning rate (%(default)s)",
    )
    one.add_argument(
        "--batch-size",
        type=positive_int,
        default=defaults.batch_size,
        help="sequences per minibatch (%(default)s)",
    )
    one.add_argument(
        "--min-length",
        type=int_at_least(MIN_LENGTH),
        default=defaults.min_length,
        help="shortest training sequence (%(default)s)",
    )
    one.add_argument(
        "--max-length",
        type=int_at_least(MIN_LENGTH),
        default=defaults.max_length,
        help="longest training sequence, at least --min-length (%(default)s)",
    )
    one.add_argument(
        "--pretrain-steps",
        type=positive_int,
        default=defaults.pretrain_steps,
        help="steps of Raffel-network pretraining (gated-pretrained only; default %(default)s)",
    )
    one.add_argument(
        "--eval-lengths",
        type=int_at_least(MIN_LENGTH),
        nargs="+",
        default=list(defaults.eval_lengths),
        help="lengths of the generalisation test (default: %(default)s)",
    )
    one.add_argument(
        "--eval-size",
        type=positive_int,
        default=defaults.eval_size,
        help="fresh sequences per generalisation length (default %(default)s)",
    )
    one.add_argument(
        "--no-jit",
        action="store_true",
        help="compile without XLA (slower steps, faster start; default: XLA on)",
    )
    one.add_argument(
        "--unit-forget-bias",
        action="store_true",
        help="start the forget-gate bias at 1 (Keras's default) instead of the thesis's 0",
    )
    _add_stop_flag(one)

    grid = sub.add_parser("grid", help="run every configuration of a preset (resumable)")
    grid.add_argument(
        "--preset", choices=tuple(PRESETS), default="cpu", help="which preset (default: cpu)"
    )
    grid.add_argument(
        "--models", nargs="*", choices=MODELS, default=(), help="restrict to some models"
    )
    grid.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(grid)
    _add_stop_flag(grid)

    rep = sub.add_parser("report", help="render the table and figures from the records")
    rep.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default=None,
        help="only the runs of this preset (default: every record under <results>/addition)",
    )
    return parser


def _add_stop_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stop-after-epochs",
        type=positive_int,
        default=None,
        help="train at most this many epochs per run in this call and leave the run unfinished "
        "(time slicing; rerun to continue from the checkpoint)",
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; bad input (checked before any work), a record with other settings
    or an unreadable record end with one ``error: ...`` line and exit status 2, a failed run
    (loss NaN or infinite) with status 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.results = results_folder(args.command, args.results)
    started = time.time()
    if args.command == "run":
        if args.max_length < args.min_length:
            parser.error(
                f"--max-length ({args.max_length}) must be at least --min-length "
                f"({args.min_length})"
            )
        if args.steps % args.steps_per_epoch:
            parser.error(
                f"--steps ({args.steps}) must be a multiple of --steps-per-epoch "
                f"({args.steps_per_epoch})"
            )
        try:
            config = RunConfig(
                args.model,
                args.seed,
                steps=args.steps,
                steps_per_epoch=args.steps_per_epoch,
                batch_size=args.batch_size,
                learning_rate=args.lr,
                min_length=args.min_length,
                max_length=args.max_length,
                pretrain_steps=args.pretrain_steps,
                eval_lengths=tuple(args.eval_lengths),
                eval_size=args.eval_size,
                jit_compile=not args.no_jit,
                unit_forget_bias=args.unit_forget_bias,
            )
        except ValueError as error:
            parser.error(str(error))
        try:
            record = run(config, args.results, args.verbose, args.stop_after_epochs)
        except RunFailed as failed:
            print(f"error: {failed}", file=sys.stderr)
            return 1
        except (RunConflict, CorruptRecord, RunBusy) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"{config.name}: {record['summary'] or 'unfinished'}")
    elif args.command == "grid" and args.jobs > 1:
        argv = list(sys.argv[1:] if argv is None else argv)
        status = run_jobs("thesis_repro.addition", argv, args.jobs, command_line())
        if not args.no_report:
            print(report(args.results, args.figures, args.preset))
        if status:
            return status
    elif args.command == "grid":
        try:
            records = run_grid(
                args.preset, args.results, tuple(args.models), args.verbose, args.stop_after_epochs
            )
        except (RunConflict, CorruptRecord) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if not args.no_report:
            print(report(args.results, args.figures, args.preset))
        failures = grid_failures(records)
        if failures:
            print(f"error: {failures}", file=sys.stderr)
            return 1
    else:
        print(report(args.results, args.figures, args.preset))
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))


__all__ = [
    "MODELS",
    "PRESETS",
    "RunConfig",
    "gate_statistics",
    "generalisation",
    "input_gates",
    "preset_runs",
    "report",
    "run",
    "run_grid",
]
