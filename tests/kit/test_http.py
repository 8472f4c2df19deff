"""The toolkit's loopback HTTP client (``anyagentd.adapters.http``) against a real TCP server on 127.0.0.1 that
answers with Content-Length, chunked bodies, errors and a server-sent-events stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from anyagentd.adapters.http import HttpError, free_port, request_json, sse_events

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


ROUTES = {
    "/plain": b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"a": 1.5}\n',
    "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b'{"id": ', b'"ses_1"}'),
    "/empty": b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
    "/missing": b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno such\r\n",
    "/event": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + chunked(
        b'data: {"type": "server.connected"}\n\n',
        b'data: {"type": "a",\ndata:  "n": 2}\n',
        b"\n: comment\n\n",
        b"data: not json\n\n",
    ),
}


@asynccontextmanager
async def server() -> AsyncIterator[tuple[int, list[bytes]]]:
    port = free_port()
    seen: list[bytes] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            head = await reader.receive_until(b"\r\n\r\n", 65536)
            length = int(
                next(
                    (line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
                    b"0",
                )
            )
            seen.append(head + b"\r\n\r\n" + (await reader.receive_exactly(length) if length else b""))
            await stream.send(ROUTES[head.split()[1].decode()])

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield port, seen
        tg.cancel_scope.cancel()


async def test_json_answers_by_length_chunked_or_empty_and_the_request_body() -> None:
    async with server() as (port, seen):
        assert await request_json(port, "GET", "/plain") == {"a": 1.5}
        assert await request_json(port, "POST", "/chunked", {"title": "ünï"}) == {"id": "ses_1"}
        assert await request_json(port, "POST", "/empty") is None
    body = seen[1].split(b"\r\n\r\n", 1)[1]
    assert json.loads(body) == {"title": "ünï"} and b"Content-Type: application/json" in seen[1]


async def test_an_error_status_raises_http_error_with_the_body() -> None:
    async with server() as (port, _):
        with pytest.raises(HttpError) as caught:
            await request_json(port, "GET", "/missing")
    assert caught.value.status == 404 and caught.value.body.startswith("no such")


async def test_sse_events_join_data_lines_and_decode_json() -> None:
    async with server() as (port, _):
        events = [e async for e in sse_events(port, "/event")]
    assert events == [{"type": "server.connected"}, {"type": "a", "n": 2}, "not json"]


async def test_nothing_listening_is_an_os_error() -> None:
    with pytest.raises(OSError):
        await request_json(free_port(), "GET", "/")
