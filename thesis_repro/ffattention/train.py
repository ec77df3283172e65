"""One Raffel & Ellis run: data, model and protocol (Raffel & Ellis 2.1-2.4) -> its JSON record."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import keras
import numpy as np

from thesis_repro import tasks
from thesis_repro.ffattention.config import (
    CHUNKED_FROM_LENGTH,
    NAME,
    PAD_MULTIPLE,
    RunConfig,
    rivals,
    summarize,
)
from thesis_repro.ffattention.model import raffel_model, transfer_training_state
from thesis_repro.layers import ChunkedFeedForwardPooling
from thesis_repro.records import CorruptRecord, RunRecord, compute_device, load_record
from thesis_repro.settings import (
    RESULTS_DIR,
    data_workers,
    ff_chunk_size,
    steps_per_execution,
)
from thesis_repro.training import (
    EpochCheckpoint,
    FreshBatches,
    distribution_summary,
    dtype_policy,
    raise_if_failed,
    remove_checkpoints,
    resume,
    run_guards,
    set_seed,
    set_steps_per_execution,
)


def _padded(length: int) -> int:
    return PAD_MULTIPLE * math.ceil(length / PAD_MULTIPLE)


def train_batch_fn(config: RunConfig) -> Callable[[np.random.Generator], tuple[dict, Any]]:
    """Minibatch generator of a run (fresh sequences every call)."""
    if config.experiment == "temporal_order":

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            batch = tasks.temporal_order(
                rng, config.batch_size, *tasks.raffel_length_range(config.t0), _width(config)
            )
            batch = _as_fed(batch, config)
            return batch.inputs, batch.y

    elif config.experiment == "variable":
        top_t0 = tasks.raffel_top_t0(config.max_length)

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            low, high = tasks.raffel_length_range(int(rng.integers(config.t0, top_t0 + 1)))
            batch = tasks.make_batch(
                config.task, rng, config.batch_size, low, high, pad_to=_padded(high)
            )
            return batch.inputs, batch.y

    else:
        low, high = tasks.raffel_length_range(config.t0)

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            batch = tasks.make_batch(config.task, rng, config.batch_size, low, high, _width(config))
            batch = _as_fed(batch, config)
            return batch.inputs, batch.y

    return make


def _width(config: RunConfig) -> int | None:
    """A fixed-length run's batch width: the longest length (None) when the padding is masked,
    Raffel's script's fixed width when it is not (:func:`tasks.raffel_padded_width`)."""
    return None if config.mask_padding else tasks.raffel_padded_width(config.t0)


def _as_fed(batch: tasks.Batch, config: RunConfig) -> tasks.Batch:
    """``batch`` as the model sees it: with the padding unmasked every sequence's ``lengths``
    is the batch width, so the pooling averages over the padded steps too, as Raffel's script
    does (the targets are those of the true sequences)."""
    if config.mask_padding:
        return batch
    return tasks.Batch(batch.x, batch.y, np.full_like(batch.lengths, batch.x.shape[1]))


def test_set(config: RunConfig) -> list[tasks.Batch]:
    """The run's fixed held-out test set (seeded apart from training), as a few batches."""
    rng = np.random.default_rng([config.seed, 104729])
    if config.experiment == "variable":
        t0s = np.linspace(config.t0, tasks.raffel_top_t0(config.max_length), 100).astype(int)
        per = max(1, config.test_size // len(t0s))
        batches = []
        for t0 in t0s:
            low, high = tasks.raffel_length_range(int(t0))
            batches.append(tasks.make_batch(config.task, rng, per, low, high, pad_to=_padded(high)))
        return batches
    low, high = tasks.raffel_length_range(config.t0)
    if config.experiment == "temporal_order":
        batch = tasks.temporal_order(rng, config.test_size, low, high, pad_to=_width(config))
    else:
        batch = tasks.make_batch(config.task, rng, config.test_size, low, high, _width(config))
    return [_as_fed(batch, config)]


def evaluate(model: Any, batches: list[tasks.Batch], classification: bool) -> dict[str, float]:
    """Test accuracy and loss; for classification also the accuracy per true class."""
    predictions = [np.asarray(model.predict(b.inputs, batch_size=100, verbose=0)) for b in batches]
    targets = np.concatenate([b.y for b in batches])
    if classification:
        probabilities = np.concatenate(predictions)
        chosen = probabilities.argmax(axis=1)
        picked = probabilities[np.arange(len(targets)), targets]
        scores = {
            "test_accuracy": float(np.mean(chosen == targets)),
            "test_loss": float(-np.mean(np.log(np.maximum(picked, 1e-12)))),
        }
        for index, name in enumerate(tasks.TEMPORAL_ORDER_CLASSES):
            scores[f"test_accuracy_{name}"] = float(np.mean(chosen[targets == index] == index))
        return scores
    predicted = np.concatenate(predictions).reshape(-1)
    return {
        "test_accuracy": tasks.accuracy(predicted, targets),
        "test_loss": float(np.mean((predicted - targets) ** 2)),
    }


def record_path(config: RunConfig, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / NAME / config.experiment / f"{config.name}.json"


def best_rival(config: RunConfig, results_dir: Path = RESULTS_DIR) -> tuple[int, str] | None:
    """(epochs to 100%, name) of the rival (:func:`config.rivals`) that got there first among
    the records in ``results_dir``, finished or still training; None while none has."""
    best = None
    for rival in rivals(config):
        try:
            data = load_record(record_path(rival, results_dir))
        except CorruptRecord:
            continue  # the report warns about it; it beats nobody
        if data is None or data.get("config") != asdict(rival) or data.get("failed"):
            continue
        solved = summarize(data.get("epochs", []))["epochs_to_100"]
        if solved is not None and (best is None or solved < best[0]):
            best = (solved, rival.name)
    return best


def _beaten(record: RunRecord, config: RunConfig, results_dir: Path) -> tuple[int, str] | None:
    """The rival that ``record``'s run can no longer beat or tie: at 100% after ``b`` epochs
    while this run has done ``b`` or more without getting there; else None."""
    best = best_rival(config, results_dir)
    done = record.completed_epochs()
    return best if best is not None and done >= best[0] and not _solved(record) else None


def run(
    config: RunConfig, results_dir: Path = RESULTS_DIR, verbose: int = 1, prune: bool = True
) -> dict:
    """Train one configuration to 100% test accuracy or its epoch cap; return its record.

    ``prune``: a Table 1 run of a preset also stops once a rival learning rate of its cell got
    to 100% in fewer epochs or as many (:func:`_beaten`); its summary names that rival
    (``beaten_by``). The cell's value (the best learning rate's) is the same as without
    pruning. Raises ``RunFailed`` when the training loss becomes NaN or infinite (the record
    says so: ``records``), or when the run failed before.
    """
    record = RunRecord(record_path(config, results_dir), asdict(config)).start()
    if record.finished:
        return record.skip(verbose)
    results_dir = Path(results_dir)

    def beaten() -> tuple[int, str] | None:
        return _beaten(record, config, results_dir) if prune else None

    classification = config.experiment == "temporal_order"
    record.data["hardware"].update(distribution_summary(), dtype_policy=config.dtype_policy)
    set_seed(config.seed)
    model, done = resume(record, lambda: compiled_model(config))
    model = _in_own_implementation(model, done, config, record, verbose)
    if verbose:
        where = f"resuming after epoch {done}" if done else "starting"
        print(f"[run] {config.name}: {where} -> {record.path}", flush=True)
    test_batches = test_set(config)
    callback = EpochCheckpoint(
        record,
        evaluate=lambda m: evaluate(m, test_batches, classification),
        should_stop=lambda scores: scores["test_accuracy"] >= 1.0 or beaten() is not None,
    )
    if done < config.max_epochs and not _solved(record) and beaten() is None:
        device = compute_device()["device"]
        record.data["steps_per_execution"] = set_steps_per_execution(
            model, config.steps_per_epoch, steps_per_execution(device)
        )
        batches = FreshBatches(
            train_batch_fn(config),
            config.seed,
            steps=(config.max_epochs - done) * config.steps_per_epoch,
            start_step=done * config.steps_per_epoch,
            workers=data_workers(device),
            lengths_vary=config.experiment == "variable",
        )
        try:
            model.fit(
                batches.fit_input(),
                steps_per_epoch=config.steps_per_epoch,
                epochs=config.max_epochs,
                initial_epoch=done,
                callbacks=[
                    *run_guards(record, config.steps_per_epoch),
                    callback,
                ],
                shuffle=False,  # batch k is batch k
                verbose=verbose,
            )
        finally:
            batches.close()
    raise_if_failed(record)
    summary = summarize(record.data["epochs"])
    rival = beaten() if summary["epochs_run"] < config.max_epochs else None
    if rival is not None:
        summary["beaten_by"] = {"run": rival[1], "epochs_to_100": rival[0]}
        if verbose:
            print(f"[stop] {config.name}: {rival[1]} got to 100% in {rival[0]} epochs")
    record.finish(**summary)
    remove_checkpoints(record)
    return record.data


def compiled_model(config: RunConfig) -> keras.Model:
    """``config``'s network (section 2.1), compiled with Adam (2.3) and the task's loss: MSE,
    or cross-entropy for temporal order. Fused and chunked from a padded length of
    ``CHUNKED_FROM_LENGTH`` on when ``settings.ff_chunk_size`` is not 0 (by default on a CPU,
    not on an accelerator)."""
    classification = config.experiment == "temporal_order"
    longest = config.max_length if config.experiment == "variable" else config.t0
    chunk_size = ff_chunk_size(compute_device()["device"])
    with dtype_policy(config.dtype_policy):
        model = raffel_model(
            features=tasks.N_FEATURES[config.task],
            pooling=config.pooling,  # type: ignore[arg-type]
            classes=len(tasks.TEMPORAL_ORDER_CLASSES) if classification else None,
            seed=config.seed,
            chunked=longest >= CHUNKED_FROM_LENGTH and chunk_size > 0,
            chunk_size=chunk_size,
        )
    model.compile(
        optimizer=keras.optimizers.Adam(config.learning_rate, beta_1=0.9, beta_2=0.999),
        loss="sparse_categorical_crossentropy" if classification else "mse",
        jit_compile=True,
    )
    return model


def _in_own_implementation(
    model: keras.Model, done: int, config: RunConfig, record: RunRecord, verbose: int
) -> keras.Model:
    """``model``, or where it was checkpointed with another implementation than this device's
    (a GPU's unfused layers, a CPU's fused chunks: :func:`compiled_model`) the same network in
    this device's, its weights and Adam state carried over (``transfer_training_state``). The
    record says what trained (``implementation``) and what trained its first epochs before
    (``earlier_implementations``: implementation and epochs, as ``earlier_machines``; both
    already clipped to ``done`` by ``RunRecord.keep_epochs``)."""
    earlier = record.data.pop("earlier_implementations", [])
    if done:
        own = compiled_model(config)
        before = implementation(model)
        if implementation(own) != before:
            transfer_training_state(model, own)
            if verbose:
                print(f"[run] {config.name}: goes on in {implementation(own)} (was {before})")
            if earlier and earlier[-1]["implementation"] == before:
                earlier[-1]["epochs"] = done
            else:
                earlier.append({"implementation": before, "epochs": done})
            model = own
    if earlier:
        record.data["earlier_implementations"] = earlier
    record.data["implementation"] = implementation(model)
    return model


def implementation(model: keras.Model) -> str:
    """What computes h and the pooling: ``chunked <steps per chunk>`` (the fused
    ``ChunkedFeedForwardPooling``) or ``layers`` (Dense + pooling layer); the record stores it."""
    fused = [layer for layer in model.layers if isinstance(layer, ChunkedFeedForwardPooling)]
    return f"chunked {fused[0].chunk_size}" if fused else "layers"


def _solved(record: RunRecord) -> bool:
    epochs = record.data.get("epochs", [])
    return bool(epochs) and epochs[-1]["test_accuracy"] >= 1.0
