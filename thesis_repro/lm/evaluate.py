"""Scoring language models (thesis 3.2.3, 4.2): perplexity over a part's scored targets (and
per target: ``scored_inputs``, ``target_nll``), the eval prefixes (which a run is scored at, and
their order in a record), the prefix-length generalisation scores of a finished run, and loading
a finished run's model.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np

from thesis_repro.corpus import EOS, Corpus
from thesis_repro.files import write_json_atomic
from thesis_repro.lm.batches import (
    PAD_ID,
    ScoreBatches,
    scored_targets,
    sentence_starts,
    window_inputs,
)
from thesis_repro.lm.config import (
    EVAL_PREFIXES,
    FUTURE_TABLES,
    HISTORY_CAP,
    NAME,
    SENTENCE,
    LMError,
    RunConfig,
    final_model_path,
    record_file_of,
)
from thesis_repro.lm.corpora import CorpusSource, load_lm_corpus, record_source
from thesis_repro.records import Record, load_record
from thesis_repro.settings import RESULTS_DIR


def parse_eval_prefix(text: str | int) -> int | str:
    """``"20"`` -> 20, ``"sentence"`` -> ``"sentence"``; anything else is an error."""
    if isinstance(text, int) or str(text).isdigit():
        if int(text) < 1:
            raise LMError(f"an eval prefix must be at least 1 word, got {text}")
        return int(text)
    if text == SENTENCE:
        return SENTENCE
    raise LMError(f"--eval-prefix takes word counts or {SENTENCE!r}, got {text!r}")


def eval_order(key: str) -> tuple[int, int]:
    return (1, 0) if key == SENTENCE else (0, int(key))


def sorted_evals(scores: dict[str, float]) -> dict[str, float]:
    return {k: scores[k] for k in sorted(scores, key=eval_order)}


def missing_evals(record: Record, eval_prefixes: Sequence[int | str]) -> list[int | str]:
    done = record.get("summary", {}).get("eval_prefix", {})
    return [e for e in eval_prefixes if str(e) not in done]


def reusing_tables(config: RunConfig) -> list[str]:
    """The future-work tables (thesis 4.2) that show this attention run, its own included."""
    if not config.prefix:
        return []
    return [name for name, future in FUTURE_TABLES.items() if future.regime_of(config.as_dict())]


def reusing_eval_prefixes(config: RunConfig) -> tuple[int | str, ...]:
    """The eval prefixes of every future-work table (thesis 4.2) that shows this attention
    run, the run's own table included: a Table 3.1 or PTB run that a future table reuses is
    scored at them when its training ends, so the future table needs no final model later (a
    fresh machine has none, and a `paper` model is too big to commit: issue 15)."""
    wanted = [e for name in reusing_tables(config) for e in FUTURE_TABLES[name].eval_prefixes]
    return tuple(dict.fromkeys(wanted))


def unscored_evals(config: RunConfig, record: Record, path: Path) -> str:
    """What a finished run lacks for the future-work tables that show it (thesis 4.2): the
    eval prefixes of ``reusing_eval_prefixes`` it has no score at, and how to get them
    (``""``: nothing; ``python -m thesis_repro status`` lists it: ``Experiment.lacks``)."""
    missing = missing_evals(record, reusing_eval_prefixes(config))
    if not missing:
        return ""
    prefixes = " ".join(map(str, missing))
    what = f"no score at eval prefix {prefixes} (table {', '.join(reusing_tables(config))})"
    if final_model_path(path).exists():
        return (
            f"{what}: python -m thesis_repro.lm evaluate --table {config.table} "
            f"--eval-prefix {prefixes}"
        )
    return (
        f"{what}, and no final model here to score it: delete the record and train it again "
        f"(python -m thesis_repro.lm grid --table {config.table} --preset {config.preset})"
    )


def perplexity(
    model: Any,
    tokens: np.ndarray,
    config: RunConfig,
    batch_size: int = 1000,
    eval_prefix: int | str | None = None,
    boundary: int | None = None,
) -> float:
    """``exp(mean NLL)`` of ``model`` over the scored targets of ``tokens`` (no weight decay).

    ``eval_prefix`` (thesis 4.2): give the model that many prefix words instead of its trained
    ``config.prefix``, or ``"sentence"``: the words back to the last ``boundary`` token
    (``<eos>``) before the window, at most ``HISTORY_CAP``. The trained prefix gives exactly
    the inputs, and so the perplexity, of ``eval_prefix=None``. A ``config.bounded`` run is
    scored with sentence-bounded windows too, the sentences ending at ``boundary`` (a corpus
    without ``<eos>`` is one sentence).
    """

    targets, prefix, starts, bound = _scoring(tokens, config, eval_prefix, boundary)
    batches = ScoreBatches(
        tokens, targets, config.order, prefix, batch_size, starts, bound, boundary or PAD_ID
    )
    nll = model.evaluate(batches, verbose=0, return_dict=True)["nll"]
    return float(math.exp(nll))


def scored_inputs(
    tokens: np.ndarray,
    config: RunConfig,
    eval_prefix: int | str | None = None,
    boundary: int | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The scored targets of ``tokens`` and the model inputs ``perplexity`` feeds for them
    under ``eval_prefix`` (all at once: ~0.8 KB a target with a ``"sentence"`` prefix)."""
    targets, prefix, starts, bound = _scoring(tokens, config, eval_prefix, boundary)
    inputs = window_inputs(tokens, targets, config.order, prefix, starts, bound, boundary or PAD_ID)
    return targets, inputs


def target_nll(
    model: Any, inputs: dict[str, np.ndarray], words: np.ndarray, batch_size: int = 1000
) -> np.ndarray:
    """Per target, ``-log softmax(logits)[word]`` in float64 (thesis 3.2.3): the terms whose
    mean ``perplexity`` exponentiates, for breaking a perplexity down by target."""
    words = np.asarray(words)
    nll = np.empty(len(words))
    for start in range(0, len(words), batch_size):
        batch = {name: value[start : start + batch_size] for name, value in inputs.items()}
        logits = np.asarray(model.predict_on_batch(batch), np.float64)
        top = logits.max(axis=1)
        logsumexp = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        chosen = logits[np.arange(len(logits)), words[start : start + batch_size]]
        nll[start : start + batch_size] = logsumexp - chosen
    return nll


def _scoring(
    tokens: np.ndarray, config: RunConfig, eval_prefix: int | str | None, boundary: int | None
) -> tuple[np.ndarray, int, np.ndarray | None, np.ndarray | None]:
    """Scored targets, prefix width, ``starts`` and ``bound`` (``window_inputs``) of a part."""
    targets = scored_targets(len(tokens), config.first_target)
    prefix, starts = _eval_inputs(tokens, config, eval_prefix, boundary)
    bound = sentence_starts(tokens, boundary) if config.bounded else None
    return targets, prefix, starts, bound


def _eval_inputs(
    tokens: np.ndarray, config: RunConfig, eval_prefix: int | str | None, boundary: int | None
) -> tuple[int, np.ndarray | None]:
    """Prefix width and ``starts`` (``window_inputs``) of an evaluation prefix."""

    if eval_prefix is None:
        return config.prefix, None
    if not config.prefix:
        raise LMError(f"{config.model} has no prefix to evaluate with other lengths")
    if eval_prefix == SENTENCE:
        return HISTORY_CAP, sentence_starts(tokens, boundary)
    return int(eval_prefix), None


def prefix_words(
    tokens: np.ndarray, config: RunConfig, eval_prefix: int | str, boundary: int | None
) -> float:
    """Mean number of real prefix words per scored target under ``eval_prefix``."""
    targets, prefix, starts, bound = _scoring(tokens, config, eval_prefix, boundary)
    nearest = targets - config.order  # position of the first prefix word
    first = starts[np.maximum(nearest, 0)] if starts is not None else np.zeros_like(nearest)
    if bound is not None:  # nothing before the target's sentence (window_inputs)
        first = np.maximum(first, bound[targets - 1])
    return float(np.clip(nearest - first + 1, 0, prefix).mean())


def eval_prefix_scores(
    model: Any,
    corpus: Corpus,
    config: RunConfig,
    eval_prefixes: Sequence[int | str],
    verbose: int = 0,
) -> tuple[dict[str, float], dict[str, float]]:
    """Test perplexity and mean prefix words for each eval prefix (thesis 4.2), same weights."""

    boundary = corpus.word_to_id.get(EOS)
    scores, words = {}, {}
    for eval_prefix in eval_prefixes:
        started = time.time()
        key = str(eval_prefix)
        scores[key] = perplexity(
            model, corpus.test, config, config.batch_size, eval_prefix, boundary
        )
        words[key] = prefix_words(corpus.test, config, eval_prefix, boundary)
        if verbose:
            print(
                f"[eval] {config.name}: prefix {key} ({words[key]:.1f} words on average): "
                f"test perplexity {scores[key]:.2f} ({time.time() - started:.0f} s)",
                flush=True,
            )
    return scores, words


def distance_summary(model: Any) -> dict[str, Any]:
    """The learned per-distance attention bias beta_j of a ``bias`` model (thesis 4.2)."""
    try:
        attention = model.get_layer("attention")
    except ValueError:
        return {}
    if getattr(attention, "position_aware", "none") != "bias":
        return {}
    return {"distance_bias": [float(b) for b in np.asarray(attention.distance_bias)]}


def load_run_model(path: str | os.PathLike, jit_compile: bool | None = None) -> Any:
    """The final model of a finished run (record, final model or checkpoint path), compiled as
    for training, ready for ``perplexity`` or ``prefix_attention`` (its prefix input takes any
    length)."""
    path = Path(path)
    model_file = path if path.suffix == ".keras" else final_model_path(path)
    if not model_file.exists():
        raise LMError(
            f"no model at {model_file}: runs finished before final models were kept cannot "
            "be scored again; delete the record to train the run again"
        )
    model = keras.saving.load_model(model_file)
    if jit_compile is not None:
        model.jit_compile = jit_compile
    return model


def evaluate_run(
    path: str | os.PathLike,
    source: CorpusSource | None = None,
    eval_prefixes: Sequence[int | str] = EVAL_PREFIXES,
    verbose: int = 1,
    jit_compile: bool | None = None,
) -> dict:
    """Fill in the missing ``summary.eval_prefix`` scores of a finished run from its final
    model (thesis 4.2); returns the record. Runs without a prefix, or unfinished, are left."""
    path = record_file_of(path)
    record = load_record(path)
    if record is None:
        raise LMError(f"no record at {path}")
    config = RunConfig(**record["config"])
    missing = missing_evals(record, [parse_eval_prefix(e) for e in eval_prefixes])
    if not record.get("finished") or not config.prefix or not missing:
        return record
    if not final_model_path(path).exists():
        if verbose:
            print(
                f"[no model] {config.name}: {final_model_path(path)} is missing, so eval "
                "prefixes cannot be scored; delete the record to train the run again",
                flush=True,
            )
        return record
    source = source or record_source(record)
    corpus = load_lm_corpus(source, config, progress=bool(verbose))
    if jit_compile is None:
        jit_compile = record["jit_compile"]
    model = load_run_model(path, jit_compile)
    scores, words = eval_prefix_scores(model, corpus, config, missing, verbose)
    summary = record["summary"]
    summary["eval_prefix"] = sorted_evals({**summary.get("eval_prefix", {}), **scores})
    summary["eval_prefix_words"] = sorted_evals({**summary.get("eval_prefix_words", {}), **words})
    write_json_atomic(path, record)
    return record


def evaluate_all(
    results_dir: Path = RESULTS_DIR,
    eval_prefixes: Sequence[int | str] = EVAL_PREFIXES,
    tables: Sequence[str] | None = None,
    verbose: int = 1,
    jit_compile: bool | None = None,
) -> list[dict]:
    """``evaluate_run`` for every record under ``results/lm/`` (or its ``tables`` folders)."""
    records = []
    for path in sorted((Path(results_dir) / NAME).glob("*/*/*.json")):
        if tables and path.parent.name not in tables:
            continue
        record = load_record(path)
        if record is not None and "config" in record:
            records.append(evaluate_run(path, None, eval_prefixes, verbose, jit_compile))
    return records
