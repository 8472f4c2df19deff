"""The daemon's ASGI app over its :class:`~.services.Services` (:func:`build_app`): the routes, then the gates
every request passes, outermost first — the request observation (access log, metrics), the path prefix of
``a2a.url``, the Host gate, the CORS gate.

Routes: every served agent's card and endpoint (:mod:`.routing`: under ``/agents/{id}/``, the default agent's at
the root too, and ``GET /agents``), the command extension's schema, the device grant's (with
``[a2a.device_grant]``), ``/healthz`` and ``/readyz``, ``/metrics`` (with ``[a2a.metrics] enabled``: else the
Prometheus client is never imported), the web console's ``/console/`` and its push stream of task changes
(:mod:`.console`, when :meth:`~.config.A2ASection.console_enabled`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.routing import Route

from .card import schema_route
from .front import CorsGate, HostGate
from .pathprefix import PathPrefix, prefix_of
from .routing import AgentRoutes

if TYPE_CHECKING:
    from .services import Services


@dataclass(frozen=True)
class App:
    """The ASGI app to serve (``asgi``) and its CORS gate (``cors``: a reload replaces its origins)."""

    asgi: Any
    cors: CorsGate


def build_app(services: Services) -> App:
    """The app serving ``services`` (see the module docstring). With metrics on, the conversations' token usage is
    counted by them (``Conversations.on_usage``)."""
    settings, instance, front, agents = services.settings, services.instance, services.front, services.agents
    routes = [*AgentRoutes(agents, front, services.public_url).routes(), schema_route()]
    if instance.device_grant is not None and instance.auth_sessions is not None:
        from .auth.routes import device_routes

        public_url = services.public_url
        routes.extend(
            device_routes(
                instance.device_grant,
                instance.auth_sessions,
                issuer=lambda: public_url,
                on_event=services.ring.emit,
            )
        )
    from .observe.access import AccessLog
    from .observe.health import health_routes
    from .observe.requests import RequestObservation

    tasks = agents.default.store
    routes.extend(
        health_routes(services.stores.engine, services.lifecycle, table=tasks.task_model.__tablename__)
    )  # /healthz, /readyz
    sinks: list[Any] = [AccessLog(enabled=lambda: settings.loaded.config.a2a.access_log, source_of=front.source_of)]
    if settings.loaded.config.a2a.metrics.enabled:  # else the Prometheus client is never imported
        from .observe.metrics import Metrics

        metrics = Metrics(
            front=front,
            count_tasks=agents.count_by_state,
            pool=services.pool,
            runs=services.stores.runs,
            sessions=instance.auth_sessions,
            subagents=instance.subagents,
        )
        for agent in agents:
            agent.conversations.on_usage = metrics.usage
        routes.append(Route("/metrics", metrics.scrape, methods=["GET"]))
        sinks.append(metrics)
    if settings.loaded.config.a2a.console_enabled():
        from .console import TaskEvents, console_routes

        events = TaskEvents()  # the console's push stream, told every task each agent's store saves
        for agent in agents:
            agent.store.on_saved = events.saved(agent.id)
        routes.extend(console_routes(front, events, services.lifecycle.drain_requested))
    app = Starlette(routes=routes)
    app.router.redirect_slashes = False
    public = urlsplit(services.public_url)
    cors = CorsGate(app, settings.loaded.config.a2a.cors_origins, public_origin=f"{public.scheme}://{public.netloc}")
    public_host = public.hostname
    served: Any = HostGate(cors, {public_host} if public_host else set())
    prefix = prefix_of(services.public_url)
    if prefix:  # a2a.url names a path: served with it and without it (.pathprefix)
        served = PathPrefix(served, prefix)
    # outermost, so every request is observed, the Host gate's 421 included; uvicorn's own access log stays off
    return App(RequestObservation(served, sinks), cors)


__all__ = ["App", "build_app"]
