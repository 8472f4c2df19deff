"""The durable store of runs, their steps and the signals delivered to them (SQLAlchemy 2, async).

SQLite by default (the daemon's database file in its state dir, WAL journal and a busy timeout), PostgreSQL by URL
(``postgresql+asyncpg://…``). The runner commits every transition here before
it acts on it, so a daemon killed at any moment finds on restart exactly what had happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..members import RUN
from .state import RUN_TERMINAL, RunFlags, StepState

if TYPE_CHECKING:
    from ..members import Membership


class _Base(DeclarativeBase):
    pass


class RunRow(_Base):
    __tablename__ = "agentd_runs"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    workflow: Mapped[str] = mapped_column(String(64), index=True)
    principal: Mapped[str | None] = mapped_column(String(128), index=True)
    task_id: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), index=True)
    inputs: Mapped[Any] = mapped_column(JSON)
    output: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancelled: Mapped[bool] = mapped_column(Boolean, default=False)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    refused: Mapped[bool] = mapped_column(Boolean, default=False)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)
    finished: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class StepRow(_Base):
    __tablename__ = "agentd_steps"

    run_id: Mapped[str] = mapped_column(ForeignKey("agentd_runs.id", ondelete="CASCADE"), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    finished: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    wait: Mapped[Any] = mapped_column(JSON, nullable=True)
    output: Mapped[Any] = mapped_column(JSON, nullable=True)


class SignalRow(_Base):
    __tablename__ = "agentd_signals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("agentd_runs.id", ondelete="CASCADE"), index=True)
    step_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    payload: Mapped[Any] = mapped_column(JSON, nullable=True)
    sender: Mapped[str] = mapped_column(String(128))
    at: Mapped[int] = mapped_column(BigInteger)


_FINISHED = Index("agentd_runs_finished", RunRow.finished)
"""What :meth:`RunStore.prune` reads by (created by it when missing: a database older than it has none)."""


@dataclass
class RunRecord:
    """A run as stored: its fields and its steps (``{step_id: StepState}``)."""

    id: str
    workflow: str
    principal: str | None
    task_id: str | None
    status: str
    inputs: dict[str, Any]
    output: Any
    error: str | None
    flags: RunFlags
    tokens: int
    created: int
    updated: int
    finished: int | None
    steps: dict[str, StepState] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in RUN_TERMINAL


class RunMissing(LookupError):
    """A write for a run the store does not hold."""


class RunStore:
    """Runs, steps and signals behind one async engine. Use :meth:`open` (creates the tables), then the methods;
    :meth:`close` disposes the engine. Takes the daemon's engine (:func:`anyagentd_a2a.store.engine_for`: SQLite
    with WAL and a busy timeout, or PostgreSQL), or an SQLAlchemy async URL to make one."""

    def __init__(self, engine: AsyncEngine | str) -> None:
        if isinstance(engine, str):
            from ..store import engine_for

            engine = engine_for(engine)
        self.engine: AsyncEngine = engine
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._indexed = False
        self.members: Membership | None = None
        """This daemon's membership (:mod:`..members`): a run is created with this daemon as its holder, and
        :meth:`list` with ``claim`` takes the runs a dead or gone daemon held. ``None``: every run is this one's."""

    async def open(self) -> RunStore:
        async with self.engine.begin() as conn:
            await conn.run_sync(_Base.metadata.create_all)
        return self

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session, session.begin():
            yield session

    # -- writes (each one transaction, committed before the caller acts) ---------------------------------------

    async def create(self, record: RunRecord) -> None:
        async with self._tx() as tx:
            tx.add(_run_row(record))
            for step_id, state in record.steps.items():
                tx.add(_step_row(record.id, step_id, state))
            if self.members is not None:  # in the run's transaction: no run is ever without its holder
                await self.members.hold(RUN, record.id, await tx.connection())

    async def save(self, record: RunRecord, changed_steps: dict[str, StepState] | None = None) -> None:
        """Write the run's fields and the ``changed_steps`` (default: every step) in one transaction. Raises
        :class:`RunMissing` (nothing written) when the store holds no such run: a run created in another database
        (daemons sharing one Temporal namespace that do not share one store)."""
        steps = record.steps if changed_steps is None else changed_steps
        async with self._tx() as tx:
            written = await tx.execute(update(RunRow).where(RunRow.id == record.id).values(**_run_values(record)))
            if not written.rowcount:  # type: ignore[attr-defined]
                raise RunMissing(f"run {record.id} is not in this store ({self.engine.url.render_as_string()})")
            for step_id, state in steps.items():
                await tx.merge(_step_row(record.id, step_id, state))

    async def delete(self, run_id: str) -> None:
        """Remove a run that never started (its engine refused it), with its steps and signals, in one transaction:
        a refused ``workflow.run`` leaves nothing behind."""
        async with self._tx() as tx:
            await tx.execute(delete(StepRow).where(StepRow.run_id == run_id))
            await tx.execute(delete(SignalRow).where(SignalRow.run_id == run_id))
            await tx.execute(delete(RunRow).where(RunRow.id == run_id))
        if self.members is not None:
            await self.members.release(RUN, run_id)

    async def add_signal(self, run_id: str, step_id: str, name: str, payload: Any, sender: str, at: int) -> None:
        async with self._tx() as tx:
            tx.add(SignalRow(run_id=run_id, step_id=step_id, name=name, payload=payload, sender=sender, at=at))

    # -- reads ------------------------------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunRecord | None:
        async with self._sessions() as session:
            row = await session.get(RunRow, run_id)
            if row is None:
                return None
            steps = (await session.execute(select(StepRow).where(StepRow.run_id == run_id))).scalars().all()
            return _record(row, steps)

    async def list(
        self, *, principal: str | None = None, non_terminal: bool = False, claim: bool = False
    ) -> list[RunRecord]:
        """Runs, oldest first; only ``principal``'s when given; only those not ended with ``non_terminal``; with
        ``claim`` (and :attr:`members`), only those of them this daemon took, their holder dead, gone or unknown
        (:meth:`..members.Membership.claim`: another live daemon's runs are its own)."""
        claimed: set[str] | None = None
        if claim and self.members is not None:
            async with self._sessions() as session:
                query = select(RunRow.id).where(RunRow.status.not_in(sorted(RUN_TERMINAL)))
                if principal is not None:
                    query = query.where(RunRow.principal == principal)
                candidates = list((await session.execute(query)).scalars())
            claimed = await self.members.claim(RUN, candidates) if candidates else set()
            if not claimed:
                return []
        async with self._sessions() as session:
            query = select(RunRow).order_by(RunRow.created, RunRow.id)
            if principal is not None:
                query = query.where(RunRow.principal == principal)
            if non_terminal:
                query = query.where(RunRow.status.not_in(sorted(RUN_TERMINAL)))
            if claimed is not None:
                query = query.where(RunRow.id.in_(sorted(claimed)))
            rows = (await session.execute(query)).scalars().all()
            if not rows:
                return []
            ids = [r.id for r in rows]
            steps = (await session.execute(select(StepRow).where(StepRow.run_id.in_(ids)))).scalars().all()
            by_run: dict[str, list[StepRow]] = {}
            for step in steps:
                by_run.setdefault(step.run_id, []).append(step)
            return [_record(r, by_run.get(r.id, [])) for r in rows]

    async def updated_of(self, run_ids: list[str]) -> dict[str, int]:
        """When each of ``run_ids`` was last written (``updated``, epoch ms), in one query; a run not stored is
        absent. What a follower of runs another process drives polls (the Temporal engine)."""
        found: dict[str, int] = {}
        async with self._sessions() as session:
            for chunk in (run_ids[i : i + 500] for i in range(0, len(run_ids), 500)):  # SQLite's parameter limit
                rows = await session.execute(select(RunRow.id, RunRow.updated).where(RunRow.id.in_(chunk)))
                found.update({run_id: updated for run_id, updated in rows.all()})
        return found

    async def task_ids(self) -> set[str]:
        """The id of every task a stored run runs under (the daemon's restart keeps those tasks: their runs follow
        them)."""
        async with self._sessions() as session:
            rows = await session.execute(select(RunRow.task_id).where(RunRow.task_id.is_not(None)))
            return {row[0] for row in rows}

    async def count_by_status(self) -> dict[str, int]:
        """How many stored runs have each status (``RunStatus`` word → count; statuses without a run absent), in one
        grouped query. Raises what the driver raises."""
        async with self._sessions() as session:
            rows = await session.execute(select(RunRow.status, func.count()).group_by(RunRow.status))
            return {status: count for status, count in rows.all()}

    async def prune(self, older_than: float) -> list[str]:
        """Delete every run ended (:data:`.state.RUN_TERMINAL`) more than ``older_than`` seconds ago, with its
        steps and signals, in one transaction; returns the ids deleted (their work dirs go too, :mod:`..retention`).
        A run that has not ended is never touched. Reads by ``finished`` (indexed here on first use, so an older
        database gets the index too). Raises what the driver raises."""
        cutoff = int((time.time() - older_than) * 1000)
        async with self._tx() as tx:
            if not self._indexed:
                await (await tx.connection()).run_sync(lambda sync: _FINISHED.create(sync, checkfirst=True))
                self._indexed = True
            ids = list(
                (
                    await tx.execute(
                        select(RunRow.id).where(RunRow.status.in_(sorted(RUN_TERMINAL)), RunRow.finished < cutoff)
                    )
                ).scalars()
            )
            for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):  # SQLite's bound-parameter limit
                # explicit: SQLite enforces the foreign keys' ON DELETE CASCADE only with PRAGMA foreign_keys=ON
                await tx.execute(delete(StepRow).where(StepRow.run_id.in_(chunk)))
                await tx.execute(delete(SignalRow).where(SignalRow.run_id.in_(chunk)))
                await tx.execute(delete(RunRow).where(RunRow.id.in_(chunk)))
        return ids

    async def signals(self, run_id: str) -> list[dict[str, Any]]:
        async with self._sessions() as session:
            rows = (
                (await session.execute(select(SignalRow).where(SignalRow.run_id == run_id).order_by(SignalRow.id)))
                .scalars()
                .all()
            )
            return [
                {"step": r.step_id, "signal": r.name, "payload": r.payload, "from": r.sender, "at": r.at} for r in rows
            ]


def _run_values(record: RunRecord) -> dict[str, Any]:
    return {
        "workflow": record.workflow,
        "principal": record.principal,
        "task_id": record.task_id,
        "status": record.status,
        "inputs": record.inputs,
        "output": _json_safe(record.output),
        "error": record.error,
        "cancelled": record.flags.cancelled,
        "paused": record.flags.paused,
        "refused": record.flags.refused,
        "tokens": record.tokens,
        "created": record.created,
        "updated": record.updated,
        "finished": record.finished,
    }


def _run_row(record: RunRecord) -> RunRow:
    return RunRow(id=record.id, **_run_values(record))


def _step_row(run_id: str, step_id: str, state: StepState) -> StepRow:
    return StepRow(
        run_id=run_id,
        step_id=step_id,
        status=state.status,
        attempt=state.attempt,
        started=state.started,
        finished=state.finished,
        error=state.error,
        wait=state.wait,
        output=_json_safe(state.output),
    )


def _record(row: RunRow, steps: Any) -> RunRecord:
    return RunRecord(
        id=row.id,
        workflow=row.workflow,
        principal=row.principal,
        task_id=row.task_id,
        status=row.status,
        inputs=row.inputs or {},
        output=row.output,
        error=row.error,
        flags=RunFlags(cancelled=row.cancelled, paused=row.paused, refused=row.refused),
        tokens=row.tokens,
        created=row.created,
        updated=row.updated,
        finished=row.finished,
        steps={
            s.step_id: StepState(
                status=s.status,
                attempt=s.attempt,
                started=s.started,  # type: ignore[arg-type]
                finished=s.finished,
                error=s.error,
                wait=s.wait,
                output=s.output,
            )
            for s in steps
        },
    )


def _json_safe(value: Any) -> Any:
    # JSON columns take what json.dumps takes; anything else is stored as its text.
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


__all__ = ["RunMissing", "RunRecord", "RunStore"]
