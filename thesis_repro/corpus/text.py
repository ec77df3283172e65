"""Reading corpus text: tokens, (compressed) text files, and the part files of a folder corpus.

Tokenisation (``tokenize``): ``tokenizer="regex"`` (default) lowercases (``lowercase=True``) and
then takes the tokens of the regex ``\\w+(?:[-']\\w+)*|[^\\w\\s]`` (words with inner hyphens or
apostrophes; every other non-space character is its own token) -- the rule of the ELTeC-pol
README. ``tokenizer="whitespace"`` splits on whitespace only (for already tokenised corpora
such as PTB). With ``eos="<eos>"`` (the default of ``load_corpus``) a token ``<eos>`` is
appended after every non-empty line, the PTB convention (Mikolov; it gives PTB's standard
10,000-word vocabulary); ``eos=None`` turns it off. Empty lines give nothing. The corpus's own
unknown-word tokens ``<unk>``/``<UNK>`` (PTB has ``<unk>``) are kept as one token by both
tokenisers and mapped to our ``<UNK>`` (id 0); they never become a vocabulary word of their own.

Files are read as UTF-8, decompressed by suffix (``.xz``/``.lzma``, ``.gz``, ``.bz2``); a
folder corpus has one train, one valid and one test file (``ptb.train.txt``, ``train.txt``,
``wiki.valid.tokens``, ... each possibly compressed).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = [
    "EOS",
    "PARTS",
    "TOKENIZERS",
    "TOKEN_REGEX",
    "UNK",
    "UNK_ALIASES",
    "CorpusError",
    "compression",
    "find_part_files",
    "make_tokenizer",
    "open_text",
    "text_lines",
    "tokenize",
]

UNK = "<UNK>"
EOS = "<eos>"
#: Unknown-word tokens already present in a corpus (PTB: ``<unk>``); all map to ``UNK`` (id 0).
UNK_ALIASES = frozenset({"<unk>", "<UNK>"})
#: The tokenisation regex of the ELTeC-pol README (plus ``<unk>`` kept whole).
TOKEN_REGEX = r"\w+(?:[-']\w+)*|[^\w\s]"
_TOKEN_RE = re.compile(r"(?i:<unk>)|" + TOKEN_REGEX)
TOKENIZERS = ("regex", "whitespace")
#: The three parts of a corpus, in order.
PARTS = ("train", "valid", "test")
_COMPRESSED = {".xz": lzma.open, ".lzma": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}
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


# Tokenisation ---------------------------------------------------------------------------------


def make_tokenizer(lowercase: bool = True, tokenizer: str = "regex") -> Callable[[str], list]:
    """Return ``f(line) -> list[str]`` for the given settings (see the module docstring)."""
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
    return make_tokenizer(lowercase, tokenizer)(text)


# Files ----------------------------------------------------------------------------------------


def compression(path: Path) -> str:
    """The compression suffix of ``path`` (``.xz``, ``.lzma``, ``.gz``, ``.bz2``), or ''."""
    return path.suffix.lower() if path.suffix.lower() in _COMPRESSED else ""


def open_text(path: Path, mode: str = "rt") -> IO:
    """Open ``path`` (decompressing by suffix) as UTF-8 text (``rt``) or bytes (``rb``)."""
    opener = _COMPRESSED.get(compression(path), open)
    if "b" in mode:
        return opener(path, mode)
    return opener(path, mode, encoding="utf-8")


def text_lines(path: Path) -> Iterator[str]:
    """Lines of a (possibly compressed) UTF-8 text file; clear errors for bad input."""
    try:
        with open_text(path, "rt") as f:
            yield from f
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"file {path} is not UTF-8 text: {e}; convert it to UTF-8 (e.g. iconv)"
        ) from None
    except (EOFError, lzma.LZMAError, OSError) as e:
        kind = compression(path) or "text"
        raise CorpusError(f"cannot read {path} as a {kind} file: {e}") from None


def find_part_files(folder: Path) -> dict[str, Path]:
    """The train/valid/test files of a folder corpus (names: see ``_PART_FILE_RE``)."""
    found: dict[str, list[Path]] = {p: [] for p in PARTS}
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        base = f.name[: -len(compression(f))] if compression(f) else f.name
        m = _PART_FILE_RE.match(base)
        if m:
            found[_PART_ALIASES[m.group(1).lower()]].append(f)
    missing = [p for p in PARTS if not found[p]]
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
