"""``python -m thesis_repro.ffattention``: argparse only; ``train`` and ``report`` do the work."""

from __future__ import annotations

import argparse
import time

from thesis_repro.cli import (
    accept_shared_options_after,
    experiment_parser,
    int_at_least,
    positive_float,
    positive_int,
    results_folder,
    seed_int,
)
from thesis_repro.ffattention import EXPERIMENT
from thesis_repro.ffattention import __doc__ as DOC
from thesis_repro.ffattention.config import (
    EXPERIMENTS,
    MIN_T0,
    POOLINGS,
    PRESETS,
    TABLE1_TASKS,
    VARIABLE_MAX,
    RunConfig,
    runs,
)
from thesis_repro.ffattention.report import report
from thesis_repro.ffattention.train import run
from thesis_repro.runner import (
    add_data_parallel_option,
    add_dtype_policy_option,
    add_jobs_option,
    grid_command,
    run_command,
    start_data_parallel,
)
from thesis_repro.tasks import raffel_top_t0


def _add_unmasked_option(parser: argparse.ArgumentParser, scope: str) -> None:
    parser.add_argument(
        "--unmasked",
        action="store_true",
        help=f"{scope}: feed the padding to the network as Raffel's published script does "
        "(every batch padded to int(ceil(1.1 T0)) steps, the padded steps in the attention "
        "and the mean) instead of masking it (SPEC's default; the paper is silent); its own "
        "records (name ...-unmasked-seed<s>) and its own table in the report",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = experiment_parser("python -m thesis_repro.ffattention", DOC, PRESETS)
    sub = parser.add_subparsers(dest="command", required=True)

    one = sub.add_parser("run", help="train one configuration")
    one.add_argument(
        "--experiment",
        choices=EXPERIMENTS,
        default="table1",
        help="which experiment (default: %(default)s)",
    )
    one.add_argument(
        "--task",
        choices=(*TABLE1_TASKS, "temporal_order"),
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
        choices=POOLINGS,
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
    _add_unmasked_option(one, "Table 1 and temporal order only")
    add_data_parallel_option(one)
    add_dtype_policy_option(one)

    grid = sub.add_parser("grid", help="run every configuration of a preset (resumable)")
    grid.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="cpu",
        help="scale (default: %(default)s; paper: the published protocol, for a GPU; see below)",
    )
    grid.add_argument(
        "--only",
        nargs="*",
        choices=EXPERIMENTS,
        default=(),
        help="restrict to some experiments",
    )
    grid.add_argument(
        "--seeds",
        type=seed_int,
        nargs="+",
        help="seeds to run (default: the preset's; the temporal-order demo runs only seed 0)",
    )
    grid.add_argument(
        "--no-prune",
        action="store_true",
        help="train every Table 1 learning rate to 100%% or its cap; by default a run stops "
        "once another learning rate of its cell (same task, T0, pooling, seed) got to 100%% "
        "in as many epochs or fewer, which leaves the table unchanged (the paper reports the "
        "best learning rate) and saves the slower ones' later epochs. A record already "
        "stopped that way stays finished: delete it to train it in full",
    )
    grid.add_argument(
        "--tasks",
        nargs="+",
        choices=TABLE1_TASKS,
        help="Table 1 and variable length: only these tasks (default: the preset's)",
    )
    grid.add_argument(
        "--t0s",
        type=int_at_least(MIN_T0),
        nargs="+",
        help="Table 1: only these T0 of the preset's (default: all of them)",
    )
    grid.add_argument(
        "--poolings",
        nargs="+",
        choices=POOLINGS,
        help="Table 1 and variable length: only these poolings (default: both)",
    )
    grid.add_argument(
        "--lrs",
        type=positive_float,
        nargs="+",
        metavar="LR",
        help="Table 1 and variable length: only these of the preset's Adam learning rates "
        "(default: all of them; a cell with some rates left reads 'k of n learning rates "
        "run' in the report)",
    )
    _add_unmasked_option(grid, "the Table 1 and temporal-order runs (no variable length)")
    grid.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(grid)
    add_data_parallel_option(grid)
    add_dtype_policy_option(grid)

    rep = sub.add_parser("report", help="render the table and figure from the records")
    accept_shared_options_after(one, grid, rep)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; bad input (checked before any work), a record with other settings
    or an unreadable record end with one ``error: ...`` line and exit status 2, a failed run
    (loss NaN or infinite) with status 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.results = results_folder(args.command, args.results)
    started = time.time()
    start_data_parallel(parser, args)
    if args.command == "run":
        experiment = "temporal_order" if args.task == "temporal_order" else args.experiment
        top = raffel_top_t0(VARIABLE_MAX)
        if experiment == "variable" and args.t0 > top:
            parser.error(f"--t0 of the variable-length experiment must be at most {top}")
        if experiment == "variable" and args.unmasked:
            parser.error("--unmasked is for Table 1 and temporal order, not variable length")
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
            dtype_policy=args.dtype_policy,
            mask_padding=not args.unmasked,
        )
        status = run_command(
            lambda: run(config, args.results, args.verbose),
            lambda record: f"{config.name}: {record['summary']}",
        )
        if status:
            return status
    elif args.command == "grid":
        every = runs(args.preset, args.dtype_policy, args.seeds, mask_padding=not args.unmasked)
        configs = [c for c in every if _chosen(c, args)]
        if args.t0s and set(args.t0s) - set(PRESETS[args.preset].t0s):
            parser.error(
                f"--t0s: preset {args.preset} runs T0 = "
                f"{', '.join(map(str, PRESETS[args.preset].t0s))} only"
            )
        offered = {c.learning_rate for c in every if c.experiment != "temporal_order"}
        if args.lrs and set(args.lrs) - offered:
            parser.error(
                f"--lrs: preset {args.preset} runs learning rates "
                f"{', '.join(f'{lr:g}' for lr in sorted(offered))} only"
            )
        if not configs:
            parser.error("no run of the preset is left after --only/--tasks/--t0s/--poolings/--lrs")
        status = grid_command(
            EXPERIMENT,
            args,
            argv,
            configs,
            run_one=lambda c: run(c, args.results, args.verbose, prune=not args.no_prune),
        )
        if status:
            return status
    else:
        print(report(args.results, args.figures))
    print(f"done in {time.time() - started:.0f} s")
    return 0


def _chosen(config: RunConfig, args: argparse.Namespace) -> bool:
    """Whether ``grid``'s filters (``--only``, ``--tasks``, ``--t0s``, ``--poolings``,
    ``--lrs``) keep ``config``; any of the last four leaves the temporal-order demo out,
    ``--t0s`` also the variable-length runs."""
    if args.only and config.experiment not in args.only:
        return False
    if config.experiment == "temporal_order":
        return not (args.t0s or args.tasks or args.poolings or args.lrs)
    if args.tasks and config.task not in args.tasks:
        return False
    if args.poolings and config.pooling not in args.poolings:
        return False
    if args.lrs and config.learning_rate not in args.lrs:
        return False
    return not args.t0s or (config.experiment == "table1" and config.t0 in args.t0s)
