"""What every experiment shares: seeding, fresh-data streams, schedules, checkpoint/resume.

A run trains with ``model.fit`` on freshly generated minibatches (:class:`FreshBatches`). After each
epoch the :class:`EpochCheckpoint` callback scores the model, saves a ``.keras`` checkpoint
(weights and optimizer state) atomically, then logs the epoch in the run's JSON record. A killed
run therefore loses at most the epoch in progress; :func:`resume` reopens the last checkpoint.

A run whose training loss becomes NaN or infinite fails: :class:`FailOnNonFiniteLoss` (a
``keras.callbacks.TerminateOnNaN`` that also records) notices it at the update where it happens,
records the run as failed (``RunRecord.fail``) and stops training; :class:`EpochCheckpoint`
logs and checkpoints no epoch after that, and :func:`raise_if_failed`, called after
``model.fit``, deletes the run's checkpoints and raises ``records.RunFailed`` instead of letting
the run finish. Ctrl-C stops it at the next update on every backend (:func:`catch_interrupts`,
:class:`StopOnInterrupt`).
"""

from __future__ import annotations

import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import keras
import numpy as np

from thesis_repro.files import atomic_path
from thesis_repro.records import CorruptRecord, RunFailed, RunRecord, load_record, settled
from thesis_repro.settings import checkpoint_seconds

BatchFn = Callable[[np.random.Generator], tuple[Any, Any]]


#: Keras dtype policies a run may use (``--dtype-policy``): float32 everywhere, or mixed
#: precision (bfloat16 / float16 compute, float32 weights; losses stay float32).
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


@contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Build layers under the Keras dtype policy ``name`` (they take the global policy when
    they are created), then restore the previous policy. Compile the model afterwards: Keras
    wraps its optimizer in loss scaling when the model's policy is ``mixed_float16``."""
    if name not in DTYPE_POLICIES:
        raise ValueError(f"dtype policy must be one of {', '.join(DTYPE_POLICIES)}, got {name!r}")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and the backend (Keras's one switch)."""
    keras.utils.set_random_seed(int(seed))


class FreshBatches(keras.utils.PyDataset):
    """Minibatches ``start_step .. start_step + steps - 1`` of a run, freshly generated, as one
    Keras dataset: batch ``k`` is ``make_batch(default_rng([seed, 7919, k]))``, so it depends
    only on ``(seed, k)`` and a resumed run sees exactly the batches it would have seen.

    ``workers`` > 1: while the device trains on batch ``k``, that many threads already generate
    the next ones (NumPy's generators and array operations release the GIL), so a fast device
    does not wait for the host: a Raffel & Ellis batch at T0 = 10,000 takes ~10 ms to generate
    (``settings.data_workers``). This look-ahead is our own, not Keras's ``workers``: Keras's
    enqueuer restarts at batch 0 every epoch, and this dataset spans all of a run's epochs.
    The batches, and so the run, are the same for any ``workers``. Pass :meth:`fit_input` and
    ``shuffle=False`` to ``fit``.

    ``lengths_vary``: axis 1 of the inputs (the time axis; every array of a batch's first
    element) changes from batch to batch, as in the variable-length experiment.
    """

    def __init__(
        self,
        make_batch: BatchFn,
        seed: int,
        steps: int,
        start_step: int = 0,
        workers: int = 1,
        lengths_vary: bool = False,
    ) -> None:
        super().__init__()
        if steps < 1 or workers < 1:
            raise ValueError(f"steps and workers must be at least 1, got {steps}, {workers}.")
        self.make_batch, self.seed = make_batch, int(seed)
        self.steps, self.start_step = int(steps), int(start_step)
        self.lengths_vary = bool(lengths_vary)
        self.ahead = int(workers)
        self._pool = ThreadPoolExecutor(workers) if workers > 1 else None
        self._pending: dict[int, Future] = {}

    def __len__(self) -> int:
        return self.steps

    def batch(self, index: int) -> tuple:
        """Batch ``index`` (counted from ``start_step``), generated now."""
        return self.make_batch(np.random.default_rng([self.seed, 7919, self.start_step + index]))

    def __getitem__(self, index: int) -> tuple:
        index = int(index)
        if not 0 <= index < self.steps:
            raise IndexError(f"batch {index} of {self.steps}")
        if self._pool is None:
            return self.batch(index)
        for stale in [k for k in self._pending if k < index]:
            self._pending.pop(stale).cancel()
        for k in range(index, min(index + 1 + self.ahead, self.steps)):
            if k not in self._pending:
                self._pending[k] = self._pool.submit(self.batch, k)
        return self._pending.pop(index).result()

    def fit_input(self) -> Any:
        """What to pass to ``model.fit``: this dataset, or on the TensorFlow backend, when
        ``lengths_vary``, a ``tf.data`` view of it whose signature leaves the time axis open.
        Keras's adapter reads the signature off the first two batches and fixes every axis on
        which they agree (keras-team/keras#19748): two batches of one padded length made the
        next of another length crash the run. The batches and their order are the same."""
        if not self.lengths_vary or keras.backend.backend() != "tensorflow":
            return self
        import tensorflow as tf

        def spec(array: Any, open_axes: tuple[int, ...]) -> Any:
            shape = [None if axis in open_axes else n for axis, n in enumerate(np.shape(array))]
            return tf.TensorSpec(shape, tf.as_dtype(np.asarray(array).dtype))

        inputs, *rest = self.batch(0)
        signature = (
            keras.tree.map_structure(lambda a: spec(a, (0, 1)), inputs),
            *(keras.tree.map_structure(lambda a: spec(a, (0,)), part) for part in rest),
        )
        batches = tf.data.Dataset.from_generator(
            lambda: (self[index] for index in range(self.steps)), output_signature=signature
        )
        return batches.prefetch(tf.data.AUTOTUNE)  # as Keras's adapter does

    def close(self) -> None:
        """Stop the look-ahead threads (after ``fit``)."""
        if self._pool is not None:
            for future in self._pending.values():
                future.cancel()
            self._pending.clear()
            self._pool.shutdown(wait=True)
            self._pool = None


def inverse_time_schedule(eps0: float, decay: float) -> keras.optimizers.schedules.InverseTimeDecay:
    """Learning rate ``eps_i = eps0 / (1 + decay * i)``, ``i`` the 0-based update index.

    Thesis 3.2.2: ``eps0 = 0.2, decay = 1e-8``; "further tests": ``eps0 = 0.15, decay = 1e-5``.
    Keras's built-in ``InverseTimeDecay`` with ``decay_steps=1`` is exactly this schedule (and is
    saved with the optimizer in ``.keras`` checkpoints).
    """
    return keras.optimizers.schedules.InverseTimeDecay(
        initial_learning_rate=eps0, decay_steps=1, decay_rate=decay
    )


#: A run's checkpoints: ``checkpoints/<record stem>-<tag>.keras`` beside its record, the tag
#: ``epoch<n>`` after n epochs (``checkpoint_path``) or ``partial`` within an epoch
#: (``partial_checkpoint_path``); ``checkpoint_record_path`` inverts it.
CHECKPOINT_NAME = re.compile(r"(?P<stem>.+)-(?P<tag>epoch[0-9]+|partial)\.keras")


def _checkpoint_file(record: RunRecord, tag: str) -> Path:
    return _checkpoint_beside(record.path, tag)


def _checkpoint_beside(record_path: Path, tag: str) -> Path:
    return record_path.parent / "checkpoints" / f"{record_path.stem}-{tag}.keras"


def resumable_epochs(record_path: str | os.PathLike, logged: int) -> int:
    """How many of a record's ``logged`` epochs a resumed run keeps: the newest of them whose
    checkpoint is here (``checkpoint_path``); 0 when none is, and the run starts over."""
    for done in range(logged, 0, -1):
        if _checkpoint_beside(Path(record_path), f"epoch{done}").exists():
            return done
    return 0


def checkpoint_path(record: RunRecord, epoch: int) -> Path:
    """Where the checkpoint after ``epoch`` epochs of ``record``'s run lives."""
    return _checkpoint_file(record, f"epoch{epoch}")


def resume(record: RunRecord, build: Callable[[], keras.Model]) -> tuple[keras.Model, int]:
    """The model to train and the number of epochs already done.

    Loads the checkpoint of the newest logged epoch that has one (``resumable_epochs``), else
    builds afresh; the record keeps only the epochs it goes on from (``RunRecord.keep_epochs``:
    later ones are trained again, and a run that starts over starts its record's clock and
    machines over). Temporary files of an earlier, killed process on this run are deleted
    first (``remove_leftovers``).
    """
    remove_leftovers(record)
    done = resumable_epochs(record.path, record.completed_epochs())
    record.keep_epochs(done)
    if done:
        return keras.saving.load_model(checkpoint_path(record, done)), done
    return build(), 0


class EpochCheckpoint(keras.callbacks.Callback):
    """Score, checkpoint and record after every epoch; stop when ``should_stop(scores)``.

    ``evaluate(model) -> dict`` computes the held-out scores logged beside Keras's training logs;
    with ``verbose`` they are also printed, one line per epoch, under Keras's progress bar.
    """

    def __init__(
        self,
        record: RunRecord,
        evaluate: Callable[[keras.Model], dict[str, float]],
        should_stop: Callable[[dict[str, float]], bool] | None = None,
        keep_checkpoints: bool = False,
        verbose: int = 0,
    ) -> None:
        super().__init__()
        self.record = record
        self.evaluate = evaluate
        self.should_stop = should_stop
        self.keep_checkpoints = keep_checkpoints
        self.verbose = verbose
        self._epoch_start = time.time()
        self.stopped_early = False

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_start = time.time()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.record.failed or not _finite((logs or {}).get("loss", 0.0)):
            return  # a failed run logs no further epoch (FailOnNonFiniteLoss records why)
        scores = {f"train_{k}": float(v) for k, v in (logs or {}).items()}
        held_out = self.evaluate(self.model)
        scores.update(held_out)
        if self.verbose and held_out:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in held_out.items() if "seconds" not in k)
            newline = "\n" if self.verbose == 1 else ""  # below Keras's live bar, not on it
            print(f"{newline}epoch {epoch + 1}: {shown}", flush=True)
        path = checkpoint_path(self.record, epoch + 1)
        save_model_atomic(self.model, path)
        drop_partial(self.record)
        self.record.log_epoch(epoch, scores, seconds=time.time() - self._epoch_start)
        if not self.keep_checkpoints:
            for older in path.parent.glob(f"{self.record.path.stem}-epoch*.keras"):
                if older != path:
                    older.unlink(missing_ok=True)
        if self.should_stop is not None and self.should_stop(scores):
            self.stopped_early = True
            self.model.stop_training = True


def partial_checkpoint_path(record: RunRecord) -> Path:
    """Where the mid-epoch checkpoint of ``record``'s run lives (one at a time)."""
    return _checkpoint_file(record, "partial")


def drop_partial(record: RunRecord) -> None:
    """Forget the mid-epoch state once its epoch is complete (record entry and checkpoint)."""
    if record.data.pop("partial", None) is not None:
        partial_checkpoint_path(record).unlink(missing_ok=True)


def checkpoint_record_path(path: Path) -> Path | None:
    """The record that the checkpoint file ``path`` (``checkpoint_path`` or
    ``partial_checkpoint_path``) belongs to; None for any other file."""
    match = CHECKPOINT_NAME.fullmatch(path.name)
    if match is None or path.parent.name != "checkpoints":
        return None
    return path.parent.parent / f"{match['stem']}.json"


def unfinished_checkpoints(folder: str | os.PathLike) -> list[Path]:
    """The checkpoints under ``folder`` whose run has a record that is not ``settled``, smallest
    first: what lets those runs resume elsewhere (``scripts/gpu_slice.sh`` brings them back)."""
    chosen = []
    for path in Path(folder).glob("**/checkpoints/*.keras"):
        record_path = checkpoint_record_path(path)
        try:
            record = load_record(record_path) if record_path is not None else None
        except CorruptRecord:
            continue
        if record is not None and not settled(record):
            chosen.append(path)
    return sorted(chosen, key=lambda p: p.stat().st_size)


def _metric_state(model: keras.Model) -> list[list[Any]]:
    return [[np.asarray(v).tolist() for v in m.variables] for m in model.metrics]


class MidEpochCheckpoint(keras.callbacks.Callback):
    """Checkpoint within an epoch every ``seconds`` (thesis-scale LM epochs last hours on a
    CPU), so a killed run loses at most that much. The record's ``partial`` entry holds the
    epoch being trained, the updates done in it and Keras's metric accumulators (so the epoch's
    logged training loss is the same as without the interruption); ``resume_partial`` reads it.
    ``first_step``: updates of the first epoch done before this ``fit`` (a resumed epoch).
    """

    def __init__(
        self, record: RunRecord, seconds: float | None = None, first_step: int = 0
    ) -> None:
        super().__init__()
        self.record = record
        self.seconds = checkpoint_seconds() if seconds is None else seconds
        self._offset, self._epoch = first_step, 0
        self._last = time.time()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._offset = 0
        self._last = time.time()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if time.time() - self._last < self.seconds or self.record.failed:
            return
        save_model_atomic(self.model, partial_checkpoint_path(self.record))
        self.record.data["partial"] = {
            "epoch": self._epoch + 1,
            "steps": self._offset + batch + 1,
            "metrics": _metric_state(self.model),
        }
        self.record.save()
        self._last = time.time()


def resume_partial(record: RunRecord, done: int) -> tuple[keras.Model, int, list] | None:
    """The mid-epoch checkpoint of epoch ``done + 1``, if any: (model, updates done in that
    epoch, metric accumulators); None when there is none (or it belongs to another epoch)."""
    partial = record.data.get("partial")
    path = partial_checkpoint_path(record)
    if not partial or partial.get("epoch") != done + 1 or not path.exists():
        drop_partial(record)
        return None
    return keras.saving.load_model(path), int(partial["steps"]), partial["metrics"]


class RestoreMetrics(keras.callbacks.Callback):
    """Add back Keras's metric accumulators of the updates done before a mid-epoch
    interruption, after the resumed epoch's first update (when the compiled metrics exist), so
    the epoch's logged means cover all its updates. The metrics here are means (a total and a
    count each), whose accumulators add up."""

    def __init__(self, state: list[list[Any]]) -> None:
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.state is None:
            return
        for metric, values in zip(self.model.metrics, self.state, strict=True):
            for variable, value in zip(metric.variables, values, strict=True):
                variable.assign(variable + np.asarray(value, dtype=variable.dtype))
        self.state = None


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True  # not a number: nothing to judge


def set_steps_per_execution(model: keras.Model, updates: int, most: int) -> int:
    """Let Keras run up to ``most`` updates per compiled call (``steps_per_execution``), so the
    host queues updates instead of waiting on the device after each; returns the ``k`` chosen:
    the largest divisor of ``updates`` (one ``fit`` epoch) not above ``most``. Keras runs whole
    calls of ``k`` updates, so a ``k`` that did not divide the epoch would train past its end
    into the next epoch's batches (a dataset spanning all epochs, as ``lm.TrainBatches``). The
    updates and their order are those of ``k = 1``; callbacks see every ``k``-th update only."""
    k = max(d for d in range(1, max(1, min(most, updates)) + 1) if updates % d == 0)
    if getattr(model, "steps_per_execution", 1) != k:
        model.steps_per_execution = k
        model.make_train_function(force=True)  # each built for one k
        model.make_test_function(force=True)
        model.make_predict_function(force=True)
    return k


_INTERRUPT_REQUESTED = threading.Event()


def catch_interrupts() -> None:
    """Make Ctrl-C (SIGINT) stop a command's training for sure: the command lines call this
    (importing the package changes no signal handling). The handler remembers the request and
    raises ``KeyboardInterrupt`` as Python's own does; under JAX that exception can be lost
    when it lands while JAX waits for the device (jax-ml/jax#18246: the run went on), so
    :class:`StopOnInterrupt` raises it again at the next batch end. A SIGINT that is ignored
    (a background job of a non-interactive shell) stays ignored."""

    def request_stop(signum: int, frame: Any) -> None:
        _INTERRUPT_REQUESTED.set()
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, request_stop)


class StopOnInterrupt(keras.callbacks.Callback):
    """Raise ``KeyboardInterrupt`` at the first batch end after a Ctrl-C that the backend
    swallowed (:func:`catch_interrupts`); does nothing until one."""

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if _INTERRUPT_REQUESTED.is_set():
            raise KeyboardInterrupt


class FailOnNonFiniteLoss(keras.callbacks.TerminateOnNaN):
    """Stop at the first update whose training loss is NaN or infinite; record the run failed.

    Keras's batch logs hold the epoch's running mean loss, which stays non-finite once one
    update's loss was, so the first non-finite value marks the update where it happened: update
    ``epoch * steps_per_epoch + batch + 1`` (1-based, over the whole run). The record gets
    ``failed = {"reason": "<what> became nan at update 137", "step": 137}``. Like
    ``TerminateOnNaN`` it reads the loss after every update, which keeps Keras's batch callbacks
    synchronous (under JAX, stopping from Keras's asynchronous callback thread is not safe).
    With ``steps_per_execution`` k > 1 it sees the loss after every k-th update, and the update
    it names is the last of its k (the loss became non-finite at most k - 1 updates earlier).
    """

    def __init__(
        self, record: RunRecord, steps_per_epoch: int, what: str = "loss", first_step: int = 0
    ) -> None:
        super().__init__()
        self.record = record
        self.steps_per_epoch = steps_per_epoch
        self.what = what
        self.first_step = first_step  # updates of the first epoch done before (mid-epoch resume)
        self._epoch = 0
        self._offset = first_step

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._offset = 0

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is None or _finite(loss) or self.record.failed:
            return
        step = self._epoch * self.steps_per_epoch + self._offset + batch + 1
        self.record.fail(f"{self.what} became {float(loss)} at update {step}", step)
        self.model.stop_training = True


def run_guards(
    record: RunRecord, steps_per_epoch: int, what: str = "loss", first_step: int = 0
) -> list[keras.callbacks.Callback]:
    """The callbacks every recorded training run fits with: ``FailOnNonFiniteLoss`` (its
    arguments) and ``StopOnInterrupt``."""
    return [FailOnNonFiniteLoss(record, steps_per_epoch, what, first_step), StopOnInterrupt()]


def raise_if_failed(record: RunRecord) -> None:
    """After ``model.fit``: if the run failed, delete its checkpoints and raise ``RunFailed``."""
    if record.failed:
        remove_checkpoints(record)
        raise RunFailed(record.failure_message(), record.with_path())


def save_model_atomic(model: keras.Model, path: Path) -> None:
    """``model.save`` through :func:`files.atomic_path`: a kill never leaves a broken file, and
    two processes never write the same temporary file."""
    with atomic_path(path) as tmp:
        model.save(tmp)


def remove_leftovers(record: RunRecord) -> list[Path]:
    """Delete the temporary files a killed process left beside ``record``'s run (half-written
    checkpoints, record drafts); call only while holding the run's lock. Returns them."""
    folder = checkpoint_path(record, 0).parent
    stem = record.path.stem
    leftovers = [*folder.glob(f".{stem}-epoch*.tmp.keras"), *folder.glob(f".{stem}.*.tmp.keras")]
    leftovers += record.path.parent.glob(f".{stem}.*.tmp.json")
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def remove_checkpoints(record: RunRecord) -> None:
    """Delete a finished run's checkpoints (the record keeps the results)."""
    folder = checkpoint_path(record, 0).parent
    for path in folder.glob(f"{record.path.stem}-epoch*.keras"):
        path.unlink(missing_ok=True)
    partial_checkpoint_path(record).unlink(missing_ok=True)


def use_data_parallel() -> int:
    """Train every model built from now on data-parallel over all local devices (Keras 3
    distribution API, ``keras.distribution.DataParallel``: weights replicated, each batch split
    along its first axis); returns the number of devices. JAX backend only (Keras's
    distribution API); on a CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` gives N
    virtual devices."""
    if keras.backend.backend() != "jax":
        raise ValueError(
            f"--data-parallel needs KERAS_BACKEND=jax (Keras's distribution API); this process "
            f"runs {keras.backend.backend()}"
        )
    devices = keras.distribution.list_devices()
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    return len(devices)


def distribution_summary() -> dict[str, Any]:
    """What a record stores of the active distribution: ``{}`` on one device, else its kind
    and device count."""
    active = keras.distribution.distribution()
    if active is None:
        return {}
    return {"distribution": type(active).__name__, "devices": len(active.device_mesh.devices.flat)}
