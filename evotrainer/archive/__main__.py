"""``python -m evotrainer.archive``: the archive browser CLI (see :mod:`evotrainer.browse.cli`)."""

import sys

from evotrainer.browse.cli import main

if __name__ == "__main__":
    sys.exit(main())
