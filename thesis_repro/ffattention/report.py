"""Raffel & Ellis Table 1, the variable-length and temporal-order results: tables and a figure,
rendered from the records alone."""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import MaxNLocator

from thesis_repro import tasks
from thesis_repro.ffattention.config import (
    NAME,
    PAPER_T0S,
    PAPER_TABLE1,
    PAPER_VARIABLE,
    summarize,
)
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import (
    Record,
    failed_note,
    load_records,
    produced_by,
    run_name,
    split_failed,
)
from thesis_repro.settings import FIGURES_DIR, RESULTS_DIR


def best_over_learning_rates(records: list[Record]) -> Record | None:
    """Raffel & Ellis report the best learning rate: fewest epochs to 100%, else best accuracy."""
    if not records:
        return None

    def key(record: Record) -> tuple:
        summary = record["summary"] or summarize(record["epochs"])
        solved = summary["epochs_to_100"]
        return (0, solved, 0.0) if solved else (1, 0, -(summary["final_test_accuracy"] or 0.0))

    return min(records, key=key)


def _cell_text(record: Record | None) -> str:
    if record is None:
        return "–"
    summary = record["summary"] or summarize(record["epochs"])
    lr = f"{record['config']['learning_rate']:g}"
    if summary["epochs_to_100"]:
        return f"**{summary['epochs_to_100']}** (lr {lr})"
    status = "" if record.get("finished") else ", running"
    return f"{100 * summary['final_test_accuracy']:.1f}% after {summary['epochs_run']}{status}"


def _paper_text(value: int | float) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


def render_table(records: list[Record]) -> str:
    """Markdown: Table 1 (ours beside the paper), the variable-length and temporal-order runs.

    Failed runs, and runs without a finished epoch, are left out and named at the end.
    """
    everything = records
    records, failed = split_failed(records)
    untrained = [r for r in records if not r.get("epochs")]
    records = [r for r in records if r.get("epochs")]
    table1 = [r for r in records if r["config"]["experiment"] == "table1"]
    t0s = sorted({r["config"]["t0"] for r in table1}) or list(PAPER_T0S)
    lines = [
        "### Raffel & Ellis Table 1: epochs to 100% test accuracy (bold), else accuracy at the cap",
        "",
        "Each cell: ours (best learning rate among those run) / paper.",
        "",
        "| task, pooling | " + " | ".join(f"T0 = {t}" for t in t0s) + " |",
        "|---|" + "---|" * len(t0s),
    ]
    for (task, pooling), paper in PAPER_TABLE1.items():
        cells = []
        for t0 in t0s:
            group = [
                r
                for r in table1
                if (r["config"]["task"], r["config"]["pooling"], r["config"]["t0"])
                == (task, pooling, t0)
            ]
            cells.append(
                f"{_cell_text(best_over_learning_rates(group))} / "
                f"{_paper_text(paper[t0]) if t0 in paper else '–'}"
            )
        lines.append(f"| {task}, {pooling} | " + " | ".join(cells) + " |")
    variable = [r for r in records if r["config"]["experiment"] == "variable"]
    if variable:
        lines += [
            "",
            "### Variable length (50..10000): test accuracy",
            "",
            "| task, pooling | ours | epochs (of 1000 updates) | paper (100 epochs) |",
            "|---|---|---|---|",
        ]
        for r in variable:
            c = r["config"]
            s = r["summary"] or summarize(r["epochs"])
            paper = PAPER_VARIABLE.get((c["task"], c["pooling"]))
            lines.append(
                f"| {c['task']}, {c['pooling']} | {100 * s['final_test_accuracy']:.1f}%"
                f" | {s['epochs_run']} | {_paper_text(paper) if paper else '–'} |"
            )
    temporal = [r for r in records if r["config"]["experiment"] == "temporal_order"]
    if temporal:
        names = tasks.TEMPORAL_ORDER_CLASSES
        lines += [
            "",
            "### Temporal order (attention model): test accuracy per true class",
            "",
            "Order-blind pooling can separate XX from YY but must confuse XY with YX: the best it "
            "can do is 100% on XX/YY and 50% on the mixed pairs (75% overall, test loss "
            "ln(2)/2 = 0.347).",
            "",
            "| T0 | epochs | overall | test loss | XX/YY | XY vs YX | " + " | ".join(names) + " |",
            "|---|---|---|---|---|---|" + "---|" * len(names),
        ]
        for r in temporal:
            last = r["epochs"][-1]
            per = {n: last[f"test_accuracy_{n}"] for n in names}
            pure, mixed = (per["XX"] + per["YY"]) / 2, (per["XY"] + per["YX"]) / 2
            lines.append(
                f"| {r['config']['t0']} | {len(r['epochs'])} | {100 * last['test_accuracy']:.1f}% "
                f"| {last['test_loss']:.3f} | {100 * pure:.1f}% | {100 * mixed:.1f}% | "
                + " | ".join(f"{100 * per[n]:.1f}%" for n in names)
                + " |"
            )
    if failed:
        lines += ["", failed_note(failed, " of these tables and the figure") + "."]
    if untrained:
        names = ", ".join(run_name(r) for r in untrained)
        lines += ["", f"Left out, no epoch finished yet: {names}."]
    lines += ["", produced_by(everything)]
    return "\n".join(lines) + "\n"


def render_figure(records: list[Record], path: Path) -> Path | None:
    """Test accuracy against epoch, attention vs mean, one panel per task and T0 (best lr);
    failed runs are left out (``render_table`` names them)."""
    plt = pyplot()
    records, _ = split_failed(records)
    table1 = [r for r in records if r["config"]["experiment"] == "table1" and r.get("epochs")]
    if not table1:
        return None
    task_names = [
        t for t in ("addition", "multiplication") if any(r["config"]["task"] == t for r in table1)
    ]
    t0s = sorted({r["config"]["t0"] for r in table1})
    fig, axes = plt.subplots(
        len(task_names),
        len(t0s),
        figsize=(2.6 * len(t0s), 2.6 * len(task_names)),
        squeeze=False,
        sharey=True,
    )
    for row, task in enumerate(task_names):
        for col, t0 in enumerate(t0s):
            ax = axes[row][col]
            for pooling, color in (("attention", "C0"), ("mean", "C1")):
                group = [
                    r
                    for r in table1
                    if (r["config"]["task"], r["config"]["pooling"], r["config"]["t0"])
                    == (task, pooling, t0)
                ]
                best = best_over_learning_rates(group)
                if best is None:
                    continue
                epochs = [e["epoch"] for e in best["epochs"]]
                accuracy = [100 * e["test_accuracy"] for e in best["epochs"]]
                ax.plot(
                    epochs,
                    accuracy,
                    "o-",
                    color=color,
                    ms=3,
                    label=f"{pooling} (lr {best['config']['learning_rate']:g})",
                )
                paper = PAPER_TABLE1[(task, pooling)].get(t0)
                if isinstance(paper, int):
                    ax.axvline(paper, color=color, ls=":", lw=1)
            ax.set_title(f"{task}, T0 = {t0}", fontsize=9)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, 102)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel("test accuracy (%)")
            if row == len(task_names) - 1:
                ax.set_xlabel("epoch (1000 updates)")
            ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(
        "Feed-forward attention vs unweighted mean (dotted: paper's epochs to 100%)", fontsize=10
    )
    fig.tight_layout()
    return save_figure(fig, path)


def report(results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR) -> str:
    """Write ``<results>/ffattention/table.md`` and ``figures/ffattention_accuracy.pdf``."""
    records = load_records(Path(results_dir) / NAME)
    table = render_table(records)
    (Path(results_dir) / NAME).mkdir(parents=True, exist_ok=True)
    (Path(results_dir) / NAME / "table.md").write_text(table)
    render_figure(records, Path(figures_dir) / "ffattention_accuracy.pdf")
    return table
