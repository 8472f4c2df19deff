"""The probes a supervisor or a load balancer polls: ``GET /healthz`` (alive) and ``GET /readyz`` (ready to serve).

Both answer without credentials (they say nothing but a status word), behind the same Host and CORS gates as
everything else, so a probe on the listen address from loopback is always let through. Bodies are JSON:

- ``/healthz``: 200 ``{"status": "ok"}`` while the process serves HTTP at all (a liveness probe: no await on
  anything else, so a stuck store or a long drain never makes a supervisor kill a daemon that is finishing work);
- ``/readyz``: 200 ``{"status": "ok"}`` when the daemon is not draining and the task store answers ``SELECT 1``
  within :data:`STORE_TIMEOUT` seconds; else 503 with ``{"status": "draining"}`` or ``{"status": "store
  unavailable"}`` (the reason a log line gives in full; the body never carries a URL or a driver's message).

``Cache-Control: no-store`` on both: a cached "ok" would hide the change a probe is for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

log = logging.getLogger("anyagentd.a2a")

STORE_TIMEOUT = 2.0
"""Seconds ``/readyz`` waits for the task store's ``SELECT 1`` before it answers 503."""
NO_STORE = {"Cache-Control": "no-store"}


async def healthz(request: Request) -> JSONResponse:
    """200 ``{"status": "ok"}``: the process serves."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


class Readiness:
    """``/readyz`` for a daemon: ``is_draining()`` says whether it drains, ``engine`` is the task store's
    SQLAlchemy ``AsyncEngine`` (pinged with ``SELECT 1``, bounded by ``timeout`` seconds)."""

    def __init__(self, engine: Any, is_draining: Callable[[], bool], *, timeout: float = STORE_TIMEOUT) -> None:
        self.engine = engine
        self.is_draining = is_draining
        self.timeout = timeout

    async def store_reachable(self) -> bool:
        """Whether the store answered ``SELECT 1`` in time (a failure is logged once per probe, without secrets)."""
        try:
            with anyio.fail_after(self.timeout):
                async with self.engine.connect() as connection:
                    await connection.execute(text("SELECT 1"))
        except (OSError, SQLAlchemyError, TimeoutError) as err:
            log.warning("readyz: the task store does not answer: %s", type(err).__name__)
            return False
        return True

    async def respond(self, request: Request) -> JSONResponse:
        """The ``/readyz`` answer (see the module docstring)."""
        if self.is_draining():
            return JSONResponse({"status": "draining"}, status_code=503, headers=NO_STORE)
        if not await self.store_reachable():
            return JSONResponse({"status": "store unavailable"}, status_code=503, headers=NO_STORE)
        return JSONResponse({"status": "ok"}, headers=NO_STORE)


def health_routes(engine: Any, is_draining: Callable[[], bool]) -> list[Route]:
    """The ``GET /healthz`` and ``GET /readyz`` routes (see the module docstring)."""
    return [Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", Readiness(engine, is_draining).respond, methods=["GET"])]  # fmt: skip
