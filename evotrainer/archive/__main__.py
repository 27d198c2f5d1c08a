"""``python -m evotrainer.archive``: the archive browser CLI (see :mod:`evotrainer.archive.cli`)."""

import sys

from evotrainer.archive.cli import main

if __name__ == "__main__":
    sys.exit(main())
