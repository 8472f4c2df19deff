"""The one observation of each HTTP request: an ASGI middleware around the whole app (so the Host gate's 421 is
seen too) measures a request once — as it is received and answered, never reading a header, query string or
body beyond a JSON reply's error code — and hands the finished :class:`Observed` to its sinks: the access log line
(:class:`.access.AccessLog`) and the metrics' request counts (:meth:`.metrics.Metrics.record`).

What the front learns of a request it notes in the scope's state (shared with every ``Request`` made of the scope,
:class:`..front.Front`): ``rpc`` (the request reached ``POST /``), ``principal`` (as soon as it is identified),
``rpc_method`` (once the envelope is read) and ``op`` (a command message's op); the observation reads them when
the reply has been sent — for a streamed (SSE) reply when the stream ends.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

ERROR_BODY_BYTES = 64 * 1024
"""A JSON reply up to this size is read for its JSON-RPC error code; errors are small, a large result is not one."""


@dataclass(frozen=True)
class Observed:
    """One request, measured: ``method`` (HTTP) and ``path`` (without the query string); ``rpc`` — the front
    answered it (``POST /``); ``rpc_method``, ``op`` and ``principal`` (its id) as the front noted them, or None;
    ``status`` (HTTP, 0 when none was sent); ``rpc_error`` (the JSON-RPC error code of a JSON reply of at most
    :data:`ERROR_BODY_BYTES`, else None: a result, a stream, a plain body); ``bytes_in`` / ``bytes_out`` (body bytes
    read and sent); ``first_byte`` and ``duration`` (seconds from its arrival to the reply starting — to the end
    when no reply was started — and to the reply's end); ``scope`` (the ASGI scope, for a sink reading more of the
    request the way the front does, e.g. its client address)."""

    method: str | None
    path: str | None
    rpc: bool
    rpc_method: str | None
    op: str | None
    principal: str | None
    status: int
    rpc_error: int | None
    bytes_in: int
    bytes_out: int
    first_byte: float
    duration: float
    scope: dict[str, Any]


class Sink(Protocol):
    """Where an observation goes: ``wants()`` says, as a request arrives, whether it is to be told of it (read per
    request: a SIGHUP may change it); ``record(observed)`` takes the finished observation (quick, no I/O but a log
    line)."""

    def wants(self) -> bool: ...

    def record(self, observed: Observed) -> None: ...


class RequestObservation:
    """ASGI middleware: ``app`` observed for ``sinks`` (none of them wanting a request: it passes untouched)."""

    def __init__(self, app: Any, sinks: list[Sink]) -> None:
        self.app = app
        self.sinks = sinks

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        sinks = [s for s in self.sinks if s.wants()] if scope["type"] == "http" else []
        if not sinks:
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # shared with every Request made of this scope: the front's notes
        started = time.perf_counter()
        seen: dict[str, Any] = {"in": 0, "out": 0, "status": 0, "json": False, "body": bytearray(), "first": None}

        async def counted_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
            return message

        async def counted_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                seen["first"] = time.perf_counter() - started
                seen["status"] = message["status"]
                headers = dict(message.get("headers") or [])
                seen["json"] = headers.get(b"content-type", b"").startswith(b"application/json")
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                seen["out"] += len(body)
                if seen["json"] and len(seen["body"]) + len(body) <= ERROR_BODY_BYTES:
                    seen["body"] += body
                else:
                    seen["json"] = False
            await send(message)

        try:
            await self.app(scope, counted_receive, counted_send)
        finally:
            duration = time.perf_counter() - started
            principal = state.get("principal")
            observed = Observed(
                method=scope.get("method"),
                path=scope.get("path"),
                rpc=bool(state.get("rpc")),
                rpc_method=state.get("rpc_method"),
                op=state.get("op"),
                principal=getattr(principal, "id", None),
                status=seen["status"],
                rpc_error=rpc_error_of(seen["body"]) if seen["json"] else None,
                bytes_in=seen["in"],
                bytes_out=seen["out"],
                first_byte=duration if seen["first"] is None else seen["first"],
                duration=duration,
                scope=scope,
            )
            for sink in sinks:
                sink.record(observed)


def rpc_error_of(body: bytes | bytearray) -> int | None:
    """The ``error.code`` of a JSON-RPC error reply's body, or None (a result, or not JSON-RPC)."""
    try:
        reply = json.loads(body)
    except ValueError:
        return None
    error = reply.get("error") if isinstance(reply, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


__all__ = ["ERROR_BODY_BYTES", "Observed", "RequestObservation", "Sink", "rpc_error_of"]
