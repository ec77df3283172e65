"""One thesis 3.1 run: data, model and protocol (thesis 2.1, 3.1) -> its JSON record.

Data: fresh minibatches of ``tasks.thesis_addition``; the attention network is pretrained
(``gated-pretrained``) before the LSTM trains; after training, the generalisation test
(thesis Fig 3.3) and what the input gates do (SPEC E3) are stored in the record.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
from keras import ops

from thesis_repro import tasks
from thesis_repro.addition.config import (
    EVAL_SEED,
    EVAL_STEPS_PER_BATCH,
    GATE_SEED,
    NAME,
    PRETRAIN_STREAM,
    RunConfig,
    summarize,
)
from thesis_repro.addition.model import (
    attention_gated_lstm_model,
    thesis_lstm_model,
    thesis_reinitialize,
)
from thesis_repro.ffattention.model import raffel_model
from thesis_repro.files import atomic_path
from thesis_repro.layers import AttentionGatedLSTM, AttentionGatedLSTMCell
from thesis_repro.records import CorruptRecord, RunRecord, load_record, warn_corrupt
from thesis_repro.settings import RESULTS_DIR
from thesis_repro.training import (
    EpochCheckpoint,
    FreshBatches,
    checkpoint_path,
    raise_if_failed,
    resume,
    run_guards,
    set_seed,
)

# --- data ---------------------------------------------------------------------------------


def train_batch_fn(config: RunConfig) -> Callable[[np.random.Generator], tuple[dict, Any]]:
    """Fresh training minibatches, padded to ``max_length`` (one shape: one XLA compilation)."""

    def make(rng: np.random.Generator) -> tuple[dict, Any]:
        batch = tasks.thesis_addition(
            rng, config.batch_size, config.min_length, config.max_length, pad_to=config.max_length
        )
        return batch.inputs, batch.y

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
) -> tuple[keras.Model, dict[str, float]]:
    """Train the Raffel network (thesis 2.1.2, D = ``hidden``) on the task; return it and stats.

    Thesis initialisation (N(0, 1/sqrt(output_dim))), Adam, MSE, minibatches of
    ``config.batch_size``, ``config.pretrain_steps`` steps. The stats: its MSE on 1000 held-out
    training-length sequences and its mean energy at the marked and at the other steps (of 200
    of them). With ``record``, a NaN or infinite pretraining loss fails the run (``RunFailed``).
    """
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
        FreshBatches(train_batch_fn(config), config.seed + PRETRAIN_STREAM, config.pretrain_steps),
        steps_per_epoch=config.pretrain_steps,
        epochs=1,
        callbacks=run_guards(record, config.pretrain_steps, "pretraining loss")
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
    predicted = np.asarray(model.predict(held_out.inputs, batch_size=250, verbose=0))
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


def build_model(config: RunConfig, attention: keras.Model | None = None) -> keras.Model:
    """The uncompiled model of ``config`` (``attention``: the pretrained Raffel network)."""
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


def input_gates(model: keras.Model, batch: tasks.Batch) -> tuple[np.ndarray, np.ndarray | None]:
    """The input gate i_t (batch, T, units) of ``model``'s LSTM on ``batch``, and the energies.

    Replays the trained layer step by step with the cell of ``thesis_repro.layers``
    (``project_inputs`` + ``recurrent_step``); a ``keras.layers.LSTM`` is replayed through an
    ``AttentionGatedLSTMCell`` holding its weights (same layout) and zero energies. Energies are
    None for the plain LSTM. Steps beyond a sequence's length are computed but meaningless.
    """
    layer = model.get_layer("lstm")
    inputs = batch.inputs
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


def gate_statistics(model: keras.Model, batch: tasks.Batch) -> dict[str, float]:
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


def generalisation(model: keras.Model, lengths: tuple[int, ...], size: int) -> dict[str, float]:
    """MSE at each length on ``size`` fresh sequences (thesis 3.1.2, Fig 3.3)."""
    scores = {}
    for length in lengths:
        batch = generalisation_set(length, size)
        batch_size = max(1, min(size, EVAL_STEPS_PER_BATCH // length))
        predicted = np.asarray(model.predict(batch.inputs, batch_size=batch_size, verbose=0))
        scores[str(length)] = float(np.mean((predicted.reshape(-1) - batch.y) ** 2))
    return scores


# --- one run ------------------------------------------------------------------------------


def record_path(config: RunConfig, results_dir: Path = RESULTS_DIR) -> Path:
    """``<results>/addition/<model>/<run>.json``."""
    return Path(results_dir) / NAME / config.model / f"{config.name}.json"


def adopt_shorter_run(
    config: RunConfig, record: RunRecord, results_dir: Path = RESULTS_DIR, verbose: int = 1
) -> str | None:
    """Start ``record`` from the furthest checkpoint of the same run with fewer ``steps``.

    Training is the same for the first k epochs whatever the total number of steps (Adam with a
    constant learning rate, batch ``k`` drawn from ``(seed, k)`` by ``FreshBatches``, the same
    pretraining), so a 15000-step run continues a finished or interrupted 6000-step run of the
    same configuration: its logged epochs, pretraining statistics and last checkpoint are copied
    (the shorter run's files are left as they are). Returns the adopted run's name, or None.
    """
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
    with atomic_path(checkpoint_path(record, done)) as copy:
        shutil.copyfile(checkpoint, copy)
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
    record = RunRecord(record_path(config, results_dir), config.as_record()).start()
    if record.finished:
        return record.skip(verbose)
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
            FreshBatches(
                train_batch_fn(config),
                config.seed,
                steps=(target - done) * config.steps_per_epoch,
                start_step=done * config.steps_per_epoch,
            ),
            steps_per_epoch=config.steps_per_epoch,
            epochs=target,
            initial_epoch=done,
            callbacks=[
                *run_guards(record, config.steps_per_epoch),
                EpochCheckpoint(record, evaluate=lambda m: {}),
            ],
            shuffle=False,  # batch k is batch k
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
