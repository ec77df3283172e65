"""Which corpus a run reads (thesis 3.2.1): ``--corpus PATH``, a corpus by name in the data folder
(``$THESIS_REPRO_DATA``), or the built-in synthetic one; the corpus prepared for a run's settings;
the run configurations of each table on its corpus.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from thesis_repro.corpus import Corpus, CorpusError, load_corpus, synthetic_corpus
from thesis_repro.lm.config import (
    DEFAULT_CORPUS_NAME,
    FUTURE_TABLES,
    GAP_FACTORS,
    GAP_MODELS,
    GAP_TABLE,
    PRESETS,
    SYNTHETIC,
    TABLES,
    LMError,
    RunConfig,
    check_config,
    corpus_settings,
    gap_overrides,
)
from thesis_repro.settings import DATA_ENV

SYNTHETIC_NOTICE = (
    f"NOTE: no corpus given (--corpus PATH or {DATA_ENV}=DIR): training on the built-in "
    "SYNTHETIC corpus (thesis_repro.corpus.synthetic_corpus), not on real text."
)


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
    directly. The name ``synthetic`` is the built-in corpus, with a data directory or without
    (as :func:`record_source` reads it back).
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
    if not data_dir or name == SYNTHETIC:
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


_CORPORA: dict[tuple, Corpus] = {}


def load_lm_corpus(source: CorpusSource, config: RunConfig, progress: bool = True) -> Corpus:
    """The corpus of a run (memoised per process); checks it is long enough to score."""
    key = (source.path, config.max_words, config.min_count, config.tokenizer, config.lowercase)
    if key not in _CORPORA:
        if source.synthetic:
            corpus = synthetic_corpus(config.max_words, seed=0, min_count=config.min_count)
        else:
            corpus = load_corpus(
                source.path,  # type: ignore[arg-type]
                min_count=config.min_count,
                max_words=config.max_words,
                tokenizer=config.tokenizer,
                lowercase=config.lowercase,
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


def table_runs(
    table: str, source: CorpusSource, preset: str, seeds: Sequence[int] = (), **overrides: Any
) -> list[RunConfig]:
    """Every run of a thesis table under a preset: each model x each seed (instance).

    A future-work table (thesis 4.2) lists its regimes' runs; those of Table 3.1 are the Table
    3.1 runs themselves (same config, same record), so they are trained only once. The gap
    study (``GAP_TABLE``) lists the 5-gram and 5-gram + 5 under each of its factors; its
    ``ours`` and ``momentum`` runs are those of Tables 3.1 and 3.2.
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
    if table == GAP_TABLE:
        scale = PRESETS[preset]
        changes = {k for f in GAP_FACTORS for k in gap_overrides(f, scale)}
        overrides = {k: v for k, v in overrides.items() if v is not None}  # unset options
        if changes & set(overrides):
            flags = ", ".join("--" + k.replace("_", "-") for k in sorted(changes & set(overrides)))
            raise LMError(f"the gap study's factors set {flags} themselves: leave them out")
        return [
            make_config(
                source,
                preset,
                factor.table,
                order,
                prefix,
                factor.variant,
                seed,
                **gap_overrides(factor, scale),
                **overrides,
            )
            for seed in (seeds or scale.seeds)
            for factor in GAP_FACTORS
            for order, prefix in GAP_MODELS
        ]
    spec = TABLES[table]
    return [
        make_config(source, preset, table, order, prefix, spec.variant, seed, **overrides)
        for seed in (seeds or PRESETS[preset].seeds)
        for order, prefix in spec.models
    ]
