"""Ports on 127.0.0.1: a free one, or a requested one checked free before anything starts.

Invariant: the servers bind 127.0.0.1 only (:data:`HOST`), and a port a caller asked for is
refused, with what to do, when another process holds it: a server started there would fail
to bind, and its clients would meet whatever holds the port.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Collection

__all__ = ["HOST", "check_port_free", "free_port"]

HOST = "127.0.0.1"


def free_port(*, avoid: Collection[int] = ()) -> int:
    """A port of :data:`HOST` free now (the kernel's choice), none of ``avoid``."""
    while True:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port not in avoid:
            return port


def check_port_free(port: int, error: Callable[[str], Exception]) -> None:
    """Raise ``error`` saying what to do unless ``port`` of :data:`HOST` can be bound now.

    It binds as the servers do (``SO_REUSEADDR``): a port whose last connections linger in
    TIME_WAIT is free.
    """
    if not 0 < port < 65536:
        raise error(f"--port must be within 1..65535, got {port}")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise error(
                f"port {port} on {HOST} is taken by another process "
                f"({exc.strerror or exc}): stop it, choose another port, or leave the port "
                "out to get a free one") from None
