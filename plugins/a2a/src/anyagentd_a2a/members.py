"""Several daemons on one database (issue 29): each running daemon is a *member* with a lease, and every open task
and workflow run has a *holder*, the member serving or driving it; a member's work is taken over only once its
lease has run out, so one daemon's start never fails the tasks another serves.

Two tables, made if missing (SQLAlchemy Core: SQLite and PostgreSQL alike):

- ``anyagentd_members`` — one row per running daemon: ``instance`` (a new ULID each start), ``url`` (its public
  URL, once bound), ``home`` (host and state dir: a daemon restarted in the same state dir knows its predecessor
  died, the state dir being held by one daemon at a time, :mod:`.statedir`), ``started`` and ``last_seen`` (UTC;
  renewed every :func:`heartbeat` seconds). A row whose ``last_seen`` is older than the lease is a dead member.
- ``anyagentd_holders`` — ``(kind, item) → instance``: ``kind`` is ``task`` (a task id; ids are UUIDs, unique
  over every agent's table) or ``run`` (a workflow run id). A task's row is written before the task's first row
  (:meth:`.store.PrincipalTaskStore._save_row`), a run's with the run (:meth:`.workflows.store.RunStore.create`).
  A NULL instance, or no row, is work written before holders existed.

The rules are pure (:func:`dead_members`, :func:`may_recover`, :func:`heartbeat`); :class:`Membership` does the
I/O. A claim is a compare-and-set — ``UPDATE … SET instance = me WHERE instance = <the holder seen>`` (or ``IS
NULL``; an ``INSERT … ON CONFLICT DO NOTHING`` for no row) —, so of two survivors only one takes an item. The
holders are read before the members (:meth:`Membership.claim`): a holder that is a new member is then always
among the members read, never mistaken for an absent one.

Clocks: ``last_seen`` is the writer's UTC clock and the reader's decides; the daemons' clocks must agree to well
within a lease.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Column, DateTime, Index, MetaData, String, Table, Text, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from ulid import ULID

from .upsert import dialect_insert, upsert_in, upsert_rows

log = logging.getLogger("anyagentd.a2a")

LEASE = 15.0
"""Seconds a member's lease lasts (env :data:`LEASE_ENV`): a daemon silent that long is dead, and its work is taken
over by the first live member to see it."""
LEASE_ENV = "ANYAGENTD_A2A_MEMBER_LEASE"
"""The environment variable that overrides :data:`LEASE` (seconds; tests shorten it)."""

TASK, RUN = "task", "run"
"""The kinds of work a holder row names."""

CLAIM_BATCH = 500
"""Items one read of the holders names (bound parameters: SQLite takes at most 32,766 in a statement)."""

_metadata = MetaData()
members_table = Table(
    "anyagentd_members",
    _metadata,
    Column("instance", String(26), primary_key=True),
    Column("url", Text, nullable=True),
    Column("home", Text, nullable=False),
    Column("started", DateTime, nullable=False),
    Column("last_seen", DateTime, nullable=False),
)
holders_table = Table(
    "anyagentd_holders",
    _metadata,
    Column("kind", String(8), primary_key=True),
    Column("item", String(255), primary_key=True),
    Column("instance", String(26), nullable=True),
    Index("anyagentd_holders_instance", "instance"),
)


@dataclass(frozen=True)
class Member:
    """A row of ``anyagentd_members``."""

    instance: str
    url: str | None
    home: str
    started: datetime
    last_seen: datetime


# -- the rules (no I/O) -----------------------------------------------------------------------------------------


def heartbeat(lease: float) -> float:
    """Seconds between two renewals of a lease of ``lease`` seconds (a third of it: two renewals may be missed)."""
    return lease / 3


def dead_members(
    rows: Iterable[Member], now: datetime, lease: float, *, me: str, home: str, exclusive: bool = False
) -> list[Member]:
    """The members of ``rows`` that are dead at ``now`` (naive UTC, as stored), for member ``me`` living in
    ``home``: every other member whose ``last_seen`` is more than ``lease`` seconds before ``now``, or whose home
    is ``home`` (this daemon holds that state dir now: its predecessor there died), or — ``exclusive``, a database
    one daemon holds at a time (a SQLite file, :func:`.statedir.hold_database`) — every other member. ``me`` is
    never dead."""
    cutoff = now - timedelta(seconds=lease)
    return [row for row in rows if row.instance != me and (exclusive or row.home == home or row.last_seen < cutoff)]


def may_recover(holder: str | None, live: Set[str]) -> bool:
    """Whether a member may take an item held by ``holder`` (an instance id; ``None``: no holder recorded, written
    before holders existed) when ``live`` are the live members' ids: the holder is unknown, or dead or gone (not
    live). Ids are new at each start, so an item is never this daemon's from an earlier start."""
    return holder is None or holder not in live


# -- the I/O ----------------------------------------------------------------------------------------------------

_ABSENT = object()
"""No holder row for an item (what :meth:`Membership.claim` inserts)."""


def home_of(state_dir: Path) -> str:
    """This daemon's home: ``<host>:<state dir, resolved>``."""
    return f"{socket.gethostname()}:{state_dir.resolve()}"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Membership:
    """This daemon's membership on ``engine``: a new ``instance`` id, its ``home`` (:func:`home_of`), its
    ``lease`` (seconds) and whether the database is ``exclusive`` (SQLite: one daemon at a time). :meth:`join` at
    start, :meth:`renew` every :attr:`heartbeat` seconds, :meth:`leave` at a clean stop. :attr:`claimed` records
    every item this process took: ``(kind, item) → the holder it was taken from`` (``None``: none recorded)."""

    def __init__(self, engine: AsyncEngine, *, home: str, lease: float = LEASE, exclusive: bool = False) -> None:
        self.engine = engine
        self.instance = str(ULID())
        self.home = home
        self.lease = lease
        self.exclusive = exclusive
        self.url: str | None = None
        self.claimed: dict[tuple[str, str], str | None] = {}

    @property
    def heartbeat(self) -> float:
        """Seconds between renewals (:func:`heartbeat`)."""
        return heartbeat(self.lease)

    async def join(self, url: str | None = None) -> None:
        """Create both tables if missing and write this member's row (``url``: its public URL, when known).
        Raises what the driver raises."""
        async with self.engine.begin() as conn:
            await conn.run_sync(lambda sync: _metadata.create_all(sync, checkfirst=True))
            now = _now()
            await conn.execute(
                members_table.insert().values(
                    instance=self.instance, url=url, home=self.home, started=now, last_seen=now
                )
            )
        self.url = url
        log.info("member %s joined the database (lease %gs)", self.instance, self.lease)

    async def announce(self, url: str) -> None:
        """Record ``url`` as this member's public URL (known once the listener is bound)."""
        self.url = url
        async with self.engine.begin() as conn:
            await conn.execute(update(members_table).where(members_table.c.instance == self.instance).values(url=url))
        log.info("member %s serves %s", self.instance, url)

    async def renew(self) -> None:
        """Renew the lease (``last_seen`` now). A row another member removed (it found this one dead: a stall
        longer than the lease) is written again, with an error logged: that member took this one's open work."""
        async with self.engine.begin() as conn:
            now = _now()
            renewed = await conn.execute(
                update(members_table).where(members_table.c.instance == self.instance).values(last_seen=now)
            )
            if renewed.rowcount == 0:
                log.error(
                    "member %s: its lease had run out and another member took its work over; joining again",
                    self.instance,
                )
                await conn.execute(
                    members_table.insert().values(
                        instance=self.instance, url=self.url, home=self.home, started=now, last_seen=now
                    )
                )

    async def leave(self) -> None:
        """Remove this member's row (a clean stop; what it still holds — drained runs — is recovered by the next
        member's :meth:`claim`, its holder being absent)."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(members_table).where(members_table.c.instance == self.instance))

    async def members(self) -> list[Member]:
        """Every member row."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(members_table))).all()
        return [Member(r.instance, r.url, r.home, r.started, r.last_seen) for r in rows]

    async def dead(self) -> list[Member]:
        """The dead members now (:func:`dead_members`)."""
        rows = await self.members()
        return dead_members(rows, _now(), self.lease, me=self.instance, home=self.home, exclusive=self.exclusive)

    async def holder_of(self, kind: str, item: str) -> tuple[str, str | None] | None:
        """``item``'s holder: its instance id and, for a member still in the table, its public URL (``None``
        without one); ``None`` when no row names a holder."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(holders_table.c.instance, members_table.c.url)
                    .select_from(
                        holders_table.outerjoin(members_table, members_table.c.instance == holders_table.c.instance)
                    )
                    .where(holders_table.c.kind == kind, holders_table.c.item == item)
                )
            ).first()
        return None if row is None or row[0] is None else (row[0], row[1])

    async def release(self, kind: str, item: str) -> None:
        """Forget ``item``'s holder row (an item that never came to be: a run its engine refused)."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(holders_table).where(holders_table.c.kind == kind, holders_table.c.item == item))

    async def gone(self) -> list[Member]:
        """The members that left (a clean stop deletes its row) while still holding tasks: every instance named by
        a task's holder row that has no member row, as a :class:`Member` with no URL, seen at the epoch."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(holders_table.c.instance)
                .where(
                    holders_table.c.kind == TASK,
                    holders_table.c.instance.is_not(None),
                    holders_table.c.instance.not_in(select(members_table.c.instance)),
                )
                .distinct()
            )
            instances = sorted(r[0] for r in rows)
        epoch = datetime.fromtimestamp(0, UTC)
        return [Member(instance, None, "", epoch, epoch) for instance in instances]

    async def forget(self, member: Member) -> bool:
        """Delete dead ``member``'s row unless it renewed its lease since it was read; whether it was deleted."""
        async with self.engine.begin() as conn:
            gone = await conn.execute(
                delete(members_table).where(
                    members_table.c.instance == member.instance, members_table.c.last_seen == member.last_seen
                )
            )
        return bool(gone.rowcount)

    def holder_row(self, kind: str, item: str) -> tuple[Table, tuple[str, str], dict[str, str]]:
        """The holder row recording this member as ``item``'s holder, for :func:`.store.upsert_rows` (a store
        writes it in the same transaction as the item's first row)."""
        return holders_table, ("kind", "item"), {"kind": kind, "item": item, "instance": self.instance}

    async def hold(self, kind: str, item: str, conn: AsyncConnection | None = None) -> None:
        """Record this member as ``item``'s holder (a new row, or the row taken over), in ``conn``'s transaction
        when given, else in one of its own."""
        if conn is None:
            await upsert_rows(self.engine, [self.holder_row(kind, item)])
            return

        await upsert_in(conn, [self.holder_row(kind, item)])

    async def held_by(self, kind: str, instance: str) -> list[str]:
        """Every ``kind`` item ``instance`` holds."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(holders_table.c.item).where(holders_table.c.kind == kind, holders_table.c.instance == instance)
            )
            return [r[0] for r in rows]

    async def claim(self, kind: str, items: Sequence[str]) -> set[str]:
        """Take those of ``items`` (open ``kind`` work) this member may recover (:func:`may_recover`: no holder, or
        a dead or gone one); returns the ids taken. The holders are read first, then the members; each take is a
        compare-and-set on the holder read, so an item another member took meanwhile is left to it."""
        seen: dict[str, Any] = {}
        async with self.engine.connect() as conn:
            for start in range(0, len(items), CLAIM_BATCH):
                batch = list(items[start : start + CLAIM_BATCH])
                rows = await conn.execute(
                    select(holders_table.c.item, holders_table.c.instance).where(
                        holders_table.c.kind == kind, holders_table.c.item.in_(batch)
                    )
                )
                seen.update({r[0]: r[1] for r in rows})
        rows_now = await self.members()  # after the holders: a holder that joined since is among these
        dead = dead_members(rows_now, _now(), self.lease, me=self.instance, home=self.home, exclusive=self.exclusive)
        live = {m.instance for m in rows_now} - {m.instance for m in dead}
        wanted = {item: seen.get(item, _ABSENT) for item in items}
        return await self._take(kind, {item: h for item, h in wanted.items() if h is _ABSENT or may_recover(h, live)})

    async def take_over(self, kind: str, items: Sequence[str], dead: str) -> set[str]:
        """Take those of ``items`` that dead member ``dead`` still holds; returns the ids taken."""
        return await self._take(kind, dict.fromkeys(items, dead))

    async def _take(self, kind: str, expected: dict[str, Any]) -> set[str]:
        """Compare-and-set each item's holder from the one expected (``None``: NULL, :data:`_ABSENT`: no row) to
        this member, each in its own transaction."""
        taken: set[str] = set()
        for item, holder in expected.items():
            async with self.engine.begin() as conn:
                if holder is _ABSENT:
                    won = await _insert_absent(conn, kind, item, self.instance)
                else:
                    current = (
                        holders_table.c.instance.is_(None) if holder is None else holders_table.c.instance == holder
                    )
                    won = bool(
                        (
                            await conn.execute(_holder_row(kind, item).where(current).values(instance=self.instance))
                        ).rowcount
                    )
            if won:
                taken.add(item)
                self.claimed[(kind, item)] = None if holder is _ABSENT else holder
        return taken

    def claimed_items(self, kind: str) -> set[str]:
        """Every ``kind`` item this process claimed."""
        return {item for (k, item) in self.claimed if k == kind}


async def prune_holders(engine: AsyncEngine, task_tables: Sequence[str]) -> int:
    """Delete the holder rows whose work is gone: a task in none of ``task_tables`` (every agent's task table,
    :meth:`.scopes.AgentScopes.task_tables`), a run not in the runs table; returns how many went. A kind whose
    tables do not exist (or ``task_tables`` empty) is left alone: nothing says which items are stored. One
    transaction. Raises what the driver raises."""
    runs_table = "agentd_runs"

    def present(sync: Any) -> tuple[bool, list[str], bool]:
        from sqlalchemy import inspect

        found = inspect(sync)
        return (
            found.has_table(holders_table.name),
            [t for t in task_tables if found.has_table(t)],
            found.has_table(runs_table),
        )

    async with engine.begin() as conn:
        has_holders, tables, has_runs = await conn.run_sync(present)
        if not has_holders:
            return 0
        gone = 0
        if tables:
            stored = [select(Table(name, MetaData(), Column("id", String(36))).c.id) for name in tables]
            orphan = [holders_table.c.item.not_in(ids) for ids in stored]
            gone += (await conn.execute(delete(holders_table).where(holders_table.c.kind == TASK, *orphan))).rowcount
        if has_runs:
            runs = select(Table(runs_table, MetaData(), Column("id", String(128))).c.id)
            orphan_run = holders_table.c.item.not_in(runs)
            gone += (await conn.execute(delete(holders_table).where(holders_table.c.kind == RUN, orphan_run))).rowcount
        return gone


def _holder_row(kind: str, item: str) -> Any:
    return update(holders_table).where(holders_table.c.kind == kind, holders_table.c.item == item)


async def _insert_absent(conn: AsyncConnection, kind: str, item: str, instance: str) -> bool:
    """Insert ``item``'s holder row unless one exists (another member's claim won); whether it was inserted."""

    insert = dialect_insert(conn.dialect.name)
    values = {"kind": kind, "item": item, "instance": instance}
    if insert is not None:
        done = await conn.execute(insert(holders_table).values(values).on_conflict_do_nothing())
        return bool(done.rowcount)
    exists = await conn.execute(
        select(holders_table.c.item).where(holders_table.c.kind == kind, holders_table.c.item == item)
    )
    if exists.first() is not None:
        return False
    await conn.execute(holders_table.insert().values(values))
    return True


__all__ = [
    "LEASE",
    "LEASE_ENV",
    "RUN",
    "TASK",
    "Member",
    "Membership",
    "dead_members",
    "heartbeat",
    "holders_table",
    "home_of",
    "may_recover",
    "members_table",
    "prune_holders",
]
