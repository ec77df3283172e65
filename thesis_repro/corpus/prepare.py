"""Corpus preparation (thesis 3.2.1): text -> token ids, vocabulary and split, cached as arrays.

Inputs (``load_corpus(path)``), detected automatically:

* a plain text file, optionally compressed (``.xz``/``.lzma``, ``.gz``, ``.bz2``, by suffix),
  read line by line; every non-empty line is a sentence or paragraph;
* a folder with train/valid/test files (``ptb.train.txt``, ``train.txt``, ``wiki.valid.tokens``,
  ... each possibly compressed): the files give the split;
* a MediaWiki XML dump (``.xml``, ``.xml.bz2``, ``...xml-p1p187037.bz2``; recognised by its
  ``<mediawiki`` root), streamed; see ``thesis_repro.corpus.wikipedia``.

Every line is tokenised as described in ``thesis_repro.corpus.text``.

Vocabulary: ``<UNK>`` (id 0), then every word seen at least ``min_count`` times in the
*training* part, by descending count, ties in alphabetical (code point) order. Words outside the
vocabulary map to id 0 in all three parts.

Split: a single file is cut by running position after the ``max_words`` cap: the first 6/7 of
the tokens are train, the next 1/14 valid, the last 1/14 test (``split=(6, 0.5, 0.5)``; valid
and test sizes are rounded down, train gets the rest). A folder corpus keeps its files' split;
if its total exceeds ``max_words``, every part keeps the same fraction ``max_words / total`` of
its tokens (its first tokens), so the ratio of the given files is kept. Tokens include the
``<eos>`` tokens.

Cache: ``<cache_dir>/corpora/<name>-<hash>.npz`` holds ``train``, ``valid``, ``test`` and a
JSON ``meta`` (vocabulary, settings, source). The hash covers the input's absolute path, size
and modification time (of each file of a folder corpus) and every setting, plus
``FORMAT_VERSION``. The file is written atomically (``thesis_repro.files.atomic_path``), so an
interrupted or failed preparation never leaves a partial cache file. ``cache_dir`` defaults to
``thesis_repro.settings.cache_dir()``: ``$THESIS_REPRO_CACHE``, else ``~/.cache/thesis_repro``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import zipfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro import settings as _settings
from thesis_repro.corpus.text import (
    EOS,
    PARTS,
    TOKENIZERS,
    UNK,
    UNK_ALIASES,
    CorpusError,
    find_part_files,
    make_tokenizer,
    text_lines,
    tokenize,
)
from thesis_repro.corpus.wikipedia import is_wiki_dump, wiki_lines
from thesis_repro.files import atomic_path

__all__ = [
    "DEFAULT_SPLIT",
    "FORMAT_VERSION",
    "MIN_PART_WORDS",
    "Corpus",
    "check_sizes",
    "default_cache_dir",
    "load_corpus",
    "split_sizes",
]

#: Bump when the preparation changes in a way that changes the arrays (invalidates caches).
FORMAT_VERSION = 1
#: Each of train, valid and test must have at least this many tokens.
MIN_PART_WORDS = 20
DEFAULT_SPLIT = (6.0, 0.5, 0.5)
#: Tokens between two progress lines on stderr.
PROGRESS_EVERY = 1_000_000


# --------------------------------------------------------------------------------------------
# The Corpus object
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Corpus:
    """A prepared corpus: token-id arrays for the three parts and the vocabulary.

    ``vocab[0]`` is ``<UNK>``; ``settings`` holds the preparation settings (tokeniser,
    lowercase, min_count, max_words, eos, split, ...), ``source`` where the text came from.
    """

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    vocab: list[str]
    source: str
    settings: dict[str, Any] = field(default_factory=dict)
    cache_file: str | None = None

    unk_id = 0

    @cached_property
    def word_to_id(self) -> dict[str, int]:
        """Mapping word -> id (words outside the vocabulary are not in it; they map to 0)."""
        return {w: i for i, w in enumerate(self.vocab)}

    @property
    def vocab_size(self) -> int:
        """Number of ids, ``<UNK>`` included (the softmax size V)."""
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        """Tokenise ``text`` with this corpus's settings (no ``<eos>`` added)."""
        s = self.settings
        return tokenize(
            text, lowercase=s.get("lowercase", True), tokenizer=s.get("tokenizer", "regex")
        )

    def encode(self, words: Iterable[str] | str) -> np.ndarray:
        """Ids of ``words`` (a string is tokenised first); unknown words give 0 (``<UNK>``)."""
        if isinstance(words, str):
            words = self.tokenize(words)
        get = self.word_to_id.get
        return np.fromiter((get(w, 0) for w in words), dtype=np.int32)

    def decode(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        """Words of the ids ``ids``."""
        vocab = self.vocab
        return [vocab[int(i)] for i in np.asarray(ids).ravel()]

    def summary(self) -> str:
        """One-line description: source, vocabulary and split sizes."""
        return (
            f"{self.source}: vocab {self.vocab_size:,} (incl. {UNK}), "
            f"train {len(self.train):,} / valid {len(self.valid):,} / test {len(self.test):,} "
            f"tokens, unk rate (train) {self.unk_rate('train'):.2%}"
        )

    def unk_rate(self, part: str = "train") -> float:
        """Fraction of tokens of ``part`` that are ``<UNK>``."""
        arr = getattr(self, part)
        return float(np.mean(arr == 0)) if len(arr) else 0.0


# --------------------------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[str]:
    """The lines of text of a file: a wiki dump's cleaned paragraphs, else the file's lines."""
    return wiki_lines(path) if is_wiki_dump(path) else text_lines(path)


class _Encoder:
    """Tokens -> provisional ids (order of first appearance) in a growing ``array('i')``.

    One pass, no token strings kept: 4 bytes per token plus one dict entry per type.
    """

    def __init__(self, tok: Callable[[str], list], eos: str | None, progress: bool) -> None:
        self.tok = tok
        self.eos = eos
        self.ids: dict[str, int] = dict.fromkeys(UNK_ALIASES, 0)
        self.ids[UNK] = 0
        self.n_total = 0
        self.progress = progress
        self.next_report = PROGRESS_EVERY
        self.t0 = time.perf_counter()

    def encode_lines(self, lines: Iterable[str], limit: int | None, label: str) -> np.ndarray:
        """Provisional ids of the tokens of ``lines`` (at most ``limit`` tokens)."""
        buf = array("i")
        ids = self.ids
        setdefault = ids.setdefault
        tok, eos = self.tok, self.eos
        n = 0
        for line in lines:
            words = tok(line)
            if not words:
                continue
            if eos:
                words.append(eos)
            # new words get id len(ids): distinct and increasing (id 1 is never used)
            buf.extend([setdefault(w, len(ids)) for w in words])
            n += len(words)
            if limit is not None and n >= limit:
                del buf[limit:]
                n = limit
                break
            if self.progress and self.n_total + n >= self.next_report:
                self.next_report += PROGRESS_EVERY
                dt = time.perf_counter() - self.t0
                print(
                    f"corpus: {self.n_total + n:,} words read ({label}, {len(ids):,} types, "
                    f"{dt:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        self.n_total += n
        return np.frombuffer(buf, dtype=np.int32) if n else np.zeros(0, np.int32)

    def words(self) -> list[str]:
        """Provisional id -> word (slot 0 = ``<UNK>``, unused slots = '')."""
        out = [""] * (max(self.ids.values()) + 1)
        for w, i in self.ids.items():
            out[i] = w
        out[0] = UNK
        return out


def split_sizes(n: int, split: Sequence[float]) -> tuple[int, int, int]:
    """(n_train, n_valid, n_test) for ``n`` tokens cut by running position."""
    total = float(sum(split))
    n_valid = int(n * split[1] / total)
    n_test = int(n * split[2] / total)
    return n - n_valid - n_test, n_valid, n_test


def _build_vocab(
    train: np.ndarray, words: list[str], min_count: int, eos: str | None
) -> tuple[list[str], np.ndarray]:
    """Vocabulary from the training ids and the provisional-id -> final-id map."""
    counts = np.bincount(train, minlength=len(words))
    keep = np.flatnonzero(counts >= min_count)
    keep = keep[keep != 0]  # <UNK> (and the corpus's own <unk>) is always id 0
    order = sorted(keep.tolist(), key=lambda i: (-int(counts[i]), words[i]))
    vocab = [UNK] + [words[i] for i in order]
    if len([w for w in vocab[1:] if w != eos]) == 0:
        raise CorpusError(
            f"vocabulary would be only {UNK}: no word occurs min_count={min_count} times in the "
            f"{len(train):,} training words; lower --min-count or use a larger corpus"
        )
    remap = np.zeros(len(words), dtype=np.int32)
    remap[order] = np.arange(1, len(order) + 1, dtype=np.int32)
    return vocab, remap


def check_sizes(source: str, sizes: Mapping[str, int], hint: str) -> None:
    """CorpusError (ending in ``hint``) if a part has fewer than ``MIN_PART_WORDS`` tokens."""
    small = {p: n for p, n in sizes.items() if n < MIN_PART_WORDS}
    if small:
        got = ", ".join(f"{p} {n}" for p, n in small.items())
        raise CorpusError(
            f"corpus {source} is too small: {got} words (each of train/valid/test needs at "
            f"least {MIN_PART_WORDS}); {hint}"
        )


def _prepare(
    path: Path, settings: dict[str, Any], progress: bool
) -> tuple[dict[str, np.ndarray], list[str], dict[str, Any]]:
    """Tokenise, cap, split and build the vocabulary (no caching here)."""
    tok = make_tokenizer(settings["lowercase"], settings["tokenizer"])
    eos = settings["eos"]
    max_words = settings["max_words"]
    enc = _Encoder(tok, eos, progress)
    info: dict[str, Any] = {}
    if path.is_dir():
        files = find_part_files(path)
        raw = {p: enc.encode_lines(_lines(f), None, p) for p, f in files.items()}
        for p, f in files.items():
            if len(raw[p]) == 0:
                raise CorpusError(f"file {f} contains no words; give a non-empty {p} file")
        total = sum(len(a) for a in raw.values())
        info["format"] = "folder"
        info["files"] = {p: f.name for p, f in files.items()}
        info["words_before_cap"] = {p: len(a) for p, a in raw.items()}
        if total > max_words:  # keep the same fraction of each part
            raw = {p: a[: len(a) * max_words // total] for p, a in raw.items()}
        hint = "use larger files or a larger --max-words"
    else:
        info["format"] = "wiki-xml" if is_wiki_dump(path) else "text"
        ids = enc.encode_lines(_lines(path), max_words, path.name)
        if len(ids) == 0:
            raise CorpusError(f"file {path} contains no words; give a non-empty text file")
        n_train, n_valid, _ = split_sizes(len(ids), settings["split"])
        raw = {
            "train": ids[:n_train],
            "valid": ids[n_train : n_train + n_valid],
            "test": ids[n_train + n_valid :],
        }
        hint = "use a larger corpus or a larger --max-words"
    check_sizes(str(path), {p: len(a) for p, a in raw.items()}, hint)
    words = enc.words()
    info["types_seen"] = len(set(enc.ids.values()))  # distinct tokens read, <UNK> counted once
    vocab, remap = _build_vocab(raw["train"], words, settings["min_count"], eos)
    arrays = {p: remap[a] for p, a in raw.items()}
    if progress:
        dt = time.perf_counter() - enc.t0
        print(f"corpus: {enc.n_total:,} words read in {dt:.1f} s", file=sys.stderr, flush=True)
    return arrays, vocab, info


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """The cache folder used when none is given: ``thesis_repro.settings.cache_dir()``
    (``$THESIS_REPRO_CACHE`` if set, else ``~/.cache/thesis_repro``)."""
    return _settings.cache_dir()


def _input_stats(path: Path) -> list[list[Any]]:
    """(absolute path, size, mtime_ns) of the input file(s): the cheap part of the cache key."""
    files = list(find_part_files(path).values()) if path.is_dir() else [path]
    out = []
    for f in files:
        st = f.stat()
        out.append([str(f.resolve()), st.st_size, st.st_mtime_ns])
    return out


def _cache_file(cache_dir: Path, path: Path, settings: Mapping[str, Any]) -> Path:
    key = json.dumps(
        {"format_version": FORMAT_VERSION, "inputs": _input_stats(path), "settings": settings},
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    stem = re.sub(r"[^\w.-]+", "_", path.name) or "corpus"
    return cache_dir / "corpora" / f"{stem}-{digest}.npz"


def _save_corpus(target: Path, corpus: Corpus) -> None:
    """Write ``corpus`` to ``target`` as ``.npz`` atomically (flushed to disk before the rename)."""
    meta = {"vocab": corpus.vocab, "settings": corpus.settings, "source": corpus.source}
    meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), np.uint8)
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        np.savez(f, train=corpus.train, valid=corpus.valid, test=corpus.test, meta=meta_bytes)
        f.flush()
        os.fsync(f.fileno())


def _load_cached(target: Path) -> Corpus | None:
    """The corpus cached in ``target``, or None if missing or unreadable."""
    if not target.is_file():
        return None
    try:
        with np.load(target, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode("utf-8"))
            arrays = {p: z[p].astype(np.int32, copy=False) for p in PARTS}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
        return None
    return Corpus(
        **arrays,
        vocab=list(meta["vocab"]),
        source=meta["source"],
        settings=meta["settings"],
        cache_file=str(target),
    )


# --------------------------------------------------------------------------------------------
# Main entry
# --------------------------------------------------------------------------------------------


def load_corpus(
    path: str | os.PathLike,
    *,
    min_count: int = 10,
    max_words: int = 7_000_000,
    lowercase: bool = True,
    tokenizer: str = "regex",
    eos: str | None = EOS,
    split: Sequence[float] = DEFAULT_SPLIT,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> Corpus:
    """Load a corpus prepared as in thesis 3.2.1, from the cache or by preparing it.

    ``path``: text file (``.txt``/``.xz``/``.gz``/``.bz2``), folder of train/valid/test files,
    or MediaWiki XML dump. ``min_count``: vocabulary = ``<UNK>`` + training words seen at least
    this often. ``max_words``: cap on the total number of tokens (``<eos>`` included), applied
    before splitting. ``eos``: token appended at each non-empty line end (None: none).
    ``split``: train/valid/test proportions for a single file. See the module docstring.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise CorpusError(
            f"corpus path {path} does not exist; give a text file (.txt, .xz, .gz, .bz2), a "
            "folder with train/valid/test files or a Wikipedia .xml(.bz2) dump, or fetch one "
            "with `python -m thesis_repro.corpus download NAME`"
        )
    if tokenizer not in TOKENIZERS:
        raise CorpusError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")
    if min_count < 1 or max_words < 1:
        raise CorpusError(f"min_count ({min_count}) and max_words ({max_words}) must be >= 1")
    if len(split) != 3 or min(split) <= 0:
        raise CorpusError(f"split must be three positive proportions, got {split!r}")
    if eos in UNK_ALIASES:
        raise CorpusError(f"eos token {eos!r} clashes with the unknown-word token")
    settings: dict[str, Any] = {
        "tokenizer": tokenizer,
        "lowercase": bool(lowercase),
        "min_count": int(min_count),
        "max_words": int(max_words),
        "eos": eos or None,
        "split": [float(x) for x in split],
    }
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = _cache_file(cache_root, path, settings)
    cached = _load_cached(target)
    if cached is not None:
        if progress:
            print(f"corpus: loaded {target}", file=sys.stderr, flush=True)
        return cached
    arrays, vocab, info = _prepare(path, settings, progress)
    corpus = Corpus(
        **arrays,
        vocab=vocab,
        source=str(path.resolve()),
        settings={**settings, **info, "format_version": FORMAT_VERSION},
        cache_file=str(target),
    )
    _save_corpus(target, corpus)
    if progress:
        print(f"corpus: cached in {target}", file=sys.stderr, flush=True)
    return corpus
