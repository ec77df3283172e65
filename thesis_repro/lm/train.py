"""One language-model run (thesis 3.2.2): corpus, model, SGD with weight decay and the
thesis's learning-rate schedule -> its JSON record; and the runs of a table in order."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np

from thesis_repro.corpus import EOS, Corpus
from thesis_repro.lm.batches import PAD_ID, TrainBatches, scored_targets, sentence_starts
from thesis_repro.lm.config import (
    PRESETS,
    LMError,
    RunConfig,
    check_config,
    final_model_path,
    record_path,
    summarize,
    table_eval_prefixes,
)
from thesis_repro.lm.corpora import CorpusSource, load_lm_corpus, table_runs
from thesis_repro.lm.evaluate import (
    distance_summary,
    eval_prefix_scores,
    evaluate_run,
    missing_evals,
    parse_eval_prefix,
    perplexity,
    reusing_eval_prefixes,
    sorted_evals,
)
from thesis_repro.lm.model import build_model
from thesis_repro.records import RunRecord, compute_device
from thesis_repro.run_lock import release
from thesis_repro.runner import walk_grid
from thesis_repro.settings import RESULTS_DIR, steps_per_execution
from thesis_repro.training import (
    EpochCheckpoint,
    MidEpochCheckpoint,
    RestoreMetrics,
    distribution_summary,
    raise_if_failed,
    remove_checkpoints,
    resume,
    resume_partial,
    run_guards,
    save_model_atomic,
    set_seed,
    set_steps_per_execution,
)


def run(
    config: RunConfig,
    source: CorpusSource,
    results_dir: Path = RESULTS_DIR,
    verbose: int = 1,
    jit_compile: bool | None = None,
    callbacks: Sequence[Any] = (),
    eval_prefixes: Sequence[int | str] = (),
) -> dict:
    """Train one configuration for ``config.epochs`` epochs (resuming); return its record.

    ``jit_compile``: XLA for the training and scoring steps (default: the preset's); it does
    not change the results beyond float rounding, so it is not part of the config.
    ``eval_prefixes`` (thesis 4.2, attention models): after training, also score the test part
    with these prefixes (``summary.eval_prefix``); a finished run gets the missing ones from
    its final model. With none given, a run ends scored at those of every future-work table
    that reuses it (``reusing_eval_prefixes``). Raises ``RunFailed`` when the training loss
    becomes NaN or infinite (the record says so: ``records``), or when the run failed before.
    """

    check_config(config)
    eval_prefixes = [parse_eval_prefix(e) for e in eval_prefixes] if config.prefix else []
    record = RunRecord(record_path(config, results_dir), config.as_dict())
    try:
        record.start()
    except ValueError as e:
        raise LMError(str(e)) from None
    record.data["hardware"]["dtype_policy"] = config.dtype_policy  # the model's, not the global
    if record.finished:
        if missing_evals(record.data, eval_prefixes):
            evaluated = evaluate_run(record.path, source, eval_prefixes, verbose, jit_compile)
            release(record.path)
            return evaluated
        return record.skip(verbose)
    corpus = load_lm_corpus(source, config, progress=bool(verbose))
    train_targets = scored_targets(len(corpus.train), config.first_target)
    record.data["corpus"] = {
        "source": corpus.source,
        "vocab_size": corpus.vocab_size,
        "words": {p: len(getattr(corpus, p)) for p in ("train", "valid", "test")},
        "unk_rate_train": corpus.unk_rate("train"),
        "settings": corpus.settings,
    }
    if jit_compile is None:
        jit_compile = PRESETS[config.preset].jit_compile
    record.data["jit_compile"] = jit_compile
    record.data["hardware"].update(distribution_summary(), dtype_policy=config.dtype_policy)
    set_seed(config.seed)
    model, done = resume(record, lambda: build_model(config, corpus.vocab_size, jit_compile))
    first_step, metric_state = 0, None
    partial = resume_partial(record, done) if done < config.epochs else None
    if partial is not None:  # a mid-epoch checkpoint of epoch done + 1
        model, first_step, metric_state = partial
    model.jit_compile = jit_compile  # a resumed model may come from a run with the other setting

    eos = corpus.word_to_id.get(EOS)  # sentence ends (None: a corpus without <eos>)
    train_bound = sentence_starts(corpus.train, eos) if config.bounded else None

    def train_batches(first_epoch: int, epochs: int, first_step: int = 0) -> TrainBatches:
        return TrainBatches(
            corpus.train,
            train_targets,
            config.order,
            config.prefix,
            config.batch_size,
            config.seed,
            first_epoch,
            epochs,
            config.min_prefix,
            first_step,
            train_bound,
            PAD_ID if eos is None else eos,
        )

    batches = train_batches(done, config.epochs)
    if verbose:
        where = f"resuming after epoch {done}" if done else "starting"
        if first_step:
            where = f"resuming epoch {done + 1} after {first_step:,} updates"
        updates = batches.steps_per_epoch * (config.epochs - done)
        estimate = updates * estimate_update_seconds(config, corpus.vocab_size)
        print(
            f"[run] {config.name} ({config.model}; corpus {config.corpus}, preset "
            f"{config.preset}, V = {corpus.vocab_size:,}, {config.epochs} epochs of "
            f"{batches.steps_per_epoch:,} updates; ~{_duration(estimate)} left on this machine, "
            f"estimated): {where} -> {record.path}",
            flush=True,
        )
    clock = {"start": time.time()}
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: clock.update(start=time.time())
    )

    def evaluate(m: Any) -> dict[str, float]:
        seconds = time.time() - clock["start"]
        return {
            "train_seconds": seconds,
            "ms_per_step": 1000 * seconds / batches.steps_per_epoch,
            "valid_perplexity": perplexity(
                m, corpus.valid, config, config.batch_size, boundary=eos
            ),
        }

    most_per_execution = steps_per_execution(compute_device()["device"])

    def train(data: TrainBatches) -> None:
        """``fit`` over ``data``'s epochs; a ``data.first_step`` > 0 makes its one epoch the
        rest of an interrupted epoch."""
        first_step = data.first_step
        record.data["steps_per_execution"] = set_steps_per_execution(
            model, data.steps_per_epoch - first_step, most_per_execution
        )
        model.fit(
            data,
            epochs=data.epochs,
            initial_epoch=data.first_epoch,
            steps_per_epoch=data.steps_per_epoch - first_step,
            shuffle=False,  # TrainBatches shuffles, per epoch; Keras would mix epochs' batches
            callbacks=[
                timer,
                RestoreMetrics(metric_state) if first_step else keras.callbacks.Callback(),
                *run_guards(record, batches.steps_per_epoch, first_step=first_step),
                MidEpochCheckpoint(record, first_step=first_step),
                EpochCheckpoint(record, evaluate, verbose=verbose),
                *callbacks,
            ],
            verbose=verbose,
        )

    if first_step:  # finish the interrupted epoch first (its remaining updates only)
        train(train_batches(done, done + 1, first_step))
        done += 1
    if done < config.epochs and not record.failed:
        train(train_batches(done, config.epochs))
    raise_if_failed(record)
    test = perplexity(model, corpus.test, config, config.batch_size, boundary=eos)
    save_model_atomic(model, final_model_path(record.path))
    summary = summarize(record.data["epochs"], test) | distance_summary(model)
    scored = eval_prefixes or [parse_eval_prefix(e) for e in reusing_eval_prefixes(config)]
    if scored:
        scores, words = eval_prefix_scores(model, corpus, config, scored, verbose)
        summary |= {"eval_prefix": sorted_evals(scores), "eval_prefix_words": sorted_evals(words)}
    record.finish(**summary)
    remove_checkpoints(record)
    if verbose:
        print(f"[done] {config.name}: test perplexity {test:.2f}", flush=True)
    return record.data


def estimate_update_seconds(config: RunConfig, vocab_size: int) -> float:
    """Rough seconds per update on this machine: the update's matmul FLOP (the softmax layer
    dominates: ~6 x B x H x V) over a float32 matmul timed now with NumPy, x 1.5 for the rest;
    measured ratio to real updates on a CPU ~1-2 (benchmarks/bench_lm.py); on a CPU ~20 ms of
    per-update overhead is added (it dominates at small V). On an accelerator the update's FLOP
    at the rate measured there (``ACCELERATOR_UPDATE_FLOPS``): the host's matmul says nothing
    of the device (it had put a 10-minute H100 run at 7.6 h)."""
    width = (config.order - 1 + (1 if config.prefix else 0)) * config.embedding_dim
    flop = 6 * config.batch_size * config.hidden * (vocab_size + width)
    if compute_device()["device"] != "cpu":
        return flop / ACCELERATOR_UPDATE_FLOPS
    return 0.02 + 1.5 * flop / _matmul_flops()  # + ~20 ms of per-update overhead (small V)


def estimate_run_seconds(config: RunConfig, corpus: Corpus) -> float:
    """Rough seconds for all the updates of a run on ``corpus`` (``estimate_update_seconds``)."""
    steps = max(1, len(scored_targets(len(corpus.train), config.first_target)) // config.batch_size)
    return config.epochs * steps * estimate_update_seconds(config, corpus.vocab_size)


#: A `paper` run estimated longer than this gets a warning before it starts: on a CPU an
#: eltec-pol run (~45 h) does, a PTB run (~50 min) does not.
SLOW_RUN_SECONDS = 3 * 3600


# FLOP/s of a whole LM `paper` update (45.3 GFLOP by the count above) on an H100, one run alone:
# 2.5 ms per update (2.3-2.7 ms on 2026-11-26, 3.2 ms each with another run beside it on an H200).
ACCELERATOR_UPDATE_FLOPS = 45.3e9 / 2.5e-3


def _matmul_flops(n: int = 512, repeats: int = 20) -> float:
    """FLOP/s of an n x n float32 NumPy matmul on this machine, the best of ``repeats``
    (~40 ms): with a training beside it, one of 3 was 10 times too slow in 1 of 5 tries."""
    a = np.ones((n, n), np.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / max(best, 1e-9)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{max(seconds, 60) / 60:.0f} min"


def run_grid(
    table: str,
    source: CorpusSource,
    preset: str = "cpu",
    results_dir: Path = RESULTS_DIR,
    seeds: Sequence[int] = (),
    verbose: int = 1,
    jit_compile: bool | None = None,
    eval_prefixes: Sequence[int | str] | None = None,
    **overrides: Any,
) -> list[dict]:
    """All runs of ``table`` (seed-major, so early stops still cover every model); attention
    runs of a future-work table are also scored at its eval prefixes (or ``eval_prefixes``).
    A failed run (``RunFailed``) is reported in one line and the grid goes on; its record is
    among those returned (``records.grid_failures`` words the error)."""
    configs = table_runs(table, source, preset, seeds, **overrides)
    if eval_prefixes is None:
        eval_prefixes = table_eval_prefixes(table)
    return walk_grid(
        configs,
        lambda c: run(c, source, results_dir, verbose, jit_compile, (), eval_prefixes),
        lambda c: f"table {table}: {c.name}",
        verbose,
    )
