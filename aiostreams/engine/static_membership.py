"""A worker's static group membership (KIP-345): the ``group_instance_id`` it joins with when
none is configured.

With an instance id, a member that restarts within the session timeout gets its partitions
back with no rebalance: the other members keep theirs (same generation), and its own tasks
reopen on the local state they left - no restore. The price: a static member does not leave
the group when it stops, so a member that does not come back holds its partitions,
unprocessed, until its session times out.

**Where it is on by default (``static_membership=True``):** a worker of a Kafka broker whose
app has a ``state_dir`` and no ``group_instance_id``. There the identity can be made stable
(below), and a rebalance is what costs most (tasks move away from their local state and
restore on another worker). A stateless app, or one without a state directory, keeps dynamic
membership: moving its tasks is cheap, and waiting a session timeout for a member that may
never come back is not. ``static_membership=False`` turns it off; an explicit
``group_instance_id`` is used as it is (the supervisor suffixes ``-I`` for worker I).

**Which id (:func:`claim_instance_id`):** ``<app id>-<token>-<slot>``.

* ``token``: 12 hex digits drawn once and kept in ``<state_dir>/.instance-token``. The id
  follows the state directory, not the host name: it survives a restart exactly when the
  local state does (a container with a persistent volume keeps it; one with a new empty
  directory starts as a new member, which is right, as it has no state to come back to),
  while host names change with every pod of a Kubernetes Deployment and are shared by
  containers on the host network.
* ``slot``: the lowest ``n`` whose lock file ``<state_dir>/.instance-<n>.lock`` this process
  can lock (``flock``, held until :meth:`InstanceClaim.release` or the process's end). Two
  processes on one state directory (``--workers N``, or two ``aiostreams run``) get
  different slots; a restarted worker gets the slot its previous process left. Which worker
  of one host gets which slot does not matter: they share the state directory.

Two processes can still claim one id from different hosts (a copied state directory copies
its token): the broker then fences the first one, which stops with
:class:`~aiostreams.errors.InstanceIdConflictError` (see
:mod:`aiostreams.transport.kafka_instance_fence`) rather than rejoin and fence the other.

Invariant: while a claim is held, no other process (nor another claim of this one) holds
the same slot of the same state directory, so the ids derived from one state directory are
distinct among live processes.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from aiostreams.errors import ConfigError

__all__ = ["TOKEN_FILE", "InstanceClaim", "claim_instance_id", "derives_instance_id"]

TOKEN_FILE = ".instance-token"
_TOKEN = re.compile(r"[0-9a-f]{12}")
_MAX_SLOTS = 1024  # more processes on one state directory than this is a mistake


@dataclass
class InstanceClaim:
    """A derived instance id, and the lock that keeps its slot this process's."""

    instance_id: str
    slot: int
    _lock: int | None

    def release(self) -> None:
        """Give the slot up (idempotent); a later claim in any process may take it."""
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor drops its flock
            self._lock = None


def derives_instance_id(*, static_membership: bool, group_instance_id: str | None,
                        state_dir: Path | str | None, kafka: bool) -> bool:
    """Whether a worker derives its own instance id (see the module docstring)."""
    return static_membership and group_instance_id is None and state_dir is not None \
        and kafka


def claim_instance_id(app_id: str, state_dir: Path | str) -> InstanceClaim:
    """Claim ``<app_id>-<token>-<slot>`` in ``state_dir`` (created if missing). Blocking
    (small file operations). Raises :class:`ConfigError` for a token file that is not one."""
    root = Path(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    token = _token(root)
    for slot in range(_MAX_SLOTS):
        fd = os.open(root / f".instance-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return InstanceClaim(f"{app_id}-{token}-{slot}", slot, fd)
    raise ConfigError(f"{_MAX_SLOTS} processes already hold an instance id of state_dir "
                      f"{root}; give each host its own state_dir")


def _token(root: Path) -> str:
    """The state directory's token, drawn and written (atomically: the first of racing
    processes wins) if it has none."""
    path = root / TOKEN_FILE
    if not path.exists():
        draft = root / f"{TOKEN_FILE}.{os.getpid()}.tmp"
        draft.write_text(secrets.token_hex(6) + "\n")
        try:
            os.link(draft, path)  # fails if another process linked its token first
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    token = path.read_text().strip()
    if not _TOKEN.fullmatch(token):
        raise ConfigError(f"{path} holds {token[:40]!r}, not an instance token (12 hex "
                          "digits); delete it and the app draws a new one (its workers then "
                          "join as new members)")
    return token
