"""The ``anyagentd a2a`` daemon: the assembly of the stores, the Runtime, the services, the app and uvicorn.

``serve(loaded, options)`` runs until SIGTERM/SIGINT, then drains and returns 0: sends are refused (DRAINING),
every running turn is cancelled and every session closed in parallel, the listener stops
(:meth:`.lifecycle.Lifecycle.drain`). SIGHUP reloads the configuration file (credentials, principals, CORS
origins, the parents reported to; the listener and agent need a restart: :mod:`.reload`). Once the
listener accepts connections the first stdout line is ``{"listening": "http://HOST:PORT"}``; logs are JSON lines on
stderr and never carry a secret (:mod:`.logs`).

What runs is built elsewhere, each by the module that owns it: the stores and the services
(:mod:`.services`), the app (:mod:`.app`); this module binds, starts them in order, and handles the signals.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
from contextlib import nullcontext
from typing import Any

import anyio
import uvicorn

from anyagentd import startup
from anyagentd.listen import listening_socket

from . import sdkimports  # noqa: F401  # first: httpx without its CLI (rich, pygments), before the SDK imports it
from .app import build_app
from .config import Loaded, split_host_port
from .lifecycle import Lifecycle
from .logring import LogRing, RingHandler, SecretRedactor
from .logs import redact_stderr, setup_logging
from .members import RUN, TASK
from .reload import Reload
from .services import Runtimes, Services, Stores, build_services, open_runtimes, open_stores, tell_interrupted
from .settings import Options, Settings

log = logging.getLogger("anyagentd.a2a")

LOG_RING_SIZE = 1024
"""Lines the daemon's log ring keeps for ``debug.events``."""


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()
        """Set once uvicorn has started serving its sockets (``startup`` returned with ``started`` true)."""

    def capture_signals(self) -> Any:  # signals are the daemon's (drain, reload), not uvicorn's
        return nullcontext()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.listening.set()


class Daemon:
    """One running daemon; built and run by :func:`serve`. Holds its :class:`~.settings.Settings` (``settings``);
    ``url`` once bound (:meth:`_bind`). Its :class:`~.lifecycle.Lifecycle` is made over the runtime it opens."""

    def __init__(self, loaded: Loaded, options: Options) -> None:
        self.settings = Settings(loaded, options)

    async def run(self) -> int:
        """Open the store (a task a dead process left open gets what :func:`.tasks.state.on_restart` decides; the
        push subscribers of those it fails are told), bind, serve until drained; returns 0.
        Raises ``ConfigError`` (an agent no plugin drives, a child instance named like an installed agent),
        ``StoreUnavailable`` (the task store cannot be opened) and ``OSError`` (the listener cannot bind)."""
        settings = self.settings
        async with open_stores(settings) as stores:
            redact = SecretRedactor(lambda: settings.loaded, settings.secret_references)
            redact_stderr(redact)  # stderr's JSON lines (setup_logging)
            ring = LogRing(LOG_RING_SIZE, stream=None, redact=redact)
            ring_handler = RingHandler(ring)
            logging.getLogger().addHandler(ring_handler)
            with self._bind() as sock:
                async with open_runtimes(settings) as runtimes:
                    settings.check_agents(runtimes.shared)
                    await settings.check_options(runtimes.agents)
                    await self._serve(stores, Lifecycle(runtimes.shared), runtimes, ring, sock)
            logging.getLogger().removeHandler(ring_handler)
        log.info("stopped")
        return 0

    def _bind(self) -> socket.socket:
        """The listening socket (port 0: a free one); sets ``self.url``."""
        host, port = split_host_port(self.settings.listen)
        sock = listening_socket(host, port)
        scheme = "https" if self.settings.loaded.config.a2a.tls else "http"
        shown_host = f"[{host}]" if ":" in host else host
        self.url = f"{scheme}://{shown_host}:{sock.getsockname()[1]}"
        return sock

    async def _serve(
        self, stores: Stores, lifecycle: Lifecycle, runtimes: Runtimes, ring: LogRing, sock: socket.socket
    ) -> None:
        """Build the services and the app in one task group, start uvicorn on ``sock`` with the signal handlers,
        the drain, the announcement and the background loops beside it; once uvicorn stops (drained), close the
        SDK's handler and the push client and end the group."""
        tls = self.settings.loaded.config.a2a.tls
        async with anyio.create_task_group() as tg:
            services = await build_services(self.settings, lifecycle, stores, runtimes, ring, self.url, tg)
            tell_interrupted(services, tg)  # failed by this start: the SDK pushes only what it serves
            app = build_app(services)
            if services.run_tasks is not None:  # the runs this start claimed (another live daemon follows its own)
                claimed = stores.members
                tg.start_soon(
                    services.run_tasks.follow_resumed, claimed.claimed_items(RUN), claimed.claimed_items(TASK)
                )
            tg.start_soon(services.takeover.serve)  # the lease renewed, dead members' work taken over
            # proxy_headers off: uvicorn would take X-Forwarded-For from any loopback peer and rewrite the client
            # address before the front sees it; the front trusts only [a2a] trusted_proxies (.proxies)
            config = uvicorn.Config(
                app.asgi,
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=5,
                ssl_certfile=tls.cert if tls else None,
                ssl_keyfile=tls.key if tls else None,
                proxy_headers=False,
            )
            server = _Server(config)
            tg.start_soon(self._signals, lifecycle, Reload(services, app.cors, tg.start_soon))
            tg.start_soon(self._drain_on_request, server, services)
            tg.start_soon(self._announce, server)
            for agent in services.agents:
                tg.start_soon(agent.conversations.reap_idle)
                tg.start_soon(agent.store.flush_behind)
            tg.start_soon(lifecycle.serve, list(services.agents))  # an agent's own drain (admin.drain on its path)
            tg.start_soon(services.retention.serve)  # a prune now, then every [a2a.retention] interval
            await server.serve(sockets=[sock])
            if not lifecycle.draining:
                await _drain(services)
            for agent in services.agents:
                await agent.handler.aclose()
            if services.push_http is not None:
                await services.push_http.aclose()
            tg.cancel_scope.cancel()

    async def _announce(self, server: _Server) -> None:
        await server.listening.wait()
        startup.done()  # the daemon has started: what it built is frozen out of the collector's sight
        sys.stdout.write(json.dumps({"listening": self.url}) + "\n")
        sys.stdout.flush()
        for spec in self.settings.specs:
            log.info("listening on %s (agent %s: %s in %s)", self.url, spec.id, spec.label, spec.dir)
        if self.settings.loaded.config.a2a.console_enabled():
            from .console import console_url

            log.info("console: %s", console_url(self.settings.loaded.config.a2a.url or self.url))

    async def _signals(self, lifecycle: Lifecycle, reload: Reload) -> None:
        """SIGHUP reloads (:meth:`.reload.Reload.on_signal`); SIGTERM or SIGINT latches the drain and ends."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    reload.on_signal()
                    continue
                log.info("draining: %s", signal.Signals(signum).name)
                lifecycle.request_drain(signal.Signals(signum).name)
                return

    async def _drain_on_request(self, server: uvicorn.Server, services: Services) -> None:
        await services.lifecycle.drain_requested()
        with anyio.CancelScope(shield=True):
            await _drain(services)
        server.should_exit = True


async def _drain(services: Services) -> None:
    """The drain (:meth:`.lifecycle.Lifecycle.drain`) of every served agent's conversations, through their SDK
    handlers, with the workflow runner and the subagent manager as configured."""
    instance = services.instance
    await services.lifecycle.drain(services.agents, instance.runner, instance.subagents, services.front)


async def serve(loaded: Loaded, options: Options) -> int:
    """Run one daemon for ``loaded`` until it drains; returns its exit status. Holds the state dir and a SQLite
    task database for the daemon's lifetime (:func:`.statedir.hold`, :func:`.statedir.hold_database`: raise
    ``StateDirUnusable`` when another daemon holds one or the state dir cannot be created), then raises what
    :meth:`Daemon.run` raises."""
    from contextlib import ExitStack

    from .config import sqlite_file
    from .statedir import hold, hold_database

    setup_logging()
    daemon = Daemon(loaded, options)
    with ExitStack() as held:
        held.enter_context(hold(daemon.settings.state_dir))
        database = sqlite_file(daemon.settings.store_url)
        if database is not None and database.parent.is_dir():  # a missing directory is Daemon.run's to refuse
            held.enter_context(hold_database(database))
        return await daemon.run()


__all__ = ["LOG_RING_SIZE", "Daemon", "Options", "serve"]
