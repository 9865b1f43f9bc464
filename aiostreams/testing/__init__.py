"""Tools for testing stream applications without sleeps.

* :class:`~aiostreams.runtime.clock.ManualClock` (re-exported): time moves only when told;
  :class:`Clock` is the protocol an app's ``clock=`` follows.
* :class:`Sequencer`: lets a test decide when each awaited step of a processor completes,
  so out-of-order completion is tested deterministically.
* :func:`settle`: wait until the callbacks already scheduled on the loop have run.
* :class:`~aiostreams.testing.driver.TopologyTestDriver`: runs an app's topology
  on a private memory broker with a manual clock; pipe input, read output, inspect stores.

The pytest fixtures (``memory_broker``, ``make_app``, ``topology_driver``) come with the
package as the pytest plugin :mod:`aiostreams.pytest_plugin`.
"""

from aiostreams.runtime.clock import Clock, ManualClock, TimerHandle
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.testing.sequencer import Sequencer, settle

__all__ = ["Clock", "ManualClock", "Sequencer", "TimerHandle", "TopologyTestDriver", "settle"]
