"""How far a preset has got: every run of every experiment, finished or not, from the records.

    python -m thesis_repro status --preset paper          # counts per experiment and table
    python -m thesis_repro status --preset paper --list   # and the name of every run left

Work on a lent GPU comes in slices (issue 15) and a grid can be stopped anywhere; this answers
"what is left?" without training anything. A run is ``finished``, ``failed`` (its loss became
NaN or infinite; never retrained), ``running`` (a live process holds its lock), ``interrupted``
(a record with some epochs and nobody training it: ``grid`` resumes it from its newest
checkpoint here, or starts it over where none is, as after a move to a fresh machine) or ``not
started``. A finished run can still lack something a table needs (``Experiment.lacks``: a
reused language model not scored at a future-work table's eval prefixes); it is counted as
finished, counted again as incomplete, and listed with what it lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from thesis_repro.experiment import Experiment
from thesis_repro.records import hours, load_record, run_seconds
from thesis_repro.run_lock import held
from thesis_repro.training import resumable_epochs

#: The states of a run, in the order a listing names them.
STATES = ("finished", "failed", "running", "interrupted", "not started")


@dataclass(frozen=True)
class RunStatus:
    """One run of a preset: where it stands and how much of it is recorded."""

    experiment: str
    group: str  # the table or experiment it belongs to (what the grid's log names it by)
    name: str
    state: str  # one of STATES
    epochs: int  # epochs recorded (0 for a run not started)
    seconds: float  # wall time recorded (records.run_seconds)
    resumable: int = 0  # of those epochs, how many a resume keeps (training.resumable_epochs)
    lacks: str = ""  # what a finished run still lacks for a table, and how to get it


def group_and_name(experiment: Experiment, config: object) -> tuple[str, str]:
    """``("table1", "paper-addition-...")`` from the grid log's line ``table1: paper-...``;
    an experiment whose lines name no group is its own group."""
    group, _, name = experiment.describe(config).rpartition(": ")
    return group or experiment.name, name


def run_status(experiment: Experiment, config: object, results_dir: Path) -> RunStatus:
    """Where one run stands, from its record and its lock (``run_lock.held``)."""
    path = experiment.record_path(config, results_dir)
    record = load_record(path)
    group, name = group_and_name(experiment, config)
    if record is None:
        state = "running" if held(path) else "not started"
        epochs, seconds = 0, 0.0
    else:
        epochs, seconds = len(record.get("epochs", [])), run_seconds(record)
        if record.get("failed"):
            state = "failed"
        elif record.get("finished"):
            state = "finished"
        else:
            state = "running" if held(path) else "interrupted"
    resumable = resumable_epochs(path, epochs) if state == "interrupted" else epochs
    lacks = ""
    if state == "finished" and experiment.lacks is not None:
        lacks = experiment.lacks(config, record, path)
    return RunStatus(experiment.name, group, name, state, epochs, seconds, resumable, lacks)


def preset_status(
    preset: str, results_dir: Path, experiments: Sequence[Experiment]
) -> list[RunStatus]:
    """Every run of ``preset`` in every experiment (``Experiment.runs``), in grid order.

    The language models list only the tables whose corpus is found (``$THESIS_REPRO_DATA``)."""
    return [
        run_status(experiment, config, Path(results_dir))
        for experiment in experiments
        for config in experiment.runs(preset)
    ]


def render_status(statuses: Sequence[RunStatus], preset: str, list_runs: bool = False) -> str:
    """A line per (experiment, group): how many runs are in each state, the wall time recorded;
    then the total. ``list_runs``: every run not finished (or finished but lacking something)
    under its group, with its state."""
    groups: dict[tuple[str, str], list[RunStatus]] = {}
    for status in statuses:
        groups.setdefault((status.experiment, status.group), []).append(status)
    width = max((len(f"{e} {g}") for e, g in groups), default=0)
    lines = [f"preset {preset}: {len(statuses)} runs"]
    for (experiment, group), members in groups.items():
        label = experiment if group == experiment else f"{experiment} {group}"
        lines.append(f"  {label:<{width}}  {_counts(members)}")
        if list_runs:
            lines += [
                f"      {s.state:<12} {s.name}{_epochs(s)}"
                for s in members
                if s.state != "finished"
            ]
            lines += [f"      {'incomplete':<12} {s.name}: {s.lacks}" for s in members if s.lacks]
    lines.append(f"  {'all':<{width}}  {_counts(statuses)}")
    return "\n".join(lines)


def _epochs(status: RunStatus) -> str:
    """`` (79 epochs)``, saying where a resume would start when that is earlier (its newest
    checkpoint here) or over (none here)."""
    if not status.epochs:
        return ""
    if status.resumable == status.epochs:
        return f" ({status.epochs} epochs)"
    if status.resumable:
        return f" ({status.epochs} epochs; resumes after {status.resumable}: newest checkpoint)"
    return f" ({status.epochs} epochs; no checkpoint here: starts over)"


def _counts(members: Sequence[RunStatus]) -> str:
    """``172 of 192 finished (2 incomplete), 1 running, 19 not started; 3.33 h recorded``."""
    done = sum(s.state == "finished" for s in members)
    incomplete = sum(bool(s.lacks) for s in members)
    first = f"{done} of {len(members)} finished" + (
        f" ({incomplete} incomplete)" if incomplete else ""
    )
    rest = [(state, sum(s.state == state for s in members)) for state in STATES[1:]]
    text = ", ".join([first] + [f"{n} {s}" for s, n in rest if n])
    return f"{text}; {hours(sum(s.seconds for s in members))} recorded"


__all__ = ["STATES", "RunStatus", "preset_status", "render_status", "run_status"]
