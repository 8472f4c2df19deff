"""Row writes on the daemon's SQLite file in one hop to a worker thread, and how durable a SQLite commit is.

**One hop.** Through the async engine (aiosqlite) a write is about seven round trips to aiosqlite's thread —
check-out, cursor, execute, commit, the pool's rollback at check-in… — each a queue put there and a wake-up of the
event loop back; a mock A2A turn's two durable writes were ~35 % of its CPU (bench/README.md, issue 31: 10.4 ms of
CPU per later turn through aiosqlite, 6.35 ms in one hop). :func:`twin` gives a SQLite file's async engine a
synchronous SQLAlchemy engine on the same file; :class:`RowWriter` runs a whole transaction of upserts on it in one
call to a worker thread (:func:`anyio.to_thread.run_sync`, which a cancellation waits for: a write is done or
rolled back, never left half way). The statements are SQLAlchemy's (one ``INSERT … ON CONFLICT DO UPDATE`` per
table and key, built once), so a row is what the async engine would write. One connection, used by one thread at
a time (:meth:`RowWriter.write`): SQLite has one writer per file anyway. An in-memory database or a ``file:`` URI gets no twin (another
connection would not see the same database); other databases keep the async engine.

**Durability** (``[a2a] store_synchronous``, SQLite's ``PRAGMA synchronous`` on every connection of the daemon):
``normal`` (the default) — in WAL mode a commit is written to the WAL without an fsync; it survives the daemon's
death (kill -9 included: the WAL is in the operating system's cache), and the database is never corrupted, but the
last commits can be lost to a power cut or a kernel crash. ``full`` — an fsync per commit: those survive too. On
this project's CI disk (ext4 on virtio) a ``full`` commit took 3.4 ms p50, 8 ms p90 and a ``normal`` one 0.03 ms
(bench/README.md, issue 31): a unary turn's two durable commits at ``full`` cost more than twice the bare a2a-sdk
server's whole turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal
from weakref import WeakKeyDictionary

import anyio

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.engine import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

Synchronous = Literal["normal", "full"]
"""``[a2a] store_synchronous``: SQLite's ``PRAGMA synchronous`` for the daemon's connections (module docstring)."""

Row = tuple["Table", Sequence[str], Mapping[str, Any]]
"""One upsert: the table, its key columns, the row's values (column name → value, the key among them)."""

BUSY_TIMEOUT = 30.0
"""Seconds a connection waits for another one's write lock (``sqlite3.connect``'s ``timeout``, ``busy_timeout``)."""


def pragmas(synchronous: Synchronous) -> Any:
    """A ``connect`` event listener that sets the daemon's pragmas on every new SQLite connection: incremental
    auto-vacuum (before anything writes a new file's header: ``PRAGMA incremental_vacuum`` then frees pages, an older
    file keeps its mode, :mod:`.retention`), WAL (readers never block the writer), the busy timeout and
    ``synchronous``."""

    def set_pragmas(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        cursor.execute(f"PRAGMA synchronous={synchronous.upper()}")
        cursor.close()

    return set_pragmas


class RowWriter:
    """Upserts on a synchronous engine, one transaction per :meth:`write`, run on a worker thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._limiter: anyio.CapacityLimiter | None = None
        self._statements: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Any] = {}

    async def write(self, rows: Sequence[Row]) -> None:
        """Upsert ``rows`` in order in one transaction. Raises what SQLAlchemy raises (its ``DBAPIError``
        family); nothing of ``rows`` is written then. One write at a time: the others wait here, in the event loop,
        not in a worker thread of anyio's shared pool (40 threads), which a write waiting for SQLite's lock held by
        another process would otherwise exhaust, and with it every other use of the pool (``/readyz``'s check)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)  # made in the event loop, as anyio requires
        await anyio.to_thread.run_sync(self._write, rows, limiter=self._limiter)

    def _write(self, rows: Sequence[Row]) -> None:
        with self.engine.begin() as conn:
            for table, key, values in rows:
                conn.execute(self._upsert(table, tuple(key), tuple(values)), dict(values))

    def _upsert(self, table: Table, key: tuple[str, ...], names: tuple[str, ...]) -> Any:
        """``INSERT INTO table (names) … ON CONFLICT (key) DO UPDATE`` of the other ``names`` (a column not named
        keeps its value), the values bound at execution; built once per table, key and names (SQLAlchemy then
        reuses its compiled form)."""
        statement = self._statements.get((table.name, key, names))
        if statement is None:
            from sqlalchemy.dialects.sqlite import insert

            into = insert(table)
            changed = {name: into.excluded[name] for name in names if name not in key}
            statement = into.on_conflict_do_update(index_elements=list(key), set_=changed)
            self._statements[(table.name, key, names)] = statement
        return statement


_twins: WeakKeyDictionary[Engine, RowWriter] = WeakKeyDictionary()


def twin(engine: AsyncEngine, synchronous: Synchronous) -> None:
    """Give ``engine`` (a SQLite file's async engine) a :class:`RowWriter` on the same file, with the same pragmas,
    disposed of with it; nothing for another database, an in-memory one or a ``file:`` URI."""
    url = engine.url
    database = url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:") or database.startswith("file:") or url.query:
        return
    from sqlalchemy import create_engine, event

    sync = create_engine(
        url.set(drivername="sqlite"),
        hide_parameters=True,  # a failed write's error names no task's contents (logs, replies)
        connect_args={"timeout": BUSY_TIMEOUT, "check_same_thread": False},
        pool_size=1,
        max_overflow=0,
    )
    event.listen(sync, "connect", pragmas(synchronous))
    event.listen(engine.sync_engine, "engine_disposed", lambda _engine: sync.dispose())
    _twins[engine.sync_engine] = RowWriter(sync)


def writer_of(engine: AsyncEngine) -> RowWriter | None:
    """``engine``'s :class:`RowWriter` (:func:`twin`), or ``None``."""
    return _twins.get(engine.sync_engine)


__all__ = ["BUSY_TIMEOUT", "Row", "RowWriter", "Synchronous", "pragmas", "twin", "writer_of"]
