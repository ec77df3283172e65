"""``python -m thesis_repro.lm``: argparse only; ``train``, ``evaluate``, ``report``, ``examples``
and ``kneser_ney`` do the work.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thesis_repro.cli import (
    Parser,
    add_figures_option,
    add_results_option,
    add_verbose_option,
    int_at_least,
    positive_int,
    seed_int,
)
from thesis_repro.corpus import CorpusError
from thesis_repro.layers import POSITION_AWARE
from thesis_repro.lm import EXPERIMENT
from thesis_repro.lm.config import (
    EVAL_PREFIXES,
    FIRST_TARGET,
    FUTURE_TABLES,
    HISTORY_CAP,
    LM_TABLES,
    PRESETS,
    TABLES,
    VARIANTS,
    LMError,
    model_label,
    table_corpus_name,
    table_eval_prefixes,
)
from thesis_repro.lm.corpora import (
    SYNTHETIC_NOTICE,
    load_lm_corpus,
    make_config,
    resolve_corpus,
    table_runs,
)
from thesis_repro.lm.evaluate import evaluate_all, parse_eval_prefix
from thesis_repro.lm.examples import EXAMPLES, make_examples, show_attention
from thesis_repro.lm.kneser_ney import ORDERS, KNError, table_baselines
from thesis_repro.lm.report import report
from thesis_repro.lm.train import SLOW_RUN_SECONDS, estimate_run_seconds, run
from thesis_repro.records import (
    CorruptRecord,
    RunFailed,
    grid_failures,
)
from thesis_repro.run_lock import RunBusy
from thesis_repro.runner import (
    add_data_parallel_option,
    add_dtype_policy_option,
    add_jobs_option,
    grid_command,
    start_data_parallel,
)
from thesis_repro.settings import DATA_ENV, RESULTS_DIR, RUNS_DIR, data_dir


def _add_common(parser: argparse.ArgumentParser, grid: bool) -> None:
    parser.add_argument(
        "--corpus",
        metavar="PATH",
        help="corpus text file (.txt/.xz/.gz/.bz2) or folder with train/valid/test files",
    )
    parser.add_argument(
        "--corpus-name",
        metavar="NAME",
        help=f"corpus inside ${DATA_ENV} when --corpus is not given (default: "
        + ("the table's: ptb for ptb and future-*-ptb, else eltec-pol)" if grid else "eltec-pol)"),
    )
    parser.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="cpu",
        help="scale: corpus size, vocabulary, epochs, instances (default: %(default)s, what "
        "a 2-core CPU trains in minutes; paper: the thesis's protocol, for a GPU; see the "
        "list below)",
    )
    parser.add_argument("--epochs", type=int, help="override the preset's number of epochs")
    parser.add_argument(
        "--max-words", type=int, help="override the preset's corpus size (tokens before split)"
    )
    parser.add_argument(
        "--min-count", type=int, help="override the vocabulary threshold (words seen >= N times)"
    )
    parser.add_argument("--batch-size", type=int, help="override the minibatch size (thesis: 1000)")
    parser.add_argument(
        "--first-target",
        type=int,
        help=f"first scored position of each part (default {FIRST_TARGET}: the 10-gram's); "
        "keep it equal for models you compare",
    )
    add_results_option(parser, RESULTS_DIR if grid else RUNS_DIR)
    add_data_parallel_option(parser)
    add_dtype_policy_option(parser)
    parser.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile training and scoring with XLA (default: the preset's; on except smoke)",
    )
    add_verbose_option(parser)


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(
        text, 96, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False
    )


def _presets_epilog() -> str:
    return "presets:\n" + "\n".join(
        _wrap(f"{k}: {p.description}", "  ") for k, p in PRESETS.items()
    )


def train_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm",
        description=_wrap(
            "Train one language model of thesis 3.2 (Bengio n-gram LM, or with an "
            "attention-compressed prefix). Other commands: `python -m thesis_repro.lm grid "
            "--help` (Tables 3.1/3.2, PTB, thesis 4.2 future work, the gap study), `... lm "
            "report --help`, `... lm evaluate --help`, `... lm show-attention --help`, `... lm "
            "examples --help`, `... lm kneser-ney --help` (count-based baselines)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_presets_epilog()
        + "\n\n"
        + _wrap(
            f"corpus: --corpus PATH, else ${DATA_ENV}/<--corpus-name>, else the synthetic "
            "corpus (announced on the first line of output)."
        ),
    )
    parser.add_argument(
        "--order", type=int, default=5, help="n of the n-gram window: sees n-1 words (default 5)"
    )
    parser.add_argument(
        "--prefix",
        type=int,
        default=0,
        help="words before the window compressed by attention (0 = plain Bengio model; "
        "thesis: 2 or 5)",
    )
    parser.add_argument(
        "--variant",
        choices=tuple(VARIANTS),
        default="thesis",
        help="optimiser: thesis = SGD eps0 0.2, decay 1e-8 (Table 3.1); momentum = momentum "
        "0.85, eps0 0.15, decay 1e-5 (Table 3.2)",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="instance: weights and data order")
    parser.add_argument(
        "--min-prefix",
        type=int,
        default=0,
        metavar="K",
        help="thesis 4.2: train with a prefix length drawn uniformly in K..--prefix for every "
        "minibatch (default 0: always --prefix words)",
    )
    parser.add_argument(
        "--position-aware",
        choices=POSITION_AWARE,
        default="none",
        help="thesis 4.2: tell the attention how far back each prefix word is: bias = a "
        "learned per-distance bias on the energies (primary), embedding = a learned distance "
        "embedding added to h_i (default: none, the thesis's model)",
    )
    _add_eval_prefix(parser, "after training, also score the test part")
    _add_common(parser, grid=False)
    return parser


def _add_eval_prefix(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--eval-prefix",
        nargs="+",
        metavar="N|sentence",
        help=f"thesis 4.2: {what} of an attention model with other prefixes, same weights: N "
        f"words, or 'sentence' = back to the previous <eos> (at most {HISTORY_CAP} words); "
        "stored in the record's summary.eval_prefix (default: the future-work tables' "
        "prefixes for a run they show, none for another)",
    )


def grid_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm grid",
        description=_wrap(
            "Run every model x instance of a thesis table (finished runs are skipped, "
            "interrupted ones resumed), then render tables and figures."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="tables:\n"
        + "\n".join(f"  {k}: {t.title}" for k, t in TABLES.items())
        + "\n"
        + "\n".join(
            _wrap(
                f"{k}: {t.title}. Rows: {'; '.join(model_label(*g.key) for g in t.regimes)}. "
                f"Eval prefixes: {', '.join(map(str, t.eval_prefixes))}. {t.runtime}.",
                "  ",
            )
            for k, t in FUTURE_TABLES.items()
        )
        + "\n\n"
        + _presets_epilog(),
    )
    parser.add_argument(
        "--table",
        choices=LM_TABLES,
        default="3.1",
        help="model set (default: %(default)s); future-*: thesis 4.2, reusing the runs of "
        "Table 3.1 (future-*-ptb: of the PTB table); gap: the 5-gram vs 5-gram + 5 gap under "
        "each difference from the thesis (cased, sentence-bounded, vocabulary, epochs, "
        "schedule), reusing Tables 3.1 and 3.2",
    )
    parser.add_argument(
        "--seeds", type=seed_int, nargs="+", help="instances to run (default: the preset's)"
    )
    add_figures_option(parser)
    parser.add_argument("--no-report", action="store_true", help="skip rendering afterwards")
    add_jobs_option(parser)
    _add_eval_prefix(parser, "override the table's eval prefixes: score the test part")
    _add_common(parser, grid=True)
    return parser


def evaluate_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm evaluate",
        description=_wrap(
            "Thesis 4.2: score finished attention runs on the test part with other prefixes "
            "(same weights, from each run's final model) and store the missing scores in their "
            "records (summary.eval_prefix). Then render the tables."
        ),
    )
    add_results_option(parser, RESULTS_DIR)
    add_figures_option(parser)
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="TABLE",
        help="only the runs under these table folders (e.g. 3.1 future-prefix; default: all)",
    )
    parser.add_argument(
        "--eval-prefix",
        nargs="+",
        metavar="N|sentence",
        default=[str(e) for e in EVAL_PREFIXES],
        help="prefixes to score (default: %(default)s)",
    )
    parser.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="XLA for scoring (default: as the run was trained)",
    )
    parser.add_argument("--verbose", type=int, choices=(0, 1), default=1, help="progress lines")
    return parser


def show_attention_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm show-attention",
        description=_wrap(
            "Draw the attention examples of thesis 3.2.4 for one sentence: every window a line "
            "of text, each prefix word's opacity proportional to its attention weight. With "
            "several models (e.g. with and without position awareness, thesis 4.2): one panel "
            "each, side by side."
        ),
    )
    parser.add_argument(
        "--checkpoint",
        nargs="+",
        required=True,
        type=Path,
        metavar="PATH",
        help="a run's record (.json; its final model is used) or a .keras model of it (final "
        "or epoch checkpoint); the vocabulary comes from the run's corpus settings",
    )
    parser.add_argument("--sentence", required=True, help="text, tokenised like the run's corpus")
    parser.add_argument("--out", type=Path, required=True, help="figure file (.pdf, .png)")
    parser.add_argument(
        "--prefix",
        type=positive_int,
        help="prefix words to give the models (default: each model's trained prefix)",
    )
    return parser


def examples_parser() -> argparse.ArgumentParser:

    listing = "; ".join(
        f"{e.name}: {', '.join(f'{p.table}/{p.model}' for p in e.panels)} on {e.corpus}"
        for e in EXAMPLES
    )
    parser = Parser(
        prog="python -m thesis_repro.lm examples",
        description=_wrap(
            "Thesis 3.2.4 (and 4.2): compute the committed attention examples from the final "
            "models of finished runs (seed 0 of a preset), write their records to "
            "<results>/lm/attention_examples/ and draw figures/attention_<name>_<k>.pdf. "
            f"Examples: {listing}. Examples whose runs are missing are skipped."
        ),
    )
    parser.add_argument(
        "--preset", choices=tuple(PRESETS), default="cpu", help="whose runs (default: cpu)"
    )
    parser.add_argument(
        "--force", action="store_true", help="recompute examples whose records exist"
    )
    add_results_option(parser, RESULTS_DIR)
    add_figures_option(parser)
    return parser


def report_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m thesis_repro.lm report",
        description="Render results/lm/<corpus>/<table>/table.md and the figures (validation "
        "perplexity per epoch) from the JSON records.",
    )
    add_results_option(parser, RESULTS_DIR)
    add_figures_option(parser)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "epochs": args.epochs,
        "max_words": args.max_words,
        "min_count": args.min_count,
        "batch_size": args.batch_size,
        "first_target": args.first_target,
        "dtype_policy": args.dtype_policy,
    }


def kneser_ney(args: argparse.Namespace) -> int:
    """The ``kneser-ney`` command: the KN3/KN5 rows of a table (``kneser_ney.table_baselines``)."""
    name = args.corpus_name or table_corpus_name(args.table)
    source = resolve_corpus(args.corpus, name, data_dir())
    if source.synthetic and not args.quiet:
        print(SYNTHETIC_NOTICE, flush=True)
    records = table_baselines(
        args.table, source, args.preset, args.results, args.order, not args.quiet, args.force
    )
    for record in records:
        s, order = record["summary"], record["config"]["order"]
        line = (
            f"KN{order} on {source.name} (V = {record['corpus']['vocab_size']:,}): valid "
            f"{s['valid_perplexity']:.2f}, test {s['test_perplexity']:.2f}"
        )
        if "sentence_bounded" in s:
            b = s["sentence_bounded"]
            line += (
                f"; sentence-bounded: valid {b['valid_perplexity']:.2f}, test "
                f"{b['test_perplexity']:.2f}"
            )
        print(line, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry; errors end with one ``error: ...`` line and exit status 2, a failed
    run (loss NaN or infinite; in a grid, after the other runs and the report) with status 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parsers = {
        "train": train_parser,
        "grid": grid_parser,
        "report": report_parser,
        "evaluate": evaluate_parser,
        "show-attention": show_attention_parser,
        "examples": examples_parser,
        "kneser-ney": kneser_ney_parser,
    }
    command = argv[0] if argv and argv[0] in parsers else "train"
    if argv and argv[0] == command:
        argv = argv[1:]
    parser = parsers[command]()
    args = parser.parse_args(argv)
    started = time.time()

    try:
        if command == "report":
            print(report(args.results, args.figures))
            return 0
        if command == "evaluate":
            evals = [parse_eval_prefix(e) for e in args.eval_prefix]  # errors before any work
            evaluate_all(args.results, evals, args.table, args.verbose, args.jit)
            print(report(args.results, args.figures))
            return 0
        if command == "examples":
            make_examples(args.results, args.figures, args.preset, force=args.force)
            return 0
        if command == "kneser-ney":
            return kneser_ney(args)
        if command == "show-attention":
            path = show_attention(args.checkpoint, args.sentence, args.out, args.prefix)
            print(f"wrote {path}")
            return 0
        eval_prefixes = [parse_eval_prefix(e) for e in args.eval_prefix or ()]
        start_data_parallel(parser, args)
        default_name = table_corpus_name(args.table) if command == "grid" else None
        source = resolve_corpus(args.corpus, args.corpus_name or default_name, data_dir())
        if command == "train":
            configs = [
                make_config(
                    source,
                    args.preset,
                    "runs",
                    args.order,
                    args.prefix,
                    args.variant,
                    args.seed,
                    min_prefix=args.min_prefix,
                    position_aware=args.position_aware,
                    **_overrides(args),
                )
            ]
        else:
            configs = table_runs(args.table, source, args.preset, args.seeds, **_overrides(args))
        if source.synthetic:
            print(SYNTHETIC_NOTICE, flush=True)
        slowest = 0.0  # seconds of the longest run here, estimated (paper preset)
        for config in {(c.max_words, c.min_count, c.tokenizer): c for c in configs}.values():
            corpus = load_lm_corpus(source, config, progress=bool(args.verbose))  # errors now
            if args.preset == "paper":
                slowest = max(slowest, estimate_run_seconds(config, corpus))
        if slowest > SLOW_RUN_SECONDS:
            print(
                "warning: the paper preset is the thesis's protocol, sized for a GPU; a run here "
                f"takes ~{slowest / 3600:.0f} h on this machine (estimated; eltec-pol on this "
                "2-core CPU: 1.0-1.2 s per update measured, ~45 h per run; PTB: ~50 min)",
                flush=True,
            )
        evals = eval_prefixes if command == "train" or args.eval_prefix else None
        if evals is None:
            evals = table_eval_prefixes(args.table)
        if command == "grid":  # the corpus cache is ready: --jobs workers can start at once
            status = grid_command(
                EXPERIMENT,
                args,
                ["grid", *argv],
                configs,
                run_one=lambda c: run(c, source, args.results, args.verbose, args.jit, (), evals),
                render=lambda: report(args.results, args.figures),
            )
            if status:
                return status
            print(f"done in {time.time() - started:.0f} s")
            return 0
        try:
            record = run(configs[0], source, args.results, args.verbose, args.jit, (), evals)
        except RunBusy as busy:
            raise LMError(str(busy)) from None
        print(f"{configs[0].name}: {json.dumps(record['summary'])}")
        records = [record]
        failures = grid_failures(records)
        if failures:
            print(f"error: {failures}", file=sys.stderr)
            return 1
    except (CorpusError, LMError, KNError, CorruptRecord) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"done in {time.time() - started:.0f} s")
    return 0


def kneser_ney_parser() -> argparse.ArgumentParser:
    """The ``kneser-ney`` command of ``python -m thesis_repro.lm``."""
    p = Parser(
        prog="python -m thesis_repro.lm kneser-ney",
        description=(
            "Kneser-Ney baselines (interpolated modified KN, Chen & Goodman 1998) for the LM "
            "tables: estimated on the table's training part, scored on exactly the neural "
            "models' targets (running windows, positions >= 9 of valid and test), plus the "
            "standard sentence-bounded perplexity. Writes one record per order under "
            "RESULTS/kneser-ney/<corpus>/; `python -m thesis_repro.lm report` shows them as "
            "rows KN3 / KN5."
        ),
    )
    p.add_argument(
        "--table",
        choices=tuple(TABLES),
        default="3.1",
        help="the table whose corpus to use: 3.1 and 3.2 (eltec-pol, the same corpus settings, "
        "so the same records) or ptb (default: %(default)s)",
    )
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="cpu",
        help="corpus size and vocabulary of that preset (default: %(default)s)",
    )
    p.add_argument(
        "--order",
        type=int_at_least(1, FIRST_TARGET + 1),
        nargs="+",
        default=list(ORDERS),
        metavar="N",
        help=f"n-gram orders, 1..{FIRST_TARGET + 1} (the n-1 context words precede the first "
        f"scored position {FIRST_TARGET}; default: 3 5)",
    )
    p.add_argument(
        "--corpus",
        metavar="PATH",
        help=f"corpus file or folder (default: ${DATA_ENV}/<the table's corpus>; neither: the "
        "synthetic corpus)",
    )
    p.add_argument("--corpus-name", metavar="NAME", help=f"corpus inside ${DATA_ENV}")
    add_results_option(p, RESULTS_DIR)
    p.add_argument("--force", action="store_true", help="recompute finished records")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p
