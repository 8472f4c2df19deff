"""Subagent records in the daemon's database (SQLAlchemy 2, async), so they survive a restart.

:meth:`SubagentStore.load` is what start-up reads back: a subagent that was ``pending`` or ``running`` when the
daemon stopped reads ``failed`` "interrupted" (:func:`.state.on_restart`); a warm one that was ``idle`` stays idle
without a session, and its next message re-opens it with the agent's resume token
(:meth:`.manager.SubagentManager.reopen`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Integer, String, Text, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .manager import Subagent, now_ms
from .state import TERMINAL, on_restart


class _Base(DeclarativeBase):
    pass


class SubagentRow(_Base):
    __tablename__ = "agentd_subagents"

    handle: Mapped[str] = mapped_column(String(40), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str] = mapped_column(String(128), index=True)
    agent: Mapped[Any] = mapped_column(JSON)
    instruction: Mapped[str] = mapped_column(Text)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    parent: Mapped[str | None] = mapped_column(String(40), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    resume_token: Mapped[str | None] = mapped_column(Text, nullable=True)
    created: Mapped[int] = mapped_column(BigInteger)
    updated: Mapped[int] = mapped_column(BigInteger)


class SubagentStore:
    """The ``agentd_subagents`` table on ``engine``; :meth:`open` creates it."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def open(self) -> SubagentStore:
        async with self.engine.begin() as conn:
            await conn.run_sync(_Base.metadata.create_all)
        return self

    async def save(self, record: Subagent) -> None:
        async with self._sessions() as db, db.begin():
            await db.merge(
                SubagentRow(
                    handle=record.handle,
                    mode=record.mode,
                    owner=record.owner,
                    agent=record.agent,
                    instruction=record.instruction,
                    depth=record.depth,
                    parent=record.parent,
                    status=record.status,
                    attempts=record.attempts,
                    tokens=record.tokens,
                    result=record.result,
                    error=record.error,
                    resume_token=record.resume_token,
                    created=record.created,
                    updated=record.updated,
                )
            )

    async def prune(self, older_than: float) -> list[str]:
        """Delete the records that ended (:data:`.state.TERMINAL`) and were last updated more than ``older_than``
        seconds ago; returns their handles (the manager forgets them, their work dirs go: :mod:`..retention`). One
        that has not ended (pending, running, idle) is never touched. Raises what the driver raises."""
        cutoff = now_ms() - int(older_than * 1000)
        ended = (SubagentRow.status.in_(sorted(TERMINAL)), SubagentRow.updated < cutoff)
        async with self._sessions() as db, db.begin():
            handles = list((await db.execute(select(SubagentRow.handle).where(*ended))).scalars())
            await db.execute(delete(SubagentRow).where(*ended))
        return handles

    async def load(self) -> list[Subagent]:
        """Every record, with the restart rule of the module doc applied (and saved)."""
        async with self._sessions() as db:
            rows = (await db.execute(select(SubagentRow).order_by(SubagentRow.created))).scalars().all()
        records = []
        for row in rows:
            record = Subagent(
                handle=row.handle,
                mode=row.mode,
                owner=row.owner,
                agent=row.agent,  # type: ignore[arg-type]
                instruction=row.instruction,
                depth=row.depth,
                parent=row.parent,
                status=row.status,
                attempts=row.attempts,
                tokens=row.tokens,  # type: ignore[arg-type]
                result=row.result,
                error=row.error,
                created=row.created,
                updated=row.updated,
                resume_token=row.resume_token,
            )
            restarted = on_restart(record.status)
            if restarted != record.status:
                record.moved(restarted)
                record.error = "interrupted"
                await self.save(record)
            records.append(record)
        return records


__all__ = ["SubagentStore"]
