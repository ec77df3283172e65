"""A generated corpus with real long-range dependencies, for runs without a real corpus.

The language-model experiment falls back to it when no corpus is given; its words far back
predict later words at distances a 5-gram cannot see (see ``synthetic_corpus``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from thesis_repro.corpus.prepare import DEFAULT_SPLIT, Corpus, check_sizes, split_sizes
from thesis_repro.corpus.text import UNK, CorpusError

__all__ = ["synthetic_corpus"]


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
    n_train, n_valid, _ = split_sizes(len(words), split)
    source = f"synthetic(n_words={n_words}, seed={seed})"
    parts_words = {
        "train": words[:n_train],
        "valid": words[n_train : n_train + n_valid],
        "test": words[n_train + n_valid :],
    }
    check_sizes(source, {p: len(w) for p, w in parts_words.items()}, "use a larger n_words")
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
