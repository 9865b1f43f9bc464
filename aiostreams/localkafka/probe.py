"""Is a Kafka broker serving requests? One Metadata request over a plain blocking socket.

An open port is not enough: a KRaft broker binds its listener before it has caught up with the
metadata log. A Metadata response naming at least one broker and a controller is. The request is
hand-encoded (Metadata v4, a non-flexible version every broker from 1.0 to 4.x answers) so the
probe needs no event loop and no client library, and can run from synchronous code that may sit
inside a running event loop (a pytest fixture).
"""

from __future__ import annotations

import socket
import struct

_METADATA_API_KEY = 3
_METADATA_VERSION = 4
_CLIENT_ID = b"aiostreams-probe"


def metadata_answers(host: str, port: int, timeout: float) -> bool:
    """True when the broker at ``host:port`` answers a Metadata request with a live cluster.

    Never raises for a broker that is down, starting or misbehaving: that is a False.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_metadata_request(correlation_id=1))
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            body = _read_exactly(sock, size)
    except OSError:
        return False
    return _has_broker_and_controller(body, correlation_id=1)


def _metadata_request(correlation_id: int) -> bytes:
    header = struct.pack(
        ">hhih", _METADATA_API_KEY, _METADATA_VERSION, correlation_id, len(_CLIENT_ID)
    ) + _CLIENT_ID
    # topics = null (all topics), allow_auto_topic_creation = false
    body = struct.pack(">ib", -1, 0)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the broker closed the connection mid-response")
        chunks += chunk
    return bytes(chunks)


def _has_broker_and_controller(body: bytes, correlation_id: int) -> bool:
    """Parse a Metadata v4 response up to ``controller_id``."""
    try:
        got_correlation, _throttle, broker_count = struct.unpack_from(">iii", body, 0)
        if got_correlation != correlation_id or broker_count < 1:
            return False
        at = 12
        for _ in range(broker_count):
            at += 4  # node_id
            (host_len,) = struct.unpack_from(">h", body, at)
            at += 2 + host_len + 4  # host, port
            (rack_len,) = struct.unpack_from(">h", body, at)
            at += 2 + max(rack_len, 0)
        (cluster_id_len,) = struct.unpack_from(">h", body, at)
        at += 2 + max(cluster_id_len, 0)
        (controller_id,) = struct.unpack_from(">i", body, at)
    except struct.error:
        return False
    return bool(controller_id >= 0)
