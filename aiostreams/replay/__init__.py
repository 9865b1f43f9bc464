"""Recording service answers, replaying an app over recorded traffic, and diffing two runs'
outputs (``docs/guides/replay.md``).

* :mod:`aiostreams.replay.recording`: the recording's format and its reader
  (:class:`~aiostreams.replay.recording.Recording`, :class:`~aiostreams.replay.recording.
  RecordedAnswer`), the contract the replay and ``aiostreams explain`` read;

Users reach this through the ``record_services_dir`` setting and the ``aiostreams replay``
and ``aiostreams diff`` commands; the reader is the one documented entry point.
"""

from aiostreams.replay.recording import RecordedAnswer, Recording

__all__ = ["RecordedAnswer", "Recording"]
