"""``python -m thesis_repro``: reproduce every experiment, or render the report from the records.

    python -m thesis_repro reproduce --preset smoke --results /tmp/r --figures /tmp/f \\
        --report /tmp/r/REPORT.md --no-readme            # minutes: everything, on toy data
    python -m thesis_repro reproduce --preset cpu --data ../shared/data
    python -m thesis_repro reproduce --preset paper --jobs 8   # a GPU: 8 runs side by side
    python -m thesis_repro report                        # tables and figures from the records
    python -m thesis_repro status --preset paper --list  # what is left of a preset (no training)

``reproduce`` runs, in this order, the grids of a preset (``smoke``, ``cpu`` or ``paper``, as
defined in each experiment's ``config.py``; the experiments are listed in
``thesis_repro.experiment.NAMES``):

1. ``thesis_repro.ffattention`` -- Raffel & Ellis Table 1, variable length, temporal order
   (``paper``: Table 1 and temporal order again with the padding unmasked, as Raffel's script);
2. ``thesis_repro.addition`` -- thesis 3.1, LSTM vs attention-gated LSTM;
3. ``thesis_repro.lm`` -- thesis Tables 3.1 and 3.2, the PTB comparison, then the future-work
   tables of thesis 4.2 (prefix-length generalisation on eltec-pol and PTB, position-aware
   attention), which reuse the runs of Table 3.1 and of the PTB table, and the gap study
   (``--table gap``: why the thesis's gaps are larger); last the Kneser-Ney rows and the
   attention examples of thesis 3.2.4 (``python -m thesis_repro.lm examples``) from the
   finished runs.

Runs whose records are finished are skipped and interrupted ones resume, so the command can be
repeated until everything is done. ``smoke`` trains the language models on the built-in
synthetic corpus; ``cpu`` and ``paper`` need the real corpora from ``--data DIR`` (or
``$THESIS_REPRO_DATA``): ``DIR/eltec-pol`` for Tables 3.1, 3.2 and the eltec-pol future-work
tables, ``DIR/ptb`` for the PTB ones. A missing
corpus is reported in one line and its experiments are skipped. Afterwards the figures
(``figures/*.pdf``), ``REPORT.md`` and the README's results blocks are rendered from all records
(``thesis_repro.report.write_report``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thesis_repro.cli import (
    Parser,
    add_figures_option,
    add_results_option,
    add_verbose_option,
    run_main,
)
from thesis_repro.corpus import CorpusError
from thesis_repro.experiment import Reproduction, experiments
from thesis_repro.lm import LMError, table_sources
from thesis_repro.progress import preset_status, render_status
from thesis_repro.records import (
    CorruptRecord,
    RunConflict,
    RunFailed,
    command_line,
    grid_failures,
)
from thesis_repro.report import write_report
from thesis_repro.runner import add_jobs_option, run_jobs
from thesis_repro.settings import (
    DATA_ENV,
    FIGURES_DIR,
    README_PATH,
    REPORT_PATH,
    RESULTS_DIR,
    data_dir,
)

PRESETS = ("smoke", "cpu", "paper")


def reproduce(
    preset: str,
    results_dir: Path = RESULTS_DIR,
    figures_dir: Path = FIGURES_DIR,
    report_path: Path = REPORT_PATH,
    readme_path: Path | None = README_PATH,
    data_dir: str | os.PathLike | None = None,
    verbose: int = 1,
    log: Callable[[str], None] = print,
    jobs: int = 1,
    train_only: bool = False,
) -> dict[str, float]:
    """Run the steps of every experiment (``Experiment.steps``) under ``preset`` in order, then
    render figures and REPORT.md.

    Finished runs are skipped (each grid does this). ``data_dir``: folder of the LM corpora
    (ignored by ``smoke``; see ``lm.table_sources``). Returns the wall seconds of each step.
    A run that fails (loss NaN or infinite) is left out of the tables; once the report is
    written, ``RunFailed`` names every failed run. ``jobs`` > 1: first that many worker
    processes train every grid side by side (``reproduce ... --jobs 1 --no-report``, each
    taking the runs nobody holds: ``runner.run_jobs``), then the steps run here, finding the
    runs done. ``train_only``: the grids alone, no other step and no report (a worker).
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    results_dir = Path(results_dir)
    timings: dict[str, float] = {}
    if jobs > 1:
        started = time.time()
        argv = ["reproduce", "--preset", preset, "--results", str(results_dir)]
        argv += ["--figures", str(figures_dir), "--verbose", str(verbose)]
        argv += [] if data_dir is None else ["--data", str(data_dir)]
        log(f"##### training every grid of preset {preset} in {jobs} worker processes")
        run_jobs("thesis_repro", argv, jobs, command_line())
        timings[f"training ({jobs} jobs)"] = time.time() - started
    reproduction = Reproduction(
        preset, results_dir, Path(figures_dir), None if data_dir is None else str(data_dir),
        verbose, log, train_only,
    )  # fmt: skip
    steps = [step for experiment in experiments() for step in experiment.steps(reproduction)]
    ran: list[dict[str, Any]] = []  # records returned by the grids (failed ones included)
    for index, (name, step) in enumerate(steps, 1):
        log(f"##### [{index}/{len(steps)}] {name}, preset {preset} -> {results_dir}/")
        started = time.time()
        records = step()
        ran += [r for r in records or [] if isinstance(r, dict)]
        timings[name] = time.time() - started
    if train_only:
        return timings
    started = time.time()
    write_report(
        results_dir,
        figures_dir,
        report_path,
        readme_path,
        command=f"python -m thesis_repro reproduce --preset {preset}",
        timings=timings,
    )
    timings["report"] = time.time() - started
    log(
        f"wrote {report_path} and figures in {figures_dir}/; wall time: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())
    )
    if grid_failures(ran):
        raise RunFailed(grid_failures(ran), {})
    return timings


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro",
        description="Reproduce every experiment of the thesis and of Raffel & Ellis, or "
        "regenerate REPORT.md, the README's results blocks and figures/*.pdf from the records.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="render tables and figures from the records")
    status = sub.add_parser(
        "status",
        help="how far a preset has got: runs finished, running, interrupted, not started",
        description="Count every run of a preset by state (finished, failed, running, "
        "interrupted, not started) per experiment and table, from the records alone; nothing "
        "trains. A finished run that still lacks something a table needs (a language model "
        "not scored at a future-work table's eval prefixes) is counted as incomplete too. The "
        "language-model tables are listed only where their corpus is found.",
    )
    status.add_argument("--preset", choices=PRESETS, required=True, help="the preset to count")
    status.add_argument(
        "--list",
        action="store_true",
        help="also name every run not finished, with its state, and every incomplete one, with "
        "what it lacks and how to get it",
    )
    add_results_option(status, RESULTS_DIR)
    rerun = sub.add_parser(
        "reproduce",
        help="run every experiment of a preset (finished runs are skipped), then report",
        description=__doc__[__doc__.index("``reproduce`` runs") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rerun.add_argument(
        "--preset",
        choices=PRESETS,
        required=True,
        help="smoke: minutes, toy data, for the tests; cpu: hours on a CPU; paper: the "
        "papers' protocols (GPU)",
    )
    for command in (rerun, status):
        command.add_argument(
            "--data",
            metavar="DIR",
            default=data_dir(),
            help=f"folder of the LM corpora (eltec-pol/, ptb/); default ${DATA_ENV}",
        )
    add_verbose_option(rerun)
    add_jobs_option(rerun)
    rerun.add_argument(
        "--no-report",
        action="store_true",
        help="train the grids only: no Kneser-Ney rows, attention examples or report (what "
        "the workers of --jobs do)",
    )
    for command in (rep, rerun):
        add_results_option(command, RESULTS_DIR)
        add_figures_option(command)
        command.add_argument(
            "--report", type=Path, default=REPORT_PATH, help="report file (%(default)s)"
        )
        command.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; bad input ends with one ``error: ...`` line and exit status 2, a
    failed run (after the report is written) with status 1."""
    args = build_parser().parse_args(argv)
    if args.command == "status":
        if args.data is not None:
            os.environ[DATA_ENV] = str(args.data)  # where lm.runs looks for the corpora
        statuses = preset_status(args.preset, args.results, experiments())
        print(render_status(statuses, args.preset, args.list))
        _, skipped = table_sources(args.preset, args.data)  # corpora not found: not counted
        if skipped:
            print(skipped)
        return 0
    readme = None if args.no_readme else README_PATH
    if args.command == "report":
        write_report(args.results, args.figures, args.report, readme)
        print(f"wrote {args.report} and figures in {args.figures}/")
        return 0
    try:
        reproduce(
            args.preset,
            args.results,
            args.figures,
            args.report,
            readme,
            args.data,
            args.verbose,
            log=lambda line: print(line, flush=True),
            jobs=args.jobs,
            train_only=args.no_report,
        )
    except (CorpusError, LMError, CorruptRecord, RunConflict) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RunFailed as failed:
        print(f"error: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))


__all__ = ["build_parser", "main", "reproduce"]
