"""How the daemon writes a row by its key (:func:`upsert`, :func:`upsert_rows`: the stores' rows, the holder rows of
:mod:`.members`), and the dialects' INSERT … ON CONFLICT, imported on first use, which the membership's claims
share."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .sqlite_writes import Row, writer_of

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

UPSERT_DIALECTS = frozenset({"sqlite", "postgresql"})
"""Dialects whose INSERT takes ``ON CONFLICT … DO UPDATE``. Each one's ``insert`` is imported on its first upsert:
SQLAlchemy's PostgreSQL dialect alone costs a SQLite daemon ~65 ms of its start (issue 17, target 4)."""


def dialect_insert(dialect: str) -> Any:
    """``sqlalchemy.dialects.<dialect>.insert`` for a dialect of :data:`UPSERT_DIALECTS`, else ``None``."""
    if dialect not in UPSERT_DIALECTS:
        return None
    return importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert


async def upsert(engine: AsyncEngine, table: Table, key: Sequence[str], values: Mapping[str, Any]) -> None:
    """Write ``values`` (column name → value, the ``key`` columns and at least one other among them) as ``table``'s
    row with that key: :func:`upsert_rows` of that one row."""
    await upsert_rows(engine, [(table, key, values)])


async def upsert_rows(engine: AsyncEngine, rows: Sequence[Row]) -> None:
    """Write each of ``rows`` (table, key columns, values) in order, in one transaction: a new row, or the existing
    row updated in place — never deleted and inserted again. On SQLite and PostgreSQL that is one ``INSERT … ON
    CONFLICT (key) DO UPDATE`` a row (on a SQLite file through the engine's twin, in one hop to a worker thread:
    :mod:`.sqlite_writes`); on other databases an UPDATE of the keyed row, then an INSERT when none matched.
    Raises what the driver raises (SQLAlchemy's ``DBAPIError`` family); nothing of ``rows`` is written then."""
    writer = writer_of(engine)
    if writer is not None:
        await writer.write(rows)
        return
    async with engine.begin() as conn:
        await upsert_in(conn, rows)


async def upsert_in(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """:func:`upsert_rows` inside the caller's transaction on ``conn`` (always through the async engine)."""
    insert_of = dialect_insert(conn.dialect.name)
    for table, key, values in rows:
        if insert_of is None:
            await _update_or_insert(conn, table, key, values)
            continue
        insert = insert_of(table).values(dict(values))
        changed = {name: insert.excluded[name] for name in values if name not in key}
        await conn.execute(insert.on_conflict_do_update(index_elements=list(key), set_=changed))


async def _update_or_insert(conn: AsyncConnection, table: Table, key: Sequence[str], values: Mapping[str, Any]) -> None:
    """:func:`upsert` for a database without ``ON CONFLICT``, inside the caller's transaction."""
    keyed = table.update().where(*(table.c[name] == values[name] for name in key))
    updated = await conn.execute(keyed.values({name: value for name, value in values.items() if name not in key}))
    if updated.rowcount == 0:
        await conn.execute(table.insert().values(dict(values)))


__all__ = ["UPSERT_DIALECTS", "Row", "dialect_insert", "upsert", "upsert_in", "upsert_rows"]
