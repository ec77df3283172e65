"""Attention examples of thesis 3.2.4 as figures: what the attention LM looks at in a sentence.

The thesis shows, for a whole sentence, "results of attention on 5-word substrings", the
"transparency of words" corresponding "to weights assigned to them". Here every window of an
attention LM (``model.attention_lm``) over the sentence is one line of text: its
prefix words drawn with opacity proportional to their attention weight (``alpha_i / max_j
alpha_j``, so the most attended word of each line is fully opaque), then, after a thin bar, the
n-1 window words in plain black, then the predicted word in grey. Several models (e.g. with and
without position awareness, thesis 4.2) are drawn side by side, one panel each, for the same
sentence. Words outside the vocabulary (``<UNK>`` for the model) are set in italics.

    draw_attention_examples(model, corpus, "Tekst zdania ...", "figures/attention.pdf")

Computing and drawing are separate: ``example_record`` computes the weights of every window
(a JSON-ready dict), ``draw_example`` draws such a record. The committed examples (``EXAMPLES``:
the thesis's three Wall Street Journal sentences in PTB form, for the PTB 5-gram + 5 model; three
Polish sentences from the eltec-pol test part, for the Table 3.1 5-gram + 5 model; one of them
with and without position awareness, thesis 4.2) are computed from finished runs by
``python -m thesis_repro.lm examples`` into ``results/lm/attention_examples/<name>.json``;
``python -m thesis_repro report`` redraws ``figures/attention_<name>.pdf`` from those records,
so the figures need no model.

The text is set in a monospaced font, so a line's layout is just character counts. Used by
``python -m thesis_repro.lm show-attention`` too.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro.corpus import Corpus
from thesis_repro.files import write_json_atomic
from thesis_repro.lm.config import LMError, RunConfig, record_file_of
from thesis_repro.lm.corpora import load_lm_corpus, record_source
from thesis_repro.lm.evaluate import load_run_model
from thesis_repro.lm.model import model_shape, prefix_attention
from thesis_repro.markdown import table_head, table_row
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import CorruptRecord, command_line, load_record, warn_corrupt

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


def panel_windows(model: Any, ids: np.ndarray, prefix: int | None = None) -> dict[str, Any]:
    """The model's attention over every window of the sentence ``ids`` (thesis 3.2.4), as
    JSON-ready data: ``order`` and per window ``target``, prefix ``positions`` (reading order)
    and their ``weights``."""
    order, _ = model_shape(model)
    windows = [
        {
            "target": int(example.target),
            "positions": example.positions.tolist(),
            "weights": [round(float(w), 6) for w in example.weights],
        }
        for example in prefix_attention(model, ids, prefix)
    ]
    return {"order": int(order), "windows": windows}


def panel_lines(
    panel: dict[str, Any], words: Sequence[str], known: Sequence[bool], color: str = "#1f4e9c"
) -> list[list[Word]]:
    """One line per window of a panel: prefix words with opacity ``alpha / max alpha``, a bar,
    the window words, the predicted word (grey, if any)."""
    order = panel["order"]
    lines = []
    for window in panel["windows"]:
        target, weights = window["target"], window["weights"]
        top = max(weights) or 1.0
        line = [
            Word(words[p], w / top, color, not known[p])
            for p, w in zip(window["positions"], weights, strict=True)
        ]
        line.append(Word("|", 1.0, "0.75"))
        line += [
            Word(words[p], 1.0, "black", not known[p]) for p in range(target - order + 1, target)
        ]
        if target < len(words):
            line.append(Word("→ " + words[target], 1.0, "0.55", not known[target]))
        lines.append(line)
    return lines


def example_record(
    models: Any | Sequence[Any],
    vocab: Corpus | Sequence[str],
    sentence: str | Sequence[str],
    titles: Sequence[str] | None = None,
    prefix: int | None = None,
) -> dict[str, Any]:
    """The attention of every window of ``sentence`` for each model (one panel each), as a
    JSON-ready record for ``draw_example``. ``vocab``: the ``Corpus`` the models were trained
    on, or its word list; ``prefix``: prefix words to give the models (default: each one's
    trained prefix)."""
    models = list(models) if isinstance(models, Sequence) else [models]
    titles = list(titles) if titles is not None else [m.name for m in models]
    if len(titles) != len(models):
        raise ValueError(f"{len(models)} models but {len(titles)} titles.")
    words, ids, known = encode_sentence(vocab, sentence)
    panels = [
        {"title": title, **panel_windows(model, ids, prefix)}
        for model, title in zip(models, titles, strict=True)
    ]
    if not all(panel["windows"] for panel in panels):
        raise ValueError(
            f"the sentence has {len(words)} words: too few for a window and a prefix word "
            "(it needs at least n words for an n-gram model)."
        )
    return {"words": list(words), "known": known.tolist(), "panels": panels}


#: The figure's key (printed under the panels).
KEY = (
    "Key: each line is one prediction. Prefix words (blue) are drawn with opacity = their "
    "attention weight / the line's largest; | separates the prefix from the n-gram window "
    "(black); → the word to predict (grey); italics: not in the vocabulary (<UNK> for the model)."
)


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
    record = example_record(model, vocab, sentence, titles, prefix)
    return draw_example(record, path, fontsize, color)


def draw_example(
    record: dict[str, Any], path: str | os.PathLike, fontsize: float = 8.0, color: str = "#1f4e9c"
) -> Path:
    """Draw an ``example_record`` (thesis 3.2.4) to ``path``: the sentence, then one panel per
    model with a line per window. Returns the path."""
    plt = pyplot()
    words, known = record["words"], record["known"]
    titles = [panel["title"] for panel in record["panels"]]
    panels = [panel_lines(panel, words, known, color) for panel in record["panels"]]
    widths = [
        max(max(_width(line) for line in lines), len(t))
        for lines, t in zip(panels, titles, strict=True)
    ]
    total = sum(widths) + PANEL_GAP * (len(widths) - 1)
    font = {"family": "DejaVu Sans Mono", "size": fontsize, "va": "top"}
    fig = plt.figure()
    char, row = _char_width(fig, font), LINE_HEIGHT * fontsize / 72  # inches
    header = textwrap.wrap(" ".join(words), max(total, 40))
    key = textwrap.wrap(KEY, max(total, 40))
    body = max(len(lines) for lines in panels)
    rows = len(header) + 1 + 1 + body + 1 + len(key)
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
    for index, text in enumerate(key):
        put(0, len(header) + 2 + body + 1 + index, text, color="0.35")
    return save_figure(fig, path)


# Thesis 3.2.4's three WSJ sentences as the PTB preprocessing (Mikolov et al.) writes them:
# lowercase, no punctuation, numbers as N (the thesis's model read the spoken forms "nineteen
# eighty eight", "one thousand"). Words outside PTB's 10k vocabulary (rosner, grambling,
# libman, tensions) are <unk> for the model and set in italics.
WSJ_SENTENCES = (
    "brian rosner an assistant district attorney in manhattan who eventually prosecuted "
    "messrs. grambling and libman",
    "the company said the plant will be completed by late N and will employ between N and N people",
    "trade tensions are a growing concern if we get into a broad front trade war it could slow "
    "everyone down and change the political climate dramatically",
)


SENTENCE_ENDS = frozenset({".", "!", "?", "…", "<eos>"})


@dataclass(frozen=True)
class Panel:
    """One model of an example: the run ``<preset>-<model>-<variant>-seed<seed>`` of ``table``
    (the naming of ``RunConfig.name``)."""

    table: str
    model: str
    variant: str
    title: str
    seed: int = 0

    def record_file(self, results_dir: Path, corpus: str, preset: str) -> Path:
        name = f"{preset}-{self.model}-{self.variant}-seed{self.seed}.json"
        return Path(results_dir) / "lm" / corpus / self.table / name


@dataclass(frozen=True)
class Example:
    """Sentences drawn for the same panels; ``sentences=()``: the first ``count`` sentences of
    the corpus's test part that ``pick_sentences`` accepts. Figures are ``attention_<name>_<k>``."""

    name: str
    corpus: str
    panels: tuple[Panel, ...]
    sentences: tuple[str, ...] = ()
    count: int = 3
    note: str = ""


_PLAIN_ELTEC = Panel("3.1", "5gram+5", "thesis", "5-gram + 5 (Table 3.1 model)")


EXAMPLES: tuple[Example, ...] = (
    Example(
        "wsj",
        "ptb",
        (Panel("ptb", "5gram+5", "momentum", "5-gram + 5 trained on PTB"),),
        WSJ_SENTENCES,
        note="thesis 3.2.4's sentences, PTB form",
    ),
    Example("eltec", "eltec-pol", (_PLAIN_ELTEC,), note="eltec-pol test part"),
    Example(
        "eltec_position",
        "eltec-pol",
        (
            _PLAIN_ELTEC,
            Panel("future-position", "5gram+5-posbias", "thesis", "+ distance bias (4.2)"),
            Panel("future-position", "5gram+5-posemb", "thesis", "+ distance embedding (4.2)"),
        ),
        count=1,
        note="thesis 4.2: the same sentence with and without position awareness",
    ),
)


EXAMPLES_FOLDER = Path("lm") / "attention_examples"  # under the results directory


def pick_sentences(
    corpus: Corpus, count: int = 3, min_words: int = 12, max_words: int = 25
) -> list[str]:
    """The first ``count`` sentences of ``corpus``'s test part with ``min_words..max_words``
    tokens (sentence-final punctuation included) and no ``<UNK>``: a fixed rule, so the choice
    is reproducible and not picked for what the attention does. Sentences end at ``.``, ``!``,
    ``?``, ``…`` and at the ``<eos>`` of a paragraph end (not included)."""
    ends = {i for i, word in enumerate(corpus.vocab) if word in SENTENCE_ENDS}
    eos = corpus.word_to_id.get("<eos>")
    picked: list[str] = []
    sentence: list[int] = []
    for token in corpus.test.tolist():
        if token != eos:
            sentence.append(token)
        if token in ends:
            if min_words <= len(sentence) <= max_words and 0 not in sentence:
                picked.append(" ".join(corpus.vocab[i] for i in sentence))
                if len(picked) == count:
                    break
            sentence = []
    return picked


def examples_for(preset: str, examples: Sequence[Example] = EXAMPLES) -> list[Example]:
    """The examples of a preset: ``smoke`` trains every table on the synthetic corpus, so its
    examples use that corpus and sentences picked from its test part."""
    if preset != "smoke":
        return list(examples)
    return [replace(e, corpus="synthetic", sentences=()) for e in examples]


def make_examples(
    results_dir: Path,
    figures_dir: Path,
    preset: str = "cpu",
    examples: Sequence[Example] = EXAMPLES,
    log: Any = print,
    force: bool = False,
) -> list[Path]:
    """Compute every example from the final models of its finished runs (seed 0 of
    ``preset``), write its records (``<results>/lm/attention_examples/<name>_<k>.json``, with
    ``_<preset>`` appended for presets other than cpu) and figures. Examples whose runs are not
    finished (or whose final model is gone) are skipped with a one-line note, and so are those
    whose records exist, unless ``force``."""

    written = []
    suffix = "" if preset == "cpu" else f"_{preset}"
    for example in examples_for(preset, examples):
        count = len(example.sentences) or example.count
        names = [f"{example.name}_{k}{suffix}" for k in range(1, count + 1)]
        folder = Path(results_dir) / EXAMPLES_FOLDER
        if not force and all((folder / f"{name}.json").exists() for name in names):
            log(f"[skip] attention examples {example.name}: records exist (force to recompute)")
            continue
        files = [p.record_file(results_dir, example.corpus, preset) for p in example.panels]
        records = [load_record(f) for f in files]
        missing = [
            str(f) for f, r in zip(files, records, strict=True) if not (r or {}).get("finished")
        ]
        if missing:
            log(f"[skip] attention examples {example.name}: no finished run {', '.join(missing)}")
            continue
        try:
            models = [load_run_model(f) for f in files]
        except LMError as error:
            log(f"[skip] attention examples {example.name}: {error}")
            continue
        config = RunConfig(**records[0]["config"])
        corpus = load_lm_corpus(record_source(records[0]), config, progress=False)
        sentences = list(example.sentences) or pick_sentences(corpus, example.count)
        for number, sentence in enumerate(sentences, 1):
            record = example_record(models, corpus, sentence, [p.title for p in example.panels])
            record.update(
                example=example.name,
                note=example.note,
                runs=[str(f) for f in files],
                command=command_line(),
            )
            name = f"{example.name}_{number}{suffix}"
            write_json_atomic(folder / f"{name}.json", record)
            written.append(draw_example(record, Path(figures_dir) / f"attention_{name}.pdf"))
            log(f"wrote {written[-1]}")
    return written


def _full_windows(record: dict[str, Any], panel: int) -> list[dict[str, Any]]:
    """The windows of one panel of an example record whose prefix has the full width."""
    windows = record["panels"][panel]["windows"]
    width = max(len(w["positions"]) for w in windows)
    return [w for w in windows if len(w["positions"]) == width]


def most_attended(record: dict[str, Any], panel: int = 0) -> list[tuple[str, int, float]]:
    """(word, windows in which it had the largest weight, mean of that weight) of one panel,
    over the windows with a full prefix, most frequent first; ties keep sentence order."""
    tops: dict[str, list[float]] = {}
    for window in _full_windows(record, panel):
        best = int(np.argmax(window["weights"]))
        word = record["words"][window["positions"][best]]
        tops.setdefault(word, []).append(window["weights"][best])
    ranked = sorted(tops.items(), key=lambda item: -len(item[1]))
    return [(word, len(weights), float(np.mean(weights))) for word, weights in ranked]


def weight_by_distance(record: dict[str, Any], panel: int = 0) -> list[float]:
    """Mean attention weight by distance from the predicted word (nearest prefix word first)
    over one panel's windows with a full prefix: where in the prefix the attention looks."""
    full = [w["weights"][::-1] for w in _full_windows(record, panel)]
    return np.mean(np.asarray(full, dtype=float), axis=0).tolist()


def _readable(path: Path) -> dict[str, Any] | None:
    """The example record at ``path``; None, with a one-line warning, if it cannot be read."""

    try:
        return load_record(path)
    except CorruptRecord as error:
        warn_corrupt(error)
        return None


def summarise_examples(results_dir: Path) -> str:
    """Markdown: per example record and panel, the words attention weighs most (thesis 3.2.4)."""
    rows = []
    for path in sorted((Path(results_dir) / EXAMPLES_FOLDER).glob("*.json")):
        record = _readable(path)
        if record is None:
            continue
        for index, panel in enumerate(record["panels"]):
            ranked = most_attended(record, index)
            full = sum(count for _, count, _ in ranked)
            words = ", ".join(f"{w} ({n}×, {m:.2f})" for w, n, m in ranked[:4])
            profile = weight_by_distance(record, index)  # one weight per prefix word
            by_distance = ", ".join(f"{w:.2f}" for w in profile)
            uniform = f"{1 / len(profile):.2f}"
            cells = [path.stem, panel["title"], str(full), words, by_distance, uniform]
            rows.append(table_row(cells))
    if not rows:
        return ""
    return "\n".join(
        [
            "### Thesis 3.2.4 (and 4.2): the words and distances the attention weighs most",
            "",
            "Over the windows with a full prefix: the prefix word with the largest attention "
            "weight (times it was the largest, mean weight then), and the mean weight by "
            "distance from the predicted word (nearest prefix word first); uniform = 1 / prefix "
            "length. "
            "Sentences and figures: `results/lm/attention_examples/`, `figures/attention_*.pdf`.",
            "",
            *table_head(
                [
                    "example",
                    "model",
                    "windows",
                    "most weighted (times, mean weight)",
                    "weight by distance (nearest first)",
                    "uniform",
                ]
            ),
            *rows,
            "",
        ]
    )


def render_examples(results_dir: Path, figures_dir: Path) -> list[Path]:
    """Redraw ``figures/attention_<name>.pdf`` from every example record (no model needed)."""
    paths = []
    for path in sorted((Path(results_dir) / EXAMPLES_FOLDER).glob("*.json")):
        record = _readable(path)
        if record is not None:
            paths.append(draw_example(record, Path(figures_dir) / f"attention_{path.stem}.pdf"))
    return paths


def show_attention(
    paths: Sequence[str | os.PathLike],
    sentence: str,
    out: str | os.PathLike,
    prefix: int | None = None,
) -> Path:
    """Thesis 3.2.4 attention examples of ``sentence`` for the runs at ``paths`` (records or
    ``.keras`` models), one panel each; the vocabulary is the runs' corpus (its cache)."""

    models, titles, vocab, corpus = [], [], None, None
    for path in map(Path, paths):
        record = load_record(record_file_of(path))
        if record is None:
            raise LMError(f"no record of a run for {path} (looked for {record_file_of(path)})")
        config = RunConfig(**record["config"])
        if not config.prefix:
            raise LMError(f"{path} is a {config.model} model: attention needs --prefix > 0")
        corpus = load_lm_corpus(record_source(record), config, progress=False)
        if vocab is not None and corpus.vocab != vocab:
            raise LMError("the models were trained on different vocabularies")
        vocab = corpus.vocab
        models.append(load_run_model(path if path.suffix == ".keras" else record_file_of(path)))
        titles.append(f"{config.model} (seed {config.seed})")
    assert corpus is not None  # argparse requires a path
    return draw_attention_examples(models, corpus, sentence, out, titles=titles, prefix=prefix)
