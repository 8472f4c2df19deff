"""The access log: one JSON line per HTTP request, logger ``anyagentd.a2a.access``, written when the reply has
been sent — for a streamed (SSE) reply when the stream ends.

The line's fields (top-level keys beside ``ts``, ``level``, ``logger``, ``msg``, by :class:`.daemon.JsonLines`):
``method`` (the HTTP method), ``rpc_method`` (the JSON-RPC method, e.g. ``SendMessage``, or null), ``op`` (the
command op a command message names, or null), ``path`` (without the query string), ``principal`` (the id the front
identified, or null), ``status`` (the HTTP status, 0 when none was sent), ``rpc_error`` (the JSON-RPC error code of
a non-streamed JSON reply, or null), ``bytes_in`` (request body bytes read), ``bytes_out`` (response body bytes
sent), ``duration_ms`` and ``client`` (the client address after ``[a2a] trusted_proxies``, as the front reads it).
No header, query string or body is ever logged: a token never reaches the line. ``[a2a] access_log = false``
turns it off (read per request, so a SIGHUP applies it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

log = logging.getLogger("anyagentd.a2a.access")

ERROR_BODY_BYTES = 64 * 1024
"""A JSON reply up to this size is read for its JSON-RPC error code; errors are small, a large result is not one."""


class AccessLog:
    """ASGI middleware around the whole app (so the Host gate's 421 is logged too). ``enabled()`` says whether to
    log now; ``source_of(request)`` is the front's client address (:meth:`.front.Front.source_of`)."""

    def __init__(self, app: Any, *, enabled: Callable[[], bool], source_of: Callable[[Request], str]) -> None:
        self.app = app
        self.enabled = enabled
        self.source_of = source_of

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.enabled():
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})  # shared with every Request made of this scope: the front's notes
        started = time.monotonic()
        seen: dict[str, Any] = {"in": 0, "out": 0, "status": 0, "json": False, "body": bytearray()}

        async def counted_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
            return message

        async def counted_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
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
            principal = state.get("principal")
            line = {
                "method": scope.get("method"), "rpc_method": state.get("rpc_method"), "op": state.get("op"),
                "path": scope.get("path"), "principal": getattr(principal, "id", None), "status": seen["status"],
                "rpc_error": _rpc_error(seen["body"]) if seen["json"] else None, "bytes_in": seen["in"],
                "bytes_out": seen["out"], "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "client": self._client(scope),
            }  # fmt: skip
            log.info("%s %s %s", line["method"], line["path"], line["status"], extra=line)

    def _client(self, scope: dict[str, Any]) -> str:
        try:
            return self.source_of(Request(scope))
        except Exception:  # noqa: BLE001 - a malformed X-Forwarded-For must not lose the line
            client = scope.get("client")
            return client[0] if client else "unknown"


def _rpc_error(body: bytes | bytearray) -> int | None:
    """The ``error.code`` of a JSON-RPC error reply, or None (a result, or not JSON-RPC)."""
    try:
        reply = json.loads(body)
    except ValueError:
        return None
    error = reply.get("error") if isinstance(reply, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) else None


__all__ = ["AccessLog"]
