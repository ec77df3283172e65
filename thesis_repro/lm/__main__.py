"""``python -m thesis_repro.lm`` (see ``cli.py``)."""

import sys

from thesis_repro.lm.cli import main

sys.exit(main())
