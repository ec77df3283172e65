"""Thesis 3.1: tables (learning starts, generalisation, input gates) and figures (thesis Figs
3.1-3.3), rendered from the records alone."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from thesis_repro.addition.config import (
    BASELINE_MSE,
    GATE_KEYS,
    LEARNING_THRESHOLD,
    MODEL_LABELS,
    MODELS,
    NAME,
    PAPER_LEARNING_STARTS,
    PRESETS,
    preset_runs,
    summarize,
)
from thesis_repro.files import write_bytes_atomic
from thesis_repro.markdown import table_head, table_row
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import (
    Record,
    failed_note,
    load_records,
    produced_by,
    run_seconds,
    split_failed,
)
from thesis_repro.settings import FIGURES_DIR, RESULTS_DIR
from thesis_repro.spread import format_spread


def _select(records: list[Record], preset: str | None) -> list[dict]:
    """The records of ``preset``'s runs (all records when ``preset`` is None)."""
    if preset is None:
        return records
    wanted = [c.as_record() for c in preset_runs(PRESETS[preset])]
    return [r for r in records if r["config"] in wanted]


def _groups(records: list[Record]) -> dict[tuple[str, int], list[dict]]:
    """Records by (model, steps), in the order of ``MODELS``."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for record in sorted(
        records, key=lambda r: (MODELS.index(r["config"]["model"]), r["config"]["steps"])
    ):
        groups.setdefault((record["config"]["model"], record["config"]["steps"]), []).append(record)
    return groups


def _spread(values: list[float]) -> str:
    """``mean ± std [min, max]`` to 3 significant digits (``spread.format_spread``)."""
    return format_spread(values, ".3g", with_range=True)


def _steps_spread(values: list[float]) -> str:
    """``mean ± std [min, max]`` of step counts, as whole numbers."""
    return format_spread(values, ".0f", with_range=True)


def render_table(records: list[Record]) -> str:
    """Markdown: per run, per model, generalisation and gate tables (from the records); failed
    runs are left out and named at the end."""
    everything = records
    records, failed = split_failed(records)
    threshold = f"{LEARNING_THRESHOLD:g}"
    per_epoch = "/".join(str(n) for n in _values(records, "steps_per_epoch")) or "100"
    lines = [
        "### Thesis 3.1: addition problem, LSTM vs attention-gated LSTM",
        "",
        f'"Learning starts" = first step at which the mean training MSE over {per_epoch} steps '
        f"is below "
        f"{threshold} (the baseline of predicting 1 is 1/6 = 0.167; having learned one of the "
        f'two values gives 1/12 = 0.083); "for good" = first step from which it stays below '
        f"{threshold} to the end of the run (passing dips excluded). Thesis: learning starts "
        f"at about 2000 steps with attention, about 8000 without.",
        "",
        *table_head(
            [
                "model",
                "steps",
                "runs",
                f"below {threshold} at some point",
                "learning starts at step: mean ± std [min, max]",
                f"below {threshold} for good",
                "for good from step",
                "thesis",
                "final training MSE",
            ]
        ),
    ]
    groups = _groups(records)
    for (model, steps), group in groups.items():
        summaries = [summarize(r) for r in group]
        starts = [s["first_step_below_threshold"] for s in summaries]
        learned = [s for s in starts if s is not None]
        kept = [
            s["stays_below_threshold_from"]
            for s in summaries
            if s["stays_below_threshold_from"] is not None
        ]
        finals = [s["final_train_mse"] for s in summaries if s["final_train_mse"] is not None]
        running = sum(not r.get("finished") for r in group)
        lines.append(
            table_row(
                [
                    model,
                    str(steps),
                    f"{len(group)}" + (f" ({running} running)" if running else ""),
                    f"{len(learned)} of {len(group)}",
                    _steps_spread(learned),
                    f"{len(kept)} of {len(group)}",
                    _steps_spread(kept),
                    f"~{PAPER_LEARNING_STARTS[model]}",
                    _spread(finals),
                ]
            )
        )
    finished = [r for r in records if r.get("generalisation")]
    if finished:
        lengths = sorted({int(k) for r in finished for k in r["generalisation"]})
        lines += [
            "",
            "#### Generalisation MSE by sequence length (mean ± std [min, max] over runs; "
            "baseline 0.167)",
            "",
            *table_head(["model", "steps"] + [str(n) for n in lengths]),
        ]
        for (model, steps), group in _groups(finished).items():
            cells = [
                _spread(
                    [r["generalisation"][str(n)] for r in group if str(n) in r["generalisation"]]
                )
                for n in lengths
            ]
            lines.append(table_row([model, str(steps), *cells]))
        lines += [
            "",
            "#### What the input gates do (after training; mean over runs)",
            "",
            "Input gate i_t and energy e_t averaged over the two marked steps and over the other "
            f"steps of {'/'.join(str(n) for n in _values(finished, 'gate_size'))} "
            'training-length sequences; "units opening at markers" = fraction of the '
            f"{'/'.join(str(n) for n in _values(finished, 'units'))} units whose mean i_t is "
            "higher at the marked steps. The pretrained Raffel "
            "network's own held-out MSE and energies are given where it exists.",
            "",
            *table_head(
                [
                    "model",
                    "steps",
                    "i_t marked",
                    "i_t other",
                    "units opening at markers",
                    "e_t marked",
                    "e_t other",
                    "pretrained net: MSE, e_t marked / other",
                ]
            ),
        ]
        for (model, steps), group in _groups(finished).items():
            gates = [_mean(group, "gates", key) for key in GATE_KEYS]
            pre = [r for r in group if "pretrain" in r]
            pretrained = (
                f"{_mean(pre, 'pretrain', 'test_mse')}, {_mean(pre, 'pretrain', 'energy_marked')}"
                f" / {_mean(pre, 'pretrain', 'energy_other')}"
                if pre
                else "–"
            )
            lines.append(table_row([model, str(steps), *gates, pretrained]))
    lines += [
        "",
        "#### Runs",
        "",
        *table_head(
            [
                "run",
                f"learning starts (< {threshold})",
                "for good from",
                "final training MSE",
                "MSE at shortest / longest test length",
                "i_t marked / other",
                "minutes",
            ]
        ),
    ]
    lines += [_run_row(r) for group in groups.values() for r in group]
    if failed:
        lines += ["", failed_note(failed, " of these tables and the figures") + "."]
    lines += ["", produced_by(everything)]
    return "\n".join(lines) + "\n"


def _count(number: int, noun: str) -> str:
    """``1 run``, ``3 runs``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _values(records: list[Record], key: str) -> list:
    """The distinct values of ``config[key]`` among ``records``, sorted."""
    return sorted({r["config"][key] for r in records})


def _run_row(record: Record) -> str:
    """One line of the runs table."""
    summary = summarize(record)
    gen = record.get("generalisation", {})
    gates = record.get("gates", {})
    final = summary["final_train_mse"]
    lengths = sorted(gen, key=int)
    ends = [lengths[0], lengths[-1]] if len(lengths) > 1 else lengths
    cells = [
        Path(record["path"]).stem + ("" if record.get("finished") else " (running)"),
        str(summary["first_step_below_threshold"] or "–"),
        str(summary["stays_below_threshold_from"] or "–"),
        "–" if final is None else f"{final:.3g}",
        " / ".join(f"{gen[k]:.3g}" for k in ends) or "–",
        f"{gates['input_gate_marked']:.3g} / {gates['input_gate_other']:.3g}" if gates else "–",
        f"{run_seconds(record) / 60:.1f}",
    ]
    return table_row(cells)


def _mean(records: list[Record], source: str, key: str) -> str:
    """Mean of ``record[source][key]`` over the records that have it, as text."""
    values = [r[source][key] for r in records if key in r.get(source, {})]
    return f"{statistics.mean(values):.3g}" if values else "–"


def render_training_figure(records: list[Record], path: Path) -> Path | None:
    """Thesis Figs 3.1 and 3.2: every run's training MSE, one panel per model, shared axes."""
    plt = pyplot()

    groups = _groups([r for r in records if r["epochs"]])
    if not groups:
        return None
    fig, axes = plt.subplots(
        1, len(groups), figsize=(4.2 * len(groups), 3.4), squeeze=False, sharey=True
    )
    for ax, ((model, steps), group) in zip(axes[0], groups.items(), strict=True):
        for r in group:
            per_epoch = r["config"]["steps_per_epoch"]
            ax.plot(
                [e["epoch"] * per_epoch for e in r["epochs"]],
                [e["train_loss"] for e in r["epochs"]],
                lw=1,
                label=f"seed {r['config']['seed']}",
            )
        ax.axhline(BASELINE_MSE, color="k", ls="--", lw=1, label="baseline 1/6")
        ax.axhline(LEARNING_THRESHOLD, color="grey", ls=":", lw=1, label="threshold 0.1")
        if PAPER_LEARNING_STARTS[model] <= steps:
            ax.axvline(PAPER_LEARNING_STARTS[model], color="C3", ls=":", lw=1, label="thesis start")
        ax.set_yscale("log")
        ax.set_title(f"{MODEL_LABELS[model]}\n{_count(len(group), 'run')}", fontsize=8)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    per_epoch = "/".join(str(n) for n in _values(records, "steps_per_epoch"))
    axes[0][0].set_ylabel(f"training MSE (mean over {per_epoch} steps)")
    fig.tight_layout()
    return save_figure(fig, path)


def render_generalisation_figure(records: list[Record], path: Path) -> Path | None:
    """Thesis Fig 3.3: mean generalisation MSE against length (bars: min..max over runs)."""
    plt = pyplot()

    groups = _groups([r for r in records if r.get("generalisation")])
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for index, ((model, steps), group) in enumerate(groups.items()):
        lengths = sorted({int(k) for r in group for k in r["generalisation"]})
        values = [  # runs may differ in --eval-lengths: each length's runs only
            [r["generalisation"][str(n)] for r in group if str(n) in r["generalisation"]]
            for n in lengths
        ]
        means = np.array([np.mean(v) for v in values])
        low = means - np.array([min(v) for v in values])
        high = np.array([max(v) for v in values]) - means
        ax.errorbar(
            lengths,
            means,
            yerr=[low, high],
            fmt="o-",
            ms=3,
            capsize=2,
            color=f"C{index}",
            label=f"{model} ({steps} steps, {_count(len(group), 'run')})",
        )
    ax.axhline(BASELINE_MSE, color="k", ls="--", lw=1, label="baseline 1/6")
    ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel("MSE (mean over runs; bars min..max)")
    ax.set_title("Generalisation to longer sequences (thesis Fig 3.3)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def report_parts(records: list[Record]) -> list[tuple[str, str, list[Record]]]:
    """``(figure suffix, table text, runs to plot)`` for the thesis's runs, then, if any, the
    runs with the forget-gate bias at 1 (preset ``cpu-forget-bias``) under their own heading
    (suffix ``_forgetbias1``). The figures leave failed runs out (the tables name them)."""
    parts = []
    for forget_bias in (False, True):
        subset = [r for r in records if r["config"].get("unit_forget_bias", False) == forget_bias]
        if not subset and (forget_bias or parts):
            continue
        text = render_table(subset)
        if forget_bias:
            text = text.replace(
                "### Thesis 3.1: addition problem, LSTM vs attention-gated LSTM",
                "### Beyond thesis 3.1: the same with the forget-gate bias starting at 1",
                1,
            )
        parts.append(("_forgetbias1" if forget_bias else "", text, split_failed(subset)[0]))
    return parts


def report(
    results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR, preset: str | None = None
) -> str:
    """Write ``<results>/addition/table.md`` and the two figures from the records; runs with
    the forget-gate bias at 1 (preset ``cpu-forget-bias``) get their own tables and figures
    (``addition_*_forgetbias1.pdf``), after the thesis's (:func:`report_parts`)."""
    records = _select(load_records(Path(results_dir) / NAME), preset)
    parts = report_parts(records)
    for suffix, _, plotted in parts:
        render_training_figure(plotted, Path(figures_dir) / f"addition_training{suffix}.pdf")
        render_generalisation_figure(
            plotted, Path(figures_dir) / f"addition_generalisation{suffix}.pdf"
        )
    table = "\n".join(text for _, text, _ in parts)
    write_bytes_atomic(Path(results_dir) / NAME / "table.md", table.encode())
    return table
