"""The options every experiment's command line shares: where records and figures go, progress.

Also the one place for checking numbers on a command line: :class:`Parser` reports bad input in
one line (``error: ...``, exit status 2) and the ``type=`` functions below reject a value before
any work starts (nothing is trained and nothing written). Checks that involve two options (e.g.
``--max-length`` against ``--min-length``) call ``parser.error`` right after parsing.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TextIO

from thesis_repro.settings import (
    FIGURES_DIR,
    RESULTS_DIR,
    RUNS_DIR,
    SettingError,
    check_environment,
)
from thesis_repro.training import catch_interrupts

#: Largest seed: Keras seeds NumPy's legacy generator, which takes 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: ...`` on stderr, exit status 2 (its sub-commands'
    parsers are of the same class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def parse_args(self, *args: Any, **kwargs: Any) -> argparse.Namespace:  # type: ignore[override]
        """The arguments, once the environment's settings are known to be usable
        (``settings.check_environment``): a bad one ends like a bad argument."""
        parsed = super().parse_args(*args, **kwargs)
        try:
            check_environment()
        except SettingError as error:
            self.error(str(error))
        return parsed


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number in ``minimum..maximum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    parse.__name__ = f"int_at_least_{minimum}"
    return parse


#: ``type=`` of counts (epochs, steps, sizes, lengths): 1 or more.
positive_int = int_at_least(1)
#: ``type=`` of seeds: 0 .. 2**32 - 1.
seed_int = int_at_least(0, MAX_SEED)


def positive_float(text: str) -> float:
    """An argparse ``type=``: a finite number above 0 (learning rates)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


INTERRUPTED = "interrupted: finished epochs are kept; run the same command again to resume"


def interrupted() -> int:
    """Ctrl-C: the message on a line of its own (not glued to a progress bar); status 130."""
    sys.stdout.flush()
    print(f"\n{INTERRUPTED}", file=sys.stderr, flush=True)
    return 130


class WholeLines:
    """A text stream that passes on whole lines only, all those of one ``write`` in one write
    to ``stream``; the start of a line waits for its newline or for ``flush()`` (progress
    bars flush). Every other attribute is ``stream``'s."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._tail = ""

    def write(self, text: str) -> int:
        pending = self._tail + text
        cut = pending.rfind("\n") + 1
        self._tail = pending[cut:]
        if cut:
            self.stream.write(pending[:cut])
            self.stream.flush()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        self.write("".join(lines))

    def flush(self) -> None:
        if self._tail:
            self.stream.write(self._tail)
            self._tail = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def write_whole_lines() -> None:
    """Make stdout and stderr pass on whole lines, each in one write (:class:`WholeLines`),
    so that the lines of processes sharing a pipe never mix: the ``--jobs`` workers of
    ``runner.run_jobs``. With ``PYTHONUNBUFFERED=1``, ``print`` wrote a line's text and its
    newline apart and another worker's line could land between them (CI, 2026-12-06: a
    ``[run]`` line glued behind an ``[eval]`` line)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, WholeLines):
            setattr(sys, name, WholeLines(stream))


def run_main(main: Callable[[], int]) -> int:
    """``main()``, with Ctrl-C ending in :func:`interrupted` instead of a traceback (and
    stopping the training for sure: ``training.catch_interrupts``); each output line is one
    write (:func:`write_whole_lines`)."""
    write_whole_lines()
    catch_interrupts()
    try:
        return main()
    except KeyboardInterrupt:
        return interrupted()


def results_folder(command: str, given: Path | None) -> Path:
    """``--results`` if given, else ``RUNS_DIR`` for a single run and ``RESULTS_DIR`` for the
    rest (grids and reports)."""
    if given is not None:
        return given
    return RUNS_DIR if command in ("run", "train") else RESULTS_DIR


def add_results_option(parser: argparse.ArgumentParser, default: Path | None = None) -> None:
    """``--results``: where records are written and read. ``default`` None: decided per command
    by :func:`results_folder` (``runs/`` for a single run, ``results/`` otherwise)."""
    if default is None:
        text = (
            f"directory for the JSON records (default: {RUNS_DIR}/ for a single run, which keeps "
            f"ad-hoc runs out of the committed tree; {RESULTS_DIR}/ for grids and reports)"
        )
    else:
        text = "directory for the JSON records and checkpoints (default: %(default)s)"
    parser.add_argument("--results", type=Path, default=default, help=text)


def add_figures_option(parser: argparse.ArgumentParser) -> None:
    """``--figures``: where figure PDFs are written."""
    parser.add_argument(
        "--figures",
        type=Path,
        default=FIGURES_DIR,
        help="directory for figure PDFs (default: %(default)s)",
    )


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    """``--verbose``: Keras's progress output."""
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras progress: 1 = bar per epoch (default), 2 = one line per epoch (for logs), "
        "0 = silent",
    )


def accept_shared_options_after(*subcommands: argparse.ArgumentParser) -> None:
    """Let ``--results``, ``--figures`` and ``--verbose`` (options of the experiment's parser)
    also follow a subcommand: ``python -m thesis_repro.ffattention run --results X`` as well as
    ``... --results X run``, as the LM's subcommands take them. Given in both places, the one
    after the subcommand wins."""
    for parser in subcommands:
        group = parser.add_argument_group("shared options (also accepted before the subcommand)")
        group.add_argument(
            "--results",
            type=Path,
            default=argparse.SUPPRESS,
            help=f"directory for the JSON records (default: {RUNS_DIR}/ for a single run, "
            f"{RESULTS_DIR}/ for grids and reports)",
        )
        group.add_argument(
            "--figures",
            type=Path,
            default=argparse.SUPPRESS,
            help=f"directory for figure PDFs (default: {FIGURES_DIR})",
        )
        group.add_argument(
            "--verbose",
            type=int,
            choices=(0, 1, 2),
            default=argparse.SUPPRESS,
            help="Keras progress: 1 = bar per epoch (default), 2 = one line per epoch, 0 = silent",
        )


def experiment_parser(prog: str, doc: str, presets: Mapping[str, Any]) -> argparse.ArgumentParser:
    """A :class:`Parser` with ``--results``, ``--figures`` and ``--verbose``, and the presets as
    epilog.

    ``doc`` is the experiment package's docstring (its first paragraph becomes the description);
    each preset needs a ``description``.
    """
    parser = Parser(
        prog=prog,
        description=doc.split("\n\n")[0] + " Train, run a preset grid, or render outputs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Presets:\n" + "\n".join(f"  {k}: {p.description}" for k, p in presets.items()),
    )
    add_results_option(parser)
    add_figures_option(parser)
    add_verbose_option(parser)
    return parser
