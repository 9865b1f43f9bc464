"""Deprecated path: the lake sinks moved to :mod:`aiostreams.sinks` (Spark itself is now the
backend :mod:`aiostreams.sinks.spark`). ``from aiostreams.spark import X`` keeps working for
one release, with a :class:`DeprecationWarning`; import from ``aiostreams.sinks`` instead."""

import warnings

from aiostreams.sinks import *  # noqa: F403 (the same names, for one release)
from aiostreams.sinks import __all__ as __all__

warnings.warn("aiostreams.spark is deprecated and will be removed in the next release: "
              "import the same names from aiostreams.sinks", DeprecationWarning, stacklevel=2)
