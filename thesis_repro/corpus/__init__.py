"""Corpus preparation for the language-model experiments (thesis 3.2.1), separate from training.

The thesis trained on 7 M words of Polish Wikipedia: vocabulary = words seen at least 10 times
(37,235) plus ``<UNK>``; 6 M train / 0.5 M valid / 0.5 M test words. This package turns a text
corpus into that form -- three ``np.int32`` arrays of token ids and a vocabulary -- once, and
caches the result as integer arrays (nanoGPT-style ``prepare`` step), so training scripts only
load arrays.

=================  ===========================================================================
``text.py``        tokeniser, reading (compressed) text files, the part files of a folder corpus
``wikipedia.py``   MediaWiki XML dumps: streaming and wikitext cleaning (``clean_wikitext``)
``prepare.py``     ``Corpus``, vocabulary, split, the prepared-corpus cache, ``load_corpus``
``synthetic.py``   ``synthetic_corpus``: generated text with long-range dependencies
``downloads.py``   ``download``: PTB, ELTeC-pol, Polish Wikipedia into the cache folder
``cli.py``         ``python -m thesis_repro.corpus {prepare,download,synthetic} ...``
=================  ===========================================================================

The names below are the package's interface; import them from ``thesis_repro.corpus``.
"""

from __future__ import annotations

from thesis_repro.corpus.cli import main
from thesis_repro.corpus.downloads import DOWNLOADS, download
from thesis_repro.corpus.prepare import (
    FORMAT_VERSION,
    MIN_PART_WORDS,
    Corpus,
    default_cache_dir,
    load_corpus,
)
from thesis_repro.corpus.synthetic import synthetic_corpus
from thesis_repro.corpus.text import EOS, TOKEN_REGEX, UNK, CorpusError, tokenize
from thesis_repro.corpus.wikipedia import clean_wikitext

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
