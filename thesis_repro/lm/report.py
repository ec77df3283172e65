"""Tables and figures of the language-model experiments (thesis 3.2, 4.2) from their records.

``report`` renders, for every ``results/lm/<corpus>/<table>/``, ``table.md`` (test perplexity,
mean ± std over instances, beside the thesis's numbers: ``render_table``) and the validation
perplexity per epoch (thesis Figs 3.4, 3.5: ``render_figure``); for the future-work tables of
thesis 4.2, the perplexity by training regime and evaluation prefix (``render_future_table``,
``render_future_figure``), drawing on the other tables' records of the same corpus; and the
attention-example figures of thesis 3.2.4 from their records. Failed runs (loss NaN or infinite:
``records``) are left out of every table and figure, and each table names those it left out. The
run configurations and the thesis's numbers live in ``config.py``.

Tables 3.1, 3.2 and PTB also show the count-based Kneser-Ney rows KN3 and KN5
(``kneser_ney.py``; records under ``results/kneser-ney/<corpus>/``, matched to a
table by its runs' corpus settings), outside the paired columns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import ticker

from thesis_repro.lm import kneser_ney
from thesis_repro.lm.config import (
    FUTURE_TABLES,
    GAP_TABLE,
    HISTORY_CAP,
    NAME,
    SENTENCE,
    TABLES,
    VARIANTS,
    FutureTable,
    Regime,
    RunConfig,
    model_label,
    preset_config,
)
from thesis_repro.lm.examples import render_examples, summarise_examples
from thesis_repro.lm.gap import report_gap
from thesis_repro.markdown import table_head, table_row
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import Record, failed_note, load_records, produced_by, split_failed
from thesis_repro.settings import FIGURES_DIR, RESULTS_DIR
from thesis_repro.spread import format_spread, mean_std

_GROUP_IGNORES = ("order", "prefix", "seed", "min_prefix", "position_aware")


ModelKey = tuple[int, int, int, str]  # order, prefix, min_prefix, position_aware


def _model_key(config: dict) -> ModelKey:
    """A record's model: what ``_groups`` leaves out, apart from the seed."""
    return (
        config["order"],
        config["prefix"],
        config["min_prefix"],
        config["position_aware"],
    )


def _precision(config: dict) -> str:
    """`` (dtype policy mixed_bfloat16)`` for a mixed-precision group; nothing for float32."""
    policy = config["dtype_policy"]
    return "" if policy == "float32" else f" (dtype policy {policy})"


def _groups(records: list[Record]) -> dict[str, list[dict]]:
    """Records of one table split by everything but model and seed (preset, overrides)."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        key = json.dumps({k: v for k, v in record["config"].items() if k not in _GROUP_IGNORES})
        groups.setdefault(key, []).append(record)
    return groups


def render_table(records: list[Record], baselines: Sequence[dict] = ()) -> str:
    """Markdown: test perplexity (mean ± std over instances) beside the thesis's numbers;
    failed runs are left out and named at the end. A thesis table (3.1, 3.2, PTB) also gets the
    rows of the Kneser-Ney ``baselines`` prepared like its runs (``kneser_ney.matching``),
    outside the paired columns."""
    records, failed = split_failed(records)
    lines: list[str] = []
    for group in _groups(records).values():
        config = group[0]["config"]
        spec = TABLES.get(config["table"])
        models: list[ModelKey] = [(o, p, 0, "none") for o, p in spec.models] if spec else []
        for r in group:
            if _model_key(r["config"]) not in models:
                models.append(_model_key(r["config"]))
        vocab = {r.get("corpus", {}).get("vocab_size") for r in group} - {None}
        variant = VARIANTS[config["variant"]]
        title = spec.title if spec else "Single runs: test perplexity"
        lines += [
            f"### {title}",
            "",
            f"Corpus `{config['corpus']}` (max_words {config['max_words']:,}, min_count "
            f"{config['min_count']}, V = {', '.join(f'{v:,}' for v in sorted(vocab)) or '?'}), "
            f"preset `{config['preset']}`{_precision(config)}: {config['epochs']} epochs, batch "
            f"{config['batch_size']}, SGD eps0 = {variant.eps0:g}, decay {variant.decay:g}, "
            f"momentum {variant.momentum:g}, weight decay {config['weight_decay']:g}·||W||² on "
            f"W_mh, W_hl; targets from position {config['first_target']}. Std: sample std "
            "(ddof 1) over instances. Ratio: mean perplexity / the 5-gram's, over the seeds "
            "both have (a seed only one has would tilt it). Paired: the model's "
            "test perplexity minus the 5-gram's (10-gram's) of the same seed, mean ± std "
            "over the seeds both have (negative: the model is better).",
            "",
            *table_head(
                [
                    "model",
                    "test perplexity (ours)",
                    "instances",
                    "valid (last epoch)",
                    "ratio (ours)",
                    "− 5-gram, paired",
                    "− 10-gram, paired",
                    "thesis",
                    "ratio (thesis)",
                ]
            ),
        ]
        finished = {
            key: [r for r in group if r.get("finished") and _model_key(r["config"]) == key]
            for key in models
        }
        base = finished.get((5, 0, 0, "none"))
        references = [_scores(finished.get((order, 0, 0, "none"), []), "test") for order in (5, 10)]
        base_mean = mean_std([r["summary"]["test_perplexity"] for r in base])[0] if base else None
        paper = spec.paper if spec else {}
        for key in models:
            label = model_label(*key)
            done = finished[key]
            started = [r for r in group if _model_key(r["config"]) == key]
            if done:
                tests = [r["summary"]["test_perplexity"] for r in done]
                ours = format_spread(tests)
                valid = format_spread([r["summary"]["final_valid_perplexity"] for r in done])
            else:
                ours, valid = "–", "–"
            ours_by_seed = _scores(done, "test")
            ratio = _paired_ratio(ours_by_seed, references[0])
            paired = [
                _paired_difference(ours_by_seed, reference) if key[:2] != (order, 0) else "–"
                for order, reference in zip((5, 10), references, strict=True)
            ]
            running = len(started) - len(done)
            count = f"{len(done)}" + (f" (+{running} unfinished)" if running else "")
            shape = key[:2] if key[2:] == (0, "none") else None
            if shape in paper:
                p_mean, p_std = paper[shape]
                thesis = f"{p_mean:.2f} ± {p_std:.2f}"
                p_ratio = f"{p_mean / paper[(5, 0)][0]:.3f}" if (5, 0) in paper else "–"
            else:
                thesis, p_ratio = "–", "–"
            cells = [label, ours, count, valid, ratio, paired[0], paired[1], thesis, p_ratio]
            lines.append(table_row(cells))
        counted = kneser_ney.matching(config, baselines) if spec else []
        lines += kneser_ney.table_rows(counted, base_mean)
        lines += ["", *([kneser_ney.table_note(counted), ""] if counted else [])]
        lines += [produced_by(group, limit=2), ""]
    return "\n".join(lines + _failed_lines(failed))


def _failed_lines(failed: list[Record]) -> list[str]:
    """The note naming the failed runs a table and its figure leave out (none: no lines)."""
    return [failed_note(failed, " of this table and its figure") + ".", ""] if failed else []


def _plot_band(ax: Any, curves: list[np.ndarray], color: str, label: str) -> None:
    """Mean of ``curves`` (ragged: NaN-padded) against the epoch, min-max band if several."""
    stacked = np.full((len(curves), max(len(c) for c in curves)), np.nan)
    for row, curve in enumerate(curves):
        stacked[row, : len(curve)] = curve
    epochs = np.arange(1, stacked.shape[1] + 1)
    ax.plot(epochs, np.nanmean(stacked, 0), "o-", color=color, ms=3, label=label)
    if len(curves) > 1:
        low, high = np.nanmin(stacked, 0), np.nanmax(stacked, 0)
        ax.fill_between(epochs, low, high, color=color, alpha=0.2, lw=0)


def render_figure(records: list[Record], path: Path, title: str) -> Path | None:
    """Validation perplexity after each epoch (left) and minus the 5-gram's of the same seed
    (right): mean per model, min-max band over instances."""

    plt = pyplot()
    by_model: dict[ModelKey, dict[int, np.ndarray]] = {}  # model -> seed -> valid curve
    for r in records:
        if r["epochs"]:
            curve = np.array([e["valid_perplexity"] for e in r["epochs"]])
            by_model.setdefault(_model_key(r["config"]), {})[r["config"]["seed"]] = curve
    if not by_model:
        return None
    base = by_model.get((5, 0, 0, "none"), {})
    fig, (ax, diff_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for index, (key, curves) in enumerate(sorted(by_model.items())):
        color, label = f"C{index}", model_label(*key)
        runs = f"{len(curves)} run{'s' if len(curves) > 1 else ''}"
        _plot_band(ax, list(curves.values()), color, f"{label} ({runs})")
        seeds = sorted(set(curves) & set(base))
        if seeds and key != (5, 0, 0, "none"):
            diffs = []
            for seed in seeds:
                length = min(len(curves[seed]), len(base[seed]))
                diffs.append(curves[seed][:length] - base[seed][:length])
            _plot_band(diff_ax, diffs, color, f"{label} ({len(seeds)} paired)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(ticker.ScalarFormatter())
    ax.set_ylabel("validation perplexity")
    ax.set_title(title, fontsize=9)
    diff_ax.axhline(0, color="C0", lw=1, ls="--", label="5-gram")
    diff_ax.set_yscale("symlog", linthresh=2)  # linear within ±2, where the late epochs are
    low, high = diff_ax.get_ylim()
    diff_ax.set_yticks(
        [t for t in (-50, -20, -10, -5, -2, -1, 0, 1, 2, 5, 10, 20, 50) if low <= t <= high]
    )
    diff_ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    diff_ax.set_ylabel("Δ validation perplexity (symlog: linear within ±2)")
    diff_ax.set_title("Minus the 5-gram of the same seed (below 0: better)", fontsize=9)
    for axis in (ax, diff_ax):
        axis.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        axis.set_xlabel("epoch")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def _future_groups(table: str, records: list[Record]) -> dict[str, dict[Regime, list[dict]]]:
    """Records of a future-work table's regimes (from any table folder of the corpus), split
    by scale (preset, overrides); only groups with a run of the table itself."""
    spec = FUTURE_TABLES[table]
    groups: dict[str, dict[Regime, list[dict]]] = {}
    for r in records:
        config = r["config"]
        regime = spec.regime_of(config)
        if regime is not None:
            ignore = (*_GROUP_IGNORES, "table")
            key = json.dumps({k: v for k, v in config.items() if k not in ignore})
            groups.setdefault(key, {}).setdefault(regime, []).append(r)
    return {
        key: group
        for key, group in groups.items()
        if any(r["config"]["table"] == table for runs in group.values() for r in runs)
    }


def _scores(runs: list[Record], column: str) -> dict[int, float]:
    """Seed -> test perplexity of finished runs at eval prefix ``column`` (``"test"``: the
    trained prefix, whose eval score is the test perplexity exactly, so a run not scored at
    other prefixes still has it; a run without a prefix scores the same in every column)."""
    scores = {}
    for r in runs:
        summary = r.get("summary", {})
        if not r.get("finished"):
            continue
        prefix = r["config"]["prefix"]
        if column in ("test", str(prefix)) or not prefix:
            scores[r["config"]["seed"]] = summary["test_perplexity"]
        elif column in summary.get("eval_prefix", {}):
            scores[r["config"]["seed"]] = summary["eval_prefix"][column]
    return scores


def _paired_difference(
    ours: dict[int, float], theirs: dict[int, float], out_of: int | None = None
) -> str:
    """Mean ± std of ``ours - theirs`` over the seeds both have, with their count if it is
    below ``out_of`` (the seeds the row counts; default: those of ``ours``)."""
    seeds = sorted(set(ours) & set(theirs))
    if not seeds:
        return "–"
    total = len(ours) if out_of is None else out_of
    return format_spread([ours[s] - theirs[s] for s in seeds]) + (
        f" ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})" if len(seeds) < total else ""
    )


def _paired_ratio(ours: dict[int, float], base: dict[int, float]) -> str:
    """Mean of ``ours`` over mean of ``base``, both over the seeds both have ("–": none)."""
    seeds = sorted(set(ours) & set(base))
    if not seeds:
        return "–"
    return f"{np.mean([ours[s] for s in seeds]) / np.mean([base[s] for s in seeds]):.3f}"


def _cell(runs: list[Record], column: str) -> str:
    values = list(_scores(runs, column).values())
    if not values:
        return "–"
    finished = sum(1 for r in runs if r.get("finished"))
    return format_spread(values) + (
        f" ({len(values)}/{finished})" if len(values) < finished else ""
    )


def _sentence_words(group: dict[Regime, list[dict]]) -> float | None:
    for runs in group.values():
        for r in runs:
            words = r.get("summary", {}).get("eval_prefix_words", {})
            if SENTENCE in words:
                return float(words[SENTENCE])
    return None


def _column_label(column: str, sentence_words: float | None) -> str:
    if column != SENTENCE:
        return f"eval {column}"
    mean = f", {sentence_words:.1f} on average" if sentence_words is not None else ""
    return f"eval sentence (≤ {HISTORY_CAP} words{mean})"


def render_future_table(table: str, records: list[Record]) -> str:
    """Markdown for a thesis 4.2 table: test perplexity, mean ± std over instances, by model
    (rows) and eval prefix (columns); with position-aware rows, the paired difference to the
    same model without position awareness, and the learned distance biases. Failed runs of its
    regimes are left out and named at the end."""
    spec = FUTURE_TABLES[table]
    records, failed = split_failed(records)
    failed = [r for r in failed if spec.regime_of(r["config"]) is not None]
    columns = [str(e) for e in spec.eval_prefixes]
    lines: list[str] = []
    for group in _future_groups(table, records).values():
        config = next(iter(group.values()))[0]["config"]
        vocab = {r.get("corpus", {}).get("vocab_size") for runs in group.values() for r in runs}
        vocab -= {None}
        variant = VARIANTS[spec.variant]
        words = _sentence_words(group)
        lines += [
            f"### {spec.title}",
            "",
            f"Corpus `{config['corpus']}` (max_words {config['max_words']:,}, min_count "
            f"{config['min_count']}, V = {', '.join(f'{v:,}' for v in sorted(vocab)) or '?'}), "
            f"preset `{config['preset']}`{_precision(config)}: {config['epochs']} epochs, batch "
            f"{config['batch_size']}, SGD eps0 = {variant.eps0:g}, decay {variant.decay:g}, "
            f"momentum {variant.momentum:g}; targets from position {config['first_target']}. "
            "Test perplexity, mean ± sample std (ddof 1) over instances (seeds), each model "
            "evaluated without retraining with the given number of prefix words; bold: the "
            "trained prefix; `+ 1..20`: trained with a prefix length uniform in 1..20 per "
            "minibatch; n-gram rows see no prefix (the same value in every column); "
            "`(k/n)`: only k of n finished runs have that score so far "
            "(`python -m thesis_repro.lm evaluate`).",
            "",
            *table_head(
                ["model", "instances", "test (trained prefix)"]
                + [_column_label(c, words) for c in columns]
            ),
        ]
        for regime in spec.regimes:
            runs = group.get(regime, [])
            done = sum(1 for r in runs if r.get("finished"))
            count = f"{done}" + (f" (+{len(runs) - done} unfinished)" if len(runs) > done else "")
            cells = []
            for column in columns:
                text = _cell(runs, column)
                trained = regime.prefix and column == str(regime.prefix)
                cells.append(f"**{text}**" if trained and text != "–" else text)
            lines.append(table_row([model_label(*regime.key), count, _cell(runs, "test"), *cells]))
        lines += _position_lines(spec, group, columns) or _context_lines(spec, group, columns)
        lines += ["", produced_by([r for runs in group.values() for r in runs]), ""]
    return "\n".join(lines + _failed_lines(failed))


def _context_lines(
    spec: FutureTable, group: dict[Regime, list[dict]], columns: list[str]
) -> list[str]:
    """Each attention model scored at eval prefix k minus itself at its trained prefix, paired
    by seed: the seed-to-seed spread cancels, what is left is what the context length does."""
    rows = []
    for regime in (g for g in spec.regimes if g.prefix):
        runs = group.get(regime, [])
        trained = _scores(runs, "test")
        if trained:
            # a column scored for fewer seeds than the row counts says how many
            cells = [_paired_difference(_scores(runs, c), trained, len(trained)) for c in columns]
            rows.append(table_row([model_label(*regime.key), str(len(trained)), *cells]))
    if not rows:
        return []
    return [
        "",
        "Each attention model at the eval prefix minus the same model (same seed) at its "
        "trained prefix (negative: that context length helps; 0.00 ± 0.00 at the trained "
        "prefix, which reproduces the test perplexity exactly); mean ± std over seeds:",
        "",
        *table_head(["model", "seeds"] + [f"eval {c}" for c in columns]),
        *rows,
    ]


def _position_lines(
    spec: FutureTable, group: dict[Regime, list[dict]], columns: list[str]
) -> list[str]:
    """Paired differences (aware - plain, same seeds) and the learned biases beta_j."""
    aware = [g for g in spec.regimes if g.position_aware != "none"]
    if not aware:
        return []
    lines = [
        "",
        "Position awareness minus the same model without it, paired by seed (negative: "
        "position awareness helps); mean ± std over the seeds both have:",
        "",
        *table_head(["model", "seeds", "test (trained prefix)"] + [f"eval {c}" for c in columns]),
    ]
    biases = []
    for regime in aware:
        plain = replace(regime, position_aware="none")
        plain_runs = next((runs for g, runs in group.items() if g.key == plain.key), [])
        cells, seeds = [], set()
        for column in ["test", *columns]:
            ours, theirs = _scores(group.get(regime, []), column), _scores(plain_runs, column)
            seeds |= set(ours) & set(theirs)
            cells.append(_paired_difference(ours, theirs))
        lines.append(table_row([model_label(*regime.key), str(len(seeds)), *cells]))
        betas = [
            r["summary"]["distance_bias"]
            for r in group.get(regime, [])
            if r.get("finished") and "distance_bias" in r.get("summary", {})
        ]
        if betas:
            mean = np.mean(np.asarray(betas, dtype=float), axis=0)
            biases.append(
                f"- {model_label(*regime.key)} ({len(betas)} run{'s' if len(betas) > 1 else ''}): "
                + ", ".join(f"{b:+.2f}" for b in mean)
            )
    if biases:
        lines += [
            "",
            "Learned distance bias beta_j added to the attention energies, mean over runs, "
            "j = 0 (the word just before the window) to p-1 (farther words use beta_(p-1)):",
            "",
            *biases,
        ]
    return lines


def render_future_figure(
    table: str, group: dict[Regime, list[dict]], path: Path, title: str
) -> Path | None:
    """Test perplexity against the eval prefix, one line per training regime (mean, error
    bars: std over instances); n-gram rows as horizontal lines (thesis 4.2)."""
    plt = pyplot()
    spec = FUTURE_TABLES[table]
    columns = [str(e) for e in spec.eval_prefixes]
    x = np.arange(len(columns))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    families = sorted({(g.order, g.prefix, g.min_prefix) for g in spec.regimes if g.prefix})
    lines = [g for g in spec.regimes if g.prefix]
    for regime in spec.regimes:
        runs = group.get(regime, [])
        if not regime.prefix:
            values = list(_scores(runs, "test").values())
            if values:
                ax.axhline(
                    np.mean(values), color="0.4", lw=1, ls=(0, (1, 2)) if regime.order > 5 else "--"
                )
                ax.annotate(
                    model_label(*regime.key),
                    (x[-1], np.mean(values)),
                    fontsize=7,
                    ha="right",
                    va="bottom",
                    color="0.3",
                )
                drawn = True
            continue
        stats = [_scores(runs, c) for c in columns]
        if not any(stats):
            continue
        mean = np.array([np.mean(list(s.values())) if s else np.nan for s in stats])
        std = np.array([np.std(list(s.values()), ddof=1) if len(s) > 1 else 0.0 for s in stats])
        color = f"C{families.index((regime.order, regime.prefix, regime.min_prefix))}"
        style = {"none": "o-", "bias": "s--", "embedding": "^:"}[regime.position_aware]
        count = max(len(s) for s in stats)
        dodge = 0.06 * (lines.index(regime) - (len(lines) - 1) / 2)  # error bars apart
        ax.errorbar(
            x + dodge,
            mean,
            yerr=std,
            fmt=style,
            color=color,
            ms=4,
            capsize=2,
            label=f"{model_label(*regime.key)} ({count} runs)",
        )
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    words = _sentence_words(group)
    labels = [
        c if c != SENTENCE else "sentence" + (f"\n(~{words:.0f})" if words else "") for c in columns
    ]
    ax.set_xticks(x, labels)
    ax.set_xlabel("prefix words at evaluation (model trained with the prefix in its label)")
    ax.set_ylabel("test perplexity")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def _report_future(table: str, corpus_folder: Path, figures_dir: Path) -> str:
    """Table text (also written to its folder's ``table.md``) and figure of a future table."""
    records = load_records(corpus_folder)
    text = render_future_table(table, records)
    (corpus_folder / table / "table.md").write_text(text)
    records, _ = split_failed(records)  # the figure leaves failed runs out (the table says so)
    for key, group in _future_groups(table, records).items():
        config = RunConfig(**next(iter(group.values()))[0]["config"])
        name = f"lm_{table}_{corpus_folder.name}_{config.preset}"
        if config != preset_config(config):
            name += "_" + hashlib.sha256(key.encode()).hexdigest()[:8]
        title = f"{table} ({corpus_folder.name}, preset {config.preset}): test perplexity"
        render_future_figure(table, group, Path(figures_dir) / f"{name}.pdf", title)
    return text


def report(results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR) -> str:
    """For every ``results/lm/<corpus>/<table>/``: ``table.md`` and its figure PDF(s); a
    future-work table (thesis 4.2) also draws on the other tables' records of its corpus."""
    root = Path(results_dir) / NAME
    parts = []
    for folder in sorted(p for p in root.glob("*/*") if p.is_dir()):
        records = load_records(folder)
        if not records:
            continue
        corpus, table = folder.parent.name, folder.name
        if table in FUTURE_TABLES:
            parts.append(_report_future(table, folder.parent, Path(figures_dir)))
            continue
        if table == GAP_TABLE:  # issue 18: draws on Tables 3.1 and 3.2 too
            parts.append(report_gap(folder.parent, Path(figures_dir)))
            continue
        text = render_table(records, kneser_ney.load_baselines(Path(results_dir), corpus))
        (folder / "table.md").write_text(text)
        parts.append(text)
        spec = TABLES.get(table)
        records, _ = split_failed(records)  # the figures leave failed runs out (as the table)
        for key, group in _groups(records).items():
            config = RunConfig(**group[0]["config"])
            if spec and spec.figure != table:
                name, what = f"lm_fig{spec.figure}", f"Figure {spec.figure}"
            else:
                name, what = f"lm_{table}", f"{table.upper()} table, {config.variant} variant"
            name += f"_{corpus}_{config.preset}" + ("" if spec else f"_{config.variant}")
            if config != preset_config(config):  # overrides: keep apart from the preset's
                name += "_" + hashlib.sha256(key.encode()).hexdigest()[:8]
            title = f"{what} ({corpus}, preset {config.preset}): validation perplexity"
            render_figure(group, Path(figures_dir) / f"{name}.pdf", title)

    if render_examples(Path(results_dir), Path(figures_dir)):  # thesis 3.2.4, from records
        parts.append(summarise_examples(Path(results_dir)))
    return "\n".join(parts) if parts else f"no records under {root}\n"
