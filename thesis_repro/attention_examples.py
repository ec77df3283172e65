"""Attention examples of thesis 3.2.4 as figures: what the attention LM looks at in a sentence.

The thesis shows, for a whole sentence, "results of attention on 5-word substrings", the
"transparency of words" corresponding "to weights assigned to them". Here every window of an
attention LM (``language_models.attention_lm``) over the sentence is one line of text: its
prefix words drawn with opacity proportional to their attention weight (``alpha_i / max_j
alpha_j``, so the most attended word of each line is fully opaque), then, after a thin bar, the
n-1 window words in plain black, then the predicted word in grey. Several models (e.g. with and
without position awareness, thesis 4.2) are drawn side by side, one panel each, for the same
sentence. Words outside the vocabulary (``<UNK>`` for the model) are set in italics.

    draw_attention_examples(model, corpus, "Tekst zdania ...", "figures/attention.pdf")

The text is set in a monospaced font, so a line's layout is just character counts. Used by
``python -m thesis_repro.lm show-attention`` and for the thesis's WSJ sentences.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro.corpus import Corpus
from thesis_repro.language_models import model_shape, prefix_attention

CHAR_WIDTH = 0.602  # advance of DejaVu Sans Mono, in em
LINE_HEIGHT = 1.55  # in em
PANEL_GAP = 4  # characters between panels
MARGIN = 0.15  # inches


@dataclass(frozen=True)
class Word:
    """One word of a drawn line: text, opacity and style."""

    text: str
    alpha: float = 1.0
    color: str = "black"
    italic: bool = False


def encode_sentence(
    vocab: Corpus | Sequence[str], sentence: str | Sequence[str]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Words, ids and in-vocabulary flags of ``sentence``.

    With a ``Corpus`` a string is tokenised with the corpus's settings (lowercasing, regex or
    whitespace); with a plain word list (``vocab[i]`` is the word of id ``i``, 0 = ``<UNK>``) a
    string is split on whitespace.
    """
    if isinstance(vocab, Corpus):
        words = vocab.tokenize(sentence) if isinstance(sentence, str) else list(sentence)
        lookup = vocab.word_to_id
    else:
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        lookup = {w: i for i, w in enumerate(vocab)}
    ids = np.array([lookup.get(w, 0) for w in words], dtype=np.int32)
    known = np.array([w in lookup and lookup[w] != 0 for w in words], dtype=bool)
    return words, ids, known


def attention_lines(
    model: Any,
    words: Sequence[str],
    ids: np.ndarray,
    known: np.ndarray,
    prefix: int | None = None,
    color: str = "#1f4e9c",
) -> list[list[Word]]:
    """One line per window of the sentence (thesis 3.2.4): prefix words with opacity
    ``alpha / max alpha``, a bar, the window words, the predicted word (grey, if any)."""
    order, _ = model_shape(model)
    lines = []
    for example in prefix_attention(model, ids, prefix):
        top = float(example.weights.max()) or 1.0
        line = [
            Word(words[p], float(w) / top, color, not known[p])
            for p, w in zip(example.positions.tolist(), example.weights, strict=True)
        ]
        line.append(Word("|", 1.0, "0.75"))
        line += [
            Word(words[p], 1.0, "black", not known[p])
            for p in range(example.target - order + 1, example.target)
        ]
        if example.target < len(words):
            line.append(Word("→ " + words[example.target], 1.0, "0.55", not known[example.target]))
        lines.append(line)
    return lines


def _width(line: Sequence[Word]) -> int:
    return sum(len(w.text) + 1 for w in line) - 1


def _char_width(fig: Any, font: dict) -> float:
    """Advance of one character in inches: the font's, or as rendered on screen (raster
    renderers round glyph advances to whole pixels), whichever is wider, so words never
    overlap."""
    sample = fig.text(0, 0, "x" * 100, **font)
    rendered = sample.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi / 100
    sample.remove()
    return max(CHAR_WIDTH * font["size"] / 72, rendered)


def draw_attention_examples(
    model: Any | Sequence[Any],
    vocab: Corpus | Sequence[str],
    sentence: str | Sequence[str],
    path: str | os.PathLike,
    titles: Sequence[str] | None = None,
    prefix: int | None = None,
    fontsize: float = 8.0,
    color: str = "#1f4e9c",
) -> Path:
    """Write the attention-example figure of ``sentence`` (thesis 3.2.4) to ``path``.

    ``model``: an attention LM, or several (one panel each, e.g. plain and position-aware,
    thesis 4.2); ``vocab``: the ``Corpus`` they were trained on, or its word list; ``prefix``:
    prefix words to give the models (default: each one's trained prefix). Returns the path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(model) if isinstance(model, Sequence) else [model]
    titles = list(titles) if titles is not None else [m.name for m in models]
    if len(titles) != len(models):
        raise ValueError(f"{len(models)} models but {len(titles)} titles.")
    words, ids, known = encode_sentence(vocab, sentence)
    panels = [attention_lines(m, words, ids, known, prefix, color) for m in models]
    if not all(panels):
        raise ValueError(
            f"the sentence has {len(words)} words: too few for a window and a prefix word "
            "(it needs at least n words for an n-gram model)."
        )
    widths = [
        max(max(_width(line) for line in lines), len(t))
        for lines, t in zip(panels, titles, strict=True)
    ]
    total = sum(widths) + PANEL_GAP * (len(widths) - 1)
    font = {"family": "DejaVu Sans Mono", "size": fontsize, "va": "top"}
    fig = plt.figure()
    char, row = _char_width(fig, font), LINE_HEIGHT * fontsize / 72  # inches
    header = textwrap.wrap(" ".join(words), max(total, 40))
    rows = len(header) + 1 + 1 + max(len(lines) for lines in panels)
    fig_width, fig_height = max(total, 40) * char + 2 * MARGIN, rows * row + 2 * MARGIN
    fig.set_size_inches(fig_width, fig_height)

    def put(column: float, line: float, text: str, **style: Any) -> None:
        x, y = MARGIN + column * char, fig_height - MARGIN - line * row
        fig.text(x, y, text, transform=fig.dpi_scale_trans, **{**font, **style})

    for index, text in enumerate(header):
        put(0, index, text, color="0.2")
    offset = 0
    for lines, title, width in zip(panels, titles, widths, strict=True):
        put(offset, len(header) + 1, title, weight="bold")
        for number, line in enumerate(lines):
            column = offset
            for word in line:
                put(
                    column,
                    len(header) + 2 + number,
                    word.text,
                    color=word.color,
                    alpha=word.alpha,
                    style="italic" if word.italic else "normal",
                )
                column += len(word.text) + 1
        offset += width + PANEL_GAP
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
