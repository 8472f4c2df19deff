"""Retention (``[a2a.retention]``): what ended long enough ago is deleted, so the database and the state dir stop
growing with every turn.

:class:`Retention` takes the daemon's stores and runs :meth:`Retention.prune` once at start and then every
``interval`` seconds (:meth:`Retention.serve`, in the daemon's task group). Each store deletes its own rows by age
(``PrincipalTaskStore.prune``, ``ConversationTable.prune``, ``RunStore.prune``, ``AuthSessions.prune``,
``SubagentStore.prune``); here the files those rows owned go with them, and one JSON log line says what went
(``"retention pruned tasks=N conversations=N files=N runs=N sessions=N subagents=N"``, summed over the agents).
Tasks, conversations and their files are pruned per served agent (:class:`RetainedAgent`: its task table, its
conversation table, its files directory and its pool; one agent's prune never reads another's); the push configs,
one table for every agent, are pruned once a round after the tasks, against every registered agent's task table
(``store.prune_push_configs``); runs, device sessions and subagents are the daemon's. Each store is pruned on its
own: one whose prune fails is logged by name (``"retention: pruning the tasks failed: ..."``, the agent named when
there are several) and the others are still pruned. Nothing live is touched:
a task that is not terminal, a run that has not ended (nor its task), a conversation in use (an agent session open
or opening, a task running, a prompt waiting its turn), a subagent that is pending, running or idle. A conversation
whose row is pruned is forgotten from memory too (``Conversations.forget``), so the daemon's memory is bounded by
retention as its database is. The file work (the state dir's walk, the deletions) runs in a worker
thread, never on the event loop; a conversation's directory is first renamed aside (``.pruned-<digest>``), so a
message arriving meanwhile writes into a new one (:meth:`Retention._orphan_files`).

Space: on SQLite a database created by this version has ``auto_vacuum=INCREMENTAL`` (:func:`.store.engine_for`),
and a prune that deleted something runs ``PRAGMA incremental_vacuum`` and a WAL checkpoint, so the file shrinks;
an older file (``auto_vacuum`` NONE) reuses its free pages for new rows and keeps its size (a ``VACUUM`` with the
daemon stopped shrinks it). PostgreSQL reuses the space through its autovacuum.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from sqlalchemy import select

from .config import RetentionSection
from .conversations import conversation_dir
from .members import prune_holders
from .store import prune_push_configs

if TYPE_CHECKING:
    from .conversations import Conversations
    from .store import ConversationTable, PrincipalTaskStore

log = logging.getLogger("anyagentd.a2a")

ASIDE = ".pruned-"
"""The name prefix of a conversation directory set aside for deletion (``conversations/.pruned-<digest>``)."""
RELOAD_CHECK = 1.0
"""Seconds between two reads of ``interval`` while :meth:`Retention.serve` waits (a reload's new one applies then)."""


@dataclass
class RetainedAgent:
    """What retention prunes of one served agent: ``tasks`` (its ``PrincipalTaskStore``), ``table`` (its
    ``ConversationTable``), ``files_root`` (the directory its ``Conversations`` was given as ``state_dir``: its
    files are in ``files_root / "conversations"``), ``pool`` (its ``Conversations``: the conversations in use are
    kept, those pruned are forgotten from it; ``None``, as in a bench over the stores alone: none in memory) and
    ``agent``, its id (named in the log when a prune of it fails; its task table's name when empty)."""

    tasks: PrincipalTaskStore
    table: ConversationTable
    files_root: Path
    pool: Conversations | None = None
    agent: str = ""


@dataclass
class Retention:
    """The prune of one daemon. ``settings`` returns the ``[a2a.retention]`` in force (read at each round, so a
    SIGHUP's reload applies from the next one, a new interval within :data:`RELOAD_CHECK` seconds; the ages in
    seconds, 0: keep forever); ``state_dir``: where the runs' and subagents' files are; ``agents``: each served
    agent's tasks, conversations and files (:class:`RetainedAgent`, at least one; the first's engine is the
    database's); ``task_tables``: every registered agent's task table, configured now or not, which the push
    configs are kept against (a list, or an async callable read at each round such as
    ``AgentScopes.task_tables``; ``None``: the agents' own); ``runs`` (``RunStore``), ``sessions``
    (``AuthSessions``) and ``subagents`` (``SubagentStore``) when configured, else ``None``; ``subagent_manager``
    forgets the records pruned. The tasks of the runs that have not ended are read from ``runs`` at each prune and
    kept, in every agent's table."""

    settings: Callable[[], RetentionSection]
    state_dir: Path
    agents: Sequence[RetainedAgent]
    task_tables: Callable[[], Awaitable[Sequence[str]]] | Sequence[str] | None = None
    runs: Any = None
    sessions: Any = None
    subagents: Any = None
    subagent_manager: Any = None

    def __post_init__(self) -> None:
        if not self.agents:
            raise ValueError("retention needs at least one agent")

    async def serve(self) -> None:
        """Until cancelled: a prune now, then one each time ``interval`` seconds have passed since the last ended.
        The wait is slept in steps of at most :data:`RELOAD_CHECK` seconds, the interval read again at each, so a
        SIGHUP that shortens it applies within a step (an hour's wait is not slept out first). A prune that failed
        as a whole is logged (a warning) and tried again at the next round."""
        while True:
            try:
                await self.prune()
            except Exception as err:  # noqa: BLE001 - the rows stay; the next round tries again
                log.warning("retention: the prune failed: %s", err)
            ended = anyio.current_time()
            while (left := ended + self.settings().interval - anyio.current_time()) > 0:
                await anyio.sleep(min(left, RELOAD_CHECK))

    async def prune(self) -> dict[str, int]:
        """One prune of everything whose age is set; returns the counts logged (``tasks``, ``conversations`` (resume
        token rows), ``files`` (conversation file directories), ``runs``, ``sessions``, ``subagents``). Each store
        is pruned on its own: one that fails (the driver's error) is logged naming it, its counts stay 0 and the
        others are still pruned. Raises what the driver raises for the space's reclaim."""
        counts = {"tasks": 0, "conversations": 0, "files": 0, "runs": 0, "sessions": 0, "subagents": 0}
        section = self.settings()
        steps: list[tuple[str, Callable[[int], Awaitable[dict[str, int]]], int]] = []
        if section.runs and self.runs is not None:
            steps.append(("runs", self._prune_runs, section.runs))
        if section.tasks:
            keep = _Keep(self.runs)
            steps += [
                (self._named("tasks", a), partial(self._prune_tasks, a, keep), section.tasks) for a in self.agents
            ]
            steps.append(("push configs", self._prune_push_configs, section.tasks))
            for what, per_agent in (
                ("conversations", self._prune_conversations),
                ("conversation files", self._prune_files),
            ):
                steps += [(self._named(what, a), partial(per_agent, a), section.tasks) for a in self.agents]
        if section.sessions and self.sessions is not None:
            steps.append(("sessions", self._prune_sessions, section.sessions))
        if section.subagents and self.subagents is not None:
            steps.append(("subagents", self._prune_subagents, section.subagents))
        for store, step, age in steps:
            try:
                for key, n in (await step(age)).items():
                    counts[key] += n
            except Exception as err:  # noqa: BLE001 - this store's rows stay until the next round; the others go
                log.warning("retention: pruning the %s failed: %s", store, err)
        if any(counts.values()):
            await self._reclaim()
        log.info("retention pruned %s", " ".join(f"{key}={n}" for key, n in counts.items()))
        return counts

    def _named(self, what: str, agent: RetainedAgent) -> str:
        """What a step prunes, as its failure names it: ``agent``'s own named when there are several."""
        return f"{what} (agent {agent.agent or agent.tasks.table_name})" if len(self.agents) > 1 else what

    async def _prune_runs(self, age: int) -> dict[str, int]:
        """The runs ended more than ``age`` seconds ago, and their work dirs."""
        ids = await self.runs.prune(age)
        await anyio.to_thread.run_sync(_remove, [self.state_dir / "runs" / run_id for run_id in ids])
        return {"runs": len(ids)}

    async def _prune_tasks(self, agent: RetainedAgent, keep: _Keep, age: int) -> dict[str, int]:
        """``agent``'s terminal tasks older than ``age`` seconds, but those of the runs that have not ended (read
        once a round, at the first agent's step)."""
        return {"tasks": await agent.tasks.prune(age, await keep.ids())}

    async def _prune_push_configs(self, _age: int) -> dict[str, int]:
        """The push configs whose task is in no registered agent's task table, and the holder rows whose task or
        run is gone (:func:`.members.prune_holders`; no count of their own)."""
        tables = self.task_tables
        if tables is None:
            tables = [agent.tasks.table_name for agent in self.agents]
        elif callable(tables):
            tables = await tables()
        await prune_push_configs(self.agents[0].tasks.engine, list(tables))
        await prune_holders(self.agents[0].tasks.engine, list(tables))  # whose task or run is gone (.members)
        return {}

    async def _prune_conversations(self, agent: RetainedAgent, age: int) -> dict[str, int]:
        """``agent``'s resume-token rows of the conversations older than ``age`` seconds with no task left in its
        table and not in use; those conversations, and every other one in its memory that is not in use and has
        no task left, are forgotten from memory (``Conversations.forget``; a conversation with a task — one parked
        waiting for input among them — keeps what memory says of it)."""
        tasks = agent.tasks.task_table
        pool = agent.pool
        if pool is None:
            return {"conversations": len(await agent.table.prune(age, tasks))}
        gone = await agent.table.prune(age, tasks, pool.in_use())
        # and the ones in memory without a row (an agent that gives no resume token) whose tasks all went
        idle = await agent.table.without_tasks(pool.keys() - pool.in_use(), tasks)
        pool.forget(set(gone) | idle)  # checks again, with no await before it: one taken into use is kept
        return {"conversations": len(gone)}

    async def _prune_files(self, agent: RetainedAgent, age: int) -> dict[str, int]:
        """The file directories of ``agent``'s conversations pruned (and of the ones that never had a row): a step
        of its own, so a failure here does not lose the count of the rows that went (:meth:`_orphan_files`)."""
        return {"files": await self._orphan_files(agent, age)}

    async def _prune_sessions(self, age: int) -> dict[str, int]:
        """The device sessions ended more than ``age`` seconds ago."""
        return {"sessions": await self.sessions.prune(age)}

    async def _prune_subagents(self, age: int) -> dict[str, int]:
        """The subagent records ended more than ``age`` seconds ago (forgotten by the manager), and their work dirs."""
        handles = await self.subagents.prune(age)
        for handle in handles:
            if self.subagent_manager is not None:
                self.subagent_manager.forget(handle)
        await anyio.to_thread.run_sync(_remove, [self.state_dir / "subagents" / handle for handle in handles])
        return {"subagents": len(handles)}

    async def _orphan_files(self, agent: RetainedAgent, older_than: float) -> int:
        """Remove each of ``agent``'s ``conversations/<digest>/`` directories (under its ``files_root``; a
        conversation's saved file parts) not modified for
        ``older_than`` seconds whose conversation has no stored task, no resume-token row and is not live; returns
        how many went. A conversation with no resume token has no row to prune, so its files are found by their
        digest (:func:`.conversations.conversation_dir`); the owners' (owner, contextId) pairs are read once. The
        walk of the tree and the deletion run in a worker thread, the database reads on the loop."""
        root = agent.files_root / "conversations"
        old = await anyio.to_thread.run_sync(_old_dirs, root, time.time() - older_than)
        if not old:
            return 0
        tasks = agent.tasks.task_table
        rows = agent.table.table
        async with agent.tasks.engine.connect() as conn:
            pairs = set((await conn.execute(select(tasks.c.owner, tasks.c.context_id).distinct())).all())
            pairs |= set((await conn.execute(select(rows.c.owner, rows.c.context_id))).all())
        # From the live set's read to the last rename, no await: a message arriving meanwhile cannot run in between.
        # A conversation not in memory at this read saves no file before its directory is set aside (its message
        # puts it in memory before any file is written, Conversations.conversation, and cannot run before this step
        # ends), and what it saves after goes into a new directory, which the thread does not touch. One in memory
        # since the walk is in the live set (the pool drops a conversation only in _prune_conversations, a step
        # that ran before this one), so a file written after the walk is kept. Only the renames (one rename(2) each) run here; the tree's deletion runs in the thread.
        in_memory = agent.pool.keys() if agent.pool is not None else set()
        kept = {conversation_dir(root.parent, owner, context_id).name for owner, context_id in pairs | in_memory}
        aside = [moved for name in old if name not in kept and (moved := _set_aside(root / name)) is not None]
        await anyio.to_thread.run_sync(_remove, aside)
        return len(aside)

    async def _reclaim(self) -> None:
        """SQLite: hand the freed pages back to the file system (a file with ``auto_vacuum=INCREMENTAL``) and
        checkpoint the WAL so the main file is what shrinks; elsewhere nothing (PostgreSQL's autovacuum)."""
        engine = self.agents[0].tasks.engine
        if engine.dialect.name != "sqlite":
            return
        async with engine.connect() as conn:
            raw: Any = (await conn.get_raw_connection()).driver_connection
            # a script: the pragma frees one page per step, and execute() steps a statement without columns once
            await raw.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")


class _Keep:
    """The task ids of the runs that have not ended, read from ``runs`` (a ``RunStore`` or ``None``) at most once a
    round: every agent's task prune keeps them."""

    def __init__(self, runs: Any) -> None:
        self.runs = runs
        self._ids: set[str] | None = None

    async def ids(self) -> set[str]:
        if self._ids is None:  # a read that fails is tried again at the next agent's step: never kept as none
            ids: set[str] = set()
            if self.runs is not None:
                ids = {r.task_id for r in await self.runs.list(non_terminal=True) if r.task_id}
            self._ids = ids
        return self._ids


def _newest_mtime(directory: Path) -> float:
    """The latest modification time of ``directory`` and what is in it (seconds since the epoch)."""
    return max([directory.stat().st_mtime, *(p.stat().st_mtime for p in directory.rglob("*"))])


def _old_dirs(root: Path, cutoff: float) -> list[str]:
    """The names of the conversation directories under ``root`` with nothing modified since ``cutoff`` (seconds
    since the epoch); none when ``root`` is missing. Blocking (it stats every file): run it in a worker thread.
    A directory set aside by an earlier round that could not delete it all is deleted now."""
    if not root.is_dir():
        return []
    entries = [d for d in root.iterdir() if d.is_dir()]
    _remove([d for d in entries if d.name.startswith(ASIDE)])
    return [d.name for d in entries if not d.name.startswith(ASIDE) and _newest_mtime(d) < cutoff]


def _set_aside(directory: Path) -> Path | None:
    """Rename ``directory`` to ``.pruned-<name>`` beside it (atomic; a file saved into its old name afterwards makes
    a new directory); returns the new path, ``None`` when it could not be moved (gone already)."""
    moved = directory.with_name(ASIDE + directory.name)
    try:
        os.rename(directory, moved)
    except OSError:
        return None
    return moved


def _remove(paths: list[Path]) -> None:
    """Delete each directory tree that is there (a missing one or a file that cannot go is skipped: the row is the
    record, the files only its leftovers). Blocking: run it in a worker thread."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


__all__ = ["RetainedAgent", "Retention"]
