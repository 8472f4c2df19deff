"""What an operator's tooling reads of a running daemon: the health probes (:mod:`.health`, ``/healthz`` and
``/readyz``) and the Prometheus metrics (:mod:`.metrics`, ``/metrics``, imported only when ``[a2a.metrics]
enabled``: the Prometheus client is never loaded otherwise, and never by ``anyagentd serve``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Handle = Callable[[Request], Awaitable[Response]]


def observe(daemon: Any) -> tuple[list[Route], Callable[[Handle], Handle]]:
    """The routes ``daemon`` serves for probes and scrapes, and the wrapper of its ``POST /`` endpoint that counts
    requests (the identity when metrics are off). With metrics on, sets ``daemon.metrics`` and has its
    conversations report usage to them (``Conversations.on_usage``)."""
    from .health import health_routes

    routes = health_routes(daemon.db_engine, lambda: daemon.draining)
    if not daemon.loaded.config.a2a.metrics.enabled:
        daemon.metrics = None
        return routes, lambda handle: handle
    from .metrics import Metrics

    metrics = daemon.metrics = Metrics(daemon)
    daemon.conversations.on_usage = metrics.usage
    routes.append(Route("/metrics", metrics.scrape, methods=["GET"]))
    return routes, metrics.timed


__all__ = ["observe"]
