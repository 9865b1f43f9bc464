"""A port a caller asks for is refused, saying what to do, while another process holds it;
a free one is taken by the kernel's choice, never one the caller must avoid."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.localjvm.ports import HOST, check_port_free, free_port


class PortError(RuntimeError):
    pass


@pytest.mark.parametrize("listening", [False, True], ids=["bound", "listening"])
def test_a_port_another_socket_holds_is_refused_with_what_to_do(listening: bool) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        if listening:
            taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortError, match=rf"port {port} on 127\.0\.0\.1 is taken by "
                                            r"another process \(Address already in use\): "
                                            r".*choose another port"):
            check_port_free(port, PortError)


def test_a_port_nobody_holds_is_accepted() -> None:
    port = free_port()
    check_port_free(port, PortError)  # raises nothing
    with socket.socket() as mine:  # and the check did not keep it
        mine.bind((HOST, port))


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=65536)))
def test_a_port_out_of_range_is_refused_before_any_bind(port: int) -> None:
    with pytest.raises(PortError, match=f"within 1..65535, got {port}"):
        check_port_free(port, PortError)


def test_a_free_port_is_none_the_caller_avoids() -> None:
    first = free_port()
    avoid = {first, free_port(avoid={first})}
    assert all(free_port(avoid=avoid) not in avoid for _ in range(20))
