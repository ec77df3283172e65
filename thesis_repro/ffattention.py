"""Raffel & Ellis (2015): feed-forward attention on long-memory tasks.

    python -m thesis_repro.ffattention grid --preset cpu      # every run of a preset, resumable
    python -m thesis_repro.ffattention run --task addition --t0 1000 --pooling attention --lr 3e-3
    python -m thesis_repro.ffattention report                 # table + figure from the records

Methods (Raffel & Ellis 2.1-2.4; SPEC E1, E2):
- Task: Hochreiter/Raffel addition or multiplication, lengths uniform in [T0, 1.1 T0]
  (``thesis_repro.tasks``); a prediction is correct when |error| < 0.04.
- Model: ``thesis_repro.models.raffel_model`` (D = 100, leaky ReLU, attention or mean pooling
  over each sequence's true length: the padding is masked). From T0 = 2000 on, the same function
  is computed by the fused chunked implementation (``chunked=True``; the record says which).
- Protocol: Adam (0.9, 0.999), squared error, minibatches of 100 fresh sequences, an epoch is
  1000 updates, a fixed held-out test set of 1000 sequences scored after every epoch, stop at
  100% test accuracy or at the epoch cap. Table 1 reports the best learning rate per cell.
- Variable length (Raffel 2.3): one model trained on lengths from 50 to 10000. As in Raffel's
  published code each minibatch draws one T0 in [50, 10000/1.1] and its sequences have lengths in
  [T0, 1.1 T0]; batches are zero-padded to a multiple of 512 steps and the padding is masked. The
  test set holds 10 sequences at each of 100 values of T0 spread evenly over the same range.
- Temporal order (Raffel 2.4): a 4-way classifier (XX, XY, YX, YY) with the same network; it can
  separate XX from YY but not XY from YX, since pooling over time discards order.

Every run writes ``results/ffattention/<experiment>/<run>.json`` after each epoch. A run whose
training loss becomes NaN or infinite stops there and is recorded as failed
(``training.FailOnNonFiniteLoss``; ``run`` exits with one ``error:`` line); the tables and the
figure leave it out and name it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thesis_repro import tasks
from thesis_repro.cli import (
    experiment_parser,
    int_at_least,
    positive_float,
    positive_int,
    results_folder,
    run_main,
    seed_int,
)
from thesis_repro.plots import pyplot, save_figure
from thesis_repro.records import (
    CorruptRecord,
    RunBusy,
    RunConflict,
    RunFailed,
    RunRecord,
    command_line,
    failed_note,
    grid_failures,
    load_records,
    produced_by,
    run_name,
    split_failed,
)
from thesis_repro.runner import add_data_parallel_option, add_jobs_option, run_jobs, walk_grid
from thesis_repro.settings import FIGURES_DIR, RESULTS_DIR
from thesis_repro.training import use_data_parallel

EXPERIMENT = "ffattention"
LEARNING_RATES = (3e-4, 1e-3, 3e-3, 1e-2)
PAPER_T0S = (50, 100, 500, 1000, 5000, 10000)
VARIABLE_MIN, VARIABLE_MAX = 50, 10000
PAD_MULTIPLE = 512
MIN_T0 = 11  # shortest Raffel addition sequence: the markers need room (tasks)
# From this padded length on, the fused chunked implementation is faster (bench_ffattention.py).
CHUNKED_FROM_LENGTH = 2000

# Raffel & Ellis Table 1: epochs to 100% test accuracy (int) or accuracy after 100 epochs (float).
PAPER_TABLE1: dict[tuple[str, str], dict[int, int | float]] = {
    ("addition", "attention"): {50: 1, 100: 1, 500: 1, 1000: 1, 5000: 2, 10000: 3},
    ("addition", "mean"): {50: 1, 100: 1, 500: 1, 1000: 2, 5000: 8, 10000: 17},
    ("multiplication", "attention"): {50: 1, 100: 2, 500: 4, 1000: 2, 5000: 15, 10000: 6},
    ("multiplication", "mean"): {50: 2, 100: 2, 500: 8, 1000: 33, 5000: 0.898, 10000: 0.808},
}
# Raffel & Ellis 2.3: test accuracy after 100 epochs of the variable-length model.
PAPER_VARIABLE = {
    ("addition", "attention"): 0.999,
    ("multiplication", "attention"): 0.994,
    ("addition", "mean"): 0.774,
    ("multiplication", "mean"): 0.555,
}


@dataclass(frozen=True)
class RunConfig:
    """One training run. ``experiment``: ``table1``, ``variable`` or ``temporal_order``."""

    experiment: str
    task: str
    t0: int
    pooling: str
    learning_rate: float
    seed: int = 0
    max_epochs: int = 100
    steps_per_epoch: int = 1000
    batch_size: int = 100
    test_size: int = 1000
    max_length: int = VARIABLE_MAX  # longest sequence of the variable-length experiment

    @property
    def name(self) -> str:
        t0 = "var" if self.experiment == "variable" else f"T{self.t0}"
        return f"{self.task}-{t0}-{self.pooling}-lr{self.learning_rate:g}-seed{self.seed}"


@dataclass(frozen=True)
class Preset:
    """A named set of runs; ``epoch_caps`` maps T0 to the epoch cap used for it."""

    description: str
    tasks: tuple[str, ...]
    t0s: tuple[int, ...]
    learning_rates: dict[int, tuple[float, ...]]
    epoch_caps: dict[int, int]
    steps_per_epoch: int = 1000
    test_size: int = 1000
    variable_epochs: int = 100
    variable_learning_rate: float = 1e-3
    variable_max: int = VARIABLE_MAX
    temporal_t0: int = 100
    temporal_epochs: int = 10
    temporal_learning_rate: float = 1e-3
    seeds: tuple[int, ...] = (0,)


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        description="seconds: one tiny cell per experiment, for the tests",
        tasks=("addition",),
        t0s=(50,),
        learning_rates={50: (1e-2,)},
        epoch_caps={50: 2},
        steps_per_epoch=20,
        test_size=100,
        variable_epochs=1,
        variable_max=200,
        temporal_t0=50,
        temporal_epochs=1,
    ),
    "cpu": Preset(
        description=(
            "about 2 h on 2 CPU cores (7048 s measured, under extra load): T0 up to 5000 "
            "(10000 left out), learning rates {1e-3, 3e-3} of the paper's four (3e-3 alone at "
            "5000), epoch caps 10 (T0 <= 1000) and 3 (T0 = 5000), the variable-length model "
            "for 3 epochs, the temporal-order demo for 5 epochs"
        ),
        tasks=("addition", "multiplication"),
        t0s=(50, 100, 500, 1000, 5000),
        learning_rates={
            50: (1e-3, 3e-3),
            100: (1e-3, 3e-3),
            500: (1e-3, 3e-3),
            1000: (1e-3, 3e-3),
            5000: (3e-3,),
        },
        epoch_caps={50: 10, 100: 10, 500: 10, 1000: 10, 5000: 3},
        variable_epochs=3,
        variable_learning_rate=3e-3,
        temporal_epochs=5,
    ),
    "paper": Preset(
        description="Raffel & Ellis's full protocol: every T0, four learning rates, 100 epochs",
        tasks=("addition", "multiplication"),
        t0s=PAPER_T0S,
        learning_rates={t0: LEARNING_RATES for t0 in PAPER_T0S},
        epoch_caps={t0: 100 for t0 in PAPER_T0S},
        variable_epochs=100,
        temporal_epochs=100,
    ),
}


def preset_runs(preset: Preset) -> list[RunConfig]:
    """Every run of a preset, cheapest first (so an interrupted grid has the cheap cells)."""
    runs = [
        RunConfig(
            "temporal_order",
            "temporal_order",
            preset.temporal_t0,
            "attention",
            preset.temporal_learning_rate,
            seed,
            preset.temporal_epochs,
            preset.steps_per_epoch,
            test_size=preset.test_size,
        )
        for seed in preset.seeds
    ]
    table1 = [
        RunConfig(
            "table1",
            task,
            t0,
            pooling,
            lr,
            seed,
            preset.epoch_caps[t0],
            preset.steps_per_epoch,
            test_size=preset.test_size,
        )
        for t0 in preset.t0s
        for task in preset.tasks
        for pooling in ("attention", "mean")
        for lr in preset.learning_rates[t0]
        for seed in preset.seeds
    ]
    variable = [
        RunConfig(
            "variable",
            task,
            VARIABLE_MIN,
            pooling,
            preset.variable_learning_rate,
            seed,
            preset.variable_epochs,
            preset.steps_per_epoch,
            test_size=preset.test_size,
            max_length=preset.variable_max,
        )
        for task in preset.tasks
        for pooling in ("attention", "mean")
        for seed in preset.seeds
    ]
    cheap = [run for run in table1 if run.t0 <= 1000]
    return runs + cheap + variable + [run for run in table1 if run.t0 > 1000]


# --- data ---------------------------------------------------------------------------------


def _inputs(batch: tasks.Batch) -> dict[str, np.ndarray]:
    return {"x": batch.x, "lengths": batch.lengths}


def _padded(length: int) -> int:
    return PAD_MULTIPLE * math.ceil(length / PAD_MULTIPLE)


def train_batch_fn(config: RunConfig) -> Callable[[np.random.Generator], tuple[dict, Any]]:
    """Minibatch generator of a run (fresh sequences every call)."""
    if config.experiment == "temporal_order":

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            batch = tasks.temporal_order(rng, config.batch_size, *_temporal_range(config.t0))
            return _inputs(batch), batch.y

    elif config.experiment == "variable":
        top_t0 = _variable_top_t0(config)

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            low, high = tasks.raffel_length_range(int(rng.integers(config.t0, top_t0 + 1)))
            batch = tasks.make_batch(
                config.task, rng, config.batch_size, low, high, pad_to=_padded(high)
            )
            return _inputs(batch), batch.y

    else:
        low, high = tasks.raffel_length_range(config.t0)

        def make(rng: np.random.Generator) -> tuple[dict, Any]:
            batch = tasks.make_batch(config.task, rng, config.batch_size, low, high)
            return _inputs(batch), batch.y

    return make


def _variable_top_t0(config: RunConfig) -> int:
    """Largest T0 whose lengths [T0, 1.1 T0] stay within ``config.max_length``."""
    return int(config.max_length / 1.1)


def _temporal_range(t0: int) -> tuple[int, int]:
    return t0, round(1.1 * t0)


def test_set(config: RunConfig) -> list[tasks.Batch]:
    """The run's fixed held-out test set (seeded apart from training), as a few batches."""
    rng = np.random.default_rng([config.seed, 104729])
    if config.experiment == "variable":
        t0s = np.linspace(config.t0, _variable_top_t0(config), 100).astype(int)
        per = max(1, config.test_size // len(t0s))
        batches = []
        for t0 in t0s:
            low, high = tasks.raffel_length_range(int(t0))
            batches.append(tasks.make_batch(config.task, rng, per, low, high, pad_to=_padded(high)))
        return batches
    if config.experiment == "temporal_order":
        return [tasks.temporal_order(rng, config.test_size, *_temporal_range(config.t0))]
    low, high = tasks.raffel_length_range(config.t0)
    return [tasks.make_batch(config.task, rng, config.test_size, low, high)]


def evaluate(model: Any, batches: list[tasks.Batch], classification: bool) -> dict[str, float]:
    """Test accuracy and loss; for classification also the accuracy per true class."""
    predictions = [
        np.asarray(model.predict(_inputs(b), batch_size=100, verbose=0)) for b in batches
    ]
    targets = np.concatenate([b.y for b in batches])
    if classification:
        probabilities = np.concatenate(predictions)
        chosen = probabilities.argmax(axis=1)
        picked = probabilities[np.arange(len(targets)), targets]
        scores = {
            "test_accuracy": float(np.mean(chosen == targets)),
            "test_loss": float(-np.mean(np.log(np.maximum(picked, 1e-12)))),
        }
        for index, name in enumerate(tasks.TEMPORAL_ORDER_CLASSES):
            scores[f"test_accuracy_{name}"] = float(np.mean(chosen[targets == index] == index))
        return scores
    predicted = np.concatenate(predictions).reshape(-1)
    return {
        "test_accuracy": tasks.accuracy(predicted, targets),
        "test_loss": float(np.mean((predicted - targets) ** 2)),
    }


# --- one run ------------------------------------------------------------------------------


def record_path(config: RunConfig, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / EXPERIMENT / config.experiment / f"{config.name}.json"


def run(config: RunConfig, results_dir: Path = RESULTS_DIR, verbose: int = 1) -> dict:
    """Train one configuration to 100% test accuracy or its epoch cap; return its record.

    Raises ``RunFailed`` when the training loss becomes NaN or infinite (the record says so:
    ``records``), or when the run failed before.
    """
    import keras

    from thesis_repro.models import raffel_model
    from thesis_repro.training import (
        EpochCheckpoint,
        FailOnNonFiniteLoss,
        distribution_summary,
        fresh_batches,
        raise_if_failed,
        remove_checkpoints,
        resume,
        set_seed,
    )

    record = RunRecord(record_path(config, results_dir), asdict(config)).start()
    if record.finished:
        if verbose:
            print(f"[skip] {config.name}: finished ({record.path})")
        return record.data
    classification = config.experiment == "temporal_order"
    longest = config.max_length if config.experiment == "variable" else config.t0
    chunked = longest >= CHUNKED_FROM_LENGTH
    record.data["implementation"] = "chunked" if chunked else "layers"
    record.data["hardware"].update(distribution_summary())
    set_seed(config.seed)

    def build() -> keras.Model:
        model = raffel_model(
            features=tasks.N_FEATURES[config.task],
            pooling=config.pooling,  # type: ignore[arg-type]
            classes=len(tasks.TEMPORAL_ORDER_CLASSES) if classification else None,
            seed=config.seed,
            chunked=chunked,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(config.learning_rate, beta_1=0.9, beta_2=0.999),
            loss="sparse_categorical_crossentropy" if classification else "mse",
            jit_compile=True,
        )
        return model

    model, done = resume(record, build)
    if verbose:
        where = f"resuming after epoch {done}" if done else "starting"
        print(f"[run] {config.name}: {where} -> {record.path}", flush=True)
    test_batches = test_set(config)
    callback = EpochCheckpoint(
        record,
        evaluate=lambda m: evaluate(m, test_batches, classification),
        should_stop=lambda scores: scores["test_accuracy"] >= 1.0,
    )
    if done < config.max_epochs and not _solved(record):
        model.fit(
            fresh_batches(train_batch_fn(config), config.seed, done * config.steps_per_epoch),
            steps_per_epoch=config.steps_per_epoch,
            epochs=config.max_epochs,
            initial_epoch=done,
            callbacks=[FailOnNonFiniteLoss(record, config.steps_per_epoch), callback],
            shuffle=False,  # (a generator: nothing to shuffle)
            verbose=verbose,
        )
    raise_if_failed(record)
    record.finish(**summarize(record.data["epochs"]))
    remove_checkpoints(record)
    return record.data


def _solved(record: RunRecord) -> bool:
    epochs = record.data.get("epochs", [])
    return bool(epochs) and epochs[-1]["test_accuracy"] >= 1.0


def summarize(epochs: list[dict]) -> dict[str, Any]:
    """Epochs to 100% test accuracy (None if never), final and best accuracy."""
    solved = [e["epoch"] for e in epochs if e["test_accuracy"] >= 1.0]
    return {
        "epochs_run": len(epochs),
        "epochs_to_100": solved[0] if solved else None,
        "final_test_accuracy": epochs[-1]["test_accuracy"] if epochs else None,
        "best_test_accuracy": max((e["test_accuracy"] for e in epochs), default=None),
    }


def run_grid(
    preset: str,
    results_dir: Path = RESULTS_DIR,
    experiments: tuple[str, ...] = (),
    verbose: int = 1,
) -> list[dict]:
    """Every run of ``preset`` (optionally only some experiments); finished runs are skipped.

    A failed run (``RunFailed``) is reported in one line and the grid goes on; its record is
    among those returned (``records.grid_failures`` words the error).
    """
    configs = [
        c for c in preset_runs(PRESETS[preset]) if not experiments or c.experiment in experiments
    ]
    return walk_grid(
        configs,
        lambda c: run(c, results_dir, verbose),
        lambda c: f"{c.experiment}: {c.name}",
        verbose,
    )


# --- outputs ------------------------------------------------------------------------------


def _best_over_learning_rates(records: list[dict]) -> dict | None:
    """Raffel & Ellis report the best learning rate: fewest epochs to 100%, else best accuracy."""
    if not records:
        return None

    def key(record: dict) -> tuple:
        summary = record["summary"] or summarize(record["epochs"])
        solved = summary["epochs_to_100"]
        return (0, solved, 0.0) if solved else (1, 0, -(summary["final_test_accuracy"] or 0.0))

    return min(records, key=key)


def _cell_text(record: dict | None) -> str:
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


def render_table(records: list[dict]) -> str:
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
                f"{_cell_text(_best_over_learning_rates(group))} / "
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


def render_figure(records: list[dict], path: Path) -> Path | None:
    """Test accuracy against epoch, attention vs mean, one panel per task and T0 (best lr);
    failed runs are left out (``render_table`` names them)."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

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
                best = _best_over_learning_rates(group)
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
    records = load_records(Path(results_dir) / EXPERIMENT)
    table = render_table(records)
    (Path(results_dir) / EXPERIMENT).mkdir(parents=True, exist_ok=True)
    (Path(results_dir) / EXPERIMENT / "table.md").write_text(table)
    render_figure(records, Path(figures_dir) / "ffattention_accuracy.pdf")
    return table


# --- command line -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = experiment_parser("python -m thesis_repro.ffattention", __doc__, PRESETS)
    sub = parser.add_subparsers(dest="command", required=True)

    one = sub.add_parser("run", help="train one configuration")
    one.add_argument(
        "--experiment",
        choices=("table1", "variable", "temporal_order"),
        default="table1",
        help="which experiment (default: %(default)s)",
    )
    one.add_argument(
        "--task",
        choices=("addition", "multiplication", "temporal_order"),
        default="addition",
        help="task (SPEC §2; default: %(default)s)",
    )
    one.add_argument(
        "--t0",
        type=int_at_least(MIN_T0),
        default=100,
        help="minimum sequence length T0 (at least 11: the markers need room); lengths are "
        "uniform in [T0, 1.1 T0]",
    )
    one.add_argument(
        "--pooling",
        choices=("attention", "mean"),
        default="attention",
        help="attention (eq. 1) or unweighted mean (eq. 2)",
    )
    one.add_argument("--lr", type=positive_float, default=1e-3, help="Adam learning rate")
    one.add_argument("--seed", type=seed_int, default=0, help="seed of weights, data and test set")
    one.add_argument("--max-epochs", type=positive_int, default=100, help="epoch cap (default 100)")
    one.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        default=1000,
        help="updates per epoch (default 1000, as in the paper)",
    )
    one.add_argument("--test-size", type=positive_int, default=1000, help="held-out sequences")
    add_data_parallel_option(one)

    grid = sub.add_parser("grid", help="run every configuration of a preset (resumable)")
    grid.add_argument("--preset", choices=tuple(PRESETS), default="cpu")
    grid.add_argument(
        "--only",
        nargs="*",
        choices=("table1", "variable", "temporal_order"),
        default=(),
        help="restrict to some experiments",
    )
    grid.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(grid)
    add_data_parallel_option(grid)

    sub.add_parser("report", help="render the table and figure from the records")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; bad input (checked before any work), a record with other settings
    or an unreadable record end with one ``error: ...`` line and exit status 2, a failed run
    (loss NaN or infinite) with status 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.results = results_folder(args.command, args.results)
    verbose = args.verbose
    started = time.time()
    if getattr(args, "data_parallel", False):
        if getattr(args, "jobs", 1) > 1:
            parser.error("--data-parallel spreads one run over every device: not with --jobs")
        try:
            print(f"data-parallel over {use_data_parallel()} devices", flush=True)
        except ValueError as error:
            parser.error(str(error))
    if args.command == "run":
        experiment = "temporal_order" if args.task == "temporal_order" else args.experiment
        top = int(VARIABLE_MAX / 1.1)
        if experiment == "variable" and args.t0 > top:
            parser.error(f"--t0 of the variable-length experiment must be at most {top}")
        config = RunConfig(
            experiment,
            args.task,
            args.t0,
            args.pooling,
            args.lr,
            args.seed,
            args.max_epochs,
            args.steps_per_epoch,
            test_size=args.test_size,
        )
        try:
            record = run(config, args.results, verbose)
        except RunFailed as failed:
            print(f"error: {failed}", file=sys.stderr)
            return 1
        except (RunConflict, CorruptRecord, RunBusy) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"{config.name}: {record['summary']}")
    elif args.command == "grid" and args.jobs > 1:
        argv = list(sys.argv[1:] if argv is None else argv)
        status = run_jobs("thesis_repro.ffattention", argv, args.jobs, command_line())
        if not args.no_report:
            print(report(args.results, args.figures))
        if status:
            return status
    elif args.command == "grid":
        try:
            records = run_grid(args.preset, args.results, tuple(args.only), verbose)
        except (RunConflict, CorruptRecord) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if not args.no_report:
            print(report(args.results, args.figures))
        failures = grid_failures(records)
        if failures:
            print(f"error: {failures}", file=sys.stderr)
            return 1
    else:
        print(report(args.results, args.figures))
    print(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))


__all__ = ["PRESETS", "RunConfig", "preset_runs", "report", "run", "run_grid"]
