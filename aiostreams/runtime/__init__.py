"""The kernel every layer may use: the clock, the slot of the record that runs, trace hooks,
permit waits, the record bound for an external sink.

Nothing here imports any other package of aiostreams but the vocabulary (``types``,
``errors``); the layer test (tests/test_layers.py) keeps it so.
"""

from aiostreams.runtime.clock import Clock, LoopClock, ManualClock
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.runtime.slot import CURRENT_SLOT, Slot

__all__ = ["CURRENT_SLOT", "Clock", "ExternalRecord", "ExternalSink", "LoopClock", "ManualClock",
           "Slot"]
