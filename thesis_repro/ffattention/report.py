"""Raffel & Ellis Table 1, the variable-length and temporal-order results: tables and figures,
rendered from the records alone."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.ticker import MaxNLocator

from thesis_repro import tasks
from thesis_repro.ffattention.cells import (
    best_over_learning_rates,
    cell_of,
    cell_runs,
    epochs_to_100,
    median_epochs_to_100,
    rates_text,
    summary_of,
    table_key,
    table_title,
    tables_of,
)
from thesis_repro.ffattention.config import (
    NAME,
    PAPER_T0S,
    PAPER_TABLE1,
    PAPER_VARIABLE,
    TABLE1_TASKS,
)
from thesis_repro.ffattention.plateau import plateau_presets, plateau_table
from thesis_repro.markdown import table_head, table_row
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

#: A row of a table of every run: its name, all its runs and the run each seed reports.
NamedRuns = tuple[str, list[Record], list[Record]]


def _number(value: float) -> str:
    return f"{value:g}"


def _cell_text(seeds: list[Record], notes: tuple[str, ...], finished: bool) -> str:
    """One run: epochs to 100% (bold) or the best test accuracy of its epochs (``95.9% best
    of 10``). Several seeds: the median and range of epochs to 100% (an unsolved seed counts as
    never), or of the best accuracy (``best of 12–100`` where the seeds short of 100% ran for
    different numbers of epochs, as while one is still running).
    ``notes`` (:func:`coverage_notes`) go into the parenthesis. ``unfinished`` unless
    ``finished`` (every run of the cell, all its learning rates, reached its end): a rate still
    running could beat the one shown."""
    if not seeds:
        return "–"
    lr = rates_text(seeds)
    status = "" if finished else ", unfinished"
    tail = "".join(f"; {note}" for note in notes)
    summaries = [summary_of(r) for r in seeds]
    epochs = sorted(epochs_to_100(r) for r in seeds)
    if len(seeds) == 1:
        if epochs[0] < math.inf:
            return f"**{summaries[0]['epochs_to_100']}** ({lr}{tail}{status})"
        accuracy = 100 * summaries[0]["best_test_accuracy"]
        text = f"{accuracy:.1f}% best of {summaries[0]['epochs_run']}{status}"
        return f"{text} ({'; '.join(notes)})" if notes else text
    solved = [e for e in epochs if e < math.inf]
    counted = f"{len(solved)} of {len(seeds)} seeds"
    median = median_epochs_to_100(seeds)
    if median < math.inf:
        spread = f"{_number(solved[0])}–{_number(solved[-1])}"
        return f"**{_number(median)}** [{spread}] ({lr}; {counted}{tail}{status})"
    accuracies = _median_range([100 * s["best_test_accuracy"] for s in summaries])
    # The epochs behind the accuracies short of 100%: a range while a seed is still running.
    short = sorted(s["epochs_run"] for s in summaries if not s["epochs_to_100"])
    runs = f"{short[0]}–{short[-1]}" if short[0] != short[-1] else str(short[0])
    return f"{accuracies} best of {runs} ({lr}; 100% in {counted}{tail}{status})"


def _paper_text(value: int | float) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


def render_table(records: list[Record]) -> str:
    """Markdown: per preset, dtype policy and padding (never mixed: :func:`tables_of`),
    Table 1 (ours beside the paper), the variable-length and temporal-order runs, and where
    and how long they ran.

    Failed runs, and runs without a finished epoch, are left out and named at the end.
    """
    sections = [_render_preset(table_title(t[0]["config"]), t) for t in tables_of(records).values()]
    sections += [plateau_table(preset, runs) for preset, runs in plateau_presets(records)]
    return "\n".join(sections) if sections else _render_preset("preset `cpu`", [])


def _render_preset(title: str, records: list[Record]) -> str:
    everything = records
    records, failed = split_failed(records)
    untrained = [r for r in records if not r.get("epochs")]
    records = [r for r in records if r.get("epochs")]
    seeds = sorted({r["config"]["seed"] for r in records})
    table1 = [r for r in records if r["config"]["experiment"] == "table1"]
    t0s = sorted({r["config"]["t0"] for r in table1}) or list(PAPER_T0S)
    several = len(seeds) > 1
    lines = [
        f"### Raffel & Ellis Table 1 ({title}): epochs to 100% test accuracy (bold), "
        "else the best accuracy within the cap",
        "",
        "Each cell: ours (best learning rate among those run, as the paper reports) / paper. "
        "A cell short of 100% gives the highest test accuracy of any epoch (`95.9% best of "
        "10`: of 10 epochs), as Raffel's published scripts keep it."
        + (
            f" Seeds {', '.join(map(str, seeds))}: the paper's statistic once per seed (the "
            "best learning rate of that seed, named per seed where they differ), then the "
            "median epochs to 100% over the seeds (a seed that never got there counts as "
            "never), [the range over the seeds that did], how many did; where fewer than half "
            "did, the median [range] of the best accuracy. The paper reports one run "
            "per cell."
            if several
            else ""
        ),
        "",
        *table_head(["task, pooling"] + [f"T0 = {t}" for t in t0s]),
    ]
    partial = False
    short: list[NamedRuns] = []  # cells giving an accuracy
    for (task, pooling), paper in PAPER_TABLE1.items():
        cells = []
        for t0 in t0s:
            runs = cell_of(table1, task, pooling, t0)
            cell = cell_runs(runs, seeds)
            if cell.best and median_epochs_to_100(cell.best) == math.inf:
                short.append((f"{task}, {pooling}, {t0}", runs, cell.best))
            partial = partial or bool(cell.notes) or not cell.finished
            ours = _cell_text(*cell)
            cells.append(f"{ours} / {_paper_text(paper[t0]) if t0 in paper else '–'}")
        lines.append(table_row([f"{task}, {pooling}", *cells]))
    if partial:
        lines += [
            "",
            "Partial cells (the grid has not finished them) say what they lack: `seed 0 only` "
            "or `seeds 0, 1 only` (some of the table's seeds), `k of n learning rates run` (a "
            "rate still to run could lower the cell's epochs; `grid` resumes there), "
            "`unfinished` (a run stopped before its cap; `grid` resumes it from its checkpoint, "
            "which `scripts/park.py` commits with the record).",
        ]
    if several:
        lines += ["", against_paper(table1, seeds, t0s)]
    lines += _short_cells_lines(title, short, seeds)
    variable = [r for r in records if r["config"]["experiment"] == "variable"]
    if variable:
        lines += _variable_lines(variable, seeds)
    temporal = [r for r in records if r["config"]["experiment"] == "temporal_order"]
    if temporal:
        lines += _temporal_lines(temporal)
    beaten = [r for r in table1 if summary_of(r).get("beaten_by")]
    if beaten:
        lines += [
            "",
            f"{len(beaten)} of {len(table1)} Table 1 runs stopped before their cap once "
            "another learning rate of their cell and seed had got to 100% in as many epochs "
            "(they could no longer change the cell; `grid --no-prune` trains them in full).",
        ]
    if failed:
        lines += ["", failed_note(failed, " of these tables and the figure") + "."]
    if untrained:
        names = ", ".join(run_name(r) for r in untrained)
        lines += ["", f"Left out, no epoch finished yet: {names}."]
    lines += ["", produced_by(everything)]
    return "\n".join(lines) + "\n"


def against_paper(table1: list[Record], table_seeds: list[int], t0s: list[int]) -> str:
    """Where the paper's one run per cell falls among our seeds (issue 15: the paper reports one
    run, we report the spread), counted over the finished cells (every seed and learning rate
    run: :func:`coverage_notes`) where the paper gives epochs to 100%: within our seeds' spread
    (some seed as fast or faster, some as slow or slower), or every seed slower, or faster
    (a seed that never got to 100% is slower)."""
    within: dict[int, int] = {}
    counted: dict[int, int] = {}
    beyond: dict[str, dict[tuple[str, str], list[int]]] = {"slower": {}, "faster": {}}
    for (task, pooling), paper in PAPER_TABLE1.items():
        for t0 in t0s:
            cell = cell_runs(cell_of(table1, task, pooling, t0), table_seeds)
            paper_epochs = paper.get(t0)
            if not cell.complete or not isinstance(paper_epochs, int):
                continue
            epochs = [epochs_to_100(r) for r in cell.best]
            counted[t0] = counted.get(t0, 0) + 1
            side = (
                "slower"
                if min(epochs) > paper_epochs
                else "faster"
                if max(epochs) < paper_epochs
                else None
            )
            if side is None:
                within[t0] = within.get(t0, 0) + 1
            else:
                beyond[side].setdefault((task, pooling), []).append(t0)
    if not counted:
        return "Against the paper's one run: no cell where it gives epochs to 100% is finished yet."
    per_t0 = "; ".join(
        f"T0 = {t0}: {within.get(t0, 0)} of {n}" for t0, n in sorted(counted.items())
    )
    sides = [
        f"{side} in {sum(map(len, cells.values()))} ("
        + "; ".join(
            f"{task}, {pooling} at T0 = {', '.join(map(str, t0_list))}"
            for (task, pooling), t0_list in cells.items()
        )
        + ")"
        for side, cells in beyond.items()
        if cells
    ]
    return (
        f"Against the paper's one run: in {sum(counted.values())} finished cells where it "
        f"gives epochs to 100%, it lies within the spread of our seeds in "
        f"{sum(within.values())} ({per_t0})"
        + (f"; all our seeds are {' and '.join(sides)}." if sides else ".")
    )


def _short_cells_lines(title: str, short: list[NamedRuns], table_seeds: list[int]) -> list[str]:
    """Every run of the Table 1 cells that give an accuracy (``short``: the cell's name, its
    runs and the best run of each seed, those with no median epochs to 100%), as
    :func:`_every_run_lines`: what a reader needs to weigh a cell no seed solved, whether
    another rate came close, and how far each run held its peak."""
    heading = f"Raffel & Ellis Table 1 ({title}): every run of the cells short of 100%"
    return _every_run_lines(heading, "task, pooling, T0", short, table_seeds)


def _every_run_lines(
    heading: str,
    label: str,
    cells: list[NamedRuns],
    table_seeds: list[int],
) -> list[str]:
    """A table of every run of ``cells`` (each: its name, its runs and the best run of each
    seed): per learning rate and seed its best test accuracy, the epoch of it and the epochs
    run, and the mean over its last :data:`LAST_EPOCHS` epochs; bold, the run the cell
    reports for that seed."""
    rows = []
    for name, cell, best in cells:
        for lr in sorted({r["config"]["learning_rate"] for r in cell}):
            runs = {r["config"]["seed"]: r for r in cell if r["config"]["learning_rate"] == lr}
            texts = [
                _run_accuracy_text(runs[s], reported=any(runs[s] is b for b in best))
                if s in runs
                else "–"
                for s in table_seeds
            ]
            rows.append(table_row([name, f"{lr:g}", *texts]))
    if not rows:
        return []
    return [
        "",
        f"### {heading}",
        "",
        "Per learning rate and seed: the highest test accuracy (at epoch e of the n it ran, "
        "`unfinished` where the run stopped before its cap) and the mean over the last "
        f"{LAST_EPOCHS} epochs (all, in a shorter run; the runs swing between epochs); bold, "
        "the run the cell reports for that seed (its best learning rate).",
        "",
        *table_head([label, "learning rate"] + [f"seed {s}" for s in table_seeds]),
        *rows,
    ]


def _run_accuracy_text(record: Record, reported: bool) -> str:
    """``88.2% at 63 of 100; last 10: 59.3%`` (bold where ``reported``; ``last 3`` in a run of
    3 epochs)."""
    summary = summary_of(record)
    accuracies = [e["test_accuracy"] for e in record["epochs"]]
    at = int(np.argmax(accuracies)) + 1
    peak = f"{100 * summary['best_test_accuracy']:.1f}% at {at} of {summary['epochs_run']}"
    peak = f"**{peak}**" if reported else peak
    status = "" if record.get("finished") else ", unfinished"
    last = min(LAST_EPOCHS, len(accuracies))
    return f"{peak}{status}; last {last}: {100 * _last_epochs_accuracy(record):.1f}%"


#: The variable-length table's steadier accuracy: the mean over a run's last this many epochs.
LAST_EPOCHS = 10


def _variable_lines(records: list[Record], table_seeds: list[int]) -> list[str]:
    """The variable-length runs: per (task, pooling) and seed the best learning rate, chosen as
    in Table 1 (:func:`best_over_learning_rates`), and its test accuracy after the last epoch,
    averaged over its last :data:`LAST_EPOCHS` epochs (steadier than either end: the runs swing
    between epochs) and at its best epoch (Raffel's published script keeps the best of its
    tests, one per 1000 updates); over several seeds the median [range], ``unfinished`` where a
    run of the row stopped before its cap; then, where a row chose among several runs, every
    run of every rate and seed (:func:`_every_run_lines`). ``table_seeds``: the seeds of the
    whole table, for :func:`coverage_notes`."""
    lines = [
        "",
        "### Variable length (50..10000): test accuracy",
        "",
        "Each cell: the best learning rate of each seed (as in Table 1), its test accuracy after "
        f"the last epoch, averaged over its last {LAST_EPOCHS} epochs (all, in a shorter run; "
        "the runs swing between epochs) and at its best epoch (what Raffel's published script "
        "keeps); over several seeds the median [range].",
        "",
        *table_head(
            [
                "task, pooling",
                "ours, last epoch",
                f"ours, last {LAST_EPOCHS} epochs",
                "ours, best epoch",
                "learning rate",
                "seeds",
                "epochs (of 1000 updates)",
                "paper (100 epochs)",
            ]
        ),
    ]
    every: list[NamedRuns] = []  # for the table of every run
    for (task, pooling), group in _by_task_and_pooling(records).items():
        chosen, notes, finished = cell_runs(group, table_seeds)
        summaries = [summary_of(r) for r in chosen]
        epochs = sorted({s["epochs_run"] for s in summaries})
        ran = str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}–{epochs[-1]}"
        last = _median_range([100 * s["final_test_accuracy"] for s in summaries])
        tail = _median_range([100 * _last_epochs_accuracy(r) for r in chosen])
        best = _median_range([100 * s["best_test_accuracy"] for s in summaries])
        if not finished:
            notes += ("unfinished",)
        seeds = f"{len(chosen)}" + (f" ({'; '.join(notes)})" if notes else "")
        paper = PAPER_VARIABLE.get((task, pooling))
        rates = rates_text(chosen).removeprefix("lr ")
        paper_text = _paper_text(paper) if paper else "–"
        name = f"{task}, {pooling}"
        lines.append(table_row([name, last, tail, best, rates, seeds, ran, paper_text]))
        every.append((name, group, chosen))
    if all(len(group) == 1 for _, group, _ in every):
        return lines  # one run per row: the table above is every run
    heading = "Variable length (50..10000): every run"
    return lines + _every_run_lines(heading, "task, pooling", every, table_seeds)


def _last_epochs_accuracy(record: Record) -> float:
    """Mean test accuracy over a run's last :data:`LAST_EPOCHS` epochs (all, if fewer)."""
    return float(np.mean([e["test_accuracy"] for e in record["epochs"][-LAST_EPOCHS:]]))


def _by_task_and_pooling(records: list[Record]) -> dict[tuple[str, str], list[Record]]:
    """``records`` grouped by (task, pooling), in the order of the tables and figures: the
    tasks as in Table 1, attention before the mean."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r["config"]["task"], r["config"]["pooling"]), []).append(r)
    order = sorted(groups, key=lambda tp: (TABLE1_TASKS.index(tp[0]), tp[1] != "attention", tp[1]))
    return {key: groups[key] for key in order}


def _median_range(percents: list[float]) -> str:
    """``94.3%``, or over several values ``94.3% [90.1–95.0%]``."""
    text = f"{np.median(percents):.1f}%"
    return text + (f" [{min(percents):.1f}–{max(percents):.1f}%]" if len(percents) > 1 else "")


def _temporal_lines(records: list[Record]) -> list[str]:
    names = tasks.TEMPORAL_ORDER_CLASSES
    lines = [
        "",
        "### Temporal order (attention model): test accuracy per true class",
        "",
        "Order-blind pooling can separate XX from YY but must confuse XY with YX: the best it "
        "can do is 100% on XX/YY and 50% on the mixed pairs (75% overall, test loss "
        "ln(2)/2 = 0.347).",
        "",
        *table_head(["T0", "epochs", "overall", "test loss", "XX/YY", "XY vs YX", *names]),
    ]
    for r in records:
        last = r["epochs"][-1]
        per = {n: last[f"test_accuracy_{n}"] for n in names}
        pure, mixed = (per["XX"] + per["YY"]) / 2, (per["XY"] + per["YX"]) / 2
        cells = [str(r["config"]["t0"]), str(len(r["epochs"]))]
        cells += [f"{100 * last['test_accuracy']:.1f}%", f"{last['test_loss']:.3f}"]
        cells += [f"{100 * a:.1f}%" for a in (pure, mixed, *(per[n] for n in names))]
        lines.append(table_row(cells))
    return lines


def figure_name(table: str) -> str:
    """The file name of a table's figure (``table``: :func:`table_key`)."""
    return f"{NAME}_accuracy_{table}.pdf"


def _one_table(records: list[Record], caller: str) -> list[Record]:
    """``records`` less the failed runs; a ValueError where they span several tables (a figure
    never mixes presets, dtype policies or padding: :func:`table_key`)."""
    if len({table_key(r["config"]) for r in records}) > 1:
        raise ValueError(
            f"{caller} takes the records of one preset, dtype policy and padding "
            "(never mixed: table_key)"
        )
    return split_failed(records)[0]


def render_figure(records: list[Record], path: Path) -> Path | None:
    """Test accuracy against epoch, attention vs mean, one panel per task and T0, every seed of
    the best learning rate; ``records`` of one preset. Failed runs are left out
    (``render_table`` names them)."""
    plt = pyplot()
    records = _one_table(records, "render_figure")
    table1 = [r for r in records if r["config"]["experiment"] == "table1" and r.get("epochs")]
    if not table1:
        return None
    task_names = [t for t in TABLE1_TASKS if any(r["config"]["task"] == t for r in table1)]
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
                best = best_over_learning_rates(cell_of(table1, task, pooling, t0))
                for index, run in enumerate(best):
                    ax.plot(
                        [e["epoch"] for e in run["epochs"]],
                        [100 * e["test_accuracy"] for e in run["epochs"]],
                        "o-",
                        color=color,
                        ms=3 if len(best) == 1 else 2,
                        lw=1.5 if len(best) == 1 else 0.8,
                        label=None if index else _legend(pooling, best),
                    )
                paper = PAPER_TABLE1[(task, pooling)].get(t0)
                if best and isinstance(paper, int):
                    ax.axvline(paper, color=color, ls=":", lw=1)
            ax.set_title(f"{task}, T0 = {t0}", fontsize=9)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(0, 102)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel("test accuracy (%)")
            if row == len(task_names) - 1:
                ax.set_xlabel("epoch (1000 updates)")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, loc="lower right")
            else:  # a cell of the table no run has finished yet
                ax.text(0.5, 0.5, "no finished run", ha="center", transform=ax.transAxes)
    fig.suptitle(
        f"Feed-forward attention vs unweighted mean, {table_title(table1[0]['config'], False)} "
        "(dotted: paper's epochs to 100%)",
        fontsize=10,
    )
    fig.tight_layout()
    return save_figure(fig, path)


def variable_figure_name(table: str) -> str:
    """The file name of a table's variable-length figure (``table``: :func:`table_key`)."""
    return f"{NAME}_variable_{table}.pdf"


def render_variable_figure(records: list[Record], path: Path) -> Path | None:
    """The variable-length runs (Raffel & Ellis 2.3) of one preset: test accuracy against
    epoch, one panel per task and pooling, one colour per learning rate (every rate run, not
    only the best: how the rate decides speed and stability), a line per seed; the paper's
    accuracy after 100 epochs dashed. None when the preset has no variable-length epoch yet."""
    plt = pyplot()
    records = _one_table(records, "render_variable_figure")
    variable = [r for r in records if r["config"]["experiment"] == "variable" and r.get("epochs")]
    if not variable:
        return None
    panels = _by_task_and_pooling(variable)
    rates = sorted({r["config"]["learning_rate"] for r in variable})
    colors = {rate: f"C{i}" for i, rate in enumerate(rates)}
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.4 * len(panels), 3.3), squeeze=False, sharey=True
    )
    for ax, ((task, pooling), runs) in zip(axes[0], panels.items(), strict=True):
        for run in runs:
            ax.plot(
                [e["epoch"] for e in run["epochs"]],
                [100 * e["test_accuracy"] for e in run["epochs"]],
                "-",
                color=colors[run["config"]["learning_rate"]],
                lw=1.0,
            )
        paper = PAPER_VARIABLE.get((task, pooling))
        if paper:
            ax.axhline(100 * paper, color="k", ls="--", lw=0.8)
        seeds = sorted({r["config"]["seed"] for r in runs})
        named = "seed" if len(seeds) == 1 else "seeds"
        unfinished = sum(not r.get("finished") for r in runs)
        counted = f"{len(runs)} run" + ("s" if len(runs) > 1 else "")
        ax.set_title(
            f"{task}, {pooling}\n({named} {', '.join(map(str, seeds))}; {counted}"
            + (f", {unfinished} unfinished)" if unfinished else ")"),
            fontsize=9,
        )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0, max(r["config"]["max_epochs"] for r in runs))
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
        ax.set_xlabel("epoch (1000 updates)")
    axes[0][0].set_ylabel("test accuracy (%)")
    handles = [plt.Line2D([], [], color=colors[rate], lw=1.5) for rate in rates]
    handles.append(plt.Line2D([], [], color="k", ls="--", lw=0.8))
    labels = [f"lr {rate:g}" for rate in rates] + ["paper, after 100 epochs"]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    config = variable[0]["config"]
    fig.suptitle(
        f"Variable length ({config['t0']}..{config['max_length']}), "
        f"{table_title(config, False)}: every learning rate and seed",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, path)


def _legend(pooling: str, seeds: list[Record]) -> str:
    lr = rates_text(seeds)
    return f"{pooling} ({lr})" if len(seeds) == 1 else f"{pooling} ({lr}, {len(seeds)} seeds)"


def report(results_dir: Path = RESULTS_DIR, figures_dir: Path = FIGURES_DIR) -> str:
    """Write ``<results>/ffattention/table.md`` and figures per table,
    ``figures/ffattention_accuracy_<table_key>.pdf`` (Table 1) and, where the table has
    variable-length runs, ``figures/ffattention_variable_<table_key>.pdf``."""
    records = load_records(Path(results_dir) / NAME)
    table = render_table(records)
    (Path(results_dir) / NAME).mkdir(parents=True, exist_ok=True)
    (Path(results_dir) / NAME / "table.md").write_text(table)
    for key, group in tables_of(records).items():
        render_figure(group, Path(figures_dir) / figure_name(key))
        render_variable_figure(group, Path(figures_dir) / variable_figure_name(key))
    return table
