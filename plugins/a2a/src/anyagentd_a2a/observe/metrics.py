"""Prometheus metrics of one ``anyagentd a2a`` daemon: ``GET /metrics`` in the text exposition format, built with
``prometheus_client`` on a registry of the daemon's own (never the process-global one).

Who may scrape: the operator (its bearer, or the implicit loopback operator when no credential is configured,
exactly as ``POST /`` identifies it: :meth:`.front.Front.authenticate`, whose refusals — 429 for a source past the
failed-credential allowance, 401 with ``WWW-Authenticate`` for no or a bad credential, which counts against its
source — are answered as they are) or whoever presents the scrape token ``[a2a.metrics] token``. That token is the
metrics' own credential, so it is compared here, before the front is asked (a valid one is served from any source,
as valid evidence always is); a principal that is not the operator: 403.

Series (every name ``anyagentd_a2a_*``; README "Health and metrics" lists them with their labels):

- counted as requests pass (a ``.inc()`` / ``.observe()``, nothing more, on the request and event paths):
  ``requests_total{method,outcome}`` and ``request_duration_seconds{method}`` (:meth:`Metrics.record`, a sink of
  the request observation, :mod:`.requests`); ``tokens_total{direction}`` and ``context_tokens``
  (:meth:`Metrics.usage`, from each ``ContextUsage`` event of a conversation's session — subagents' and workflow
  steps' sessions are not the pool's, and are not counted);
- read at scrape time (:meth:`Metrics.refresh`, then a collector yields them), each from its owner:
  ``tasks{state}`` (the task store's grouped count), ``live_agents``, ``pool_evictions_total``,
  ``pool_idle_closes_total`` (the pool's own counts, :class:`..conversations.Conversations`),
  ``workflow_runs{status}`` (with workflows: the run store's count), ``subagents{state}`` (with subagents: the
  manager's records), ``device_sessions`` (with the device grant: the sessions' live count).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any, get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import Response

from anyagentd.engine.projections import reported_tokens

from ..front import rpc_error
from ..principals import SCRAPER, bearer_of
from ..tasks.state import label, labels
from .requests import Observed

log = logging.getLogger("anyagentd.a2a")

PREFIX = "anyagentd_a2a"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: a blocking SendMessage lasts as long as its agent's turn, so the buckets reach minutes."""
CONTEXT_BUCKETS = (1_000, 4_000, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000, 1_000_000)
"""Tokens in a context window (the largest windows are about a million)."""


def outcome_of(observed: Observed) -> str:
    """The ``outcome`` label of a request: the JSON-RPC error code it was answered, as text (``"-32601"``); else
    ``"ok"`` for a 2xx/3xx answer (a stream is one: its errors come as events), ``"http_<status>"`` for another."""
    if observed.rpc_error is not None:
        return str(observed.rpc_error)
    return "ok" if observed.status < 400 else f"http_{observed.status}"


class Metrics:
    """The metrics of one daemon, given what they read (each None when the daemon has none: its series is not
    given): ``front`` — :meth:`~..front.Front.authenticate` asks who scrapes, ``secrets`` holds the scrape token
    served now, ``methods`` are the served JSON-RPC methods (the ``method`` label); ``count_tasks()`` — tasks by
    ``TaskState`` value (:meth:`..store.PrincipalTaskStore.count_by_state`); ``pool`` — the conversations
    (:class:`..conversations.Conversations`: ``live()``, ``evictions``, ``idle_closes``); ``runs`` — the run store
    (:meth:`..workflows.store.RunStore.count_by_status`); ``sessions`` — the device sessions
    (:meth:`..auth.sessions.AuthSessions.live_count`); ``subagents`` — the subagent manager (``owned(None)``'s
    records). Nothing of them is changed."""

    def __init__(
        self,
        *,
        front: Any = None,
        count_tasks: Callable[[], Awaitable[dict[int, int]]] | None = None,
        pool: Any = None,
        runs: Any = None,
        sessions: Any = None,
        subagents: Any = None,
    ) -> None:
        self.front = front
        self.count_tasks = count_tasks
        self.pool = pool
        self.runs = runs
        self.sessions = sessions
        self.subagents = subagents
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{PREFIX}_requests",
            "JSON-RPC requests to POST /, by method and outcome (ok, or "
            "the JSON-RPC error code; the front's HTTP refusals included)",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Seconds from a POST / arriving to its answer starting (a stream's first byte), by method",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            f"{PREFIX}_tokens",
            "Tokens the agents reported using (the anyagentd/tokens extension of ContextUsage), by direction (in, out)",
            ["direction"],
            registry=self.registry,
        )
        for direction in ("in", "out"):
            self.tokens.labels(direction)
        self.context = Histogram(
            f"{PREFIX}_context_tokens",
            "Context-window tokens in use, per ContextUsage report",
            buckets=CONTEXT_BUCKETS,
            registry=self.registry,
        )
        self._snapshot: list[Any] = []
        self.registry.register(_Snapshot(self))

    # -- the per-request and per-event paths: cheap ----------------------------------------------------

    def wants(self) -> bool:
        """Every request is observed for the metrics (which of them count, :meth:`record` says)."""
        return True

    def record(self, observed: Observed) -> None:
        """Count a request the front answered (``POST /``; any other is not counted) in ``requests_total`` and
        ``request_duration_seconds`` (its time to the answer's first byte). The method label is the one the front
        read from the envelope when it is a served method, ``other`` for any other, ``none`` when the request was
        refused before its envelope was read."""
        if not observed.rpc:
            return
        method = observed.rpc_method
        served = self.front.methods if self.front is not None else ()
        shown = "none" if method is None else method if method in served else "other"
        self.requests.labels(shown, outcome_of(observed)).inc()
        self.latency.labels(shown).observe(observed.first_byte)

    def usage(self, kind: Any, extensions: dict[str, Any] | None) -> None:
        """Count one ``ContextUsage`` event (its ``kind`` and the event's ``extensions``): ``used_tokens`` into
        ``context_tokens``, the ``anyagentd/tokens`` extension's non-negative integers ``in`` / ``out`` into
        ``tokens_total``."""
        self.context.observe(kind.used_tokens)
        reported = reported_tokens(extensions)
        for direction, value in zip(("in", "out"), reported or (), strict=False):
            if value > 0:
                self.tokens.labels(direction).inc(value)

    # -- the scrape -----------------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read what is counted at scrape time into the snapshot the collector yields, each count from its owner
        (the stores' grouped counts, the pool's and the subagents' own). Raises what the database driver raises."""
        families: list[Any] = []
        if self.count_tasks is not None:
            found = {label(state): count for state, count in (await self.count_tasks()).items()}
            families.append(_by(f"{PREFIX}_tasks", "Tasks in the task store, by state", "state", labels(), found))
        if self.runs is not None:
            from ..workflows.state import RunStatus

            families.append(
                _by(
                    f"{PREFIX}_workflow_runs",
                    "Workflow runs in the run store, by status",
                    "status",
                    get_args(RunStatus),
                    await self.runs.count_by_status(),
                )
            )
        if self.sessions is not None:
            families.append(
                GaugeMetricFamily(
                    f"{PREFIX}_device_sessions",
                    "Live device sessions (signed in, not revoked, not expired)",
                    value=await self.sessions.live_count(),
                )
            )
        pool = self.pool
        if pool is not None:
            families.append(
                GaugeMetricFamily(
                    f"{PREFIX}_live_agents", "Conversations holding an open agent session", value=len(pool.live())
                )
            )
            families.append(
                CounterMetricFamily(
                    f"{PREFIX}_pool_evictions",
                    "Idle agent sessions the pool closed to make room under a2a.pool.max_live / max_rss_mb",
                    value=pool.evictions,
                )
            )
            families.append(
                CounterMetricFamily(
                    f"{PREFIX}_pool_idle_closes",
                    "Agent sessions closed after a2a.pool.idle_close seconds idle",
                    value=pool.idle_closes,
                )
            )
        if self.subagents is not None:
            from ..subagents.state import Status

            found = {}
            for record in self.subagents.owned(None):
                found[record.status] = found.get(record.status, 0) + 1
            families.append(
                _by(f"{PREFIX}_subagents", "Subagents this daemon holds, by state", "state", get_args(Status), found)
            )
        self._snapshot = families

    async def scrape(self, request: Request) -> Response:
        """``GET /metrics``: the refusal of a caller who may not scrape; 503 with one plain line when a store does
        not answer or a reader raises (logged by its type only: a driver's message may carry the store's URL);
        else the text format."""
        refused = await self._refusal(request)
        if refused is not None:
            return refused
        try:
            await self.refresh()
        except (OSError, SQLAlchemyError) as err:  # the series read from a store cannot be given: none are
            log.warning("metrics: the store does not answer: %s", type(err).__name__)
            return Response("the task store does not answer\n", status_code=503, media_type="text/plain")
        except Exception as err:  # noqa: BLE001 - a reader's own failure: one line here, none of the series
            log.warning("metrics: reading the series failed: %s", type(err).__name__)
            return Response("the metrics cannot be read now\n", status_code=503, media_type="text/plain")
        return Response(
            generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"}
        )

    async def _refusal(self, request: Request) -> Response | None:
        """None when ``request`` may scrape (the scrape token, or the operator), else the answer refusing it. Who
        was identified is left in ``request.state.principal``, as ``POST /`` leaves it (the access log's,
        :mod:`.requests`): :data:`..principals.SCRAPER` for the scrape token."""
        token = self.front.secrets.metrics  # the configuration served now (SIGHUP replaces it)
        presented = bearer_of(request.headers.get("authorization"))
        if (
            token is not None
            and presented is not None
            and hmac.compare_digest(token.get_secret_value().encode(), presented.encode())
        ):
            request.state.principal = SCRAPER
            return None
        principal = await self.front.authenticate(request)
        if isinstance(principal, Response):
            return principal
        request.state.principal = principal  # a 403 below names who was refused, as the front's does
        if not principal.is_operator:
            return rpc_error(
                None, -31403, f"{principal.id} may not read /metrics (the operator or the scrape token may)", status=403
            )
        return None


def _by(name: str, documentation: str, key: str, known: tuple[str, ...], found: dict[str, int]) -> Any:
    """A gauge family labelled ``key``, with one series per ``known`` value (0 when none) and per other value
    ``found`` has."""
    family = GaugeMetricFamily(name, documentation, labels=[key])
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
