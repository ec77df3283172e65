"""Where does a prefix model lose on whole-sentence prefixes? Its perplexity by prefix length.

    python scripts/prefix_length_breakdown.py RECORD [RECORD ...] [--fixed 1 2 20]

Thesis 4.2 scores a model trained with p prefix words with "the words back to the previous
<eos>" (the ``sentence`` eval prefix; ``batches.sentence_starts``: the ``<eos>`` itself is the
farthest prefix word, so no prefix is empty). At the PTB `paper` scale the 5-gram + 5 scores
~151 that way against ~138 with 10, 20 or 50 words. This script scores a finished run's final
model target by target (``lm.target_nll``) on the test part, groups the targets by the length
of their sentence prefix, and prints for each group its share of the targets and its
perplexity with: the sentence prefix; the same prefix without its farthest word where that is
the ``<eos>`` and not the only word; fixed prefixes of the trained p and of each ``--fixed``
length; and the mean attention weight the model gives the ``<eos>`` in the sentence prefix,
beside 1/length (what uniform attention would give it). One target in ~20 (the fifth word of a
sentence) has the ``<eos>`` alone as its prefix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import keras
import numpy as np

from thesis_repro.corpus import EOS
from thesis_repro.lm import (
    SENTENCE,
    RunConfig,
    load_lm_corpus,
    load_run_model,
    record_file_of,
    record_source,
    scored_inputs,
    target_nll,
)
from thesis_repro.lm.batches import PAD_ID
from thesis_repro.records import load_record

EDGES = (1, 2, 5, 10, 20, 40)  # groups [1, 2), [2, 5), ..., [40, ...) of prefix words


def without_farthest_eos(inputs: dict[str, np.ndarray], eos: int) -> dict[str, np.ndarray]:
    """``inputs`` with each prefix's farthest word masked where it is ``eos`` and not alone."""
    lengths = inputs["prefix_length"]
    rows = np.arange(len(lengths))
    farthest = np.maximum(lengths - 1, 0)
    drop = (inputs["prefix"][rows, farthest] == eos) & (lengths >= 2)
    prefix = inputs["prefix"].copy()
    prefix[rows[drop], farthest[drop]] = PAD_ID
    return {**inputs, "prefix": prefix, "prefix_length": np.where(drop, lengths - 1, lengths)}


def farthest_weight(
    model: keras.Model, inputs: dict[str, np.ndarray], batch_size: int = 1000
) -> np.ndarray:
    """The attention weight alpha of each prefix's farthest word (thesis 2.2.2)."""
    alpha_model = keras.Model(model.inputs, model.get_layer("attention").output[1])
    alpha = np.asarray(alpha_model.predict(inputs, batch_size=batch_size, verbose=0))
    return alpha[np.arange(len(alpha)), np.maximum(inputs["prefix_length"] - 1, 0)]


def breakdown(path: Path, fixed: Sequence[int], edges: Sequence[int] = EDGES) -> str:
    """The markdown table of one finished run's final model (see the module docstring)."""
    record = load_record(path)
    if record is None or not record.get("finished"):
        raise SystemExit(f"error: {path} is not a finished run's record")
    config = RunConfig(**record["config"])
    if not config.prefix:
        raise SystemExit(f"error: {config.name} has no prefix")
    corpus = load_lm_corpus(record_source(record), config, progress=False)
    eos = corpus.word_to_id.get(EOS)
    if eos is None:
        raise SystemExit(f"error: corpus {config.corpus} has no {EOS}, so no sentence prefixes")
    model = load_run_model(path, jit_compile=False)
    title = f"{config.name} ({path}): test perplexity by the length of the sentence prefix"
    return breakdown_table(model, corpus.test, config, eos, fixed, edges, title)


def breakdown_table(
    model: keras.Model,
    tokens: np.ndarray,
    config: RunConfig,
    eos: int,
    fixed: Sequence[int],
    edges: Sequence[int] = EDGES,
    title: str = "",
) -> str:
    """Perplexity of ``model`` on ``tokens`` by sentence-prefix length (module docstring)."""
    targets, sentence = scored_inputs(tokens, config, SENTENCE, eos)
    words = tokens[targets]
    nll = {
        "sentence": target_nll(model, sentence, words),
        f"sentence without {EOS}": target_nll(model, without_farthest_eos(sentence, eos), words),
    }
    for n in sorted({config.prefix, *fixed}):
        nll[f"{n} words"] = target_nll(model, scored_inputs(tokens, config, n, eos)[1], words)
    lengths = sentence["prefix_length"]
    at_eos = farthest_weight(model, sentence)
    header = ["sentence prefix words", "share of targets", *nll, f"alpha({EOS}) (uniform)"]
    lines = [title, ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups = []
    for lo, hi in zip(edges, [*edges[1:], None], strict=True):
        label = str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" if hi else f"{lo}+"
        groups.append((label, (lengths >= lo) & (lengths < hi) if hi else lengths >= lo))
    for label, chosen in [*groups, ("all", np.ones_like(lengths, bool))]:
        if not chosen.any():
            continue
        cells = [f"{np.exp(values[chosen].mean()):.2f}" for values in nll.values()]
        uniform = np.mean(1.0 / lengths[chosen])
        weight = f"{at_eos[chosen].mean():.3f} ({uniform:.3f})"
        lines.append(f"| {label} | {chosen.mean():.3f} | " + " | ".join(cells) + f" | {weight} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path, help="finished LM runs with a prefix")
    parser.add_argument(
        "--fixed",
        type=int,
        nargs="+",
        default=[1, 2, 20],
        metavar="N",
        help="fixed prefix lengths to compare, besides the trained one (default: 1 2 20)",
    )
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.fixed):
        parser.error("--fixed lengths must be at least 1")
    for path in args.records:
        print(breakdown(record_file_of(path), args.fixed), flush=True)


if __name__ == "__main__":
    sys.exit(main())
