"""``python -m aiostreams``: the command line (see :mod:`aiostreams.cli`)."""

import sys

from aiostreams.cli import main

if __name__ == "__main__":
    sys.exit(main())
