"""The access log: one JSON line per HTTP request, logger ``anyagentd.a2a.access``, written when the reply has
been sent — for a streamed (SSE) reply when the stream ends. A sink of the request observation
(:mod:`.requests`), which measures the request.

The line's fields (top-level keys beside ``ts``, ``level``, ``logger``, ``msg``, by :class:`.logs.JsonLines`):
``method`` (the HTTP method), ``rpc_method`` (the JSON-RPC method, e.g. ``SendMessage``, or null), ``op`` (the
command op a command message names, or null), ``path`` (without the query string), ``principal`` (the id the front
identified, or null), ``status`` (the HTTP status, 0 when none was sent), ``rpc_error`` (the JSON-RPC error code of
a non-streamed JSON reply, or null), ``bytes_in`` (request body bytes read), ``bytes_out`` (response body bytes
sent), ``duration_ms`` and ``client`` (the client address after ``[a2a] trusted_proxies``, as the front reads it).
No header, query string or body is ever logged: a token never reaches the line. ``[a2a] access_log = false``
turns it off (read per request, so a SIGHUP applies it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request

from .requests import Observed

log = logging.getLogger("anyagentd.a2a.access")


class AccessLog:
    """The access log's sink (:class:`.requests.Sink`): ``enabled()`` says whether to log now (``[a2a]
    access_log``); ``source_of(request)`` is the front's client address (:meth:`..front.Front.source_of`)."""

    def __init__(self, *, enabled: Callable[[], bool], source_of: Callable[[Request], str]) -> None:
        self.enabled = enabled
        self.source_of = source_of

    def wants(self) -> bool:
        return self.enabled()

    def record(self, observed: Observed) -> None:
        """Write ``observed``'s line (fields in the module's docstring)."""
        line = {
            "method": observed.method,
            "rpc_method": observed.rpc_method,
            "op": observed.op,
            "path": observed.path,
            "principal": observed.principal,
            "status": observed.status,
            "rpc_error": observed.rpc_error,
            "bytes_in": observed.bytes_in,
            "bytes_out": observed.bytes_out,
            "duration_ms": round(observed.duration * 1000, 1),
            "client": self._client(observed.scope),
        }
        log.info("%s %s %s", line["method"], line["path"], line["status"], extra=line)

    def _client(self, scope: dict) -> str:
        try:
            return self.source_of(Request(scope))
        except Exception:  # noqa: BLE001 - a malformed X-Forwarded-For must not lose the line
            client = scope.get("client")
            return client[0] if client else "unknown"


__all__ = ["AccessLog"]
