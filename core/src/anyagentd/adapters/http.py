"""For agents that serve an HTTP API on loopback instead of speaking on stdio (e.g. ``opencode serve``).

Core carries no HTTP stack: this is the small HTTP/1.1 client such an adapter needs, on anyio TCP streams, for a
server on 127.0.0.1 that the adapter itself started:

- :func:`free_port`: a loopback port to start the server on;
- :func:`request_json`: one request with a JSON body, its JSON answer (``Content-Length`` or chunked);
- :func:`sse_events`: the ``data:`` payloads of a server-sent-events stream, decoded as JSON, in order;
- :class:`HttpError`: a status of 400 or more (``status``, ``body``).
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import anyio.streams.buffered

MAX_HEADER_BYTES = 64 * 1024
"""Longest response head accepted (bytes)."""


class HttpError(Exception):
    """The server answered ``status`` (>= 400) with ``body`` (text, at most 4 KiB kept)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body[:4096]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


Reader = anyio.streams.buffered.BufferedByteReceiveStream
Opened = tuple[int, dict[str, str], Reader, anyio.abc.SocketStream]
"""A response's status, lower-cased headers, the reader of its body, and the connection."""


async def _open(
    port: int, method: str, path: str, body: Any = None, *, host: str = "127.0.0.1", accept: str = "application/json"
) -> Opened:
    stream = await anyio.connect_tcp(host, port)
    data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: {accept}\r\nConnection: close\r\n"
        f"Content-Length: {len(data)}\r\n" + ("Content-Type: application/json\r\n" if body is not None else "") + "\r\n"
    )
    await stream.send(head.encode() + data)
    reader = anyio.streams.buffered.BufferedByteReceiveStream(stream)
    status_line = await reader.receive_until(b"\r\n", MAX_HEADER_BYTES)
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while line := await reader.receive_until(b"\r\n", MAX_HEADER_BYTES):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, reader, stream


async def _chunks(headers: dict[str, str], reader: Reader) -> AsyncIterator[bytes]:
    """The body's bytes as they come: chunked, by ``Content-Length``, or to the end of the connection."""
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size = int((await reader.receive_until(b"\r\n", 1024)).split(b";")[0], 16)
                if size == 0:
                    return
                yield await reader.receive_exactly(size)
                await reader.receive_exactly(2)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length:
                yield await reader.receive_exactly(length)
        else:
            while True:
                yield await reader.receive()
    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return


async def request_json(port: int, method: str, path: str, body: Any = None, *, host: str = "127.0.0.1") -> Any:
    """Send ``method path`` with ``body`` as JSON (``None``: no body) to ``host:port``; return the decoded JSON
    answer (``None`` for an empty one). Raises :class:`HttpError` for a status >= 400, ``OSError`` when the server
    cannot be reached."""
    status, headers, reader, stream = await _open(port, method, path, body, host=host)
    async with stream:
        data = b"".join([chunk async for chunk in _chunks(headers, reader)])
    if status >= 400:
        raise HttpError(status, data.decode("utf-8", "replace"))
    return json.loads(data) if data.strip() else None


async def sse_events(port: int, path: str, *, host: str = "127.0.0.1") -> AsyncIterator[Any]:
    """The events of the server-sent-events stream at ``path``: each event's ``data:`` lines joined and decoded as
    JSON (an event that is not JSON is yielded as its text). Ends when the server closes the stream. Raises
    :class:`HttpError` for a status >= 400."""
    status, headers, reader, stream = await _open(port, "GET", path, host=host, accept="text/event-stream")
    async with stream:
        if status >= 400:
            raise HttpError(status, b"".join([c async for c in _chunks(headers, reader)]).decode("utf-8", "replace"))
        buffer = b""
        data: list[str] = []
        async for chunk in _chunks(headers, reader):
            buffer += chunk
            while b"\n" in buffer:
                raw, buffer = buffer.split(b"\n", 1)
                line = raw.rstrip(b"\r").decode("utf-8", "replace")
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    text = "\n".join(data)
                    data = []
                    try:
                        yield json.loads(text)
                    except ValueError:
                        yield text
