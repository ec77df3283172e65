"""The options every experiment's command line shares: where records and figures go, progress."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thesis_repro.records import RESULTS_DIR

FIGURES_DIR = Path("figures")


def experiment_parser(prog: str, doc: str, presets: Mapping[str, Any]) -> argparse.ArgumentParser:
    """A parser with ``--results``, ``--figures`` and ``--verbose``, and the presets as epilog.

    ``doc`` is the experiment module's docstring (its first paragraph becomes the description);
    each preset needs a ``description``.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=doc.split("\n\n")[0] + " Train, run a preset grid, or render outputs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Presets:\n" + "\n".join(f"  {k}: {p.description}" for k, p in presets.items()),
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR,
        help="directory for the JSON records (default: %(default)s)",
    )
    parser.add_argument(
        "--figures",
        type=Path,
        default=FIGURES_DIR,
        help="directory for figure PDFs (default: %(default)s)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras progress: 1 = bar per epoch (default), 2 = one line per epoch (for logs), "
        "0 = silent",
    )
    return parser
