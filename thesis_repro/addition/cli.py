"""``python -m thesis_repro.addition``: argparse only; ``train`` and ``report`` do the work."""

from __future__ import annotations

import argparse
import time

from thesis_repro.addition import EXPERIMENT
from thesis_repro.addition import __doc__ as DOC
from thesis_repro.addition.config import MIN_LENGTH, MODELS, PRESETS, RunConfig, preset_runs
from thesis_repro.addition.report import report
from thesis_repro.addition.train import run
from thesis_repro.cli import (
    accept_shared_options_after,
    experiment_parser,
    int_at_least,
    positive_float,
    positive_int,
    results_folder,
    seed_int,
)
from thesis_repro.runner import add_jobs_option, grid_command, run_command


def build_parser() -> argparse.ArgumentParser:
    defaults = RunConfig("lstm")
    parser = experiment_parser("python -m thesis_repro.addition", DOC, PRESETS)
    sub = parser.add_subparsers(
        dest="command", required=True, help="run: one run; grid: a preset; report: outputs"
    )

    one = sub.add_parser("run", help="train and evaluate one configuration (resumable)")
    one.add_argument("--model", choices=MODELS, default="gated-pretrained", help="which model")
    one.add_argument("--seed", type=seed_int, default=0, help="seed of weights and training data")
    one.add_argument(
        "--steps",
        type=positive_int,
        default=defaults.steps,
        help="training steps, a multiple of --steps-per-epoch (default %(default)s)",
    )
    one.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        default=defaults.steps_per_epoch,
        help="steps per logged epoch and checkpoint (default %(default)s)",
    )
    one.add_argument(
        "--lr",
        type=positive_float,
        default=defaults.learning_rate,
        help="Adam learning rate (%(default)s)",
    )
    one.add_argument(
        "--batch-size",
        type=positive_int,
        default=defaults.batch_size,
        help="sequences per minibatch (%(default)s)",
    )
    one.add_argument(
        "--min-length",
        type=int_at_least(MIN_LENGTH),
        default=defaults.min_length,
        help="shortest training sequence (%(default)s)",
    )
    one.add_argument(
        "--max-length",
        type=int_at_least(MIN_LENGTH),
        default=defaults.max_length,
        help="longest training sequence, at least --min-length (%(default)s)",
    )
    one.add_argument(
        "--pretrain-steps",
        type=positive_int,
        default=defaults.pretrain_steps,
        help="steps of Raffel-network pretraining (gated-pretrained only; default %(default)s)",
    )
    one.add_argument(
        "--eval-lengths",
        type=int_at_least(MIN_LENGTH),
        nargs="+",
        default=list(defaults.eval_lengths),
        help="lengths of the generalisation test (default: %(default)s)",
    )
    one.add_argument(
        "--eval-size",
        type=positive_int,
        default=defaults.eval_size,
        help="fresh sequences per generalisation length (default %(default)s)",
    )
    one.add_argument(
        "--no-jit",
        action="store_true",
        help="compile without XLA (slower steps, faster start; default: XLA on)",
    )
    one.add_argument(
        "--unit-forget-bias",
        action="store_true",
        help="start the forget-gate bias at 1 (Keras's default) instead of the thesis's 0",
    )
    _add_stop_flag(one)

    grid = sub.add_parser("grid", help="run every configuration of a preset (resumable)")
    grid.add_argument(
        "--preset", choices=tuple(PRESETS), default="cpu", help="which preset (default: cpu)"
    )
    grid.add_argument(
        "--models", nargs="*", choices=MODELS, default=(), help="restrict to some models"
    )
    grid.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(grid)
    _add_stop_flag(grid)

    rep = sub.add_parser("report", help="render the table and figures from the records")
    rep.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default=None,
        help="only the runs of this preset (default: every record under <results>/addition)",
    )
    accept_shared_options_after(one, grid, rep)
    return parser


def _add_stop_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stop-after-epochs",
        type=positive_int,
        default=None,
        help="train at most this many epochs per run in this call and leave the run unfinished "
        "(time slicing; rerun to continue from the checkpoint)",
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; bad input (checked before any work), a record with other settings
    or an unreadable record end with one ``error: ...`` line and exit status 2, a failed run
    (loss NaN or infinite) with status 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.results = results_folder(args.command, args.results)
    started = time.time()
    if args.command == "run":
        if args.max_length < args.min_length:
            parser.error(
                f"--max-length ({args.max_length}) must be at least --min-length "
                f"({args.min_length})"
            )
        if args.steps % args.steps_per_epoch:
            parser.error(
                f"--steps ({args.steps}) must be a multiple of --steps-per-epoch "
                f"({args.steps_per_epoch})"
            )
        try:
            config = RunConfig(
                args.model,
                args.seed,
                steps=args.steps,
                steps_per_epoch=args.steps_per_epoch,
                batch_size=args.batch_size,
                learning_rate=args.lr,
                min_length=args.min_length,
                max_length=args.max_length,
                pretrain_steps=args.pretrain_steps,
                eval_lengths=tuple(args.eval_lengths),
                eval_size=args.eval_size,
                jit_compile=not args.no_jit,
                unit_forget_bias=args.unit_forget_bias,
            )
        except ValueError as error:
            parser.error(str(error))
        status = run_command(
            lambda: run(config, args.results, args.verbose, args.stop_after_epochs),
            lambda record: f"{config.name}: {record['summary'] or 'unfinished'}",
        )
        if status:
            return status
    elif args.command == "grid":
        configs = preset_runs(PRESETS[args.preset], tuple(args.models))
        status = grid_command(
            EXPERIMENT,
            args,
            argv,
            configs,
            run_one=lambda c: run(c, args.results, args.verbose, args.stop_after_epochs),
            render=lambda: report(args.results, args.figures, args.preset),
        )
        if status:
            return status
    else:
        print(report(args.results, args.figures, args.preset))
    print(f"done in {time.time() - started:.0f} s")
    return 0
