"""``python -m thesis_repro.addition`` (see ``cli.py``)."""

import sys

from thesis_repro.addition.cli import main
from thesis_repro.cli import run_main

sys.exit(run_main(main))
