"""The path of ``a2a.url``, served: a card at ``https://agents.example/a2a`` names ``/a2a`` as where every route is.

A reverse proxy in front of the daemon may forward that path as it came (``/a2a/``, ``/a2a/.well-known/…``) or
strip it (``/``); :class:`PathPrefix` answers both. A request whose path is the prefix or starts with the prefix
and ``/`` gets the prefix as its ASGI ``root_path`` ("the root path this application is mounted at", which
Starlette's router takes off the path: ``/a2a/metrics`` is routed as ``/metrics``; ``/a2a`` alone as ``/``); any
other path is routed as it is. Without a path in ``a2a.url`` it is not in the stack at all.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def prefix_of(url: str) -> str:
    """The path of ``url`` without its trailing ``/`` (``""`` for none, or for ``/`` alone)."""
    return urlsplit(url).path.rstrip("/")


class PathPrefix:
    """Pure ASGI layer: a request under ``prefix`` is served as mounted there (see the module docstring).
    ``prefix`` is a :func:`prefix_of` result, not empty."""

    def __init__(self, app: Any, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] in ("http", "websocket") and (path == self.prefix or path.startswith(self.prefix + "/")):
            full = path if path != self.prefix else path + "/"  # the bare prefix is its root
            scope = dict(scope, path=full, root_path=self.prefix)
        await self.app(scope, receive, send)


__all__ = ["PathPrefix", "prefix_of"]
