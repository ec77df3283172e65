"""Thesis 3.2: feed-forward n-gram language models with and without an attention-compressed prefix.

    python -m thesis_repro.lm --prefix 5                      # one model (5-gram + 5-word prefix)
    python -m thesis_repro.lm grid --table 3.1 --preset cpu   # Table 3.1 / Figure 3.4, resumable
    python -m thesis_repro.lm grid --table 3.2 --preset cpu   # Table 3.2 / Figure 3.5 (momentum)
    python -m thesis_repro.lm grid --table ptb --preset cpu   # PTB: 5-gram vs 5-gram + 5
    python -m thesis_repro.lm report                          # tables and figures from records

Future work of thesis 4.2 (same corpus and preset as Table 3.1 or the PTB table, whose runs they
reuse):

    python -m thesis_repro.lm grid --table future-prefix --preset cpu    # train x eval prefix
    python -m thesis_repro.lm grid --table future-position --preset cpu  # distance-aware attention
    python -m thesis_repro.lm grid --table future-prefix-ptb --preset cpu    # the same on PTB
    python -m thesis_repro.lm grid --table future-position-ptb --preset cpu  # (reuse PTB runs)
    python -m thesis_repro.lm --prefix 5 --eval-prefix 10 20 sentence   # one run, more evals
    python -m thesis_repro.lm evaluate                 # fill in missing eval-prefix scores
    python -m thesis_repro.lm show-attention --checkpoint RUN.json [RUN2.json] --sentence "..."
    python -m thesis_repro.lm examples --preset cpu    # thesis 3.2.4 figures from finished runs

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
- Thesis 4.2, prefix-length generalisation: a finished attention model is scored on the test
  part again with other prefix lengths (``--eval-prefix 10 20 50``; the same weights, the prefix
  input takes any length) or with the history back to the previous ``<eos>``
  (``--eval-prefix sentence``: in eltec-pol a line is a paragraph, ~37 tokens on average, and
  under the cpu preset a test target's history averages ~44 words; at most ``HISTORY_CAP`` =
  200 words; a corpus without ``<eos>``, like the synthetic one, gives the last 200 words).
  ``--min-prefix K`` trains with a prefix length drawn uniformly in ``K..--prefix`` for every
  minibatch (padded to ``--prefix`` and masked). Scores go to
  ``summary.eval_prefix`` of the run's record (``{"10": ppl, "sentence": ppl}``), with the mean
  number of prefix words actually seen in ``summary.eval_prefix_words``.
- Thesis 4.2, position awareness: ``--position-aware bias`` adds a learned per-distance bias to
  the attention energies (the primary method), ``embedding`` a learned distance embedding to the
  prefix words' h_i (``language_models.PrefixAttentionPooling`` says why).

Tables and figures are rendered from the records by ``thesis_repro.lm_tables``.

Every run writes ``results/lm/<corpus>/<table>/<run>.json`` after each epoch and a ``.keras``
checkpoint beside it; an interrupted run (even ``kill -9``) continues from its last checkpoint
when the same command is run again, and finished runs are skipped. A finished run keeps its
final model, ``checkpoints/<run>-final.keras``, so it can be scored again later (``evaluate``,
``show-attention``); the per-epoch checkpoints are deleted. A run whose training loss becomes NaN
or infinite stops there and is recorded as failed (``training.FailOnNonFiniteLoss``: one
``error:`` line, exit status 1); the tables and figures leave it out and name it.
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

from thesis_repro.cli import MAX_SEED, Parser, interrupted, positive_int, seed_int
from thesis_repro.corpus import Corpus, CorpusError, load_corpus, synthetic_corpus
from thesis_repro.files import write_json_atomic
from thesis_repro.records import (
    CorruptRecord,
    RunBusy,
    RunFailed,
    RunRecord,
    command_line,
    compute_device,
    grid_failures,
    load_record,
)
from thesis_repro.runner import add_data_parallel_option, add_jobs_option, run_jobs, walk_grid
from thesis_repro.settings import DATA_ENV, FIGURES_DIR, RESULTS_DIR, RUNS_DIR

EXPERIMENT = "lm"
FIRST_TARGET = 9  # first scored position of each part: the 10-gram's (and 5-gram + 5's) context
DEFAULT_CORPUS_NAME = "eltec-pol"
SYNTHETIC = "synthetic"
HISTORY_CAP = 200  # most prefix words of a "sentence" evaluation (thesis 4.2)
SENTENCE = "sentence"  # eval prefix: back to the previous <eos>, at most HISTORY_CAP words
EVAL_PREFIXES: tuple[int | str, ...] = (2, 5, 10, 20, 50, SENTENCE)  # thesis 4.2 columns
POSITION_AWARE = ("none", "bias", "embedding")  # as language_models.POSITION_AWARE
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
class Regime:
    """One row of a future-work table (thesis 4.2): a model and how it is trained.

    ``table`` is where its records live: ``"3.1"`` reuses the Table 3.1 runs (same config).
    ``min_prefix > 0``: prefix length uniform in ``min_prefix .. prefix`` per minibatch.
    """

    order: int
    prefix: int = 0
    min_prefix: int = 0
    position_aware: str = "none"
    table: str = "3.1"

    @property
    def key(self) -> tuple[int, int, int, str]:
        return (self.order, self.prefix, self.min_prefix, self.position_aware)


@dataclass(frozen=True)
class FutureTable:
    """A thesis 4.2 experiment: regimes scored at several eval prefixes (``EVAL_PREFIXES``)."""

    title: str
    regimes: tuple[Regime, ...]
    runtime: str  # of the cpu preset on this machine, beyond the Table 3.1 runs it reuses
    variant: str = "thesis"
    eval_prefixes: tuple[int | str, ...] = EVAL_PREFIXES
    corpus_name: str = DEFAULT_CORPUS_NAME


_REFERENCES = (Regime(5), Regime(10))  # n-gram rows of Table 3.1, for reference
FUTURE_TABLES: dict[str, FutureTable] = {
    "future-prefix": FutureTable(
        "Thesis 4.2, prefix-length generalisation: test perplexity by training prefix (rows) "
        "and evaluation prefix (columns)",
        (
            *_REFERENCES,
            Regime(5, 2),
            Regime(5, 5),
            Regime(5, 20, table="future-prefix"),
            Regime(5, 20, min_prefix=1, table="future-prefix"),
        ),
        runtime="cpu: 6 new runs (5-gram + 20, 5-gram + 1..20; 3 seeds) of ~7 min, plus "
        "~1 min of evaluations per attention run (12 with Table 3.1's): ~1 h when Table "
        "3.1 is done (else it trains the 12 Table 3.1 runs first: +1.2 h)",
    ),
    "future-position": FutureTable(
        "Thesis 4.2, position-aware attention: test perplexity by model (rows) and evaluation "
        "prefix (columns)",
        (
            *_REFERENCES,
            Regime(5, 5),
            Regime(5, 5, position_aware="bias", table="future-position"),
            Regime(5, 5, position_aware="embedding", table="future-position"),
            Regime(5, 20, min_prefix=1, table="future-prefix"),
            Regime(5, 20, min_prefix=1, position_aware="bias", table="future-position"),
            Regime(5, 20, min_prefix=1, position_aware="embedding", table="future-position"),
        ),
        runtime="cpu: 12 new runs (5-gram + 5 and 5-gram + 1..20, each with distance bias and "
        "with distance embedding; 3 seeds) of ~7 min, evaluations included: ~1.5 h when "
        "Table 3.1 and future-prefix are done (else +25 min for the plain 5-gram + 1..20, "
        "+1.2 h for Table 3.1)",
    ),
    "future-prefix-ptb": FutureTable(
        "Thesis 4.2 on PTB, prefix-length generalisation: test perplexity by training prefix "
        "(rows) and evaluation prefix (columns); momentum variant, as the PTB table",
        (
            Regime(5, table="ptb"),
            Regime(5, 5, table="ptb"),
            Regime(5, 20, min_prefix=1, table="future-prefix-ptb"),
        ),
        runtime="cpu: 3 new runs (5-gram + 1..20 on PTB; 3 seeds) of ~10 min plus ~1 min of "
        "evaluations per attention run (6 with the PTB table's): ~40 min when the PTB table "
        "is done",
        variant="momentum",
        corpus_name="ptb",
    ),
    "future-position-ptb": FutureTable(
        "Thesis 4.2 on PTB, position-aware attention: test perplexity by model (rows) and "
        "evaluation prefix (columns); momentum variant, as the PTB table",
        (
            Regime(5, table="ptb"),
            Regime(5, 5, table="ptb"),
            Regime(5, 5, position_aware="bias", table="future-position-ptb"),
            Regime(5, 5, position_aware="embedding", table="future-position-ptb"),
        ),
        runtime="cpu: 6 new runs (5-gram + 5 with distance bias and with distance embedding "
        "on PTB; 3 seeds) of ~10 min, evaluations included: ~1 h when the PTB table is done",
        variant="momentum",
        corpus_name="ptb",
    ),
}


def table_corpus_name(table: str) -> str:
    """The corpus a table (thesis table or future-work table) is trained on by default."""
    return {**TABLES, **FUTURE_TABLES}[table].corpus_name


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
            "of 37,373), 6 epochs (5,142 updates; the thesis: 25 epochs of 6,000), 3 instances "
            "(thesis: 5). The softmax dominates, so an update costs ~6 x B x H x V FLOP and a "
            "run grows with words x epochs x V. benchmarks/bench_lm.py, idle machine: 59-60 ms "
            "per update at V = 7,251, 75-76 ms at V = 10,000; so ~6 min per run and Table 3.1 "
            "(12 runs) ~1.2 h, Table 3.2 (9 runs) ~55 min, PTB (all of it: V = 10,000, 930k "
            "train words; 6 runs) ~1 h; thesis 4.2 tables (same corpus settings, so they reuse "
            "the Table 3.1 and PTB runs; 20-word prefixes cost ~10% more): future-prefix ~1 h, "
            "future-position ~1.5 h, future-prefix-ptb ~40 min, future-position-ptb ~1 h. A "
            "second training on the same "
            "2 cores doubles or triples these times. "
            "On a GPU: minutes per table. Measured (README): the thesis's ordering (5-gram worst, "
            "5-gram + 5 best), with gaps of 0.4-2.3% instead of its 10-17%, and other absolute "
            "perplexities (other corpus, V, training length)"
        ),
        epochs=6,
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

    ``table`` is ``3.1``, ``3.2``, ``ptb``, ``future-prefix``, ``future-position`` or ``runs``
    (single runs from the command line). ``min_prefix`` and ``position_aware`` (thesis 4.2)
    came later: ``as_dict`` leaves them out at their defaults, so the records of earlier runs
    keep matching their configs.
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
    min_prefix: int = 0
    position_aware: str = "none"
    dtype_policy: str = "float32"

    def as_dict(self) -> dict[str, Any]:
        """The config as stored in records: ``asdict`` without later fields at their defaults."""
        values = asdict(self)
        for field, default in _LATER_FIELDS.items():
            if values[field] == default:
                del values[field]
        return values

    @property
    def model(self) -> str:
        """Thesis label: ``5-gram``, ``10-gram``, ``5-gram + 5``; thesis 4.2: ``5-gram + 1..20``,
        ``5-gram + 5, distance bias``."""
        return model_label(self.order, self.prefix, self.min_prefix, self.position_aware)

    @property
    def name(self) -> str:
        model = f"{self.order}gram" + (f"+{self.prefix}" if self.prefix else "")
        if self.min_prefix:
            model = f"{self.order}gram+{self.min_prefix}-{self.prefix}"
        if self.position_aware != "none":
            model += "-pos" + {"bias": "bias", "embedding": "emb"}[self.position_aware]
        precision = "" if self.dtype_policy == "float32" else f"-{self.dtype_policy}"
        return f"{self.preset}-{model}-{self.variant}{precision}-seed{self.seed}"


_LATER_FIELDS: dict[str, Any] = {
    "min_prefix": 0,
    "position_aware": "none",
    "dtype_policy": "float32",
}
#: Keras dtype policies a run may use (``--dtype-policy``): float32 everywhere, or mixed
#: precision (bfloat16 / float16 compute, float32 weights; the loss and softmax stay float32).
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def model_label(
    order: int, prefix: int = 0, min_prefix: int = 0, position_aware: str = "none"
) -> str:
    """``5-gram``, ``5-gram + 5``, ``5-gram + 1..20``, ``5-gram + 5, distance bias``."""
    label = f"{order}-gram"
    if prefix:
        label += f" + {min_prefix}..{prefix}" if min_prefix else f" + {prefix}"
    if position_aware != "none":
        label += f", distance {position_aware}"
    return label


class LMError(ValueError):
    """Bad input to the experiment (printed as ``error: ...`` by the command line)."""


def check_config(config: RunConfig) -> None:
    """Reject impossible settings with a message that says what to do."""
    if config.order < 2:
        raise LMError(f"--order must be at least 2 (an n-gram sees n-1 words), got {config.order}")
    if config.prefix < 0:
        raise LMError(f"--prefix must be 0 (no attention) or more words, got {config.prefix}")
    if config.min_prefix and config.prefix < 2:
        raise LMError(f"--min-prefix needs --prefix 2 or more, got --prefix {config.prefix}")
    if config.min_prefix and not 1 <= config.min_prefix < config.prefix:
        raise LMError(
            f"--min-prefix must lie in 1..{config.prefix - 1} (below --prefix "
            f"{config.prefix}), got {config.min_prefix}"
        )
    if config.position_aware not in POSITION_AWARE:
        raise LMError(
            f"--position-aware must be one of {', '.join(POSITION_AWARE)}, got "
            f"{config.position_aware!r}"
        )
    if config.position_aware != "none" and not config.prefix:
        raise LMError("--position-aware needs an attention model: pass --prefix 1 or more")
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
    if not 0 <= config.seed <= MAX_SEED:
        raise LMError(f"--seed must lie in 0..{MAX_SEED}, got {config.seed}")


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
    the inputs, and so the perplexity, of ``eval_prefix=None``.
    """
    from thesis_repro.language_models import ScoreBatches

    targets = scored_targets(len(tokens), config.first_target)
    prefix, starts = _eval_inputs(tokens, config, eval_prefix, boundary)
    batches = ScoreBatches(tokens, targets, config.order, prefix, batch_size, starts)
    nll = model.evaluate(batches, verbose=0, return_dict=True)["nll"]
    return float(math.exp(nll))


def _eval_inputs(
    tokens: np.ndarray, config: RunConfig, eval_prefix: int | str | None, boundary: int | None
) -> tuple[int, np.ndarray | None]:
    """Prefix width and ``starts`` (``window_inputs``) of an evaluation prefix."""
    from thesis_repro.language_models import sentence_starts

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
    targets = scored_targets(len(tokens), config.first_target)
    prefix, starts = _eval_inputs(tokens, config, eval_prefix, boundary)
    nearest = targets - config.order  # position of the first prefix word
    first = starts[np.maximum(nearest, 0)] if starts is not None else np.zeros_like(nearest)
    return float(np.clip(nearest - first + 1, 0, prefix).mean())


def parse_eval_prefix(text: str | int) -> int | str:
    """``"20"`` -> 20, ``"sentence"`` -> ``"sentence"``; anything else is an error."""
    if isinstance(text, int) or str(text).isdigit():
        if int(text) < 1:
            raise LMError(f"an eval prefix must be at least 1 word, got {text}")
        return int(text)
    if text == SENTENCE:
        return SENTENCE
    raise LMError(f"--eval-prefix takes word counts or {SENTENCE!r}, got {text!r}")


def _eval_order(key: str) -> tuple[int, int]:
    return (1, 0) if key == SENTENCE else (0, int(key))


def eval_prefix_scores(
    model: Any,
    corpus: Corpus,
    config: RunConfig,
    eval_prefixes: Sequence[int | str],
    verbose: int = 0,
) -> tuple[dict[str, float], dict[str, float]]:
    """Test perplexity and mean prefix words for each eval prefix (thesis 4.2), same weights."""
    from thesis_repro.corpus import EOS

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


# --- one run --------------------------------------------------------------------------------


def build_model(config: RunConfig, vocab_size: int, jit_compile: bool = True) -> Any:
    """The compiled model of a run: thesis 2.2 network, SGD of thesis 3.2.2; its layers use
    ``config.dtype_policy`` (Keras computes the loss in float32 whatever the logits' dtype, and
    wraps the optimizer in loss scaling for ``mixed_float16``)."""
    import keras

    from thesis_repro.language_models import language_model
    from thesis_repro.training import inverse_time_schedule

    variant = VARIANTS[config.variant]
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(config.dtype_policy)  # the layers take it when built
    try:
        model = language_model(
            vocab_size,
            config.order,
            config.prefix,
            config.embedding_dim,
            config.hidden,
            config.weight_decay,
            position_aware=config.position_aware,
        )
    finally:
        keras.config.set_dtype_policy(previous)
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
        digest = hashlib.sha256(json.dumps(config.as_dict(), sort_keys=True).encode()).hexdigest()
        stem += f"-{digest[:8]}"
    return Path(results_dir) / EXPERIMENT / config.corpus / config.table / f"{stem}.json"


def final_model_path(record_file: Path) -> Path:
    """Where a finished run keeps its final model: ``checkpoints/<run>-final.keras``."""
    return record_file.parent / "checkpoints" / f"{record_file.stem}-final.keras"


def record_file_of(path: str | os.PathLike) -> Path:
    """The record of a run from its record, final model or epoch checkpoint path."""
    path = Path(path)
    if path.suffix == ".json":
        return path
    stem = path.name.removesuffix(".keras")
    for marker in ("-final", "-epoch"):
        if marker in stem:
            stem = stem[: stem.rindex(marker)]
            break
    folder = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return folder / f"{stem}.json"


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
    eval_prefixes: Sequence[int | str] = (),
) -> dict:
    """Train one configuration for ``config.epochs`` epochs (resuming); return its record.

    ``jit_compile``: XLA for the training and scoring steps (default: the preset's); it does
    not change the results beyond float rounding, so it is not part of the config.
    ``eval_prefixes`` (thesis 4.2, attention models): after training, also score the test part
    with these prefixes (``summary.eval_prefix``); a finished run gets the missing ones from
    its final model. Raises ``RunFailed`` when the training loss becomes NaN or infinite (the
    record says so: ``records``), or when the run failed before.
    """
    import keras

    from thesis_repro.language_models import TrainBatches
    from thesis_repro.training import (
        EpochCheckpoint,
        FailOnNonFiniteLoss,
        MidEpochCheckpoint,
        RestoreMetrics,
        distribution_summary,
        raise_if_failed,
        remove_checkpoints,
        resume,
        resume_partial,
        save_model_atomic,
        set_seed,
    )

    check_config(config)
    eval_prefixes = [parse_eval_prefix(e) for e in eval_prefixes] if config.prefix else []
    record = RunRecord(record_path(config, results_dir), config.as_dict())
    try:
        record.start()
    except ValueError as e:
        raise LMError(str(e)) from None
    record.data["hardware"]["dtype_policy"] = config.dtype_policy  # the model's, not the global
    if record.finished:
        if _missing_evals(record.data, eval_prefixes):
            return evaluate_run(record.path, source, eval_prefixes, verbose, jit_compile)
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
    record.data["hardware"].update(distribution_summary())
    set_seed(config.seed)
    model, done = resume(record, lambda: build_model(config, corpus.vocab_size, jit_compile))
    first_step, metric_state = 0, None
    partial = resume_partial(record, done) if done < config.epochs else None
    if partial is not None:  # a mid-epoch checkpoint of epoch done + 1
        model, first_step, metric_state = partial
    model.jit_compile = jit_compile  # a resumed model may come from a run with the other setting

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
            "valid_perplexity": perplexity(m, corpus.valid, config, config.batch_size),
        }

    def train(data: TrainBatches) -> None:
        """``fit`` over ``data``'s epochs; a ``data.first_step`` > 0 makes its one epoch the
        rest of an interrupted epoch."""
        first_step = data.first_step
        model.fit(
            data,
            epochs=data.epochs,
            initial_epoch=data.first_epoch,
            steps_per_epoch=data.steps_per_epoch - first_step,
            shuffle=False,  # TrainBatches shuffles, per epoch; Keras would mix epochs' batches
            callbacks=[
                timer,
                RestoreMetrics(metric_state) if first_step else keras.callbacks.Callback(),
                FailOnNonFiniteLoss(record, batches.steps_per_epoch, first_step=first_step),
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
    test = perplexity(model, corpus.test, config, config.batch_size)
    save_model_atomic(model, final_model_path(record.path))
    summary = summarize(record.data["epochs"], test) | _distance_summary(model)
    if eval_prefixes:
        scores, words = eval_prefix_scores(model, corpus, config, eval_prefixes, verbose)
        summary |= {"eval_prefix": _sorted_evals(scores), "eval_prefix_words": _sorted_evals(words)}
    record.finish(**summary)
    remove_checkpoints(record)
    if verbose:
        print(f"[done] {config.name}: test perplexity {test:.2f}", flush=True)
    return record.data


def estimate_update_seconds(config: RunConfig, vocab_size: int) -> float:
    """Rough seconds per update on this machine: the update's matmul FLOP (the softmax layer
    dominates: ~6 x B x H x V) over a float32 matmul timed now with NumPy, x 1.5 for the rest;
    measured ratio to real updates on a CPU ~1-2 (benchmarks/bench_lm.py). An accelerator is
    taken to be 50x faster (measured on an H100: 1.25 ms per paper update when shared); on a
    CPU ~20 ms of per-update overhead is added (it dominates at small V)."""
    width = (config.order - 1 + (1 if config.prefix else 0)) * config.embedding_dim
    flop = 6 * config.batch_size * config.hidden * (vocab_size + width)
    if compute_device()["device"] != "cpu":
        return 1.5 * flop / 50 / _matmul_flops()
    return 0.02 + 1.5 * flop / _matmul_flops()  # + ~20 ms of per-update overhead (small V)


def _matmul_flops(n: int = 512) -> float:
    """FLOP/s of an n x n float32 NumPy matmul on this machine (best of 3)."""
    a = np.ones((n, n), np.float32)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / max(best, 1e-9)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{max(seconds, 60) / 60:.0f} min"


def _sorted_evals(scores: dict[str, float]) -> dict[str, float]:
    return {k: scores[k] for k in sorted(scores, key=_eval_order)}


def _distance_summary(model: Any) -> dict[str, Any]:
    """The learned per-distance attention bias beta_j of a ``bias`` model (thesis 4.2)."""
    try:
        attention = model.get_layer("attention")
    except ValueError:
        return {}
    if getattr(attention, "position_aware", "none") != "bias":
        return {}
    return {"distance_bias": [float(b) for b in np.asarray(attention.distance_bias)]}


def _missing_evals(record: dict, eval_prefixes: Sequence[int | str]) -> list[int | str]:
    done = record.get("summary", {}).get("eval_prefix", {})
    return [e for e in eval_prefixes if str(e) not in done]


def record_source(record: dict, data_dir: str | None = None) -> CorpusSource:
    """The corpus a finished run was trained on: its recorded source path, else the corpus of
    that name in ``data_dir`` (``$THESIS_REPRO_DATA``), else (``synthetic``) the built-in one."""
    name = record["config"]["corpus"]
    if name == SYNTHETIC:
        return CorpusSource(SYNTHETIC, None)
    recorded = Path(record.get("corpus", {}).get("source", ""))
    if str(recorded) and recorded.exists():
        return CorpusSource(name, recorded)
    source = resolve_corpus(None, name, data_dir or os.environ.get(DATA_ENV))
    if source.synthetic:
        raise CorpusError(
            f"the corpus {name!r} of {record.get('path', 'a record')} is not at "
            f"{recorded}; set {DATA_ENV} to the folder that holds it"
        )
    return source


def load_run_model(path: str | os.PathLike, jit_compile: bool | None = None) -> Any:
    """The final model of a finished run (record, final model or checkpoint path), compiled as
    for training, ready for ``perplexity`` or ``language_models.prefix_attention``.

    A model saved before the prefix input took any length (a fixed ``(batch, p)`` input) is
    rebuilt from the run's record with the same weights, so it takes other prefixes too.
    """
    import keras

    import thesis_repro.language_models  # noqa: F401  (registers the model's layers)

    path = Path(path)
    model_file = path if path.suffix == ".keras" else final_model_path(path)
    if not model_file.exists():
        raise LMError(
            f"no model at {model_file}: runs finished before final models were kept cannot "
            "be scored again; delete the record to train the run again"
        )
    model = keras.saving.load_model(model_file)
    widths = [t.shape[1] for t in model.inputs if t.name.split(":")[0] == "prefix"]
    record = load_record(record_file_of(path))
    if widths and widths[0] is not None and record is not None:
        fresh = build_model(
            RunConfig(**record["config"]), record["corpus"]["vocab_size"], model.jit_compile
        )
        for layer in model.layers:
            if layer.weights:
                fresh.get_layer(layer.name).set_weights(layer.get_weights())
        model = fresh
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
    missing = _missing_evals(record, [parse_eval_prefix(e) for e in eval_prefixes])
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
        jit_compile = record.get("jit_compile", PRESETS[config.preset].jit_compile)
    model = load_run_model(path, jit_compile)
    scores, words = eval_prefix_scores(model, corpus, config, missing, verbose)
    summary = record["summary"]
    summary["eval_prefix"] = _sorted_evals({**summary.get("eval_prefix", {}), **scores})
    summary["eval_prefix_words"] = _sorted_evals({**summary.get("eval_prefix_words", {}), **words})
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
    for path in sorted((Path(results_dir) / EXPERIMENT).glob("*/*/*.json")):
        if tables and path.parent.name not in tables:
            continue
        record = load_record(path)
        if record is not None and "config" in record:
            records.append(evaluate_run(path, None, eval_prefixes, verbose, jit_compile))
    return records


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
    """Every run of a thesis table under a preset: each model x each seed (instance).

    A future-work table (thesis 4.2) lists its regimes' runs; those of Table 3.1 are the Table
    3.1 runs themselves (same config, same record), so they are trained only once.
    """
    if table in FUTURE_TABLES:
        future = FUTURE_TABLES[table]
        return [
            make_config(
                source,
                preset,
                regime.table,
                regime.order,
                regime.prefix,
                future.variant,
                seed,
                min_prefix=regime.min_prefix or None,
                position_aware=regime.position_aware,
                **overrides,
            )
            for seed in (seeds or PRESETS[preset].seeds)
            for regime in future.regimes
        ]
    spec = TABLES[table]
    return [
        make_config(source, preset, table, order, prefix, spec.variant, seed, **overrides)
        for seed in (seeds or PRESETS[preset].seeds)
        for order, prefix in spec.models
    ]


def table_eval_prefixes(table: str) -> tuple[int | str, ...]:
    """The eval prefixes a table's attention runs are scored with (none for Tables 3.x)."""
    return FUTURE_TABLES[table].eval_prefixes if table in FUTURE_TABLES else ()


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


def show_attention(
    paths: Sequence[str | os.PathLike],
    sentence: str,
    out: str | os.PathLike,
    prefix: int | None = None,
) -> Path:
    """Thesis 3.2.4 attention examples of ``sentence`` for the runs at ``paths`` (records or
    ``.keras`` models), one panel each; the vocabulary is the runs' corpus (its cache)."""
    from thesis_repro.attention_examples import draw_attention_examples

    models, titles, vocab, corpus = [], [], None, None
    for path in map(Path, paths):
        record = load_record(record_file_of(path))
        if record is None:
            raise LMError(f"no record of a run for {path} (looked for {record_file_of(path)})")
        config = RunConfig(**record["config"])
        if not config.prefix:
            raise LMError(f"{path} is a {config.model} model: attention needs --prefix > 0")
        corpus = load_lm_corpus(record_source(record), config, progress=False)
        if vocab is not None and corpus.vocab != vocab:
            raise LMError("the models were trained on different vocabularies")
        vocab = corpus.vocab
        models.append(load_run_model(path if path.suffix == ".keras" else record_file_of(path)))
        titles.append(f"{config.model} (seed {config.seed})")
    assert corpus is not None  # argparse requires a path
    return draw_attention_examples(models, corpus, sentence, out, titles=titles, prefix=prefix)


# --- command line ---------------------------------------------------------------------------


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
        + ("the table's: ptb for ptb and future-*-ptb, else eltec-pol)" if grid else "eltec-pol)"),
    )
    parser.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="cpu",
        help="scale: corpus size, vocabulary, epochs, instances (default: %(default)s, what "
        "a 2-core CPU trains in minutes; paper: the thesis's protocol, for a GPU; see the "
        "list below)",
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
        default=RESULTS_DIR if grid else RUNS_DIR,
        help="directory for JSON records and checkpoints (default: %(default)s"
        + ("" if grid else "; single runs stay out of the committed results/ tree")
        + ")",
    )
    add_data_parallel_option(parser)
    parser.add_argument(
        "--dtype-policy",
        choices=DTYPE_POLICIES,
        help="Keras dtype policy: float32 (default, every published result) or mixed "
        "precision, mixed_bfloat16 (GPUs/TPUs with bfloat16) or mixed_float16; part of the "
        "run's identity (its own record, name suffix)",
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
    return textwrap.fill(
        text, 96, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False
    )


def _presets_epilog() -> str:
    return "presets:\n" + "\n".join(
        _wrap(f"{k}: {p.description}", "  ") for k, p in PRESETS.items()
    )


def train_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm",
        description=_wrap(
            "Train one language model of thesis 3.2 (Bengio n-gram LM, or with an "
            "attention-compressed prefix). Other commands: `python -m thesis_repro.lm grid "
            "--help` (Tables 3.1/3.2, PTB, thesis 4.2 future work), `... lm report --help`, "
            "`... lm evaluate --help`, `... lm show-attention --help`, `... lm examples --help`."
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
    parser.add_argument("--seed", type=seed_int, default=0, help="instance: weights and data order")
    parser.add_argument(
        "--min-prefix",
        type=int,
        default=0,
        metavar="K",
        help="thesis 4.2: train with a prefix length drawn uniformly in K..--prefix for every "
        "minibatch (default 0: always --prefix words)",
    )
    parser.add_argument(
        "--position-aware",
        choices=POSITION_AWARE,
        default="none",
        help="thesis 4.2: tell the attention how far back each prefix word is: bias = a "
        "learned per-distance bias on the energies (primary), embedding = a learned distance "
        "embedding added to h_i (default: none, the thesis's model)",
    )
    _add_eval_prefix(parser, "after training, also score the test part")
    _add_common(parser, grid=False)
    return parser


def _add_eval_prefix(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--eval-prefix",
        nargs="+",
        metavar="N|sentence",
        help=f"thesis 4.2: {what} of an attention model with other prefixes, same weights: N "
        f"words, or 'sentence' = back to the previous <eos> (at most {HISTORY_CAP} words); "
        "stored in the record's summary.eval_prefix",
    )


def grid_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm grid",
        description=_wrap(
            "Run every model x instance of a thesis table (finished runs are skipped, "
            "interrupted ones resumed), then render tables and figures."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="tables:\n"
        + "\n".join(f"  {k}: {t.title}" for k, t in TABLES.items())
        + "\n"
        + "\n".join(
            _wrap(
                f"{k}: {t.title}. Rows: {'; '.join(model_label(*g.key) for g in t.regimes)}. "
                f"Eval prefixes: {', '.join(map(str, t.eval_prefixes))}. {t.runtime}.",
                "  ",
            )
            for k, t in FUTURE_TABLES.items()
        )
        + "\n\n"
        + _presets_epilog(),
    )
    parser.add_argument(
        "--table",
        choices=(*TABLES, *FUTURE_TABLES),
        default="3.1",
        help="model set (default: %(default)s); future-*: thesis 4.2, reusing the runs of "
        "Table 3.1 (future-*-ptb: of the PTB table)",
    )
    parser.add_argument(
        "--seeds", type=seed_int, nargs="+", help="instances to run (default: the preset's)"
    )
    parser.add_argument(
        "--figures",
        type=Path,
        default=FIGURES_DIR,
        help="directory for figure PDFs (default: %(default)s)",
    )
    parser.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(parser)
    _add_eval_prefix(parser, "override the table's eval prefixes: score the test part")
    _add_common(parser, grid=True)
    return parser


def evaluate_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm evaluate",
        description=_wrap(
            "Thesis 4.2: score finished attention runs on the test part with other prefixes "
            "(same weights, from each run's final model) and store the missing scores in their "
            "records (summary.eval_prefix). Then render the tables."
        ),
    )
    _add_outputs(parser)
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="TABLE",
        help="only the runs under these table folders (e.g. 3.1 future-prefix; default: all)",
    )
    parser.add_argument(
        "--eval-prefix",
        nargs="+",
        metavar="N|sentence",
        default=[str(e) for e in EVAL_PREFIXES],
        help="prefixes to score (default: %(default)s)",
    )
    parser.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="XLA for scoring (default: as the run was trained)",
    )
    parser.add_argument("--verbose", type=int, choices=(0, 1), default=1, help="progress lines")
    return parser


def show_attention_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm show-attention",
        description=_wrap(
            "Draw the attention examples of thesis 3.2.4 for one sentence: every window a line "
            "of text, each prefix word's opacity proportional to its attention weight. With "
            "several models (e.g. with and without position awareness, thesis 4.2): one panel "
            "each, side by side."
        ),
    )
    parser.add_argument(
        "--checkpoint",
        nargs="+",
        required=True,
        type=Path,
        metavar="PATH",
        help="a run's record (.json; its final model is used) or a .keras model of it (final "
        "or epoch checkpoint); the vocabulary comes from the run's corpus settings",
    )
    parser.add_argument("--sentence", required=True, help="text, tokenised like the run's corpus")
    parser.add_argument("--out", type=Path, required=True, help="figure file (.pdf, .png)")
    parser.add_argument(
        "--prefix",
        type=positive_int,
        help="prefix words to give the models (default: each model's trained prefix)",
    )
    return parser


def examples_parser() -> argparse.ArgumentParser:
    from thesis_repro.attention_examples import EXAMPLES

    listing = "; ".join(
        f"{e.name}: {', '.join(f'{p.table}/{p.model}' for p in e.panels)} on {e.corpus}"
        for e in EXAMPLES
    )
    parser = Parser(
        prog="python -m thesis_repro.lm examples",
        description=_wrap(
            "Thesis 3.2.4 (and 4.2): compute the committed attention examples from the final "
            "models of finished runs (seed 0 of a preset), write their records to "
            "<results>/lm/attention_examples/ and draw figures/attention_<name>_<k>.pdf. "
            f"Examples: {listing}. Examples whose runs are missing are skipped."
        ),
    )
    parser.add_argument(
        "--preset", choices=tuple(PRESETS), default="cpu", help="whose runs (default: cpu)"
    )
    parser.add_argument(
        "--force", action="store_true", help="recompute examples whose records exist"
    )
    _add_outputs(parser)
    return parser


def report_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm report",
        description="Render results/lm/<corpus>/<table>/table.md and the figures (validation "
        "perplexity per epoch) from the JSON records.",
    )
    _add_outputs(parser)
    return parser


def _add_outputs(parser: argparse.ArgumentParser) -> None:
    """``--results`` and ``--figures``: where records are read and figures written."""
    parser.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help="records (default: %(default)s)"
    )
    parser.add_argument(
        "--figures", type=Path, default=FIGURES_DIR, help="figure PDFs (default: %(default)s)"
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "epochs": args.epochs,
        "max_words": args.max_words,
        "min_count": args.min_count,
        "batch_size": args.batch_size,
        "first_target": args.first_target,
        "dtype_policy": args.dtype_policy,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; errors end with one ``error: ...`` line and exit status 2, a failed
    run (loss NaN or infinite; in a grid, after the other runs and the report) with status 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parsers = {
        "train": train_parser,
        "grid": grid_parser,
        "report": report_parser,
        "evaluate": evaluate_parser,
        "show-attention": show_attention_parser,
        "examples": examples_parser,
    }
    command = argv[0] if argv and argv[0] in parsers else "train"
    if argv and argv[0] == command:
        argv = argv[1:]
    args = parsers[command]().parse_args(argv)
    started = time.time()
    from thesis_repro.lm_tables import report

    try:
        if command == "report":
            print(report(args.results, args.figures))
            return 0
        if command == "evaluate":
            evals = [parse_eval_prefix(e) for e in args.eval_prefix]  # errors before any work
            evaluate_all(args.results, evals, args.table, args.verbose, args.jit)
            print(report(args.results, args.figures))
            return 0
        if command == "examples":
            from thesis_repro.attention_examples import make_examples

            make_examples(args.results, args.figures, args.preset, force=args.force)
            return 0
        if command == "show-attention":
            path = show_attention(args.checkpoint, args.sentence, args.out, args.prefix)
            print(f"wrote {path}")
            return 0
        eval_prefixes = [parse_eval_prefix(e) for e in args.eval_prefix or ()]
        if args.preset == "paper" and compute_device()["device"] == "cpu":
            print(
                "warning: the paper preset is the thesis's protocol, sized for a GPU; on this "
                "CPU a run takes about 45 h (measured 1.0-1.2 s per update at V = 37,373)",
                flush=True,
            )
        if args.data_parallel:
            if command == "grid" and args.jobs > 1:
                raise LMError("--data-parallel spreads one run over every device: not with --jobs")
            from thesis_repro.training import use_data_parallel

            try:
                devices = use_data_parallel()
            except ValueError as e:
                raise LMError(str(e)) from None
            print(f"data-parallel over {devices} devices", flush=True)
        default_name = table_corpus_name(args.table) if command == "grid" else None
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
                    min_prefix=args.min_prefix,
                    position_aware=args.position_aware,
                    **_overrides(args),
                )
            ]
        else:
            configs = table_runs(args.table, source, args.preset, args.seeds, **_overrides(args))
        if source.synthetic:
            print(SYNTHETIC_NOTICE, flush=True)
        for config in {(c.max_words, c.min_count, c.tokenizer): c for c in configs}.values():
            load_lm_corpus(source, config, progress=bool(args.verbose))  # errors before training
        if command == "grid" and args.jobs > 1:  # the corpus cache is ready: start the workers
            status = run_jobs("thesis_repro.lm", ["grid", *argv], args.jobs, command_line())
            if status:
                return status
            if not args.no_report:
                print(report(args.results, args.figures))
            print(f"done in {time.time() - started:.0f} s")
            return 0
        evals = eval_prefixes if command == "train" or args.eval_prefix else None
        if evals is None:
            evals = table_eval_prefixes(args.table)
        if command == "train":
            try:
                record = run(configs[0], source, args.results, args.verbose, args.jit, (), evals)
            except RunBusy as busy:
                raise LMError(str(busy)) from None
            print(f"{configs[0].name}: {json.dumps(record['summary'])}")
            records = [record]
        else:
            records = walk_grid(
                configs,
                lambda c: run(c, source, args.results, args.verbose, args.jit, (), evals),
                lambda c: f"table {args.table}: {c.name}",
                args.verbose,
            )
        if command == "grid" and not args.no_report:
            print(report(args.results, args.figures))
        failures = grid_failures(records)
        if failures:
            print(f"error: {failures}", file=sys.stderr)
            return 1
    except (CorpusError, LMError, CorruptRecord) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return interrupted()
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
