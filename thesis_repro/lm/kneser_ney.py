"""Count-based baselines for the language-model tables: interpolated modified Kneser-Ney n-grams.

    python -m thesis_repro.lm kneser-ney --table 3.1 --preset cpu        # KN3, KN5 on eltec-pol
    python -m thesis_repro.lm kneser-ney --table ptb --preset cpu --order 5

The model (Kneser & Ney 1995; Chen & Goodman 1998, "An empirical study of smoothing techniques
for language modeling", TR-10-98: "interpolated modified Kneser-Ney"): for a word ``w`` after
the context ``h`` of k-1 words,

    p_k(w | h) = (a_k(h w) - D_k(a_k(h w))) / sum_v a_k(h v)  +  gamma_k(h) p_{k-1}(w | h'),
    gamma_k(h) = (D_k1 N1(h .) + D_k2 N2(h .) + D_k3+ N3+(h .)) / sum_v a_k(h v),

where ``h'`` drops the first word of ``h``; a context never seen at order k backs off entirely
(``p_k = p_{k-1}``), and order 1 interpolates with the uniform distribution 1/V over the
vocabulary (``p_0``). ``a_k`` is the raw count at the highest order and the continuation count
below it: the number of distinct words seen before ``h w`` (``N1+(. h w)``), plus the
occurrences that have no word before them (the start of the training text; the n-grams that
begin with ``<s>``), which keep their raw count as in KenLM and SRILM. ``N_r(h .)`` counts the
words with ``a_k(h w) = r`` (``N3+``: ``>= 3``). Three discounts per order come from the
count-of-counts ``n_r`` of ``a_k`` (Chen & Goodman's estimates): ``Y = n1 / (n1 + 2 n2)``,
``D1 = 1 - 2 Y n2 / n1``, ``D2 = 2 - 3 Y n3 / n2``, ``D3+ = 3 - 4 Y n4 / n3``; where they cannot
be estimated (some ``n_r = 0``, tiny corpora) KenLM's fallback 0.5, 1, 1.5 is used and recorded.
No count cut-offs and no pruning.

Why our own ~200 lines of NumPy rather than a library: KenLM's pip module (``kenlm``) only
*queries* ARPA/binary models; its estimator ``lmplz`` is a separate C++ build that needs Boost
and CMake, which a ``pip install`` of this project cannot provide. NLTK's
``KneserNeyInterpolated`` (3.10) has one fixed discount (0.1; not *modified* Kneser-Ney) and
scores word by word in Python: measured here on PTB, 92 ms per word at order 3 and 245 ms at
order 5 (2.1 h and 5.6 h for the 82k test words), and 237 / 273 perplexity on the first 60
test sentences, where this module gives 125 / 117. This estimator sorts integer n-gram keys
with NumPy (``np.unique``), scores whole arrays of windows with ``np.searchsorted``, and takes
~2 s for PTB (KN5, both conventions) and ~50 s for 7 M words of eltec-pol. It is checked
against probabilities computed by hand, sum-to-one and a brute-force dictionary reference
(``tests/test_kneser_ney.py``), and it reproduces the literature: PTB test, sentence-bounded
(below), KN5 141.19 and KN3 148.28 against Mikolov's (2012, Table 4.1) 141.2 and 148.3.

Conventions, the neural models' (``thesis_repro.lm``), so that a KN row compares with the
neural rows of the same table row by row:

- the same prepared corpus (``corpora.load_lm_corpus``: the preset's ``max_words``, ``min_count``,
  tokeniser; vocabulary and ``<UNK>`` id 0 as a word like any other, ``<eos>`` after every line
  as a word like any other), the same train / valid / test parts;
- *running windows*: the n-gram is estimated on the training part as one stream and scored on
  ``tokens[t-n+1 .. t]``, across ``<eos>`` as the neural windows are
  (``batches.window_inputs``);
- the same scored positions: ``t >= FIRST_TARGET`` = 9 of each part (``batches.scored_targets``);
  perplexity ``exp(mean NLL)`` over them.

Every record also holds the perplexity under the *standard* conventions of the PTB literature
(``sentence_bounded``; Mikolov 2012, SRILM): every line is a sentence ``<s> w1 .. wn </s>``, no
n-gram crosses a sentence boundary, every word and every ``</s>`` (our ``<eos>``) of the part is
scored, ``<s>`` only as context. That is the number to hold against Mikolov's KN5 (141.2 on
PTB test). On PTB the two conventions differ by a tenth (test, KN5: ours 141.07, standard
141.19; KN3: 148.38, 148.28): leaving out the first 9 test words changes the standard number by
+0.005, and the running windows do the rest: a sentence's first word is predicted from
``... <eos>`` rather than ``<s>`` (KN3: 227.4 instead of 224.0 on those 3,759 words), while at
order 5 the words further in gain a little from the context across the boundary (137.96 instead
of 138.11).

Records: ``results/kneser-ney/<corpus>/kn<order>-max<max_words>-min<min_count>.json`` (one per
corpus settings and order: Table 3.1 and 3.2 share the eltec-pol corpus settings and so their KN
rows; the PTB ``cpu`` and ``paper`` presets both read all of PTB), rendered as the KN3 / KN5 rows
of the LM tables by ``report.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro.corpus import EOS, Corpus
from thesis_repro.files import write_json_atomic
from thesis_repro.lm.batches import scored_targets
from thesis_repro.lm.config import FIRST_TARGET, RunConfig
from thesis_repro.lm.corpora import CorpusSource, load_lm_corpus, make_config
from thesis_repro.markdown import table_row
from thesis_repro.records import command_line, library_versions, load_record, load_records, machine
from thesis_repro.settings import RESULTS_DIR

KN_FOLDER = "kneser-ney"


PAD = -1  # "no word": an n-gram through it does not exist (stream start, sentence boundaries)


ORDERS = (3, 5)


FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # KenLM's --discount_fallback


METHOD = "interpolated modified Kneser-Ney (Chen & Goodman 1998), no cut-offs"


#: Published KN test perplexities, sentence-bounded (Mikolov 2012, Table 4.1; PTB, SRILM).
LITERATURE: dict[str, dict[int, float]] = {"ptb": {3: 148.3, 5: 141.2}}


#: The other models published on the same PTB split (Mikolov 2012, Table 4.1), for the note.
LITERATURE_OTHERS: dict[str, str] = {
    "ptb": "Good-Turing 5-gram 162.3, feed-forward NNLM 140.2 / 141.8, RNNLM 124.7"
}


#: What a KN record shares with the neural runs whose table rows it joins.
SHARED_SETTINGS = ("corpus", "max_words", "min_count", "tokenizer", "lowercase", "first_target")


class KNError(ValueError):
    """Bad input to the baseline (printed as ``error: ...`` by the command line)."""


@dataclass
class _Level:
    """Order k >= 2: the distinct k-grams (sorted keys ``context_id * width + word``, where
    ``context_id`` indexes the (k-1)-grams), their adjusted counts ``a_k``, and per (k-1)-gram
    as a context its normaliser ``sum_v a_k(h v)`` (0: never a context) and ``gamma_k(h)``."""

    keys: np.ndarray
    counts: np.ndarray
    total: np.ndarray
    backoff: np.ndarray


@dataclass
class KneserNey:
    """An estimated model; ``log_probs(windows)`` scores windows (see ``ngram_windows``).

    Ids ``0 .. vocab_size - 1`` are words (predicted and uniform base); ids ``vocab_size ..
    width - 1`` are context-only tokens (``<s>``). ``discounts[k-1]`` = (D1, D2, D3+) of order k.
    """

    order: int
    vocab_size: int
    width: int
    discounts: np.ndarray
    unigram_counts: np.ndarray
    unigram_total: float
    unigram_backoff: float
    levels: list[_Level]
    ngrams: list[int]
    fallback_orders: list[int] = field(default_factory=list)

    def _discount(self, k: int, counts: np.ndarray) -> np.ndarray:
        """``D_k(a)`` for adjusted counts ``a`` (0 for a = 0)."""
        table = np.concatenate([[0.0], self.discounts[k - 1]])
        return table[np.minimum(counts, 3)]

    def _gram_ids(self, windows: np.ndarray) -> list[np.ndarray]:
        """``ids[j][:, c]``: index of the (j+1)-gram ending at column ``c`` among the training
        (j+1)-grams, or PAD where it was never seen or runs through a PAD."""
        ids = [np.where(windows >= 0, windows, PAD)]
        for k in range(2, windows.shape[1] + 1):
            keys = self.levels[k - 2].keys
            prev, word = ids[-1][:, :-1], windows[:, 1:]
            ok = (prev >= 0) & (word >= 0)
            key = np.where(ok, prev * self.width + word, -1)
            at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
            found = ok & (keys[at] == key) if len(keys) else np.zeros_like(ok)
            current = np.full(windows.shape, PAD, dtype=np.int64)
            current[:, 1:] = np.where(found, at, PAD)
            ids.append(current)
        return ids

    def log_probs(self, windows: np.ndarray) -> np.ndarray:
        """Natural log ``p(w | h)`` per row of ``windows`` (m, n): the last column is the word
        ``w``, the columns before it the context (PAD: no word there); n <= order uses the
        shorter context, n > order only the last ``order`` columns."""
        windows = np.asarray(windows, dtype=np.int64)
        if windows.ndim != 2 or windows.shape[1] < 1:
            raise KNError(f"windows must be a 2-d array (rows, words), got {windows.shape}")
        windows = windows[:, -self.order :]
        word = windows[:, -1]
        if word.size and (word.min() < 0 or word.max() >= self.vocab_size):
            raise KNError(f"words to score must be ids in 0..{self.vocab_size - 1}")
        counts = self.unigram_counts[word]
        p = (counts - self._discount(1, counts)) / self.unigram_total
        p += self.unigram_backoff / self.vocab_size
        ids = self._gram_ids(windows)
        for k in range(2, windows.shape[1] + 1):
            level = self.levels[k - 2]
            context, gram = ids[k - 2][:, -2], ids[k - 1][:, -1]
            safe = np.maximum(context, 0)
            total = np.where(context >= 0, level.total[safe], 0.0)
            seen = total > 0
            a = np.where(gram >= 0, level.counts[np.maximum(gram, 0)], 0)
            higher = (a - self._discount(k, a)) / np.where(seen, total, 1.0)
            p = np.where(seen, higher + level.backoff[safe] * p, p)
        return np.log(p)

    def probabilities(self, context: Sequence[int]) -> np.ndarray:
        """``p(w | context)`` for every word ``w`` of the vocabulary (sums to 1)."""
        context = list(context)[len(context) - (self.order - 1) :] if self.order > 1 else []
        words = np.arange(self.vocab_size, dtype=np.int64)
        windows = np.column_stack([np.tile(np.asarray(context, np.int64), (len(words), 1)), words])
        return np.exp(self.log_probs(windows))


def estimate_discounts(counts: np.ndarray) -> tuple[float, float, float] | None:
    """(D1, D2, D3+) from the count-of-counts of ``counts`` (Chen & Goodman 1998);
    None where some ``n_r`` (r = 1..4) is 0 or a discount falls outside (0, r]."""
    n = [int(np.count_nonzero(counts == r)) for r in (1, 2, 3, 4)]
    if min(n) == 0:
        return None
    y = n[0] / (n[0] + 2 * n[1])
    d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
    if not all(0 < d_r <= r for r, d_r in enumerate(d, 1)):
        return None
    return d


def fit(
    stream: np.ndarray,
    order: int,
    vocab_size: int,
    *,
    context_only: int = 0,
    discounts: Sequence[Sequence[float]] | None = None,
) -> KneserNey:
    """Estimate an interpolated modified Kneser-Ney model of ``order`` from ``stream``.

    ``stream``: token ids, ``PAD`` (-1) where n-grams must not cross (sentence boundaries);
    ids ``vocab_size .. vocab_size + context_only - 1`` are context-only tokens (``<s>``), given
    no unigram probability. ``discounts``: (D1, D2, D3+) per order 1..order instead of the
    estimates (for tests).
    """
    if order < 1:
        raise KNError(f"order must be at least 1, got {order}")
    x = np.asarray(stream, dtype=np.int64)
    width = vocab_size + context_only
    if x.size == 0 or x.max() < 0:
        raise KNError("the training stream has no words")
    if x.min() < PAD or x.max() >= width:
        raise KNError(f"token ids must lie in 0..{width - 1} (or {PAD} as a boundary)")
    if discounts is not None and len(discounts) != order:
        raise KNError(f"give (D1, D2, D3+) for each of the {order} orders, got {len(discounts)}")
    n = len(x)
    before = np.concatenate([[PAD], x[:-1]])  # the word before each position
    grams = [np.where(x >= 0, x, PAD)]  # grams[k-1][t]: id of the k-gram ending at t
    raw = [np.bincount(x[x >= 0], minlength=width)]
    no_left = [np.bincount(x[(x >= 0) & (before < 0)], minlength=width)]
    keys_of: list[np.ndarray] = []
    suffix_of: list[np.ndarray] = []
    for k in range(2, order + 1):
        prev = grams[-1]
        pos = np.flatnonzero((prev[:-1] >= 0) & (x[1:] >= 0)) + 1
        keys, first, inverse = np.unique(
            prev[pos - 1] * width + x[pos], return_index=True, return_inverse=True
        )
        inverse = inverse.ravel()
        current = np.full(n, PAD, dtype=np.int64)
        current[pos] = inverse
        start = pos - k + 1  # first position of each occurrence
        left = np.where(start >= 1, x[np.maximum(start - 1, 0)], PAD)
        raw.append(np.bincount(inverse, minlength=len(keys)))
        no_left.append(np.bincount(inverse[left < 0], minlength=len(keys)))
        suffix_of.append(prev[pos[first]])  # the (k-1)-gram ending where it ends
        keys_of.append(keys)
        grams.append(current)
    del grams
    # adjusted counts: raw at the top order; below, distinct left extensions + left-less uses
    adjusted = [raw[-1]]
    for k in range(order - 1, 0, -1):
        size = width if k == 1 else len(keys_of[k - 2])
        extensions = np.bincount(suffix_of[k - 1], minlength=size)
        adjusted.insert(0, extensions + no_left[k - 1])
    adjusted[0][vocab_size:] = 0  # context-only tokens (<s>) are never predicted
    chosen, fallback = [], []
    for k in range(1, order + 1):
        if discounts is not None:
            chosen.append(tuple(float(d) for d in discounts[k - 1]))
            continue
        estimate = estimate_discounts(adjusted[k - 1])
        if estimate is None:
            fallback.append(k)
            estimate = FALLBACK_DISCOUNTS
        chosen.append(estimate)
    table = np.asarray(chosen, dtype=np.float64)
    model = KneserNey(
        order=order,
        vocab_size=vocab_size,
        width=width,
        discounts=table,
        unigram_counts=adjusted[0],
        unigram_total=float(adjusted[0].sum()),
        unigram_backoff=0.0,
        levels=[],
        ngrams=[int(np.count_nonzero(adjusted[0]))] + [len(keys) for keys in keys_of],
        fallback_orders=fallback,
    )
    model.unigram_backoff = float(model._discount(1, adjusted[0]).sum() / model.unigram_total)
    for k in range(2, order + 1):
        keys, counts = keys_of[k - 2], adjusted[k - 1]
        contexts = keys // width
        size = width if k == 2 else len(keys_of[k - 3])
        total = np.bincount(contexts, weights=counts, minlength=size)
        freed = np.bincount(contexts, weights=model._discount(k, counts), minlength=size)
        backoff = np.divide(freed, total, out=np.zeros(size), where=total > 0)
        model.levels.append(_Level(keys, counts, total, backoff))
    return model


def ngram_windows(stream: np.ndarray, targets: np.ndarray, order: int) -> np.ndarray:
    """``stream[t-n+1 .. t]`` for every target ``t`` (rows), PAD before the stream's start: the
    window of ``window_inputs`` with its target as last column."""
    stream = np.asarray(stream, dtype=np.int64)
    at = np.asarray(targets, dtype=np.int64)[:, None] + np.arange(1 - order, 1)
    return np.where(at >= 0, stream[np.maximum(at, 0)], PAD)


def sentence_bounded(tokens: np.ndarray, eos: int, bos: int) -> tuple[np.ndarray, np.ndarray]:
    """The standard (SRILM, Mikolov) form of a part: every sentence (words up to and with
    ``<eos>``; a last line cut off by the corpus cap ends without it) becomes ``PAD <s> w1 ..
    <eos>``. Returns the stream and the positions of the original tokens in it (every word and
    every ``<eos>`` is scored; ``<s>`` only as context)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    sentence = np.concatenate([[0], np.cumsum(tokens[:-1] == eos)])  # sentence of each token
    starts = np.flatnonzero(np.diff(sentence, prepend=-1))  # first token of each sentence
    positions = np.arange(len(tokens)) + 2 * sentence + 2
    stream = np.full(len(tokens) + 2 * len(starts), PAD, dtype=np.int64)
    stream[positions] = tokens
    stream[starts + 2 * np.arange(len(starts)) + 1] = bos
    return stream, positions


def perplexity(model: KneserNey, windows: np.ndarray) -> float:
    """``exp(mean NLL)`` of ``model`` over the rows of ``windows``."""
    if len(windows) == 0:
        raise KNError("no targets to score")
    return float(np.exp(-np.mean(model.log_probs(windows))))


def score_corpus(
    corpus: Corpus, order: int, first_target: int, progress: bool = False
) -> dict[str, Any]:
    """KN perplexities of ``corpus`` under our conventions (running windows, targets from
    ``first_target``) and the standard ones (``sentence_bounded``), with the model's facts."""
    started = time.time()
    model = fit(corpus.train, order, corpus.vocab_size)
    summary: dict[str, Any] = {"fit_seconds": round(time.time() - started, 2)}
    for part in ("valid", "test"):
        tokens = getattr(corpus, part)
        targets = scored_targets(len(tokens), first_target)
        summary[f"{part}_perplexity"] = perplexity(model, ngram_windows(tokens, targets, order))
        summary[f"{part}_scored"] = len(targets)
    summary["discounts"] = model.discounts.round(6).tolist()
    summary["ngrams"] = model.ngrams
    summary["fallback_discount_orders"] = model.fallback_orders
    if progress:
        print(
            f"[kn{order}] ours: valid {summary['valid_perplexity']:.2f}, test "
            f"{summary['test_perplexity']:.2f} ({time.time() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    eos = corpus.word_to_id.get(EOS)
    if eos is not None:
        standard: dict[str, Any] = {}
        bos = corpus.vocab_size
        train, _ = sentence_bounded(corpus.train, eos, bos)
        model = fit(train, order, corpus.vocab_size, context_only=1)
        for part in ("valid", "test"):
            stream, positions = sentence_bounded(getattr(corpus, part), eos, bos)
            windows = ngram_windows(stream, positions, order)
            standard[f"{part}_perplexity"] = perplexity(model, windows)
            standard[f"{part}_scored"] = len(positions)
        standard["discounts"] = model.discounts.round(6).tolist()
        standard["ngrams"] = model.ngrams
        summary["sentence_bounded"] = standard
    summary["seconds"] = round(time.time() - started, 2)
    if progress and "sentence_bounded" in summary:
        s = summary["sentence_bounded"]
        print(
            f"[kn{order}] sentence-bounded: valid {s['valid_perplexity']:.2f}, test "
            f"{s['test_perplexity']:.2f} ({summary['seconds']:.0f} s in all)",
            file=sys.stderr,
            flush=True,
        )
    return summary


def baseline_config(config: RunConfig, order: int) -> dict[str, Any]:
    """What a KN record depends on: the corpus and its preparation (from the neural run
    ``config`` whose table row it joins), the order, the first scored position."""
    return {
        "corpus": config.corpus,
        "model": f"KN{order}",
        "order": order,
        "method": METHOD,
        "max_words": config.max_words,
        "min_count": config.min_count,
        "tokenizer": config.tokenizer,
        "lowercase": config.lowercase,
        "first_target": config.first_target,
        "windows": "running (across <eos>, as the neural models' windows)",
    }


def record_path(config: dict[str, Any], results_dir: Path) -> Path:
    """``<results>/kneser-ney/<corpus>/kn<order>-max<max_words>-min<min_count>.json`` (a
    ``-cased`` suffix for cased text, ``-first<k>`` for another first target)."""
    stem = f"kn{config['order']}-max{config['max_words']}-min{config['min_count']}"
    if not config["lowercase"]:
        stem += "-cased"
    if config["first_target"] != FIRST_TARGET:
        stem += f"-first{config['first_target']}"
    return Path(results_dir) / KN_FOLDER / config["corpus"] / f"{stem}.json"


def _hardware() -> dict[str, Any]:
    """Where a record was made (NumPy only: no Keras backend or accelerator involved)."""
    return {**machine(), "backend": "numpy", "device": "cpu"}


def load_baselines(results_dir: Path, corpus: str) -> list[dict[str, Any]]:
    """The finished KN records of ``corpus`` (each with its ``path``), by order."""
    records = load_records(Path(results_dir) / KN_FOLDER / corpus)
    return sorted((r for r in records if r.get("finished")), key=lambda r: r["config"]["order"])


def run_baseline(
    corpus: Corpus,
    run_config: RunConfig,
    order: int,
    results_dir: Path = RESULTS_DIR,
    force: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Estimate and score KN of ``order`` on ``corpus`` (prepared for ``run_config``, a neural
    run of the table, as ``load_lm_corpus`` does); write and return its record (a finished
    record with the same config is returned as it is unless ``force``)."""
    config = baseline_config(run_config, order)
    path = record_path(config, results_dir)
    existing = load_record(path)
    if existing is not None and existing.get("config") == config and existing.get("finished"):
        if not force:
            if progress:
                print(f"[skip] KN{order}: finished ({path})", file=sys.stderr, flush=True)
            return existing
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    summary = score_corpus(corpus, order, run_config.first_target, progress)
    record = {
        "config": config,
        "command": command_line(),
        "corpus": {
            "source": corpus.source,
            "vocab_size": corpus.vocab_size,
            "words": {p: len(getattr(corpus, p)) for p in ("train", "valid", "test")},
            "unk_rate_train": corpus.unk_rate("train"),
            "settings": corpus.settings,
        },
        "summary": summary,
        "finished": True,
        "started": started,
        "ended": time.strftime("%Y-%m-%d %H:%M:%S"),
        "wall_seconds": summary["seconds"],
        "versions": library_versions(),
        "hardware": _hardware(),
    }
    write_json_atomic(path, record)
    return record


def matching(config: Mapping[str, Any], baselines: Sequence[dict[str, Any]]) -> list[dict]:
    """The KN records prepared like the neural run ``config`` (``SHARED_SETTINGS``), by order."""
    found = [
        b for b in baselines if all(b["config"].get(k) == config.get(k) for k in SHARED_SETTINGS)
    ]
    return sorted(found, key=lambda b: b["config"]["order"])


def table_rows(baselines: Sequence[dict[str, Any]], base_mean: float | None) -> list[str]:
    """Rows "KN3 (count-based)", ... of an LM table (its nine columns): test and valid
    perplexity, ratio to the neural 5-gram's mean; no seeds, so no std and no paired columns."""
    rows = []
    for b in baselines:
        s = b["summary"]
        ratio = f"{s['test_perplexity'] / base_mean:.3f}" if base_mean else "–"
        label = f"KN{b['config']['order']} (count-based)"
        test, valid = f"{s['test_perplexity']:.2f}", f"{s['valid_perplexity']:.2f}"
        rows.append(table_row([label, test, "1 (no seeds)", valid, ratio, "–", "–", "–", "–"]))
    return rows


def table_note(baselines: Sequence[dict[str, Any]]) -> str:
    """The paragraph under an LM table that says what its KN rows are."""
    if not baselines:
        return ""
    orders = [b["config"]["order"] for b in baselines]
    names = ", ".join(f"KN{n}" for n in orders)
    corpus = baselines[0]["config"]["corpus"]
    standard = [b["summary"].get("sentence_bounded") for b in baselines]
    text = (
        f"{names}: count-based baselines, not neural models: interpolated modified Kneser-Ney "
        f"(Chen & Goodman 1998) of orders {', '.join(map(str, orders))}, estimated on the same "
        "training part and scored on the same targets (running windows across `<eos>`, from "
        f"position {baselines[0]['config']['first_target']}); deterministic, so no std, and "
        "left out of the paired columns."
    )
    if all(standard):
        text += (
            " Under the standard sentence-bounded convention (`<s> … </s>`, every token scored), "
            "test: "
            + ", ".join(
                f"KN{n} {s['test_perplexity']:.2f}" for n, s in zip(orders, standard, strict=True)
            )
        )
        published = LITERATURE.get(corpus, {})
        if any(n in published for n in orders):
            text += (
                " (Mikolov 2012, Table 4.1: "
                + ", ".join(f"KN{n} {published[n]}" for n in orders if n in published)
                + ")"
            )
        text += "."
    if corpus in LITERATURE_OTHERS:
        text += f" Also published on this split (same table): {LITERATURE_OTHERS[corpus]}."
    commands = sorted({b.get("command", "?") for b in baselines})
    return text + " Produced by: " + "; ".join(f"`{c}`" for c in commands)


def table_baselines(
    table: str,
    source: CorpusSource,
    preset: str,
    results_dir: Path = RESULTS_DIR,
    orders: Sequence[int] = ORDERS,
    progress: bool = True,
    force: bool = False,
) -> list[dict[str, Any]]:
    """The KN rows of ``table`` under ``preset``: one record per order (finished ones are kept
    unless ``force``), on the corpus exactly as the table's neural runs prepare it."""
    config = make_config(source, preset, table=table)
    corpus = load_lm_corpus(source, config, progress=progress)
    return [
        run_baseline(corpus, config, order, results_dir, force=force, progress=progress)
        for order in dict.fromkeys(orders)
    ]
