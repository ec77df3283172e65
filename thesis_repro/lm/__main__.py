"""``python -m thesis_repro.lm`` (see ``cli.py``)."""

import sys

from thesis_repro.cli import run_main
from thesis_repro.lm.cli import main

sys.exit(run_main(main))
