"""The experiment contract: what every experiment provides, and the registry that lists them.

Each experiment is a package (``thesis_repro.ffattention``, ``thesis_repro.addition``,
``thesis_repro.lm``) with the same files::

    config.py   presets and run configurations as data (a leaf: imports nothing of its package)
    model.py    the Keras models it trains
    train.py    one run: data, model, protocol -> a JSON record (``records.RunRecord``)
    report.py   tables and figures from the records alone
    cli.py      argparse only: parse, then call the functions above
    __init__.py its :class:`Experiment`, ``EXPERIMENT``

``python -m thesis_repro reproduce`` and ``report`` iterate over :func:`experiments`; every grid
is walked by ``runner.run_grid`` (skip finished runs, resume interrupted ones, locks, failures).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thesis_repro.runner import run_grid

#: The experiments, in the order ``reproduce`` runs them (cheapest first).
NAMES = ("ffattention", "addition", "lm")


@dataclass(frozen=True)
class Reproduction:
    """What ``python -m thesis_repro reproduce`` passes to every experiment's ``steps``."""

    preset: str
    results_dir: Path
    figures_dir: Path
    data_dir: str | None = None
    verbose: int = 1
    log: Callable[[str], None] = print
    #: Only the steps that train (the grids): the workers of ``reproduce --jobs N`` leave the
    #: steps computed from finished runs (Kneser-Ney rows, attention examples) to the end.
    train_only: bool = False


#: One step of ``reproduce``: a name for the log and the work, which returns the records it ran.
Step = tuple[str, Callable[[], Sequence[Mapping[str, Any]] | None]]


@dataclass(frozen=True)
class Experiment:
    """One experiment, as ``reproduce``, ``report`` and the grid runner see it.

    ``runs(preset)``: every run configuration of a preset; ``run(config, results_dir,
    verbose)``: train one (skipping a finished run, resuming an interrupted one) and return its
    record; ``record_path(config, results_dir)``: where that record is (``progress`` reads it);
    ``describe(config)``: one line naming a run (``group: name`` where the experiment has
    several tables); ``report(results_dir, figures_dir)``:
    render tables and figures from the records and return the Markdown; ``steps``: the steps of
    ``reproduce`` (default: one grid over ``runs(preset)``); ``lacks(config, record, path)``:
    what a finished run's record still lacks for the tables that show it, and how to get it
    (``""``: nothing; ``progress`` lists it).
    """

    name: str  # records in results/<name>/
    title: str  # heading in REPORT.md
    package: str  # python -m <package> is its command line
    presets: Mapping[str, Any]
    runs: Callable[[str], Sequence[Any]]
    run: Callable[[Any, Path, int], dict[str, Any]]
    record_path: Callable[[Any, Path], Path]
    describe: Callable[[Any], str]
    report: Callable[[Path, Path], str]
    figure_prefixes: tuple[str, ...] = ()  # figures/<prefix>*.pdf (default: <name>_)
    reproduce_steps: Callable[[Reproduction], list[Step]] | None = field(default=None)
    lacks: Callable[[Any, Mapping[str, Any], Path], str] | None = field(default=None)

    def figures(self, figures_dir: Path) -> list[Path]:
        """The experiment's figures in ``figures_dir``, sorted."""
        prefixes = self.figure_prefixes or (f"{self.name}_",)
        return sorted(p for prefix in prefixes for p in Path(figures_dir).glob(f"{prefix}*.pdf"))

    def steps(self, reproduction: Reproduction) -> list[Step]:
        """The steps of ``reproduce`` for this experiment."""
        if self.reproduce_steps is not None:
            return self.reproduce_steps(reproduction)

        def grid() -> list[dict[str, Any]]:
            configs = self.runs(reproduction.preset)
            return run_grid(self, configs, reproduction.results_dir, reproduction.verbose)

        return [(self.name, grid)]


def experiment(name: str) -> Experiment:
    """The registered experiment ``name`` (its package's ``EXPERIMENT``)."""
    if name not in NAMES:
        raise ValueError(f"no experiment {name!r}; the experiments are {', '.join(NAMES)}")
    return importlib.import_module(f"thesis_repro.{name}").EXPERIMENT


def experiments() -> list[Experiment]:
    """Every experiment, in the order of :data:`NAMES`."""
    return [experiment(name) for name in NAMES]
