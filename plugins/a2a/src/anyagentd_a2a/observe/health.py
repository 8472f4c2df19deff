"""The probes a supervisor or a load balancer polls: ``GET /healthz`` (alive) and ``GET /readyz`` (ready to serve).

Both answer without credentials (they say nothing but a status word), behind the same Host and CORS gates as
everything else, so a probe on the listen address from loopback is always let through. Bodies are JSON:

- ``/healthz``: 200 ``{"status": "ok"}`` while the process serves HTTP at all (a liveness probe: no await on
  anything else, so a stuck store or a long drain never makes a supervisor kill a daemon that is finishing work);
- ``/readyz``: 200 ``{"status": "ok"}`` when the daemon is not draining and the task store can serve a request
  now (:meth:`Readiness.store_ready`: a row of the task table is read within :data:`STORE_TIMEOUT` seconds and,
  on SQLite, the database's write lock is taken within :data:`LOCK_WAIT` seconds and given back at once); else
  503 with ``{"status": "draining"}`` or ``{"status": "store unavailable"}`` (the reason a log line gives in
  full; the body never carries a URL or a driver's message).

``Cache-Control: no-store`` on both: a cached "ok" would hide the change a probe is for.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..config import sqlite_file

if TYPE_CHECKING:
    from ..lifecycle import Draining

log = logging.getLogger("anyagentd.a2a")

STORE_TIMEOUT = 2.0
"""Seconds ``/readyz`` waits for the read of the task table before it answers 503."""
LOCK_WAIT = 0.5
"""Seconds ``/readyz`` waits, on SQLite, for the database's write lock (every send writes its task): a writer
holding it longer — another process, a stuck transaction — makes the daemon not ready."""
TASK_TABLE = "tasks"
"""The SDK's task table (``DatabaseTaskStore``'s default name), the one every request reads and writes."""
NO_STORE = {"Cache-Control": "no-store"}


async def healthz(request: Request) -> JSONResponse:
    """200 ``{"status": "ok"}``: the process serves."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


class Readiness:
    """``/readyz`` for a daemon: ``lifecycle.draining`` says whether it drains, ``engine`` is the task store's
    SQLAlchemy ``AsyncEngine`` and ``table`` the name of its task table; ``timeout`` bounds the read (seconds),
    ``lock_wait`` the wait for SQLite's write lock (seconds)."""

    def __init__(
        self,
        engine: Any,
        lifecycle: Draining,
        *,
        table: str = TASK_TABLE,
        timeout: float = STORE_TIMEOUT,
        lock_wait: float = LOCK_WAIT,
    ) -> None:
        self.engine = engine
        self.lifecycle = lifecycle
        self.table = table
        self.timeout = timeout
        self.lock_wait = lock_wait

    async def store_ready(self) -> bool:
        """Whether the store can serve a request now: ``SELECT id FROM <table> LIMIT 1`` answered within
        :attr:`timeout` seconds (the table is there and its file or server reads), then, on a SQLite file,
        :func:`_take_write_lock` succeeded. A failure is logged (a warning naming the cause, without secrets)."""
        try:
            with anyio.fail_after(self.timeout):
                async with self.engine.connect() as connection:
                    await connection.execute(text(f'SELECT id FROM "{self.table}" LIMIT 1'))
            path = sqlite_file(self.engine.url.render_as_string(hide_password=False))
            if path is not None:
                # not under fail_after: the thread ends by itself within lock_wait (a cancelled wait would leave it
                # running), and nothing is awaited while it holds the lock
                await anyio.to_thread.run_sync(_take_write_lock, path, self.lock_wait)
        except (OSError, SQLAlchemyError, TimeoutError, sqlite3.Error) as err:
            log.warning("readyz: the task store cannot serve: %s: %s", type(err).__name__, _reason(err))
            return False
        return True

    async def respond(self, request: Request) -> JSONResponse:
        """The ``/readyz`` answer (see the module docstring)."""
        if self.lifecycle.draining:
            return JSONResponse({"status": "draining"}, status_code=503, headers=NO_STORE)
        if not await self.store_ready():
            return JSONResponse({"status": "store unavailable"}, status_code=503, headers=NO_STORE)
        return JSONResponse({"status": "ok"}, headers=NO_STORE)


def _take_write_lock(path: Path, wait: float) -> None:
    """Take the write lock of the SQLite database at ``path`` and give it back: ``BEGIN IMMEDIATE`` then
    ``ROLLBACK`` on a connection of its own (read-write, never creating the file) whose busy timeout is ``wait``
    seconds, so the lock is held only between two statements of this thread and nothing is written. Raises
    ``sqlite3.OperationalError`` (``database is locked`` past ``wait``, or a file that cannot be opened).
    Blocking: run it in a worker thread."""
    connection = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=wait, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def _reason(err: BaseException) -> str:
    """What the log says of ``err`` besides its type: SQLite's own message (``database is locked``, ``unable to
    open database file``), else nothing (another driver's text may name a host or a user)."""
    detail = getattr(err, "orig", None) or err
    return str(detail) if isinstance(detail, sqlite3.Error) else "-"


def health_routes(engine: Any, lifecycle: Draining, *, table: str = TASK_TABLE) -> list[Route]:
    """The ``GET /healthz`` and ``GET /readyz`` routes (see the module docstring); ``lifecycle.draining`` says
    whether the daemon drains, ``table`` is the task table."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", Readiness(engine, lifecycle, table=table).respond, methods=["GET"]),
    ]
