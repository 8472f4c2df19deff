"""Prometheus metrics of one ``anyagentd a2a`` daemon: ``GET /metrics`` in the text exposition format, built with
``prometheus_client`` on a registry of the daemon's own (never the process-global one).

Who may scrape: the operator (its bearer, or the implicit loopback operator when no credential is configured,
exactly as ``POST /`` identifies it: :meth:`.front.Front._identify`) or whoever presents the scrape token
``[a2a.metrics] token``. No or a bad credential: 401 with ``WWW-Authenticate`` (a bad one counts against its source
in the front's failed-credential limiter, and a source past its allowance gets 429); a principal that is not the
operator: 403.

Series (every name ``anyagentd_a2a_*``; README "Health and metrics" lists them with their labels):

- counted as requests pass (a ``.inc()`` / ``.observe()``, nothing more, on the request and event paths):
  ``requests_total{method,outcome}`` and ``request_duration_seconds{method}`` (:meth:`Metrics.timed`);
  ``tokens_total{direction}`` and ``context_tokens`` (:meth:`Metrics.usage`, from each ``ContextUsage`` event of a
  conversation's session — subagents' and workflow steps' sessions are not the pool's, and are not counted);
- read at scrape time (:meth:`Metrics.refresh`, then a collector yields them): ``tasks{state}`` (one grouped
  count query over the task store), ``live_agents``, ``pool_evictions_total``, ``pool_idle_closes_total`` (the
  pool's own counts, :class:`..conversations.Conversations`), ``workflow_runs{status}`` (with workflows),
  ``subagents{state}`` (with subagents), ``device_sessions`` (with the device grant: live sessions).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, get_args

from anyagentd.engine.projections import TOKENS_EXTENSION
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from sqlalchemy import func, or_, select
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import Response

from ..front import rpc_error
from ..principals import Unauthenticated, bearer_of

log = logging.getLogger("anyagentd.a2a")

PREFIX = "anyagentd_a2a"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: a blocking SendMessage lasts as long as its agent's turn, so the buckets reach minutes."""
CONTEXT_BUCKETS = (1_000, 4_000, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000, 1_000_000)
"""Tokens in a context window (the largest windows are about a million)."""
ERROR_BODY_BYTES = 8192
"""A JSON answer at most this long is read for a JSON-RPC ``error`` (errors are short; a result may be large)."""
TASK_STATES = ("submitted", "working", "input_required", "auth_required", "completed", "canceled", "failed",
               "rejected")  # fmt: skip


def outcome_of(response: Response) -> str:
    """``"ok"``, or the JSON-RPC error code of ``response`` as text (``"-32601"``); a streamed answer is ``"ok"``
    (its errors come as events), as is a JSON body over :data:`ERROR_BODY_BYTES`; an answer that is neither
    JSON-RPC nor 2xx is ``"http_<status>"``."""
    body = getattr(response, "body", None)
    if isinstance(body, bytes) and len(body) <= ERROR_BODY_BYTES:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            code = parsed["error"].get("code")
            return str(code) if isinstance(code, int) else "error"
    return "ok" if response.status_code < 400 else f"http_{response.status_code}"


class Metrics:
    """The metrics of ``daemon`` (an :class:`..daemon.Daemon` that serves: its ``front``, ``task_store``,
    ``db_engine``, ``conversations``, ``instance`` and ``loaded`` are read, never changed)."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        self.registry = CollectorRegistry()
        self.requests = Counter(f"{PREFIX}_requests", "JSON-RPC requests to POST /, by method and outcome (ok, or "
                                "the JSON-RPC error code; the front's HTTP refusals included)", ["method", "outcome"],
                                registry=self.registry)  # fmt: skip
        self.latency = Histogram(f"{PREFIX}_request_duration_seconds", "Seconds from a POST / arriving to its answer "
                                 "starting (a stream's first byte), by method", ["method"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)  # fmt: skip
        self.tokens = Counter(f"{PREFIX}_tokens", "Tokens the agents reported using (the anyagentd/tokens extension "
                              "of ContextUsage), by direction (in, out)", ["direction"], registry=self.registry)
        for direction in ("in", "out"):
            self.tokens.labels(direction)
        self.context = Histogram(f"{PREFIX}_context_tokens", "Context-window tokens in use, per ContextUsage report",
                                 buckets=CONTEXT_BUCKETS, registry=self.registry)  # fmt: skip
        self._snapshot: list[Any] = []
        self.registry.register(_Snapshot(self))

    # -- the per-request and per-event paths: cheap ----------------------------------------------------

    def timed(self, handle: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``handle`` (the front's ``POST /`` endpoint) counting each request in ``requests_total`` and
        ``request_duration_seconds``. The method label is the one the front read from the envelope
        (``request.state.rpc_method``) when it is a served method, ``other`` for any other, ``none`` when the
        request was refused before its envelope was read."""
        methods = self.daemon.front.methods

        async def timed_handle(request: Request) -> Response:
            began = time.perf_counter()
            response = await handle(request)
            method = getattr(request.state, "rpc_method", None)
            label = "none" if method is None else method if method in methods else "other"
            self.requests.labels(label, outcome_of(response)).inc()
            self.latency.labels(label).observe(time.perf_counter() - began)
            return response

        return timed_handle

    def usage(self, kind: Any, extensions: dict[str, Any] | None) -> None:
        """Count one ``ContextUsage`` event (its ``kind`` and the event's ``extensions``): ``used_tokens`` into
        ``context_tokens``, the ``anyagentd/tokens`` extension's non-negative integers ``in`` / ``out`` into
        ``tokens_total``."""
        self.context.observe(kind.used_tokens)
        tokens = extensions.get(TOKENS_EXTENSION) if extensions else None
        if isinstance(tokens, dict):
            for direction in ("in", "out"):
                value = tokens.get(direction)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    self.tokens.labels(direction).inc(value)

    # -- the scrape -----------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read what is counted at scrape time into the snapshot the collector yields: one grouped count per
        store (tasks; workflow runs and device sessions when configured), the pool's and the subagents' own
        counts. Raises what the database driver raises."""
        daemon = self.daemon
        families: list[Any] = []
        store = daemon.task_store
        await store.flush()  # the states still written behind
        state = store.task_model.status["state"].as_string()
        async with daemon.db_engine.connect() as db:
            counts = dict((await db.execute(select(state, func.count()).group_by(state))).all())
            tasks = GaugeMetricFamily(f"{PREFIX}_tasks", "Tasks in the task store, by state", labels=["state"])
            found = {str(k).removeprefix("TASK_STATE_").lower(): v for k, v in counts.items() if k}
            for name in dict.fromkeys([*TASK_STATES, *found]):
                tasks.add_metric([name], found.get(name, 0))
            families.append(tasks)
            if getattr(daemon, "run_store", None) is not None:
                from ..workflows.state import RunStatus
                from ..workflows.store import RunRow

                found = dict((await db.execute(select(RunRow.status, func.count()).group_by(RunRow.status))).all())
                families.append(_by(f"{PREFIX}_workflow_runs", "Workflow runs in the run store, by status", "status",
                                    get_args(RunStatus), found))  # fmt: skip
            if daemon.instance.auth_sessions is not None:
                from ..auth.sessions import SessionRow, now_ms

                live = select(func.count()).select_from(SessionRow).where(
                    SessionRow.revoked.is_(False),
                    or_(SessionRow.expires_at.is_(None), SessionRow.expires_at > now_ms()))  # fmt: skip
                sessions = GaugeMetricFamily(f"{PREFIX}_device_sessions", "Live device sessions (signed in, not "
                                             "revoked, not expired)")  # fmt: skip
                sessions.add_metric([], (await db.execute(live)).scalar_one())
                families.append(sessions)
        pool = daemon.conversations
        families.append(GaugeMetricFamily(f"{PREFIX}_live_agents", "Conversations holding an open agent session",
                                          value=len(pool.live())))  # fmt: skip
        families.append(CounterMetricFamily(f"{PREFIX}_pool_evictions", "Idle agent sessions the pool closed to make "
                                            "room under a2a.pool.max_live / max_rss_mb", value=pool.evictions))
        families.append(CounterMetricFamily(f"{PREFIX}_pool_idle_closes", "Agent sessions closed after "
                                            "a2a.pool.idle_close seconds idle", value=pool.idle_closes))  # fmt: skip
        manager = daemon.instance.subagents
        if manager is not None:
            from ..subagents.manager import Status

            found = {}
            for record in manager.owned(None):
                found[record.status] = found.get(record.status, 0) + 1
            families.append(_by(f"{PREFIX}_subagents", "Subagents this daemon holds, by state", "state",
                                get_args(Status), found))  # fmt: skip
        self._snapshot = families

    async def scrape(self, request: Request) -> Response:
        """``GET /metrics``: the refusal of a caller who may not scrape; 503 when a store does not answer; else the
        text format."""
        refused = await self._refusal(request)
        if refused is not None:
            return refused
        try:
            await self.refresh()
        except (OSError, SQLAlchemyError) as err:  # the series read from a store cannot be given: none are
            log.warning("metrics: the store does not answer: %s", type(err).__name__)
            return Response("the task store does not answer\n", status_code=503, media_type="text/plain")
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST,
                        headers={"Cache-Control": "no-store"})  # fmt: skip

    async def _refusal(self, request: Request) -> Response | None:
        front = self.daemon.front
        authorization = request.headers.get("authorization")
        token = front.identities.loaded.secrets.metrics  # the configuration served now (SIGHUP replaces it)
        presented = bearer_of(authorization)
        if token is not None and presented is not None and hmac.compare_digest(
                token.get_secret_value().encode(), presented.encode()):  # fmt: skip
            return None
        source = front.source_of(request)
        wait = front.failed.peek(source)
        try:
            principal = await front._identify(request, authorization, source)
        except Unauthenticated as err:
            if wait > 0:
                return rpc_error(None, -31429, "too many failed credentials from this source", status=429,
                                 headers={"Retry-After": str(math.ceil(wait))})  # fmt: skip
            if err.bad_credential:
                front.failed.take(source)
            return rpc_error(None, -31401, str(err), status=401,
                             headers={"WWW-Authenticate": f'Bearer realm="{front.realm}"'})  # fmt: skip
        if not principal.is_operator:
            return rpc_error(None, -31403, f"{principal.id} may not read /metrics (the operator or the scrape "
                             "token may)", status=403)  # fmt: skip
        return None


def _by(name: str, documentation: str, label: str, known: tuple[str, ...], found: dict[str, int]) -> Any:
    """A gauge family with one series per ``known`` value (0 when none) and per other value ``found`` has."""
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value in dict.fromkeys([*known, *found]):
        family.add_metric([value], found.get(value, 0))
    return family


class _Snapshot:
    """A collector yielding what :meth:`Metrics.refresh` read last (collect is synchronous: the reads are not)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []  # nothing to check against other collectors' names at registration: these are read at scrape

    def collect(self) -> Any:
        yield from self.metrics._snapshot
