"""Command line of the corpus step: parse the arguments and call the package's functions.

Usage::

    python -m thesis_repro.corpus prepare PATH [--min-count 10] [--max-words 7000000] ...
    python -m thesis_repro.corpus download {ptb,eltec-pol,plwiki}
    python -m thesis_repro.corpus synthetic [--n-words 200000] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from thesis_repro.corpus.downloads import DOWNLOADS, download
from thesis_repro.corpus.prepare import load_corpus
from thesis_repro.corpus.synthetic import synthetic_corpus
from thesis_repro.corpus.text import EOS, TOKENIZERS, CorpusError

__all__ = ["main"]


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
