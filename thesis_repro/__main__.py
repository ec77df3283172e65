"""``python -m thesis_repro report``: every table and figure from the committed records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from thesis_repro.records import RESULTS_DIR
from thesis_repro.report import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m thesis_repro",
        description="Regenerate REPORT.md, the README's results blocks and figures/*.pdf "
        "from the JSON records.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="render tables and figures from the records")
    rep.add_argument("--results", type=Path, default=RESULTS_DIR, help="records directory")
    rep.add_argument("--figures", type=Path, default=Path("figures"), help="figure directory")
    rep.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    args = parser.parse_args(argv)
    write_report(
        args.results, args.figures, readme_path=None if args.no_readme else Path("README.md")
    )
    print("wrote REPORT.md and figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
