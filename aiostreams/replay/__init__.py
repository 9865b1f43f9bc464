"""Recording service answers, replaying an app over recorded traffic, and diffing two runs'
outputs (``docs/guides/replay.md``). The command line (``aiostreams replay``, ``aiostreams
diff``) is the usual way in; these are the same steps from Python:

* :class:`Recording`, :class:`RecordedAnswer`: the recorded answers (the app's
  ``record_services_dir``; :mod:`aiostreams.replay.recording` says the format);
* :func:`read_ranges`, :class:`InputRange`, :func:`save_inputs`, :func:`load_inputs`:
  source records read from a broker, and kept in a directory beside the answers;
* :func:`replay`: an app over recorded inputs on a private memory broker, its calls
  answered from a recording (:class:`ReplayResult`);
* :func:`read_outputs`, :func:`diff_runs`: two runs' outputs compared (:class:`RunDiff`).
"""

from aiostreams.replay.diff import Difference, RunDiff, TopicCounts, diff_runs
from aiostreams.replay.inputs import InputRange, load_inputs, read_ranges, read_times, save_inputs
from aiostreams.replay.outputs import OutputRecord, read_outputs
from aiostreams.replay.player import MissingCall
from aiostreams.replay.recording import RecordedAnswer, Recording
from aiostreams.replay.run import ReplayableApp, ReplayResult, replay
from aiostreams.types import RawRecord

__all__ = ["Difference", "InputRange", "MissingCall", "OutputRecord", "RawRecord",
           "RecordedAnswer", "Recording", "ReplayResult", "ReplayableApp", "RunDiff",
           "TopicCounts", "diff_runs", "load_inputs", "read_outputs", "read_ranges",
           "read_times", "replay", "save_inputs"]
