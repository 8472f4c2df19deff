"""Subagents: agent sessions one requester (a conversation, a workflow run, another subagent) delegates to.

A subagent has a ``handle`` (``sa-<ulid>``), a ``mode``, an ``owner`` (the principal of whoever asked), a depth (0
for one asked by a conversation or run; a subagent's own subagents are one deeper), an ``instruction``, attempts,
tokens, a ``result`` and an ``error``. Modes (``docs/commands.md``):

- ``sync``: the requester waits for the first result (:meth:`SubagentManager.spawn` with ``wait=True``);
- ``async``: the requester gets the handle and asks later (:meth:`SubagentManager.result`);
- ``detached``: runs on, nobody waits;
- ``warm``: stays alive after its first result and takes more messages (:meth:`SubagentManager.send`).

A record's status (``pending``, ``running``, ``idle``, and the terminal ``completed``, ``failed``, ``cancelled``)
moves only as :mod:`.state` allows: every write goes through :meth:`Subagent.moved`, and what counts against a
limit, what takes a message and what a warm subagent's turn leaves are that module's rules, not this one's.

Limits (:class:`SubagentLimits`) refuse with :class:`SubagentRefused` before anything starts: which agents may be
spawned, how many may run at once per owner, how deep, and how long one turn may take. Records are kept in the
daemon's database (:mod:`.store`); after a restart a subagent that was running reads ``failed`` "interrupted",
and a warm one is re-opened with its agent's resume token on its next message.

A subagent's agent is a catalog agent (opened on the runtime; with :attr:`SubagentManager.tools` set its session
gets the subagent MCP server one level deeper, so depth limits apply) or a configured child instance
(:mod:`.instances`: another daemon over A2A, whose reply is the subagent's result, or, for a child that reports,
its ``_instance.result``: :meth:`SubagentManager.child_result`). Either way a turn ends once, by what comes first
(:meth:`SubagentManager._end_turn`). Each record keeps its newest events as one stream (:mod:`.streams`): a local
subagent's from its session, a child's from its ``_instance.emit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
from ulid import ULID

from anyagentd.errors import AnyagentError
from anyagentd.model import kind_tag

from .callers import Caller
from .errors import SubagentNotFound, SubagentRefused
from .instances import ChildFailed, ChildInstance
from .state import REPORTED, Status, after_turn, counts_against_limit, ended, move, takes_message
from .streams import STREAM, EventMirror, keep, mirrored, running_tool

log = logging.getLogger("anyagentd.a2a.subagents")

Mode = Literal["sync", "async", "detached", "warm"]
MODES: tuple[str, ...] = get_args(Mode)
CHILD_CANCEL_TIMEOUT = 30.0
"""Seconds cancelling a context's open tasks on a child instance may take (``ListTasks`` + ``CancelTask``)."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class SubagentLimits:
    """``agents``: patterns of agent names that may be spawned (``["*"]`` any); ``per_owner``: subagents running
    at once per owner; ``depth``: how deep subagents may nest (1: a conversation's subagents may not spawn
    their own); ``timeout``: seconds one turn may take."""

    agents: tuple[str, ...] = ("*",)
    per_owner: int = 4
    depth: int = 1
    timeout: float = 600.0

    def allows(self, agent: str) -> bool:
        return any(fnmatchcase(agent, pattern) for pattern in self.agents)


@dataclass
class Subagent:
    """One subagent's record (``subagent.get``); ``session`` is its live engine session, if any."""

    handle: str
    mode: Mode
    owner: str
    agent: Any
    instruction: str
    depth: int = 0
    parent: str | None = None
    status: Status = "pending"
    attempts: int = 0
    tokens: int = 0
    result: Any = None
    error: str | None = None
    created: int = field(default_factory=now_ms)
    updated: int = field(default_factory=now_ms)
    resume_token: str | None = None
    turn_started: int | None = None  # epoch ms the running turn started (status.activity), None when none runs
    session: Any = field(default=None, repr=False)
    done: anyio.Event = field(default_factory=anyio.Event, repr=False)
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)  # {stream, event}, newest last (.streams)
    mirror: EventMirror = field(default_factory=EventMirror, repr=False)

    def moved(self, status: Status) -> None:
        """Set :attr:`status` to ``status`` when :func:`.state.move` allows the move; else
        :class:`.state.MoveRefused` naming both, the record unchanged."""
        self.status = move(self.status, status)

    def to_json(self) -> dict[str, Any]:
        """The record as ``subagent.get`` shows it (``$defs/ops/subagent.get``): ``requested_by`` is the
        requesting subagent's handle or the owner, ``node`` the nesting depth."""
        return {
            "handle": self.handle,
            "mode": self.mode,
            "status": self.status,
            "attempt": self.attempts,
            "tokens": self.tokens,
            "instruction": self.instruction,
            "result": self.result,
            "error": self.error,
            "requested_by": self.parent or self.owner,
            "created": self.created,
            "updated": self.updated,
            "node": self.depth,
        }

    def status_json(self) -> dict[str, Any]:
        """``subagent.status``: ``{handle, status, mode, result?, error?}``."""
        out: dict[str, Any] = {"handle": self.handle, "status": self.status, "mode": self.mode}
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        return out


Saver = Callable[[Subagent], Awaitable[None]]


class SubagentManager:
    """Spawns and drives subagents on a :class:`~anyagentd.runtime.Runtime`.

    Takes ``runtime``, ``limits``, ``work_root`` (each subagent works in ``work_root/<handle>`` unless given a
    ``dir``), ``save`` (persists a record after each change; the store's :meth:`~.store.SubagentStore.save`) and
    ``events_kept`` (the newest events of each subagent kept for its owner), ``instances`` (child instances by
    agent name) and ``parent_url`` (this daemon's URL, told to children). Call :meth:`serve` in a task group.
    :attr:`tools` is the :class:`~.mcp_server.SubagentMcpServer` offered to subagent sessions (it sets itself).
    """

    def __init__(
        self,
        runtime: Any,
        limits: SubagentLimits,
        *,
        work_root: Path,
        save: Saver | None = None,
        events_kept: int = 200,
        instances: dict[str, ChildInstance] | None = None,
        parent_url: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.limits = limits
        self.work_root = Path(work_root)
        self.save = save
        self.events_kept = events_kept
        self.instances = dict(instances or {})
        self.parent_url = parent_url
        self.tools: Any = None
        self._all: dict[str, Subagent] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            await anyio.sleep_forever()

    def adopt(self, records: list[Subagent]) -> None:
        """Records loaded at start-up (already marked interrupted where they were running)."""
        for record in records:
            if ended(record.status):
                record.done.set()
            self._all[record.handle] = record

    def forget(self, handle: str) -> None:
        """Drop an ended record whose row retention deleted (:mod:`..retention`); one still live is kept."""
        record = self._all.get(handle)
        if record is not None and ended(record.status):
            del self._all[handle]

    # ------------------------------------------------------------------------------------------ requests

    async def spawn(
        self,
        owner: str,
        agent: Any,
        instruction: str,
        mode: str = "sync",
        *,
        depth: int = 0,
        parent: str | None = None,
        dir: Path | None = None,
    ) -> Subagent:
        """Start a subagent; with mode ``sync`` or ``warm`` wait for its first result. Raises :class:`SubagentRefused` (bad
        mode, an agent not allowed, too deep, too many running for ``owner``)."""
        if mode not in MODES:
            raise SubagentRefused(f"mode must be one of {', '.join(MODES)}")
        name = (
            agent
            if isinstance(agent, str)
            else (agent.get("acp", {}).get("name") if isinstance(agent, dict) else str(agent))
        )
        if not name or not self.limits.allows(name):
            raise SubagentRefused(f"agent {name!r} may not be spawned here")
        if depth >= self.limits.depth:
            raise SubagentRefused(f"subagents may nest {self.limits.depth} deep at most")
        running = sum(1 for s in self._all.values() if s.owner == owner and counts_against_limit(s.status))
        if running >= self.limits.per_owner:
            raise SubagentRefused(f"{owner} already has {running} subagents running (limit {self.limits.per_owner})")
        if not instruction.strip():
            raise SubagentRefused("an instruction is required")
        record = Subagent(
            handle=f"sa-{ULID()}",
            mode=mode,
            owner=owner,
            agent=agent,  # type: ignore[arg-type]
            instruction=instruction,
            depth=depth,
            parent=parent,
        )
        self._all[record.handle] = record
        await self._save(record)
        assert self._tg is not None, "start SubagentManager.serve first"
        self._tg.start_soon(self._first_turn, record, dir)
        if mode in ("sync", "warm"):
            await record.done.wait()
        return record

    def get(self, handle: str, owner: str | None) -> Subagent:
        """The subagent ``handle`` if ``owner`` owns it (``None``: the operator, any). Raises
        :class:`SubagentNotFound`."""
        record = self._all.get(handle)
        if record is None or (owner is not None and record.owner != owner):
            raise SubagentNotFound(handle)
        return record

    def owned(self, owner: str | None) -> list[Subagent]:
        return [s for s in self._all.values() if owner is None or s.owner == owner]

    async def result(
        self, handle: str, owner: str | None, *, wait: bool = False, timeout: float | None = None
    ) -> Subagent:
        """The subagent's record; with ``wait``, after its current turn ends (bounded by ``timeout`` s)."""
        record = self.get(handle, owner)
        if wait:
            with anyio.move_on_after(timeout if timeout is not None else self.limits.timeout):
                await record.done.wait()
        return record

    async def send(self, handle: str, owner: str | None, message: str, *, wait: bool = True) -> Subagent:
        """Another message to a warm subagent; waits for its answer unless ``wait`` is false. Raises
        :class:`SubagentRefused` for a subagent that is not warm, not idle, or ended."""
        record = self.get(handle, owner)
        if record.mode != "warm":
            raise SubagentRefused(f"subagent {handle} is {record.mode}; only a warm subagent takes messages")
        if not takes_message(record.status):
            raise SubagentRefused(f"subagent {handle} is {record.status}; it takes a message when idle")
        record.done = anyio.Event()
        record.moved("running")
        await self._save(record)
        assert self._tg is not None
        self._tg.start_soon(self._turn, record, message)
        if wait:
            await record.done.wait()
        return record

    async def kill(self, handle: str, owner: str | None, reason: str | None = None) -> Subagent:
        """Cancel the subagent: its turn is cancelled, its session closed (the agent process gone), and a child
        instance's open tasks of its context cancelled on the child whatever the record's status (a turn that
        timed out or failed may have left one). A subagent that had not ended reads ``cancelled`` with ``error =
        reason`` (plus "; cancel on the child failed: …" when that cancel failed); one that had ended keeps its
        status and error. A failed cancel on the child also costs one log line."""
        record = self.get(handle, owner)
        scope = self._scopes.get(handle)
        if scope is not None:
            scope.cancel()
        session, record.session = record.session, None
        if session is not None:
            with anyio.CancelScope(shield=True):
                await session.close()
        child = self._child(record)
        failed = None
        if child is not None:
            with anyio.CancelScope(shield=True):
                failed = await self._cancel_on_child(record, child)
        if not ended(record.status):
            record.moved("cancelled")
            record.error = reason or "killed"
            if failed is not None:
                record.error += f"; cancel on the child failed: {failed}"
        await self._save(record)  # committed before anyone waiting is told
        record.done.set()
        return record

    async def _cancel_on_child(self, record: Subagent, child: ChildInstance) -> str | None:
        """Cancel the open tasks of ``record``'s context on ``child`` (best effort, bounded by
        :data:`CHILD_CANCEL_TIMEOUT`); returns ``None``, or what went wrong after logging it in one line (the
        child's name and the handle, never its credential)."""
        failed = f"no answer from the child instance {child.name!r} in {CHILD_CANCEL_TIMEOUT:g} s"
        with anyio.move_on_after(CHILD_CANCEL_TIMEOUT):
            try:
                await child.cancel(record.handle)
                return None
            except ChildFailed as err:
                failed = str(err)
        log.warning("subagent %s: its tasks on the child were not cancelled: %s", record.handle, failed)
        return failed

    async def child_result(self, handle: str, status: str | None, output: Any) -> Subagent:
        """A child instance's result (``_instance.result``): it ends the handle's running turn as the child's
        ``status`` (``completed`` by default, ``failed``, ``cancelled``) with ``output`` as the result (completed)
        or the error (else); the record is committed before the waiter (a ``sync`` spawn) is told, and a reply
        that arrives later changes nothing. Raises :class:`SubagentNotFound` and :class:`SubagentRefused` (not a
        child instance, another status, or no turn of it running: already ended by its reply, an earlier report,
        a kill or a timeout)."""
        record = self.get(handle, None)
        if self._child(record) is None:
            raise SubagentRefused(f"subagent {handle} is not a child instance")
        status = status or "completed"
        if status not in REPORTED:
            raise SubagentRefused(f"status must be one of {', '.join(REPORTED)}")
        said = f": {str(output)[:1000]}" if output not in (None, "") else ""
        if not await self._end_turn(record, status, output, f"the child instance reported {status}{said}"):
            raise SubagentRefused(f"subagent {handle} is {record.status}: no turn of it waits for a result")
        return record

    def child_event(self, handle: str, stream: str, event: dict[str, Any]) -> None:
        """A child instance's stream event (``_instance.emit``), kept with the handle's events like a local
        subagent's own, cut the same way (:func:`.streams.mirrored`). Raises :class:`SubagentNotFound`."""
        keep(self.get(handle, None).events, stream, mirrored(event), self.events_kept)

    async def close(self) -> None:
        """Close every live subagent session (drain); records stay as they are."""
        async with anyio.create_task_group() as tg:
            for record in self._all.values():
                if record.session is not None:
                    tg.start_soon(record.session.close)

    # ------------------------------------------------------------------------------------------ driving

    async def _save(self, record: Subagent) -> None:
        record.updated = now_ms()
        if self.save is not None:
            await self.save(record)

    def _child(self, record: Subagent) -> ChildInstance | None:
        return self.instances.get(record.agent) if isinstance(record.agent, str) else None

    def activity(self, owner: str | None) -> list[dict[str, Any]]:
        """``status.activity`` rows of ``owner``'s subagents whose turn runs (``None``: everyone's): ``id`` the
        handle, ``phase`` the session's (``working`` for a child instance), the current tool (a child's: the one
        its newest mirrored event shows running, :func:`.streams.running_tool`), ``round`` the attempt, token
        counts, when the turn started and the last activity (epoch ms)."""
        rows = []
        for record in self.owned(owner):
            if record.status != "running" or record.turn_started is None:
                continue
            projections = record.session.projections if record.session is not None else None
            tool = projections.current_tool if projections is not None else None
            usage = projections.usage if projections is not None else None
            last = projections.last_activity if projections is not None else None
            rows.append(
                {
                    "id": record.handle,
                    "task": None,
                    "ctx": None,
                    "phase": (projections.phase if projections is not None else None) or "working",
                    "tool": ((tool.title or tool.id) if tool is not None else None)
                    if projections is not None
                    else running_tool(record.events),
                    "round": record.attempts,
                    "tokens_in": (usage.tokens_in or 0) if usage else 0,
                    "tokens_out": (usage.tokens_out or 0) if usage else 0,
                    "started_ms": record.turn_started,
                    "updated_ms": int(last * 1000) if last else record.updated,
                }
            )
        return rows

    async def _open(self, record: Subagent, directory: Path, resume: str | None = None) -> Any:
        """The subagent's session: AutoApprove, offered the subagent tools one level deeper when :attr:`tools`
        is set."""
        if self.tools is None:
            return await self.runtime.open(record.agent, directory, permission_mode="AutoApprove", resume=resume)
        assert self._tg is not None
        caller = Caller(owner=record.owner, depth=record.depth + 1, handle=record.handle)
        return await self.tools.open_with_tools(
            self.runtime,
            record.agent,
            directory,
            caller,
            spawn=self._tg.start_soon,
            permission_mode="AutoApprove",
            resume=resume,
        )

    async def _first_turn(self, record: Subagent, directory: Path | None) -> None:
        if self._child(record) is not None:
            await self._turn(record, record.instruction)
            return
        directory = directory or self.work_root / record.handle
        directory.mkdir(parents=True, exist_ok=True)
        try:
            record.session = await self._open(record, directory)
            record.resume_token = record.session.info().resume_token
        except AnyagentError as err:
            await self._fail(record, f"{err.kind}: {err.message}")
            return
        await self._turn(record, record.instruction)

    async def reopen(self, record: Subagent) -> None:
        """Re-open a warm subagent's session after a restart, resuming its agent's conversation; it reads ``idle``
        unless a kill ended it while the session opened."""
        directory = self.work_root / record.handle
        directory.mkdir(parents=True, exist_ok=True)
        record.session = await self._open(record, directory, resume=record.resume_token)
        if not ended(record.status):
            record.moved("idle")
            await self._save(record)

    async def _fail(self, record: Subagent, error: str) -> None:
        """A turn that could not start (its session did not open): ``failed`` with ``error``, committed before
        anyone waiting is told. Nothing when a kill ended the record while the session opened (kill() recorded
        it)."""
        if ended(record.status):
            return
        record.moved("failed")
        record.error = error
        await self._save(record)  # committed before anyone waiting is told
        record.done.set()

    async def _turn(self, record: Subagent, message: str) -> None:
        child = self._child(record)
        resumes = child is None and record.session is None and record.mode == "warm" and record.resume_token
        if resumes and not ended(record.status):
            try:
                await self.reopen(record)
            except AnyagentError as err:
                await self._fail(record, f"cannot resume: {err.message}")
                return
        if ended(record.status):
            # killed before its turn began (while its session opened): kill() recorded the end and told the
            # waiters, and closed no session then; close the one that opened since
            session, record.session = record.session, None
            if session is not None:
                with anyio.CancelScope(shield=True):
                    await session.close()
            return
        if child is not None:
            await self._child_turn(record, child, message)
            return
        session = record.session
        assert session is not None
        record.moved("running")
        record.attempts += 1
        record.turn_started = now_ms()
        await self._save(record)
        parts: list[str] = []
        scope = anyio.CancelScope()
        self._scopes[record.handle] = scope
        outcome: tuple[Status, Any, str | None] = ("failed", None, "the session ended before its turn did")
        try:
            with scope, anyio.move_on_after(self.limits.timeout) as deadline:
                await session.prompt(message)
                async for event in session.events():
                    self._keep(record, record.mirror.feed(event))
                    tag = event.tag
                    if tag == "TextDelta" and event.turn_info is not None and event.turn_info.parent_tool_id is None:
                        parts.append(event.kind.text)
                    elif tag == "ContextUsage":
                        record.tokens = max(record.tokens, int(event.kind.used_tokens or 0))
                    elif tag == "TurnEnded":
                        stop = event.kind.stop
                        stop_tag = kind_tag(stop)
                        if stop_tag == "Completed":
                            outcome = ("completed", "".join(parts), None)
                        else:
                            outcome = ("failed", None, f"the subagent's turn ended {stop_tag}")
                        break
            if deadline.cancelled_caught:
                outcome = ("failed", None, f"timed out after {self.limits.timeout:g} s")
        except AnyagentError as err:
            outcome = ("failed", None, f"{err.kind}: {err.message}")
        finally:
            self._scopes.pop(record.handle, None)
            record.turn_started = None
        self._keep(record, record.mirror.flush())
        if scope.cancelled_caught:
            return  # killed: kill() recorded it
        if not (record.mode == "warm" and outcome[0] == "completed"):
            record.session = None
            with anyio.CancelScope(shield=True):
                await session.close()
        await self._end_turn(record, *outcome)

    async def _child_turn(self, record: Subagent, child: ChildInstance, message: str) -> None:
        """One message to a child instance (a warm child stays ``idle`` after). Without reports its reply is the
        result; with them (:attr:`ChildInstance.reports`) the turn waits for the child's ``_instance.result``
        (:meth:`child_result` ends it), bounded by the timeout. Whichever ends the turn first is its result."""
        record.moved("running")
        record.attempts += 1
        record.turn_started = now_ms()
        await self._save(record)
        scope = anyio.CancelScope()
        self._scopes[record.handle] = scope
        outcome: tuple[Status, Any, str | None] = ("failed", None, "the child instance gave no answer")
        try:
            with scope, anyio.move_on_after(self.limits.timeout) as deadline:
                answer = await child.ask(message, handle=record.handle, parent=self.parent_url)
                if child.reports:
                    await record.done.wait()  # the child's _instance.result ended the turn
                outcome = ("completed", answer, None)
            if deadline.cancelled_caught:
                waited = " waiting for the child's _instance.result" if child.reports else ""
                outcome = ("failed", None, f"timed out after {self.limits.timeout:g} s{waited}")
        except ChildFailed as err:
            outcome = ("failed", None, str(err))
        finally:
            self._scopes.pop(record.handle, None)
            record.turn_started = None
        if scope.cancelled_caught:
            return  # killed: kill() recorded it
        await self._end_turn(record, *outcome)  # nothing when a report ended it first
        if record.status == "failed":
            # timed out, refused, ended INPUT_REQUIRED, or reported failed: the child may still hold the task
            # open (and a live agent); the record is committed first, so a waiter does not wait on this
            await self._cancel_on_child(record, child)

    async def _end_turn(self, record: Subagent, status: Status, result: Any, error: str | None) -> bool:
        """End ``record``'s running turn ``status``: a completed one takes ``result`` (a warm subagent then reads
        ``idle``: :func:`.state.after_turn`), another keeps the last result and takes ``error``. Committed before
        anyone waiting is told. Returns ``False``, changing nothing, when no turn runs (it ended already: the first
        end is the one kept)."""
        if record.status != "running":
            return False
        if status == "completed":
            record.result, record.error = result, None
        else:
            record.error = error
        record.moved(after_turn(record.mode, status))
        record.turn_started = None
        await self._save(record)
        record.done.set()
        return True

    def _keep(self, record: Subagent, items: list[dict[str, Any]]) -> None:
        for item in items:
            keep(record.events, STREAM, item, self.events_kept)


__all__ = ["MODES", "Subagent", "SubagentLimits", "SubagentManager", "SubagentNotFound", "SubagentRefused"]
