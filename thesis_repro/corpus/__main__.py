"""``python -m thesis_repro.corpus ...``: see ``thesis_repro.corpus.cli``."""

import sys

from thesis_repro.corpus.cli import main

if __name__ == "__main__":
    sys.exit(main())
