"""Thesis 3.2: feed-forward n-gram language models with and without an attention-compressed prefix.

    python -m thesis_repro.lm --prefix 5                      # one model (5-gram + 5-word prefix)
    python -m thesis_repro.lm grid --table 3.1 --preset cpu   # Table 3.1 / Figure 3.4, resumable
    python -m thesis_repro.lm grid --table 3.2 --preset cpu   # Table 3.2 / Figure 3.5 (momentum)
    python -m thesis_repro.lm grid --table ptb --preset cpu   # PTB: 5-gram vs 5-gram + 5
    python -m thesis_repro.lm report                          # tables and figures from records

Methods (thesis 2.2, 3.2; SPEC E4):
- Corpus (thesis 3.2.1): ``--corpus PATH``, or ``$THESIS_REPRO_DATA/<--corpus-name>`` (default
  ``eltec-pol``, the stand-in for the thesis's 7 M words of Polish Wikipedia), prepared by
  ``thesis_repro.corpus.load_corpus`` (lowercased, punctuation split off, vocabulary = words seen
  at least ``min_count`` times in train, plus ``<UNK>``; 6 : 0.5 : 0.5 split by running
  position). PTB is read as given (whitespace tokens, ``min_count`` 1). With neither option the
  run uses ``corpus.synthetic_corpus`` and says so on its first line of output.
- Models (``thesis_repro.language_models``): the Bengio LM of order n (thesis 2.2.1) and the
  attention-prefix LM (2.2.2); S = 100, H = 200, ReLU, full softmax over V.
- Targets: every model predicts the same positions, ``t >= FIRST_TARGET = 9`` of each part (the
  10-gram and the 5-gram + 5 see 9 words back), in training and in scoring; prefix words before
  the start of a part are padded and masked.
- Training (thesis 3.2.2): SGD on minibatches of 1000, mean NLL (sparse categorical
  cross-entropy from logits) plus ``1e-5 * ||W||^2`` for W_mh and W_hl, learning rate
  ``eps0 / (1 + decay * i)`` (``training.inverse_time_schedule``); variant ``thesis``: eps0 = 0.2,
  decay = 1e-8, no momentum (Table 3.1); variant ``momentum``: eps0 = 0.15, decay = 1e-5,
  momentum 0.85 (Table 3.2). Keras's momentum is ``v = mu v - lr g; w += v``; TensorFlow 1's
  MomentumOptimizer (``v = mu v + g; w -= lr v``) is the same while lr is constant.
  Each epoch visits every training target once in a permutation seeded by (seed, epoch), in
  full batches only (at most batch - 1 targets are left out per epoch, different ones each time).
- Scores: validation perplexity ``exp(mean NLL)`` after every epoch, test perplexity at the end
  (of the last epoch's model), both over all targets of the part.

Every run writes ``results/lm/<corpus>/<table>/<run>.json`` after each epoch and a ``.keras``
checkpoint beside it; an interrupted run (even ``kill -9``) continues from its last checkpoint
when the same command is run again, and finished runs are skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro.corpus import Corpus, CorpusError, load_corpus, synthetic_corpus
from thesis_repro.records import RESULTS_DIR, RunRecord, load_records

EXPERIMENT = "lm"
FIRST_TARGET = 9  # first scored position of each part: the 10-gram's (and 5-gram + 5's) context
DATA_ENV = "THESIS_REPRO_DATA"
DEFAULT_CORPUS_NAME = "eltec-pol"
SYNTHETIC = "synthetic"
FIGURES_DIR = Path("figures")
SYNTHETIC_NOTICE = (
    f"NOTE: no corpus given (--corpus PATH or {DATA_ENV}=DIR): training on the built-in "
    "SYNTHETIC corpus (thesis_repro.corpus.synthetic_corpus), not on real text."
)


@dataclass(frozen=True)
class Variant:
    """Optimiser of thesis 3.2.2: SGD, ``eps_i = eps0 / (1 + decay * i)``, optional momentum."""

    eps0: float
    decay: float
    momentum: float = 0.0


VARIANTS: dict[str, Variant] = {
    "thesis": Variant(eps0=0.2, decay=1e-8),  # Table 3.1
    "momentum": Variant(eps0=0.15, decay=1e-5, momentum=0.85),  # Table 3.2, "further tests"
}


@dataclass(frozen=True)
class Table:
    """A model set of the thesis, the optimiser variant it was trained with, and its numbers."""

    title: str
    models: tuple[tuple[int, int], ...]  # (order, prefix)
    variant: str
    figure: str
    paper: dict[tuple[int, int], tuple[float, float]]  # test perplexity (mean, std)
    corpus_name: str = DEFAULT_CORPUS_NAME


TABLES: dict[str, Table] = {
    "3.1": Table(
        "Table 3.1: test perplexity (SGD, eps0 = 0.2)",
        ((5, 0), (10, 0), (5, 2), (5, 5)),
        "thesis",
        "3.4",
        {
            (5, 0): (544.70, 6.67),
            (10, 0): (488.78, 2.88),
            (5, 2): (487.38, 6.53),
            (5, 5): (460.07, 6.16),
        },
    ),
    "3.2": Table(
        "Table 3.2: test perplexity (further tests: momentum 0.85, eps0 = 0.15)",
        ((5, 0), (10, 0), (5, 5)),
        "momentum",
        "3.5",
        {(5, 0): (493.04, 16.41), (10, 0): (425.90, 8.36), (5, 5): (411.43, 8.37)},
    ),
    "ptb": Table(
        "PTB: 5-gram vs 5-gram + 5-word prefix (momentum variant; no thesis numbers)",
        ((5, 0), (5, 5)),
        "momentum",
        "ptb",
        {},
        corpus_name="ptb",
    ),
}


@dataclass(frozen=True)
class Preset:
    """Scale of a grid: corpus size and vocabulary, epochs, instances (seeds), batch size.

    ``max_words``/``min_count`` apply to raw-text corpora (eltec-pol) and to the synthetic
    corpus (``max_words`` = its length); PTB keeps its own closed vocabulary (min_count 1) and
    is capped at ``ptb_max_words``.
    """

    description: str
    epochs: int
    seeds: tuple[int, ...]
    max_words: int
    min_count: int
    ptb_max_words: int
    batch_size: int = 1000
    jit_compile: bool = True  # XLA; measured ~10-20% faster per update on CPU at V = 7,251


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        description=(
            "seconds, for the tests: 6,000 words, 2 epochs, batches of 100, 2 instances, no "
            "XLA (compiling costs more than it saves at this size)"
        ),
        epochs=2,
        seeds=(0, 1),
        max_words=6_000,
        min_count=1,
        ptb_max_words=6_000,
        batch_size=100,
        jit_compile=False,
    ),
    "cpu": Preset(
        description=(
            "about 3 h or less per table on this 2-core CPU: the first 1,000,000 words of "
            "eltec-pol (train 857k, valid/test 71k words; min_count 10 gives V = 7,251 instead "
            "of 37,373), 4 epochs (3,428 updates), 3 instances. The softmax dominates, so an "
            "update costs ~6 x B x H x V FLOP and a run grows with words x epochs x V. Measured "
            "with XLA while another training (and at times test suites) shared the 2 cores: "
            "130-230 ms per update, ~7 s per scoring of the valid part, so 8-14 min per run: "
            "Table 3.1 (12 runs) 1.6-2.8 h, Table 3.2 (9 runs) 1.2-2.1 h. PTB (all of it: "
            "V = 10,000, 930k train words, 4 epochs): 300-350 ms per update under the same "
            "load, ~21 min per run, 6 runs ~2 h. "
            "On a GPU: minutes per table. Expect the thesis's ordering and gaps (5-gram worst, "
            "5-gram + 5 best), not its absolute perplexities (other corpus, V, training length)"
        ),
        epochs=4,
        seeds=(0, 1, 2),
        max_words=1_000_000,
        min_count=10,
        ptb_max_words=2_000_000,
    ),
    "paper": Preset(
        description=(
            "the thesis protocol: 7,000,000 words (6M / 0.5M / 0.5M; eltec-pol gives "
            "V = 37,373 with min_count 10, thesis 37,236), 25 epochs of 6,000 updates of "
            "~45 GFLOP, 5 instances. Not for a CPU (measured here under load: 1.0-1.2 s per "
            "update at V = 37,373, ~140 s per scoring of the valid part: ~45 h per run). "
            "Expected on one GPU (~15 TFLOP/s effective fp32/TF32; not measured): 5-10 ms per "
            "update, 15-30 min per run, Table 3.1 (20 runs) 5-10 h, Table 3.2 (15 runs) 4-8 h. "
            "Thesis (Polish Wikipedia): 544.7 / 488.8 / 487.4 / 460.1 (Table 3.1), 493.0 / "
            "425.9 / 411.4 (Table 3.2)"
        ),
        epochs=25,
        seeds=(0, 1, 2, 3, 4),
        max_words=7_000_000,
        min_count=10,
        ptb_max_words=2_000_000,
    ),
}


@dataclass(frozen=True)
class RunConfig:
    """One training run (everything that changes its result).

    ``table`` is ``3.1``, ``3.2``, ``ptb`` or ``runs`` (single runs from the command line).
    """

    corpus: str
    table: str
    preset: str
    order: int = 5
    prefix: int = 0
    variant: str = "thesis"
    seed: int = 0
    epochs: int = 25
    batch_size: int = 1000
    max_words: int = 7_000_000
    min_count: int = 10
    tokenizer: str = "regex"
    first_target: int = FIRST_TARGET
    embedding_dim: int = 100
    hidden: int = 200
    weight_decay: float = 1e-5

    @property
    def model(self) -> str:
        """Thesis label: ``5-gram``, ``10-gram``, ``5-gram + 5``."""
        return f"{self.order}-gram" + (f" + {self.prefix}" if self.prefix else "")

    @property
    def name(self) -> str:
        model = f"{self.order}gram" + (f"+{self.prefix}" if self.prefix else "")
        return f"{self.preset}-{model}-{self.variant}-seed{self.seed}"


class LMError(ValueError):
    """Bad input to the experiment (printed as ``error: ...`` by the command line)."""


def check_config(config: RunConfig) -> None:
    """Reject impossible settings with a message that says what to do."""
    if config.order < 2:
        raise LMError(f"--order must be at least 2 (an n-gram sees n-1 words), got {config.order}")
    if config.prefix < 0:
        raise LMError(f"--prefix must be 0 (no attention) or more words, got {config.prefix}")
    if config.order - 1 > config.first_target:
        raise LMError(
            f"a {config.order}-gram needs {config.order - 1} words before its first target, "
            f"but targets start at position {config.first_target}; pass --first-target "
            f"{config.order - 1} (and use it for every model you compare)"
        )
    if config.variant not in VARIANTS:
        raise LMError(f"unknown variant {config.variant!r}; use one of {', '.join(VARIANTS)}")
    for field in ("epochs", "batch_size", "max_words", "min_count"):
        if getattr(config, field) < 1:
            flag = "--" + field.replace("_", "-")
            raise LMError(f"{flag} must be at least 1, got {getattr(config, field)}")


# --- corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusSource:
    """Where the text comes from: a path, or ``None`` for the synthetic corpus."""

    name: str
    path: Path | None

    @property
    def synthetic(self) -> bool:
        return self.path is None


def corpus_key(path: Path) -> str:
    """Short name of a corpus path: ``eltec-pol.txt.xz`` -> ``eltec-pol``; folder ``ptb``."""
    return path.resolve().name.split(".")[0] or "corpus"


def resolve_corpus(
    path: str | os.PathLike | None, name: str | None = None, data_dir: str | None = None
) -> CorpusSource:
    """``--corpus PATH``, else ``<data_dir>/<name>`` (``$THESIS_REPRO_DATA``), else synthetic.

    Inside the data directory ``name`` may be a folder holding ``<name>.txt[.xz|.gz|.bz2]``
    (e.g. ``eltec-pol/eltec-pol.txt.xz``) or train/valid/test files (``ptb/``), or such a file
    directly.
    """
    name = name or DEFAULT_CORPUS_NAME
    if path:
        path = Path(path).expanduser()
        if not path.exists():
            raise CorpusError(
                f"corpus path {path} does not exist; give a text file (.txt, .xz, .gz, .bz2) or "
                "a folder with train/valid/test files"
            )
        return CorpusSource(corpus_key(path), path)
    if not data_dir:
        return CorpusSource(SYNTHETIC, None)
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise CorpusError(f"{DATA_ENV}={data_dir} is not a directory; set it to the data folder")
    folder = root / name
    candidates = sorted(folder.glob(f"{name}.txt*")) if folder.is_dir() else []
    candidates += sorted(root.glob(f"{name}.txt*"))
    if candidates:
        return CorpusSource(name, candidates[0])
    if folder.is_dir():
        return CorpusSource(name, folder)
    raise CorpusError(
        f"no corpus named {name!r} in {DATA_ENV}={data_dir} (looked for {folder}/ and "
        f"{root / name}.txt*); pass --corpus-name NAME or --corpus PATH"
    )


def corpus_settings(corpus: str, preset: Preset) -> dict[str, Any]:
    """Preparation settings of the corpus named ``corpus`` under ``preset``.

    PTB (``ptb*``) is already tokenised with a closed vocabulary: whitespace, min_count 1.
    """
    if corpus.startswith("ptb"):
        return {"tokenizer": "whitespace", "min_count": 1, "max_words": preset.ptb_max_words}
    return {"tokenizer": "regex", "min_count": preset.min_count, "max_words": preset.max_words}


_CORPORA: dict[tuple, Corpus] = {}


def load_lm_corpus(source: CorpusSource, config: RunConfig, progress: bool = True) -> Corpus:
    """The corpus of a run (memoised per process); checks it is long enough to score."""
    key = (source.path, config.max_words, config.min_count, config.tokenizer)
    if key not in _CORPORA:
        if source.synthetic:
            corpus = synthetic_corpus(config.max_words, seed=0, min_count=config.min_count)
        else:
            corpus = load_corpus(
                source.path,  # type: ignore[arg-type]
                min_count=config.min_count,
                max_words=config.max_words,
                tokenizer=config.tokenizer,
                progress=progress,
            )
        _CORPORA[key] = corpus
    corpus = _CORPORA[key]
    for part in ("train", "valid", "test"):
        if len(getattr(corpus, part)) <= config.first_target:
            raise CorpusError(
                f"the {part} part of {corpus.source} has {len(getattr(corpus, part))} words, "
                f"too few to score from position {config.first_target}; use a larger corpus "
                "or --max-words"
            )
    return corpus


def scored_targets(part_length: int, first_target: int = FIRST_TARGET) -> np.ndarray:
    """Positions whose word every model predicts: ``first_target .. part_length - 1``."""
    return np.arange(first_target, part_length, dtype=np.int64)


# --- scoring --------------------------------------------------------------------------------


def perplexity(model: Any, tokens: np.ndarray, config: RunConfig, batch_size: int = 1000) -> float:
    """``exp(mean NLL)`` of ``model`` over the scored targets of ``tokens`` (no weight decay)."""
    from thesis_repro.language_models import ScoreBatches

    targets = scored_targets(len(tokens), config.first_target)
    batches = ScoreBatches(tokens, targets, config.order, config.prefix, batch_size)
    nll = model.evaluate(batches, verbose=0, return_dict=True)["nll"]
    return float(math.exp(nll))


# --- one run --------------------------------------------------------------------------------


def build_model(config: RunConfig, vocab_size: int, jit_compile: bool = True) -> Any:
    """The compiled model of a run: thesis 2.2 network, SGD of thesis 3.2.2."""
    import keras

    from thesis_repro.language_models import language_model
    from thesis_repro.training import inverse_time_schedule

    variant = VARIANTS[config.variant]
    model = language_model(
        vocab_size,
        config.order,
        config.prefix,
        config.embedding_dim,
        config.hidden,
        config.weight_decay,
    )
    model.compile(
        optimizer=keras.optimizers.SGD(
            inverse_time_schedule(variant.eps0, variant.decay), momentum=variant.momentum
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[
            keras.metrics.SparseCategoricalCrossentropy(from_logits=True, name="nll")
        ],
        jit_compile=jit_compile,
    )
    return model


def record_path(config: RunConfig, results_dir: Path = RESULTS_DIR) -> Path:
    """``results/lm/<corpus>/<table>/<name>.json``; a config that differs from its preset's
    defaults (e.g. ``--epochs``) gets a short hash of the config appended to the name."""
    stem = config.name
    if config != preset_config(config):
        digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()
        stem += f"-{digest[:8]}"
    return Path(results_dir) / EXPERIMENT / config.corpus / config.table / f"{stem}.json"


def preset_config(config: RunConfig) -> RunConfig:
    """What ``config`` would be with its preset's defaults for every scale setting."""
    preset = PRESETS[config.preset]
    return replace(
        config,
        epochs=preset.epochs,
        batch_size=preset.batch_size,
        first_target=FIRST_TARGET,
        embedding_dim=100,
        hidden=200,
        weight_decay=1e-5,
        **corpus_settings(config.corpus, preset),
    )


def make_config(
    source: CorpusSource,
    preset: str,
    table: str = "runs",
    order: int = 5,
    prefix: int = 0,
    variant: str = "thesis",
    seed: int = 0,
    **overrides: Any,
) -> RunConfig:
    """A run's config from its preset, with optional overrides (``epochs=3``, ...)."""
    scale = PRESETS[preset]
    config = RunConfig(
        corpus=source.name,
        table=table,
        preset=preset,
        order=order,
        prefix=prefix,
        variant=variant,
        seed=seed,
        epochs=scale.epochs,
        batch_size=scale.batch_size,
        **corpus_settings(source.name, scale),
    )
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    check_config(config)
    return config


def run(
    config: RunConfig,
    source: CorpusSource,
    results_dir: Path = RESULTS_DIR,
    verbose: int = 1,
    jit_compile: bool | None = None,
    callbacks: Sequence[Any] = (),
) -> dict:
    """Train one configuration for ``config.epochs`` epochs (resuming); return its record.

    ``jit_compile``: XLA for the training and scoring steps (default: the preset's); it does
    not change the results beyond float rounding, so it is not part of the config.
    """
    import keras

    from thesis_repro.language_models import TrainBatches
    from thesis_repro.training import EpochCheckpoint, remove_checkpoints, resume, set_seed

    check_config(config)
    record = RunRecord(record_path(config, results_dir), asdict(config))
    try:
        record.start()
    except ValueError as e:
        raise LMError(str(e)) from None
    if record.finished:
        if verbose:
            print(f"[skip] {config.name}: finished ({record.path})", flush=True)
        return record.data
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
    set_seed(config.seed)
    model, done = resume(record, lambda: build_model(config, corpus.vocab_size, jit_compile))
    model.jit_compile = jit_compile  # a resumed model may come from a run with the other setting
    batches = TrainBatches(
        corpus.train,
        train_targets,
        config.order,
        config.prefix,
        config.batch_size,
        config.seed,
        done,
        config.epochs,
    )
    if verbose:
        where = f"resuming after epoch {done}" if done else "starting"
        print(
            f"[run] {config.name} ({config.model}, V = {corpus.vocab_size:,}, "
            f"{batches.steps_per_epoch} updates/epoch): {where} -> {record.path}",
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
            "valid_perplexity": perplexity(m, corpus.valid, config, config.batch_size),
        }

    if done < config.epochs:
        model.fit(
            batches,
            epochs=config.epochs,
            initial_epoch=done,
            steps_per_epoch=batches.steps_per_epoch,
            shuffle=False,  # TrainBatches shuffles, per epoch; Keras would mix epochs' batches
            callbacks=[timer, EpochCheckpoint(record, evaluate), *callbacks],
            verbose=verbose,
        )
    test = perplexity(model, corpus.test, config, config.batch_size)
    record.finish(**summarize(record.data["epochs"], test))
    remove_checkpoints(record)
    if verbose:
        print(f"[done] {config.name}: test perplexity {test:.2f}", flush=True)
    return record.data


def summarize(epochs: list[dict], test_perplexity: float | None = None) -> dict[str, Any]:
    """Final/best validation perplexity, test perplexity, median ms per update over epochs."""
    valid = [e["valid_perplexity"] for e in epochs]
    return {
        "epochs_run": len(epochs),
        "test_perplexity": test_perplexity,
        "final_valid_perplexity": valid[-1] if valid else None,
        "best_valid_perplexity": min(valid) if valid else None,
        "ms_per_step": float(np.median([e["ms_per_step"] for e in epochs])) if epochs else None,
    }


def table_runs(
    table: str, source: CorpusSource, preset: str, seeds: Sequence[int] = (), **overrides: Any
) -> list[RunConfig]:
    """Every run of a thesis table under a preset: each model x each seed (instance)."""
    spec = TABLES[table]
    return [
        make_config(source, preset, table, order, prefix, spec.variant, seed, **overrides)
        for seed in (seeds or PRESETS[preset].seeds)
        for order, prefix in spec.models
    ]


def run_grid(
    table: str,
    source: CorpusSource,
    preset: str = "cpu",
    results_dir: Path = RESULTS_DIR,
    seeds: Sequence[int] = (),
    verbose: int = 1,
    jit_compile: bool | None = None,
    **overrides: Any,
) -> list[dict]:
    """All runs of ``table`` (seed-major, so early stops still cover every model)."""
    configs = table_runs(table, source, preset, seeds, **overrides)
    records = []
    for index, config in enumerate(configs, 1):
        if verbose:
            print(f"=== {index}/{len(configs)} table {table}: {config.name}", flush=True)
        records.append(run(config, source, results_dir, verbose, jit_compile))
    return records


# --- outputs --------------------------------------------------------------------------------

_GROUP_IGNORES = ("order", "prefix", "seed")


def _groups(records: list[dict]) -> dict[str, list[dict]]:
    """Records of one table split by everything but model and seed (preset, overrides)."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        key = json.dumps({k: v for k, v in record["config"].items() if k not in _GROUP_IGNORES})
        groups.setdefault(key, []).append(record)
    return groups


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof = 1; None for a single value)."""
    array = np.asarray(values, dtype=float)
    return float(array.mean()), (float(array.std(ddof=1)) if len(array) > 1 else None)


def _fmt(mean: float, std: float | None) -> str:
    return f"{mean:.2f} ± {std:.2f}" if std is not None else f"{mean:.2f}"


def render_table(records: list[dict]) -> str:
    """Markdown: test perplexity (mean ± std over instances) beside the thesis's numbers."""
    lines: list[str] = []
    for group in _groups(records).values():
        config = group[0]["config"]
        spec = TABLES.get(config["table"])
        models = list(spec.models) if spec else []
        for r in group:
            shape = (r["config"]["order"], r["config"]["prefix"])
            if shape not in models:
                models.append(shape)
        vocab = {r.get("corpus", {}).get("vocab_size") for r in group} - {None}
        variant = VARIANTS[config["variant"]]
        title = spec.title if spec else "Single runs: test perplexity"
        lines += [
            f"### {title}",
            "",
            f"Corpus `{config['corpus']}` (max_words {config['max_words']:,}, min_count "
            f"{config['min_count']}, V = {', '.join(f'{v:,}' for v in sorted(vocab)) or '?'}), "
            f"preset `{config['preset']}`: {config['epochs']} epochs, batch "
            f"{config['batch_size']}, SGD eps0 = {variant.eps0:g}, decay {variant.decay:g}, "
            f"momentum {variant.momentum:g}, weight decay {config['weight_decay']:g}·||W||² on "
            f"W_mh, W_hl; targets from position {config['first_target']}. Std: sample std "
            "(ddof 1) over instances. Ratio: perplexity / the 5-gram's.",
            "",
            "| model | test perplexity (ours) | instances | valid (last epoch) | ratio (ours) "
            "| thesis | ratio (thesis) |",
            "|---|---|---|---|---|---|---|",
        ]
        finished = {
            shape: [
                r
                for r in group
                if r.get("finished") and (r["config"]["order"], r["config"]["prefix"]) == shape
            ]
            for shape in models
        }
        base = finished.get((5, 0))
        base_mean = _mean_std([r["summary"]["test_perplexity"] for r in base])[0] if base else None
        paper = spec.paper if spec else {}
        for shape in models:
            label = f"{shape[0]}-gram" + (f" + {shape[1]}" if shape[1] else "")
            done = finished[shape]
            started = [r for r in group if (r["config"]["order"], r["config"]["prefix"]) == shape]
            if done:
                mean, std = _mean_std([r["summary"]["test_perplexity"] for r in done])
                ours = _fmt(mean, std)
                valid = _fmt(*_mean_std([r["summary"]["final_valid_perplexity"] for r in done]))
                ratio = f"{mean / base_mean:.3f}" if base_mean else "–"
            else:
                ours, valid, ratio = "–", "–", "–"
            running = len(started) - len(done)
            count = f"{len(done)}" + (f" (+{running} unfinished)" if running else "")
            if shape in paper:
                p_mean, p_std = paper[shape]
                thesis = f"{p_mean:.2f} ± {p_std:.2f}"
                p_ratio = f"{p_mean / paper[(5, 0)][0]:.3f}" if (5, 0) in paper else "–"
            else:
                thesis, p_ratio = "–", "–"
            lines.append(
                f"| {label} | {ours} | {count} | {valid} | {ratio} | {thesis} | {p_ratio} |"
            )
        commands = sorted({r["command"] for r in group})
        lines += [
            "",
            "Produced by: "
            + "; ".join(f"`{c}`" for c in commands[:2])
            + (f" (and {len(commands) - 2} more)" if len(commands) > 2 else ""),
            "",
        ]
    return "\n".join(lines)


def render_figure(records: list[dict], path: Path, title: str) -> Path | None:
    """Validation perplexity after each epoch: mean per model, min-max band over instances."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_model: dict[tuple[int, int], list[dict]] = {}
    for r in records:
        if r["epochs"]:
            by_model.setdefault((r["config"]["order"], r["config"]["prefix"]), []).append(r)
    if not by_model:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for index, (shape, runs) in enumerate(sorted(by_model.items())):
        color = f"C{index}"
        length = max(len(r["epochs"]) for r in runs)
        curves = np.full((len(runs), length), np.nan)
        for row, r in enumerate(runs):
            values = [e["valid_perplexity"] for e in r["epochs"]]
            curves[row, : len(values)] = values
        epochs = np.arange(1, length + 1)
        label = f"{shape[0]}-gram" + (f" + {shape[1]}" if shape[1] else "")
        mean = np.nanmean(curves, 0)
        ax.plot(epochs, mean, "o-", color=color, ms=3, label=f"{label} ({len(runs)} runs)")
        if len(runs) > 1:
            low, high = np.nanmin(curves, 0), np.nanmax(curves, 0)
            ax.fill_between(epochs, low, high, color=color, alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def report(results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR) -> str:
    """For every ``results/lm/<corpus>/<table>/``: ``table.md`` and its figure PDF(s)."""
    root = Path(results_dir) / EXPERIMENT
    parts = []
    for folder in sorted(p for p in root.glob("*/*") if p.is_dir()):
        records = load_records(folder)
        if not records:
            continue
        corpus, table = folder.parent.name, folder.name
        text = render_table(records)
        (folder / "table.md").write_text(text)
        parts.append(text)
        spec = TABLES.get(table)
        for key, group in _groups(records).items():
            config = RunConfig(**group[0]["config"])
            if spec and spec.figure != table:
                name, what = f"lm_fig{spec.figure}", f"Figure {spec.figure}"
            else:
                name, what = f"lm_{table}", f"{table}: {config.variant}"
            name += f"_{corpus}_{config.preset}" + ("" if spec else f"_{config.variant}")
            if config != preset_config(config):  # overrides: keep apart from the preset's
                name += "_" + hashlib.sha256(key.encode()).hexdigest()[:8]
            title = f"{what} ({corpus}, preset {config.preset}): validation perplexity"
            render_figure(group, Path(figures_dir) / f"{name}.pdf", title)
    return "\n".join(parts) if parts else f"no records under {root}\n"


# --- command line ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``error: ...``, exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _add_common(parser: argparse.ArgumentParser, grid: bool) -> None:
    parser.add_argument(
        "--corpus",
        metavar="PATH",
        help="corpus text file (.txt/.xz/.gz/.bz2) or folder with train/valid/test files",
    )
    parser.add_argument(
        "--corpus-name",
        metavar="NAME",
        help=f"corpus inside ${DATA_ENV} when --corpus is not given (default: "
        + ("the table's: eltec-pol, or ptb for --table ptb)" if grid else "eltec-pol)"),
    )
    parser.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="cpu" if grid else "paper",
        help="scale: corpus size, vocabulary, epochs, instances (default: %(default)s; see "
        "the list below)",
    )
    parser.add_argument("--epochs", type=int, help="override the preset's number of epochs")
    parser.add_argument(
        "--max-words", type=int, help="override the preset's corpus size (tokens before split)"
    )
    parser.add_argument(
        "--min-count", type=int, help="override the vocabulary threshold (words seen >= N times)"
    )
    parser.add_argument("--batch-size", type=int, help="override the minibatch size (thesis: 1000)")
    parser.add_argument(
        "--first-target",
        type=int,
        help=f"first scored position of each part (default {FIRST_TARGET}: the 10-gram's); "
        "keep it equal for models you compare",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR,
        help="directory for JSON records and checkpoints (default: %(default)s)",
    )
    parser.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile training and scoring with XLA (default: the preset's; on except smoke)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras progress: 1 = live bar with the loss (default), 2 = a line per epoch, "
        "0 = silent",
    )


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, 96, initial_indent=indent, subsequent_indent=indent + "    ")


def _presets_epilog() -> str:
    return "presets:\n" + "\n".join(
        _wrap(f"{k}: {p.description}", "  ") for k, p in PRESETS.items()
    )


def train_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m thesis_repro.lm",
        description=_wrap(
            "Train one language model of thesis 3.2 (Bengio n-gram LM, or with an "
            "attention-compressed prefix). Other commands: `python -m thesis_repro.lm grid "
            "--help` (Tables 3.1/3.2, PTB), `python -m thesis_repro.lm report --help`."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_presets_epilog()
        + "\n\n"
        + _wrap(
            f"corpus: --corpus PATH, else ${DATA_ENV}/<--corpus-name>, else the synthetic "
            "corpus (announced on the first line of output)."
        ),
    )
    parser.add_argument(
        "--order", type=int, default=5, help="n of the n-gram window: sees n-1 words (default 5)"
    )
    parser.add_argument(
        "--prefix",
        type=int,
        default=0,
        help="words before the window compressed by attention (0 = plain Bengio model; "
        "thesis: 2 or 5)",
    )
    parser.add_argument(
        "--variant",
        choices=tuple(VARIANTS),
        default="thesis",
        help="optimiser: thesis = SGD eps0 0.2, decay 1e-8 (Table 3.1); momentum = momentum "
        "0.85, eps0 0.15, decay 1e-5 (Table 3.2)",
    )
    parser.add_argument("--seed", type=int, default=0, help="instance: weights and data order")
    _add_common(parser, grid=False)
    return parser


def grid_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m thesis_repro.lm grid",
        description=_wrap(
            "Run every model x instance of a thesis table (finished runs are skipped, "
            "interrupted ones resumed), then render tables and figures."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="tables:\n"
        + "\n".join(f"  {k}: {t.title}" for k, t in TABLES.items())
        + "\n\n"
        + _presets_epilog(),
    )
    parser.add_argument(
        "--table", choices=tuple(TABLES), default="3.1", help="model set (default: %(default)s)"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="instances to run (default: the preset's)"
    )
    parser.add_argument(
        "--figures",
        type=Path,
        default=FIGURES_DIR,
        help="directory for figure PDFs (default: %(default)s)",
    )
    parser.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    _add_common(parser, grid=True)
    return parser


def report_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m thesis_repro.lm report",
        description="Render results/lm/<corpus>/<table>/table.md and the figures (validation "
        "perplexity per epoch) from the JSON records.",
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help="records (default: %(default)s)"
    )
    parser.add_argument(
        "--figures", type=Path, default=FIGURES_DIR, help="figure PDFs (default: %(default)s)"
    )
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "epochs": args.epochs,
        "max_words": args.max_words,
        "min_count": args.min_count,
        "batch_size": args.batch_size,
        "first_target": args.first_target,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; errors end with one ``error: ...`` line and exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in ("train", "grid", "report") else "train"
    if argv and argv[0] == command:
        argv = argv[1:]
    parser = {"train": train_parser, "grid": grid_parser, "report": report_parser}[command]()
    args = parser.parse_args(argv)
    started = time.time()
    try:
        if command == "report":
            print(report(args.results, args.figures))
            return 0
        default_name = TABLES[args.table].corpus_name if command == "grid" else None
        source = resolve_corpus(
            args.corpus, args.corpus_name or default_name, os.environ.get(DATA_ENV)
        )
        if command == "train":
            configs = [
                make_config(
                    source,
                    args.preset,
                    "runs",
                    args.order,
                    args.prefix,
                    args.variant,
                    args.seed,
                    **_overrides(args),
                )
            ]
        else:
            configs = table_runs(args.table, source, args.preset, args.seeds, **_overrides(args))
        if source.synthetic:
            print(SYNTHETIC_NOTICE, flush=True)
        for config in {(c.max_words, c.min_count, c.tokenizer): c for c in configs}.values():
            load_lm_corpus(source, config, progress=bool(args.verbose))  # errors before training
        for index, config in enumerate(configs, 1):
            if command == "grid" and args.verbose:
                print(f"=== {index}/{len(configs)} table {args.table}: {config.name}", flush=True)
            record = run(config, source, args.results, args.verbose, args.jit)
            if command == "train":
                print(f"{config.name}: {json.dumps(record['summary'])}")
        if command == "grid" and not args.no_report:
            print(report(args.results, args.figures))
    except (CorpusError, LMError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
