"""``python -m thesis_repro.ffattention`` (see ``cli.py``)."""

import sys

from thesis_repro.cli import run_main
from thesis_repro.ffattention.cli import main

sys.exit(run_main(main))
