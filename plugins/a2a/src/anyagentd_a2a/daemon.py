"""The ``anyagentd a2a`` daemon: the Runtime, the stores, the SDK's request handler behind our front, uvicorn.

``serve(loaded, options)`` runs until SIGTERM/SIGINT, then drains and returns 0: sends are refused (DRAINING),
every running turn is cancelled and every session closed in parallel, the listener stops. SIGHUP reloads the
configuration file (credentials, principals, CORS origins, the parents reported to; the listener and agent need a
restart). Once the
listener accepts connections the first stdout line is ``{"listening": "http://HOST:PORT"}``; logs are JSON lines on
stderr and never carry a secret.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from a2a.auth.user import User
from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import BasePushNotificationSender
from a2a.types import CancelTaskRequest
from a2a.utils.errors import A2AError
from a2a.utils.push_url_validator import validate_push_notification_url
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from anyagentd import startup
from anyagentd.errors import ResumeFailed
from anyagentd.listen import listening_socket
from anyagentd.ops import owns
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

from .card import SCHEMA_PATH, build_card, card_route, extend_for_caller
from .command.dispatch import CommandDispatcher
from .command.envelope import COMMAND_URI as COMMAND_EXTENSION
from .config import ConfigError, Loaded, load, parent_key, split_host_port, with_listen
from .conversations import Conversation, Conversations, Opening, PoolLimits
from .executor import CANCEL_GRACE, ConversationExecutor
from .front import CorsGate, Front, HostGate, invalid_params, rpc_error
from .instance import Instance
from .logring import LogRing, RingHandler, SecretRedactor
from .pathprefix import PathPrefix, prefix_of
from .principals import OPERATOR, Identities
from .push import OnDemandClient
from .store import (
    FLUSH_DELAY,
    ConversationTable,
    PrincipalTaskStore,
    PushConfigStore,
    StoreUnavailable,
    check_sqlite_directory,
    engine_for,
    fail_interrupted,
)
from .tasks.state import FAILED, INPUT_REQUIRED, OPEN, TERMINAL, UNRESUMABLE_MESSAGE, on_drain
from .translate import accepts_our_output, url_violations

log = logging.getLogger("anyagentd.a2a")
LOG_RING_SIZE = 1024
"""Lines the daemon's log ring keeps for ``debug.events``."""


DRAIN_TIMEOUT = 20.0
"""Seconds the drain gives the live agents' sessions, all closing at once, after the running tasks are cancelled."""


def _seconds(name: str, default: float) -> float:
    import os

    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %s", name, value, default)
        return default


def pool_limits(loaded: Loaded) -> PoolLimits:
    """``[a2a.pool]`` as :class:`PoolLimits`; env ``ANYAGENTD_A2A_IDLE_CLOSE`` (seconds) overrides ``idle_close``."""
    pool = loaded.config.a2a.pool
    return PoolLimits(
        idle_close=_seconds("ANYAGENTD_A2A_IDLE_CLOSE", pool.idle_close),
        max_live=pool.max_live,
        max_rss_mb=pool.max_rss_mb,
    )


@dataclass(frozen=True)
class Options:
    """Command-line overrides: ``listen`` (HOST:PORT), ``mock_script``, ``state_dir``, ``config_path`` (for
    SIGHUP reloads), and ``plugins``: the plugin manager the command line already loaded (None: the runtime
    loads its own)."""

    listen: str | None = None
    mock_script: str | None = None
    state_dir: Path | None = None
    config_path: str | None = None
    plugins: Plugins | None = None


# what every LogRecord carries; anything else on a record came from ``extra=`` (uvicorn's color_message is its own)
_RECORD_KEYS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


START_ONLY = (
    "agent.name",
    "agent.dir",
    "agent.mock_script",
    "a2a.listen",
    "a2a.url",
    "a2a.tls",
    "a2a.store",
    "a2a.push",
    "a2a.pool",
    "a2a.device_grant",
    "a2a.metrics.enabled",
    "a2a.limits.task_history",
    "subagents.enabled",
    "subagents.agents",
    "subagents.per_owner",
    "subagents.depth",
    "subagents.timeout",
    "subagents.instances",
)
"""The configuration keys read once at the start — the agent and its runtime, the listener and the card (url, TLS),
the stores, the push sender, the pool, the device grant, the /metrics route, the task store's history bound, the
subagent manager and its child instances (their bearers resolved): a SIGHUP that changes one says it takes effect
at the next start (:meth:`Daemon._reload`)."""


class JsonLines(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``msg`` (and ``exc`` for exceptions), then each
    field the call passed with ``extra=`` as a key of its own (the access and audit lines, :mod:`.observe.access`);
    an extra field never replaces one of the four. The line is passed through :attr:`redact` (the daemon installs
    its :class:`~.logring.SecretRedactor`: a configured secret's value never reaches stderr, whatever field or
    argument carried it)."""

    def __init__(self, redact: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.redact = redact or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info).splitlines()[-1]
        for key, value in record.__dict__.items():
            if key not in _RECORD_KEYS and key not in line:
                line[key] = value
        return self.redact(json.dumps(line, ensure_ascii=False, default=str))


def setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "uvicorn.access", "sse_starlette", "a2a", "aiosqlite", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def default_state_dir() -> Path:
    import os

    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "anyagentd" / "a2a"


class _Principal(User):
    def __init__(self, principal: Any) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.principal.id


class PrincipalContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context with the front's principal as its user (the task store's owner)."""

    def build(self, request: Request) -> Any:
        context = super().build(request)
        context.state["principal"] = request.state.principal
        return context

    def build_user(self, request: Request) -> User:
        return _Principal(request.state.principal)


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
    """One running daemon; built and run by :func:`serve`."""

    def __init__(self, loaded: Loaded, options: Options) -> None:
        self.loaded = loaded
        self.started_with = loaded  # what the keys read once at the start (START_ONLY) keep, whatever reloads
        self.options = options
        self.listen = options.listen or loaded.config.a2a.listen
        self.state_dir = (options.state_dir or default_state_dir()).expanduser().resolve()
        self.draining = False
        self.drain_reason: str | None = None
        self._drain_requested = anyio.Event()
        agent = loaded.config.agent
        self.agent_ref = agent.agent_ref()
        self.agent_label = agent.label()
        self.agent_dir = Path(agent.dir).expanduser().resolve()
        self.mock_script = options.mock_script or agent.mock_script

    async def run(self) -> int:
        """Open the store (a task a dead process left open gets what :func:`.tasks.state.on_restart` decides; the
        push subscribers of those it fails are told), bind, serve until drained; returns 0.
        Raises ``ConfigError`` (an agent no plugin drives, a child instance named like an installed agent),
        ``StoreUnavailable`` (the task store cannot be opened) and ``OSError`` (the listener cannot bind)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        url = self.store_url
        check_sqlite_directory(url)
        engine = engine_for(url)
        store = PrincipalTaskStore(
            engine,
            flush_delay=_seconds("ANYAGENTD_A2A_FLUSH_DELAY", FLUSH_DELAY),
            history_kept=self.loaded.config.a2a.limits.task_history,
        )
        try:
            try:
                await store.initialize()
                self.table = ConversationTable(engine)
                await self.table.initialize()
                failed, self.parked = await fail_interrupted(
                    store, await self.table.resumable(self.agent_label), await self._run_tasks(engine)
                )
            except (OSError, SQLAlchemyError) as err:  # unreachable, refused, unwritable: not the listener
                raise StoreUnavailable(engine.url.render_as_string(hide_password=True), err) from None
            if failed:
                log.warning("marked %d task(s) FAILED: they were running when the daemon last stopped", len(failed))
            self.interrupted = failed  # their push subscribers are told once the push sender exists
            if self.parked:
                log.info(
                    "%d task(s) still wait for input: their answers resume the agent's conversation", len(self.parked)
                )
            self.task_store = store
            self.db_engine = engine
            redact = SecretRedactor(lambda: self.loaded, self._secret_references)
            for handler in logging.getLogger().handlers:  # stderr's JSON lines (setup_logging)
                if isinstance(handler.formatter, JsonLines):
                    handler.formatter.redact = redact
            self.ring = LogRing(LOG_RING_SIZE, stream=None, redact=redact)
            ring_handler = RingHandler(self.ring)
            logging.getLogger().addHandler(ring_handler)
            self.instance = Instance(self, self.ring)
            with self._bind() as sock:
                async with Runtime(mock_script=self.mock_script, plugins=self.options.plugins) as runtime:
                    self.runtime = runtime
                    self._check_agent(runtime)
                    self.ops = runtime.plugins.op_table()
                    await self._services(engine)
                    await self._serve(store, engine, sock)
            logging.getLogger().removeHandler(ring_handler)
        finally:
            try:
                await store.flush()  # the updates still written behind
            except Exception as err:  # noqa: BLE001 - the stop goes on: a restart reads those tasks as interrupted
                log.error("writing the running tasks' last updates failed: %s", type(err).__name__)
            finally:
                await engine.dispose()
        log.info("stopped")
        return 0

    @property
    def store_url(self) -> str:
        """The task store's SQLAlchemy URL: ``a2a.store``, else ``a2a.db`` in the state dir."""
        return self.loaded.config.a2a.store or f"sqlite+aiosqlite:///{self.state_dir / 'a2a.db'}"

    def _bind(self) -> socket.socket:
        """The listening socket (port 0: a free one); sets ``self.url``."""
        host, port = split_host_port(self.listen)
        sock = listening_socket(host, port)
        scheme = "https" if self.loaded.config.a2a.tls else "http"
        shown_host = f"[{host}]" if ":" in host else host
        self.url = f"{scheme}://{shown_host}:{sock.getsockname()[1]}"
        return sock

    def _check_agent(self, runtime: Runtime) -> None:
        known = {p.id for p, _ in runtime.plugins.profiles()}
        known |= {i.id for a in runtime.adapters.values() for i in a.pinned_installations()}
        if isinstance(self.agent_ref, str) and self.agent_ref not in known:
            raise ConfigError(
                "agent.name",
                f"no installed plugin drives an agent named {self.agent_ref!r} (known: {', '.join(sorted(known))})",
            )
        for n, child in enumerate(self.loaded.config.subagents.instances):
            if child.name in known:  # a spawn by that name would reach the child, never the local agent
                raise ConfigError(
                    f"subagents.instances.{n}.name",
                    f"{child.name!r} is an installed agent here; a child instance needs another name",
                )

    async def _serve(self, store: PrincipalTaskStore, engine: Any, sock: socket.socket) -> None:
        tls = self.loaded.config.a2a.tls
        public_url = self.loaded.config.a2a.url or self.url
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self.conversations = Conversations(
                self.state_dir,
                open_session=self._open_session,
                start_pump=tg.start_soon,
                remember=self._remember,
                limits=pool_limits(self.loaded),
                paused=self.instance.pause_note,
            )
            self.public_url = public_url
            await self._start_services(tg)
            card = build_card(
                self.loaded,
                public_url,
                ops=self.ops.listed(self.instance.switches()),
                schema_url=f"{public_url}{SCHEMA_PATH}",
            )
            handler, http = self._handler(store, engine, card)
            if self.push_sender is not None:
                for event in self.interrupted:  # failed by this start: the SDK pushes only what it serves
                    tg.start_soon(self.push_sender.send_notification, event.task_id, event)
            self.interrupted = []
            # proxy_headers off: uvicorn would take X-Forwarded-For from any loopback peer and rewrite the client
            # address before the front sees it; the front trusts only [a2a] trusted_proxies (.proxies)
            config = uvicorn.Config(
                self._app(handler),
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=5,
                ssl_certfile=tls.cert if tls else None,
                ssl_keyfile=tls.key if tls else None,
                proxy_headers=False,
            )
            server = _Server(config)
            tg.start_soon(self._signals, server)
            tg.start_soon(self._drain_on_request, server)
            tg.start_soon(self._announce, server)
            tg.start_soon(self.conversations.reap_idle)
            tg.start_soon(store.flush_behind)
            tg.start_soon(self._retention(store).serve)  # a prune now, then every [a2a.retention] interval
            await server.serve(sockets=[sock])
            if not self.draining:
                await self.drain()
            await handler.aclose()
            if http is not None:
                await http.aclose()
            tg.cancel_scope.cancel()

    def _retention(self, store: PrincipalTaskStore) -> Any:
        """The :class:`.retention.Retention` over this daemon's stores (``store``: the tasks): the runs' with
        workflows configured, the device sessions with the grant on, the subagent records with subagents on."""
        from .retention import Retention

        subagents = None
        if self.loaded.config.subagents.enabled:
            from .subagents.store import SubagentStore

            subagents = SubagentStore(self.db_engine)
        return Retention(
            lambda: self.loaded.config.a2a.retention,
            self.state_dir,
            store,
            self.table,
            pool=self.conversations,
            runs=getattr(self, "run_store", None),
            sessions=self.instance.auth_sessions,
            subagents=subagents,
            subagent_manager=self.instance.subagents,
        )

    def _handler(self, store: PrincipalTaskStore, engine: Any, card: Any) -> tuple[Any, Any]:
        push = self.loaded.config.a2a.push
        push_store = sender = http = validator = None
        if push.enabled:
            push_store = PushConfigStore(engine)
            validator = None if push.allow_private else validate_push_notification_url
            http = OnDemandClient(timeout=10.0)  # made by the first push: its TLS context is not the start's
            sender = BasePushNotificationSender(http, push_store, push_url_validator=validator)
        self.push_sender = sender
        executor = self.executor = ConversationExecutor(
            self.conversations,
            allow_private_urls=push.allow_private,
            parked=self.parked,
            parents=self._parents(),
            tasks_of=store.tasks_of,
        )
        contexts = SimpleRequestContextBuilder(task_id_generator=store.task_ids)  # new ids read absent, no query
        handler = self.handler = DefaultRequestHandler(
            executor,
            store,
            card,
            push_config_store=push_store,
            push_sender=sender,
            extended_agent_card=card,
            extended_card_modifier=self._extend_card,
            push_url_validator=validator,
            request_context_builder=contexts,
        )
        self.card = card
        return handler, http

    def _app(self, handler: Any) -> Any:
        dispatcher = JsonRpcDispatcher(handler, context_builder=PrincipalContextBuilder())
        identities = Identities(self.loaded, self.instance.auth_sessions)
        self.front = Front(
            identities,
            dispatcher.handle_requests,
            set(dispatcher.METHOD_TO_MODEL),
            is_draining=lambda: self.draining,
            supported_extensions={COMMAND_EXTENSION},
            realm="anyagentd",
            check_send=self._check_send,
            intercept=self._intercept,
            spawn=self._tg.start_soon,
        )
        self.dispatcher = CommandDispatcher(
            self.ops,
            self.instance,
            switches=self.instance.switches,
            save_task=self._save_task,
            spawn=self._tg.start_soon,
            open_task=self._task_manager,
            tell=self._tell,
        )
        if self.instance.runner is not None:
            self._tg.start_soon(self._follow_resumed_runs)
        routes = [card_route(self.card)]
        routes.append(Route(SCHEMA_PATH, self._schema, methods=["GET"]))
        if self.instance.device_grant is not None:
            from .auth.routes import device_routes

            routes.extend(
                device_routes(
                    self.instance.device_grant,
                    self.instance.auth_sessions,
                    issuer=lambda: self.public_url,
                    on_event=self.ring.emit,
                )
            )
        from .observe.access import AccessLog
        from .observe.health import health_routes
        from .observe.requests import RequestObservation

        routes.extend(
            health_routes(self.db_engine, lambda: self.draining, table=self.task_store.task_model.__tablename__)
        )  # /healthz, /readyz
        sinks: list[Any] = [
            AccessLog(enabled=lambda: self.loaded.config.a2a.access_log, source_of=self.front.source_of)
        ]
        if self.loaded.config.a2a.metrics.enabled:  # else the Prometheus client is never imported
            from .observe.metrics import Metrics

            metrics = Metrics(
                front=self.front,
                count_tasks=self.task_store.count_by_state,
                pool=self.conversations,
                runs=getattr(self, "run_store", None),
                sessions=self.instance.auth_sessions,
                subagents=self.instance.subagents,
            )
            self.conversations.on_usage = metrics.usage
            routes.append(Route("/metrics", metrics.scrape, methods=["GET"]))
            sinks.append(metrics)
        routes.append(Route("/", self.front.handle, methods=["POST"]))
        app = Starlette(routes=routes)
        app.router.redirect_slashes = False
        self.cors = CorsGate(app, self.loaded.config.a2a.cors_origins)
        public_host = urlsplit(self.public_url).hostname
        served: Any = HostGate(self.cors, {public_host} if public_host else set())
        prefix = prefix_of(self.public_url)
        if prefix:  # a2a.url names a path: served with it and without it (.pathprefix)
            served = PathPrefix(served, prefix)
        # outermost, so every request is observed, the Host gate's 421 included; uvicorn's own access log stays off
        return RequestObservation(served, sinks)

    async def _check_send(self, principal: Any, request_id: Any, params: dict[str, Any]) -> Any:
        """A send's own refusals, before the SDK creates or touches a task: output modes we cannot produce
        (-32005), file URLs we will not fetch (-32602), a message naming the caller's own task while it runs and
        waits for no input (-32004: the SDK would hold it until the task stops, then drop it)."""
        message = params.get("message")
        task_id = message.get("taskId") if isinstance(message, dict) else None
        run = self.conversations.runs.get(task_id) if isinstance(task_id, str) else None
        if run is not None and run.request is None and owns(principal, run.conversation.owner):
            return rpc_error(
                request_id,
                -32004,
                f"task {task_id} is running and waits for no input: send the "
                "message without taskId, in its contextId, to steer or queue it",
                reason="UNSUPPORTED_OPERATION",
            )
        parked = self.parked.get(task_id) if isinstance(task_id, str) else None
        if parked is not None and not message.get("contextId"):
            # After a restart the SDK would give a taskId-only message a fresh contextId, and then refuse the
            # task's own events as "another context": name the task's context, as the client could have.
            message["contextId"] = parked[1]
        if isinstance(task_id, str) and run is None and parked is None:
            refused = await self._refuse_unresumable(principal, request_id, task_id)
            if refused is not None:
                return refused
        configuration = params.get("configuration")
        modes = configuration.get("acceptedOutputModes") if isinstance(configuration, dict) else None
        if isinstance(modes, list) and modes and not accepts_our_output(modes):
            return rpc_error(
                request_id,
                -32005,
                f"none of the accepted output modes {modes} is produced here "
                f"({', '.join(self.card.default_output_modes)})",
                reason="CONTENT_TYPE_NOT_SUPPORTED",
            )
        violations = await url_violations(params, allow_private=self.loaded.config.a2a.push.allow_private)
        return invalid_params(request_id, violations) if violations else None

    async def _refuse_unresumable(self, principal: Any, request_id: Any, task_id: str) -> Any:
        """-32004 naming why, for a message to the caller's task that a restart left unanswerable
        (:data:`.tasks.state.UNRESUMABLE_MESSAGE`); ``None`` for any other task (the SDK answers those)."""
        context = ServerCallContext(user=_Principal(principal), state={"principal": principal})
        task = await self.task_store.get(task_id, context)
        if task is None or task.status.state != FAILED:
            return None
        text = " ".join(p.text for p in task.status.message.parts if p.text)
        if text != UNRESUMABLE_MESSAGE:
            return None
        return rpc_error(
            request_id, -32004, f"task {task_id} cannot be answered: {text}", reason="UNSUPPORTED_OPERATION"
        )

    async def _announce(self, server: _Server) -> None:
        await server.listening.wait()
        startup.done()  # the daemon has started: what it built is frozen out of the collector's sight
        sys.stdout.write(json.dumps({"listening": self.url}) + "\n")
        sys.stdout.flush()
        log.info("listening on %s (agent %s in %s)", self.url, self.agent_label, self.agent_dir)

    async def _signals(self, server: uvicorn.Server) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    before = self.loaded
                    self._reload()
                    from .observe.audit import audit

                    # a reload that took replaced the configuration; any refusal was logged with its reason
                    audit(
                        "config.reload",
                        "signal",
                        "ok" if self.loaded is not before else "refused",
                        args={"signal": "SIGHUP", "config": self.options.config_path},
                    )
                    continue
                log.info("draining: %s", signal.Signals(signum).name)
                self.request_drain(signal.Signals(signum).name)
                return

    def request_drain(self, reason: str) -> None:
        """Latch the drain (SIGTERM, SIGINT, ``admin.drain``): idempotent; sends are refused from now on, and the
        drain task cancels running work, closes the agents and stops the listener."""
        if not self._drain_requested.is_set():
            self.draining = True
            self.drain_reason = reason
            self._drain_requested.set()

    async def _drain_on_request(self, server: uvicorn.Server) -> None:
        await self._drain_requested.wait()
        with anyio.CancelScope(shield=True):
            await self.drain()
        server.should_exit = True

    async def drain(self) -> None:
        """Stop intake (sends get DRAINING), do to every live conversation task what
        :func:`.tasks.state.on_drain` decides — cancel it through the SDK handler (recorded CANCELED), or park it
        (waiting for input, its agent has a resume token: it stays INPUT_REQUIRED and its answer after the restart
        resumes the conversation) — checkpoint the workflow runs (their tasks are kept: the runs resume after the
        restart), then close every session, all in parallel."""
        self.draining = True
        context = ServerCallContext(user=_Principal(OPERATOR), state={"principal": OPERATOR})

        async def cancel(task_id: str) -> None:
            with anyio.move_on_after(CANCEL_GRACE + 1):
                try:
                    await self.handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
                except A2AError as err:  # already ended meanwhile
                    log.info("drain: task %s: %s", task_id, err)

        async with anyio.create_task_group() as tg:
            for task_id, run in list(self.conversations.runs.items()):
                decision = on_drain(run.state, run_task=False, resumable=run.conversation.holds_resume_token)
                if decision.action == "cancel":
                    tg.start_soon(cancel, task_id)
            if self.instance.runner is not None:
                tg.start_soon(self.instance.runner.drain, CANCEL_GRACE + 1)
            if self.instance.subagents is not None:
                tg.start_soon(self.instance.subagents.close)
        await self.conversations.close_all(DRAIN_TIMEOUT)

    def _reload(self) -> None:
        """SIGHUP: read ``--config`` again and apply what can be applied to a running daemon — the credentials and
        ``[[a2a.principals]]``, ``cors_origins``, ``trusted_proxies``, ``introspection``, ``access_log``,
        ``[a2a.retention]``, ``[a2a.limits]`` (the front's), the scrape token, ``agent.approval``,
        ``[[subagents.parents]]`` and the ``[[workflows]]``; a change to any key read once at the start (listed
        below) from the configuration the daemon started with is named in one warning: it takes effect at the next
        start. A file the start would refuse is refused, and the running configuration kept."""
        path = self.options.config_path
        if path is None:
            log.warning("SIGHUP: no --config file to reload")
            return
        try:
            loaded = with_listen(load(path), self.options.listen)
        except ConfigError as err:
            log.error("SIGHUP: configuration not reloaded: %s", err)
            return
        from .preflight import preflight

        # what the start would refuse, the reload refuses
        found = preflight(loaded, self.runtime.plugins, mock_script=self.options.mock_script)
        if found.errors:
            log.error("SIGHUP: configuration not reloaded: %s", found.errors[0])
            return

        def value(config: Any, key: str) -> Any:
            for part in key.split("."):
                config = getattr(config, part)
            return config

        # compared with what runs: the configuration the daemon started with (a change undone is no change)
        started = self.started_with
        changed = [key for key in START_ONLY if value(loaded.config, key) != value(started.config, key)]
        if "subagents.instances" not in changed and loaded.secrets.instances != started.secrets.instances:
            changed.append("subagents.instances")  # a bearer file's new content
        if changed:
            log.warning(
                "SIGHUP: changes to %s take effect at the next start (the running daemon keeps what it started with)",
                ", ".join(changed),
            )
        self._reload_workflows(loaded)
        self.loaded = loaded
        self.instance.reloaded()
        self.front.identities = Identities(loaded, self.instance.auth_sessions)
        self.cors.origins = set(loaded.config.a2a.cors_origins)
        self.executor.parents = self._parents()  # tasks started from now on report to the parents configured now
        log.info("SIGHUP: configuration reloaded from %s", path)

    def _reload_workflows(self, loaded: Loaded) -> None:
        """The reloaded ``[[workflows]]`` for the runs started from now on (:meth:`.WorkflowRunner.redefine`); a
        daemon started without workflows has no runner (nor run store): a warning says they wait for a restart."""
        from .workflows.definition import load_workflows

        runner = self.instance.runner
        if runner is None:
            if loaded.config.workflows:
                log.warning("SIGHUP: [[workflows]] take effect at the next start (this daemon started without any)")
            return
        self.instance.workflows = load_workflows(loaded.config.workflows)
        changes = runner.redefine(self.instance.workflows)
        said = "; ".join(f"{kind} {', '.join(names)}" for kind, names in changes.items() if names)
        log.info("SIGHUP: workflows %s", said or "unchanged")

    async def _open_session(self, conversation: Conversation, opening: Opening = "resume") -> Any:
        """The conversation's engine session, opened as ``opening`` says (:data:`.conversations.Opening`):
        ``"resume"``: with its stored resume token when there is one, else — no token, or the resume failed — afresh,
        the next task saying so (``Conversation.fresh_note``) when the agent no longer knows earlier turns;
        ``"require_resume"`` (an answer to a request from before a restart): ``ResumeFailed`` instead of afresh
        (``never_saved`` when the agent has no saved session under the token); ``"fresh"`` (a replay,
        :meth:`.executor.ConversationExecutor._answer_parked`): afresh without trying the token, the caller saying
        so. The new session's token is stored. Raises what ``Runtime.open`` raises."""
        approval = "AutoApprove" if self.instance.approval == "auto" else "Ask"
        token = None
        if opening != "fresh":
            token = await self.table.resume_token(conversation.owner, conversation.context_id, self.agent_label)
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        if opening == "require_resume" and not token:
            raise ResumeFailed("no resume token is stored for this conversation")
        failed: ResumeFailed | None = None
        if token:
            try:
                session = await self._open_agent(conversation, permission_mode=approval, resume=token)
                log.info("conversation %s resumed the agent's session", conversation.context_id)
                return self._opened(conversation, session)
            except ResumeFailed as err:
                if opening == "require_resume":
                    raise
                failed = err
                log.warning(
                    "conversation %s: resume failed (%s); starting afresh", conversation.context_id, err.message
                )
        session = await self._open_agent(conversation, permission_mode=approval)
        conversation.went_fresh = True
        if opening != "fresh" and (conversation.turns or failed is not None):
            # the agent no longer knows this conversation's earlier turns: the task says so
            why = "was never saved by the agent" if failed is not None and failed.never_saved else "was closed"
            conversation.fresh_note = (
                f"This conversation's agent session {why} and could not be resumed; this turn "
                "starts a fresh agent conversation."
            )
        return self._opened(conversation, session)

    async def _open_agent(self, conversation: Conversation, **options: Any) -> Any:
        """The conversation's agent session, opened with ``owner=`` the conversation's owner (the runtime's
        ``sessions(owner=…)`` selects it); with ``[subagents] enabled`` it gets the subagent MCP server, its
        bearer speaking for the conversation's owner (withdrawn when the session closes)."""
        tools = getattr(self, "subagent_mcp", None)
        if tools is None:
            return await self.runtime.open(self.agent_ref, self.agent_dir, owner=conversation.owner, **options)
        from .subagents.mcp_server import Caller

        return await tools.open_with_tools(
            self.runtime,
            self.agent_ref,
            self.agent_dir,
            Caller(owner=conversation.owner),
            spawn=self._tg.start_soon,
            owner=conversation.owner,
            **options,
        )

    def _opened(self, conversation: Conversation, session: Any) -> Any:
        self._remember(conversation, session.info().resume_token)
        return session

    def _remember(self, conversation: Conversation, token: str | None) -> None:
        if token:
            self._tg.start_soon(
                self.table.remember, conversation.owner, conversation.context_id, self.agent_label, token
            )

    # -- the command extension and the services behind it -------------------------------------------------

    def _secret_references(self) -> dict[str, str]:
        """Each resolved credential's value → the reference it was configured as (for redaction)."""
        config, found = self.loaded.config.a2a, {}
        if self.loaded.secrets.operator is not None and config.bearer:
            found[self.loaded.secrets.operator.get_secret_value()] = config.bearer
        if self.loaded.secrets.metrics is not None and config.metrics.token:
            found[self.loaded.secrets.metrics.get_secret_value()] = config.metrics.token
        for section in config.principals:
            secret = self.loaded.secrets.principals.get(section.id)
            if secret is not None:
                found[secret.get_secret_value()] = section.bearer
        for child in self.loaded.config.subagents.instances:
            secret = self.loaded.secrets.instances.get(child.name)
            if secret is not None and child.bearer:
                found[secret.get_secret_value()] = child.bearer
        for parent in self.loaded.config.subagents.parents:
            secret = self.loaded.secrets.parents.get(parent_key(parent.url))
            if secret is not None:
                found[secret.get_secret_value()] = parent.bearer
        return found

    def _parents(self) -> Any:
        """The ``[[subagents.parents]]`` this daemon reports a parent's subagent to (``None`` when there are none)."""
        configured = self.loaded.config.subagents.parents
        if not configured:
            return None
        from .subagents.reports import Parent, Parents

        secrets = self.loaded.secrets.parents
        return Parents(
            [Parent(p.url, secrets[parent_key(p.url)], p.principal) for p in configured], spawn=self._tg.start_soon
        )

    async def _run_tasks(self, engine: Any) -> set[str]:
        """Open the workflow runs' store (with ``workflows`` configured) and return the ids of the tasks its runs run
        under: the restart keeps those tasks open (:func:`.tasks.state.on_restart`), their runs follow them. None
        without workflows: no runner would follow them, so they fail like any task a dead process left open."""
        if not self.loaded.config.workflows:
            return set()
        from .workflows.store import RunStore

        self.run_store = await RunStore(engine).open()
        return await self.run_store.task_ids()

    async def _services(self, engine: Any) -> None:
        """The workflow runner, the device grant and the subagent manager, as configured (their stores share the
        daemon's database; the runs' store is already open, :meth:`_run_tasks`)."""
        config = self.loaded.config
        if config.workflows:
            from .workflows.definition import load_workflows

            self.instance.workflows = load_workflows(config.workflows)
        if config.a2a.device_grant.enabled:
            from .auth.device import DeviceGrant
            from .auth.sessions import AuthSessions

            grant = config.a2a.device_grant
            self.instance.auth_sessions = await AuthSessions(engine, lifetime=grant.token_days * 86400).open()
            self.instance.device_grant = DeviceGrant(
                self.instance.auth_sessions,
                verification_uri=f"{(config.a2a.url or self.url).rstrip('/')}/oauth2/device",
                principal_ids={p.id for p in config.a2a.principals},
                lifetime=grant.lifetime,
            )

    async def _start_services(self, tg: Any) -> None:
        """Subagents first (a workflow's subagent steps use them), then the workflow runner (which resumes the
        stored runs as it starts)."""
        if self.loaded.config.subagents.enabled:
            from .subagents.instances import ChildInstance
            from .subagents.manager import SubagentLimits, SubagentManager
            from .subagents.mcp_server import SubagentMcpServer
            from .subagents.store import SubagentStore

            section = self.loaded.config.subagents
            secrets = self.loaded.secrets.instances
            children = {
                c.name: ChildInstance(
                    c.name, c.url, secrets[c.name].get_secret_value() if c.name in secrets else None, reports=c.reports
                )
                for c in section.instances
            }
            store = await SubagentStore(self.db_engine).open()
            manager = SubagentManager(
                self.runtime,
                SubagentLimits(tuple(section.agents), section.per_owner, section.depth, section.timeout),
                work_root=self.state_dir / "subagents",
                save=store.save,
                instances=children,
                parent_url=self.public_url,
            )
            manager.adopt(await store.load())
            await tg.start(manager.serve)
            self.instance.subagents = manager
            self.subagent_mcp = SubagentMcpServer(manager)
            await tg.start(self.subagent_mcp.serve)

        if self.instance.workflows:
            from .workflows.runner import WorkflowRunner

            runner = WorkflowRunner(
                self.runtime,
                self.run_store,
                self.instance.workflows,
                work_root=self.state_dir / "runs",
                default_agent=self.agent_ref,
                held=lambda: self.instance.paused,
            )
            runner.subagents = self.instance.subagents  # for subagent steps, recovered ones included
            self.instance.runner = runner
            await tg.start(runner.serve)

    async def _intercept(
        self, principal: Any, request_id: Any, method: str, params: dict[str, Any], activated: list[str]
    ) -> Any:
        """Commands; a message answering a workflow run's ``ask`` step; CancelTask of a run's task. ``None``:
        the SDK's handler serves it."""
        from .command.envelope import is_command
        from .workflows.runner import RunStateRefused

        if method in ("SendMessage", "SendStreamingMessage"):
            if is_command(params):
                return await self.dispatcher.respond(principal, request_id, method, params, activated)
            message = params.get("message") if isinstance(params.get("message"), dict) else {}
            tracked = self.dispatcher.run_tasks.get(message.get("taskId") or "")
            if tracked is not None:
                return await self._answer_run(principal, request_id, message, *tracked)
        elif method == "CancelTask":
            tracked = self.dispatcher.run_tasks.get(str(params.get("id") or ""))
            if tracked is not None:
                run_id, owner = tracked
                if owns(principal, owner.id):
                    task = self.dispatcher.tracked.get(params["id"])
                    try:
                        await self.instance.runner.cancel(run_id, f"cancelled by {principal.id} (CancelTask)")
                    except RunStateRefused:
                        return None  # it ended meanwhile: the SDK refuses to cancel an ended task
                    if task is not None:
                        with anyio.move_on_after(5):  # the writer stores the run's end (CANCELED) right after it
                            await task.wait(lambda state: state in TERMINAL)
                    return await self._task_reply(request_id, params["id"], principal)
        return None

    async def _answer_run(
        self, principal: Any, request_id: Any, message: dict[str, Any], run_id: str, owner: Any
    ) -> Any:
        """A SendMessage naming a run's task: the answer to its waiting ``ask`` step (a DataPart with the wire's
        Answer JSON, or allow/deny/… text), answered with the task once it no longer waits (30 s at most); or, as
        for a conversation task (:meth:`.executor.ConversationExecutor._answer`), something that is not an answer:
        the task stays INPUT_REQUIRED with a status saying why and what is expected, the run still waits. Either
        way the message joins the task's history. Another principal's task is -32001; a run that waits for no
        answer is -32004."""
        from a2a.types import Message
        from google.protobuf.json_format import ParseDict

        from anyagentd.model import REQUEST
        from anyagentd.ops import Progress

        from .translate import answer_of, request_text

        task_id = message["taskId"]
        if not owns(principal, owner.id):
            return rpc_error(request_id, -32001, f"Task not found: {task_id}", reason="TASK_NOT_FOUND")
        runner = self.instance.runner
        waiting = runner.awaiting_input(run_id)
        if waiting is None:
            return rpc_error(request_id, -32004, f"run {run_id} waits for no answer", reason="UNSUPPORTED_OPERATION")
        request = REQUEST.validate_python(waiting["request"])
        answer = answer_of(ParseDict(message, Message(), ignore_unknown_fields=True), request)
        if isinstance(answer, str):
            said = Progress("input_required", text=f"Not an answer: {answer}. {request_text(request)}")
            await self.dispatcher.note(task_id, said, received=message)
            return await self._task_reply(request_id, task_id, principal)
        task = self.dispatcher.tracked.get(task_id)
        await self.dispatcher.receive(task_id, message)
        if await runner.answer(run_id, answer) and task is not None:
            with anyio.move_on_after(30):  # the writer stores the step's next state once the agent has the answer
                await task.wait(lambda state: state != INPUT_REQUIRED)
        return await self._task_reply(request_id, task_id, principal)

    async def _task_reply(self, request_id: Any, task_id: str, principal: Any) -> Any:
        """The stored task ``task_id`` (read as ``principal``) as the JSON-RPC result of request ``request_id``."""
        from google.protobuf.json_format import MessageToDict
        from starlette.responses import JSONResponse

        context = ServerCallContext(user=_Principal(principal), state={"principal": principal})
        task = await self.task_store.get(task_id, context)
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"task": MessageToDict(task)}})

    async def _follow_resumed_runs(self) -> None:
        """After a restart: the task of every run whose task is still open follows the run again — a resumed run
        to its end, a run that ended during recovery (a step interrupted with no retry left) at once — going on
        from the stored task (its history kept)."""
        from .ops.workflow import run_progress
        from .principals import Principal

        runner = self.instance.runner
        context = ServerCallContext(user=_Principal(OPERATOR), state={"principal": OPERATOR})
        for record in await runner.store.list():
            if not record.task_id:
                continue
            task = await self.task_store.get(record.task_id, context)
            if task is None:
                continue
            if task.status.state not in OPEN:
                continue  # the task already shows the run's end (a run ended at recovery is brought up to date)
            owner_id = record.principal or OPERATOR.id
            owner = OPERATOR if owner_id == OPERATOR.id else Principal(owner_id, owner_id.split(":", 1)[0])
            op = f"workflow.run:{record.workflow}"
            if "op" in task.metadata:  # a protobuf Struct: `in` and [], no get()
                op = task.metadata["op"]
            self.dispatcher.run_tasks[record.task_id] = (record.id, owner)
            self._tg.start_soon(
                partial(
                    self.dispatcher.track,
                    owner,
                    record.task_id,
                    task.context_id,
                    {},
                    op,
                    run_progress(runner, record),
                    resumed=True,
                )
            )

    def _task_manager(self, principal: Any, task_id: str, context_id: str) -> Any:
        """The SDK's ``TaskManager`` of task ``task_id`` (in ``context_id``) in the daemon's store, under
        ``principal``: what a command's long-running task is written through
        (:class:`.command.dispatch.TrackedTask`)."""
        from a2a.server.tasks import TaskManager

        context = ServerCallContext(user=_Principal(principal), state={"principal": principal})
        return TaskManager(self.task_store, context, task_id, context_id, None)

    async def _tell(self, event: Any) -> None:
        """Tell a command task's push subscribers its status update ``event`` (the SDK serves none of these
        tasks, so it pushes none of their states)."""
        if self.push_sender is not None:
            await self.push_sender.send_notification(event.task_id, event)

    async def _save_task(self, task: dict[str, Any], principal: Any) -> None:
        """Store a command's task (proto3 JSON) under ``principal``, then tell its push subscribers its status: the
        SDK serves none of these tasks, so it pushes none of their states (the sender looks up only tasks with
        push configs)."""
        from a2a.types import Task, TaskStatusUpdateEvent
        from google.protobuf.json_format import ParseDict

        context = ServerCallContext(user=_Principal(principal), state={"principal": principal})
        stored = ParseDict(task, Task(), ignore_unknown_fields=True)
        await self.task_store.save(stored, context)
        if self.push_sender is not None:
            await self.push_sender.send_notification(
                stored.id,
                TaskStatusUpdateEvent(
                    task_id=stored.id, context_id=stored.context_id, status=stored.status, metadata=stored.metadata
                ),
            )

    async def _schema(self, request: Request) -> Any:
        from starlette.responses import JSONResponse

        from anyagentd.ops import command_schema

        return JSONResponse(command_schema(), headers={"Cache-Control": "public, max-age=3600"})

    async def _extend_card(self, card: Any, context: ServerCallContext) -> Any:
        """The caller's card: the public one, its ops narrowed to what this caller may run, plus the
        workflow-declared commands and the paths ``admin.set`` accepts."""
        principal = context.state.get("principal")
        extended = await extend_for_caller(card, context)
        if principal is not None:
            params = extended.capabilities.extensions[0].params
            ops = self.ops.listed(self.instance.switches(), principal)
            params.update(
                {
                    "ops": [{"op": name, "reply": reply} for name, reply in ops],
                    "commands": [
                        {"command": w.command, "workflow": w.name, "description": w.description}
                        for w in self.instance.workflows.values()
                        if w.command
                    ],
                    "settable": self.instance.settable() if principal.is_operator else [],
                }
            )
        return extended


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
        held.enter_context(hold(daemon.state_dir))
        database = sqlite_file(daemon.store_url)
        if database is not None and database.parent.is_dir():  # a missing directory is Daemon.run's to refuse
            held.enter_context(hold_database(database))
        return await daemon.run()
