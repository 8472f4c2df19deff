"""Which storage each served agent has on the one database and state dir: its task table, its conversation
(resume-token) table and the directory its conversations' files go under (issue 27).

The registry table ``anyagentd_agents`` holds one row per agent id ever served: ``id`` (primary key),
``tasks_table`` (unique), ``conversations_table``, ``files_dir`` (relative to the state dir, ``.`` for the state
dir itself) and ``created``. :meth:`AgentScopes.claim` runs at each start and is idempotent:

- An id with a row gets that row's scope back, whatever the configuration says now: changing the default or the
  order of the agents never hands one agent's tasks to another, and an agent removed from the configuration keeps
  its row and tables, which it finds again when it is added back (an id renamed is a new agent).
- The **legacy scope** — the one-agent daemon's tables ``tasks`` and ``anyagentd_conversations`` and the state dir's
  own ``conversations/`` — goes to the default agent when no row holds it yet, on a fresh database and on one a
  one-agent daemon wrote alike, so a one-agent daemon's layout never changes. Once an id holds it, it keeps it.
- Any other id gets ``anyagentd_tasks_<id>`` and ``anyagentd_conversations_<id>`` (``-`` written ``_``) and
  ``agents/<id>`` under the state dir (its files in ``agents/<id>/conversations/<digest>``).

Nothing here creates the agents' own tables: their stores do (``PrincipalTaskStore.initialize``,
``ConversationTable.initialize``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, func, inspect, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .config import AGENT_ID, RESERVED_IDS
from .store import LEGACY_CONVERSATIONS, LEGACY_TASKS

log = logging.getLogger("anyagentd.a2a")

REGISTRY = "anyagentd_agents"
"""The registry table: which tables and files directory belong to which agent id."""
LEGACY_FILES = "."
"""``files_dir`` of the legacy scope: the state dir itself (its ``conversations/``)."""
CLAIM_ATTEMPTS = 3
"""Tries of a claim that lost a race with another daemon's on the same database (its rows read again)."""

_metadata = MetaData()
registry = Table(
    REGISTRY,
    _metadata,
    Column("id", String(64), primary_key=True),
    Column("tasks_table", String(255), nullable=False, unique=True),
    Column("conversations_table", String(255), nullable=False),
    Column("files_dir", Text, nullable=False),
    Column("created", DateTime, nullable=False),
)


@dataclass(frozen=True)
class Scope:
    """One agent's storage: ``tasks_table`` (``PrincipalTaskStore(table=…)``), ``conversations_table``
    (``ConversationTable(engine, …)``) and ``files_root``, the directory given as ``Conversations(state_dir=…)``
    (its files in ``<files_root>/conversations/<digest>``)."""

    agent: str
    tasks_table: str
    conversations_table: str
    files_root: Path

    @property
    def legacy(self) -> bool:
        """Whether this is the one-agent daemon's scope (``tasks``, ``anyagentd_conversations``, the state dir)."""
        return self.tasks_table == LEGACY_TASKS


def table_suffix(agent: str) -> str:
    """``agent`` as its tables' suffix (``-`` written ``_``); raises ``ValueError`` for an id that is not
    :data:`.config.AGENT_ID` or is one of :data:`.config.RESERVED_IDS` (the configuration refuses both)."""
    if not AGENT_ID.fullmatch(agent):
        raise ValueError(f"agent id {agent!r}: lower-case letters, digits and '-', at most 32 characters")
    suffix = agent.replace("-", "_")
    if agent in RESERVED_IDS:
        raise ValueError(f"agent id {agent!r} is reserved")
    return suffix


class AgentScopes:
    """The registry of ``engine``'s agents (:data:`REGISTRY`); ``state_dir`` is the daemon's, under which each
    agent's files directory is."""

    def __init__(self, engine: AsyncEngine, state_dir: Path) -> None:
        self.engine = engine
        self.state_dir = state_dir

    async def claim(self, ids: Sequence[str], default: str) -> dict[str, Scope]:
        """The scope of each of ``ids`` (the agents served now, in that order), ``default`` among them: the ones
        with a row get it back, a new one gets a row (the legacy scope for ``default`` when no row holds it, else
        tables of its own; module docstring). Rows of agents not in ``ids`` are kept. One transaction (the registry
        created in it if missing), on SQLite and PostgreSQL; one that lost a race with another daemon's claim is
        run again. Raises ``ValueError`` (an id that is not :data:`AGENT_ID`, given twice, or ``default`` not
        among them) and what the driver raises."""
        if default not in ids:
            raise ValueError(f"the default agent {default!r} is not among {list(ids)}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"an agent id is given twice: {list(ids)}")
        suffixes = {agent: table_suffix(agent) for agent in ids}
        for attempt in range(CLAIM_ATTEMPTS):
            try:
                async with self.engine.begin() as conn:
                    return await self._claim(conn, ids, default, suffixes)
            except IntegrityError:
                if attempt == CLAIM_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _claim(
        self, conn: AsyncConnection, ids: Sequence[str], default: str, suffixes: dict[str, str]
    ) -> dict[str, Scope]:
        await conn.run_sync(lambda sync: registry.create(sync, checkfirst=True))
        rows = {row.id: row for row in (await conn.execute(select(registry))).all()}
        legacy_held = any(row.tasks_table == LEGACY_TASKS for row in rows.values())
        now = datetime.now(UTC).replace(tzinfo=None)
        scopes: dict[str, Scope] = {}
        for agent in ids:
            row = rows.get(agent)
            if row is not None:
                scopes[agent] = Scope(agent, row.tasks_table, row.conversations_table, self._root(row.files_dir))
                continue
            if agent == default and not legacy_held:
                tasks, conversations, files = LEGACY_TASKS, LEGACY_CONVERSATIONS, LEGACY_FILES
                legacy_held = True
                if await _has_rows(conn, LEGACY_TASKS):
                    # once per database, never undone by a later change of default: say it where it is seen
                    log.warning(
                        "agent %r, the default, takes the tasks and conversations stored before agents had ids; they "
                        "stay its own (docs/operating.md, moving from [agent] to [[agents]]: the agent [agent] served "
                        "keeps them when its id is its name and it is the default at this first start)",
                        agent,
                    )
            else:
                suffix = suffixes[agent]
                tasks, conversations = f"anyagentd_tasks_{suffix}", f"anyagentd_conversations_{suffix}"
                files = f"agents/{agent}"
            values = {
                "id": agent,
                "tasks_table": tasks,
                "conversations_table": conversations,
                "files_dir": files,
                "created": now,
            }
            await conn.execute(registry.insert().values(values))
            scopes[agent] = Scope(agent, tasks, conversations, self._root(files))
        return scopes

    def _root(self, files_dir: str) -> Path:
        return self.state_dir / files_dir

    async def task_tables(self) -> list[str]:
        """The task table of every registered agent, configured now or not (in the order they were registered):
        what the push configs are kept against. None before the first :meth:`claim`. Raises what the driver
        raises."""
        async with self.engine.connect() as conn:
            if not await conn.run_sync(lambda sync: inspect(sync).has_table(REGISTRY)):
                return []
            rows = await conn.execute(select(registry.c.tasks_table).order_by(registry.c.created, registry.c.id))
            return [row[0] for row in rows]


async def _has_rows(conn: AsyncConnection, table: str) -> bool:
    """Whether ``table`` exists and holds a row."""
    if not await conn.run_sync(lambda sync: inspect(sync).has_table(table)):
        return False
    probe = Table(table, MetaData(), Column("id", String(36)))
    return bool((await conn.execute(select(func.count()).select_from(select(probe.c.id).limit(1).subquery()))).scalar())


__all__ = ["REGISTRY", "AgentScopes", "Scope", "table_suffix"]
