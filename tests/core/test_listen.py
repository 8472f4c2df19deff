"""The listening socket anyagentd's HTTP servers hand to uvicorn: the connections asyncio accepts on it have
TCP_NODELAY (without it every kept-alive request/response exchange waited ~40 ms for a delayed ACK; the figures
are bench/bench_a2a.py's)."""

from __future__ import annotations

import socket

import pytest
from tcp_probe import accepted_nodelay

from anyagentd.listen import listening_socket


def test_connections_accepted_on_it_have_nagle_off() -> None:
    sock = listening_socket("127.0.0.1", 0)
    assert sock.getsockname()[1] != 0
    assert accepted_nodelay(sock)


def test_a_plain_stream_socket_keeps_nagle_on_which_is_why_the_helper_exists() -> None:
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0: asyncio leaves Nagle on
    plain.bind(("127.0.0.1", 0))
    plain.listen()
    assert not accepted_nodelay(plain)


def test_an_address_in_use_raises_oserror() -> None:
    taken = listening_socket("127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            listening_socket("127.0.0.1", taken.getsockname()[1])  # SO_REUSEADDR does not share a listening port
    finally:
        taken.close()
