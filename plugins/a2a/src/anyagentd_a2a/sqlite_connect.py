"""The aiosqlite connection every SQLite engine of the daemon opens (:func:`.store.engine_for` passes :func:`connect`
as SQLAlchemy's ``async_creator_fn``): aiosqlite's own, with a ``stop()`` that can be called twice.

Why: with aiosqlite 0.22.1 and SQLAlchemy 2.1, a connection given back while its task is being cancelled (a
daemon's shutdown, a task group cancelled mid-query) is terminated: SQLAlchemy runs aiosqlite's ``close()`` in a
shielded task and, on the cancel, ``stop()`` at once (``_terminate_force_close``). That ``stop()`` ends the worker
thread; ``close()`` then calls ``stop()`` again in its ``finally`` and awaits a future that only the ended thread
could resolve. The task never ends, and the event loop's close (``asyncio.run``'s cancel of every task) waits on
it for ever: on a loaded 2-core machine one shutdown in three hung (tests/workflows/test_runner.py). Here a second
``stop()`` returns the first one's future, which the thread resolves when it stops."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite


class _Connection(aiosqlite.Connection):
    """``aiosqlite.Connection`` whose :meth:`stop` queues the worker thread's stop once."""

    _stopping: asyncio.Future[Any] | None = None
    _stop_queued = False

    def stop(self) -> asyncio.Future[Any] | None:
        """Stop the worker thread (aiosqlite's ``stop``) the first time; later calls return the same future (or
        ``None`` when the first had no event loop), never a new one the ended thread would leave pending."""
        if not self._stop_queued:
            self._stop_queued = True
            self._stopping = super().stop()
        return self._stopping


def connect(database: str | Path, *, iter_chunk_size: int = 64, **kwargs: Any) -> aiosqlite.Connection:
    """An aiosqlite connection to ``database`` as ``aiosqlite.connect`` makes it (``kwargs`` go to
    ``sqlite3.connect``: ``timeout``, ``isolation_level``, ``check_same_thread``…), its worker thread a daemon
    thread (as SQLAlchemy sets it for its own connect). Awaited by SQLAlchemy's dialect."""

    def connector() -> sqlite3.Connection:
        return sqlite3.connect(str(database), **kwargs)

    connection = _Connection(connector, iter_chunk_size)
    connection._thread.daemon = True  # a daemon that hangs up on the file must still exit
    return connection


__all__ = ["connect"]
