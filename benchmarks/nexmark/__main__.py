"""``python -m benchmarks.nexmark``: see :mod:`benchmarks.nexmark`."""

from benchmarks.nexmark.cli import main

main()
