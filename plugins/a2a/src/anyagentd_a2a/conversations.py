"""Conversations: (principal, contextId) → one engine session; each message a prompt that runs as one A2A task.

A :class:`Conversation` owns its session's single ``events()`` consumer (the pump) and routes every turn's events
to the :class:`TaskRun` of the prompt that started it: ``TurnStarted{Prompt(p)}`` binds turn to task. A run turns
engine events into A2A events (TaskStatusUpdateEvent / TaskArtifactUpdateEvent) on its own unbounded stream;
whoever serves the task (the executor's ``execute``, or ``cancel`` while nobody does) drains that stream into the
SDK's event queue until the task is terminal or waits for input. So the engine never waits for an HTTP client, and
a task parked in INPUT_REQUIRED keeps collecting events until it is answered.

Mapping (``docs/engine.md`` for the engine side): TurnStarted → WORKING; top-level text deltas → chunks
of the ``response`` artifact (append); reasoning (per message), tools, plans, usage, subagent text, diagnostics →
WORKING status updates whose message carries a text part with the wire event's JSON (:func:`.translate.wire_part`);
RequestOpened → INPUT_REQUIRED (text for a person and the event's part); RequestClosed → WORKING; TurnEnded →
COMPLETED / CANCELED / REJECTED / FAILED with a final agent message. A prompt the engine queues stays SUBMITTED until
its turn starts, its status saying behind how many prompts, or — the instance paused — that it runs once the
instance is resumed; one it steers into the running turn completes at once, saying which task's turn took it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
from a2a.types import (
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from anyagentd.engine.projections import reported_tokens
from anyagentd.errors import AnyagentError, ResumeFailed
from anyagentd.model import PromptOrigin, kind_tag

from .pool import DEFAULT_LIMITS, Pool, PoolLimits, process_tree_rss
from .tasks.state import PARK, PAUSED, TERMINAL, from_stop, move, on_drain
from .translate import (
    DELIVERY_MEDIA_TYPE,
    REASONING_MEDIA_TYPE,
    RESPONSE_ARTIFACT,
    PromptIn,
    agent_message,
    event_part,
    request_text,
    same_request,
    turn_metadata,
    wire_part,
)

log = logging.getLogger("anyagentd.a2a")

Opening = Literal["resume", "require_resume", "fresh"]
"""How a conversation's session is opened when it has none live (:meth:`Conversation.session_for`)."""


def conversation_dir(state_dir: Path, owner: str, context_id: str) -> Path:
    """The directory of the (owner, contextId) conversation's files under ``state_dir``:
    ``conversations/<sha256(owner NUL contextId)[:24]>`` (its saved file parts in ``files/``; retention removes the
    directory of one that ended long ago, :mod:`.retention`)."""
    digest = hashlib.sha256(f"{owner}\0{context_id}".encode()).hexdigest()[:24]
    return state_dir / "conversations" / digest


class ReplayRefused(Exception):
    """A turn whose session the agent never saved cannot be replayed in a fresh one; ``str()`` says why."""


Replay = Callable[[ResumeFailed], Awaitable[PromptIn]]
"""Given the resume's ``ResumeFailed`` (never saved), the prompt that replays the turn; raises
:class:`ReplayRefused`."""

REPORTED = {TaskState.TASK_STATE_COMPLETED: "completed", TaskState.TASK_STATE_CANCELED: "cancelled"}
"""A terminal task state as a report to a parent gives it (any other: ``failed``)."""
DETAIL_KINDS = frozenset(
    {
        "ToolUpdated",
        "ToolOutputDelta",
        "PlanUpdated",
        "ContextUsage",
        "UserMessage",
        "Diagnostic",
        "ContextCompacted",
        "PlanUsageUpdated",
    }
)


@dataclass
class TaskRun:
    """One A2A task: the prompt it runs, the turn that runs it, and the A2A events not yet delivered."""

    task_id: str
    context_id: str
    conversation: Conversation
    prompt_id: str | None = None
    turn_id: str | None = None
    request: Any = None  # the open engine Request, while INPUT_REQUIRED
    state: int = TaskState.TASK_STATE_SUBMITTED
    text: list[str] = field(default_factory=list)
    reasoning: dict[str, list[str]] = field(default_factory=dict)
    artifact_open: bool = False
    usage: Any = None  # the turn's last ContextUsage
    carried: Any = None  # (request, answer) given before a restart: the resumed agent's same request gets it
    replayed: bool = False  # the turn is replayed in a fresh session: it must ask what ``carried`` answered
    report: Any = None  # the parent's subagents.reports.TaskReport, when a parent daemon asked for reports
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def __post_init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[Any](math.inf)
        self._drain_lock = anyio.Lock()
        self.delivered_state: int = TaskState.TASK_STATE_SUBMITTED
        self.finished = anyio.Event()

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    # -- producing (the pump, or the executor) ----------------------------------------------------------

    def status(self, state: int, parts: list[Part] | None = None, metadata: dict[str, Any] | None = None) -> None:
        """Queue a status update (with an agent message when ``parts``; ``metadata`` merged into the task's by the
        SDK); nothing after a terminal state (a late event after the end is dropped). Any other move the rules
        refuse raises :class:`.tasks.state.MoveRefused`."""
        if self.terminal:
            return
        self.state = move(self.state, state)
        status = TaskStatus(state=state)
        if parts:
            status.message.CopyFrom(agent_message(parts, context_id=self.context_id, task_id=self.task_id))
        status.timestamp.GetCurrentTime()
        event = TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id, status=status)
        if metadata:
            event.metadata.update(metadata)
        self._send.send_nowait(event)
        if state == TaskState.TASK_STATE_INPUT_REQUIRED and self.report is not None:
            # nobody at the parent can answer here: report the question as a failure at once rather than hold
            # the parent's turn until its timeout (the parent then cancels this task)
            said = " ".join(p.text for p in parts or [] if p.text)
            self.report.ended("failed", f"the child needs input: {said}")
        if self.terminal:
            self.conversation.forget(self)
            self.finished.set()
            if self.report is not None:
                said = " ".join(p.text for p in parts or [] if p.text)  # the final message: the answer, or why not
                completed = state == TaskState.TASK_STATE_COMPLETED
                self.report.ended(REPORTED.get(state, "failed"), ("".join(self.text) if completed else "") or said)

    def text_chunk(self, text: str) -> None:
        if self.terminal:
            return
        self.text.append(text)
        artifact = Artifact(artifact_id=RESPONSE_ARTIFACT, name="response", parts=[Part(text=text)])
        self._send.send_nowait(
            TaskArtifactUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, artifact=artifact, append=self.artifact_open
            )
        )
        self.artifact_open = True

    def fail(self, message: str) -> None:
        self.status(TaskState.TASK_STATE_FAILED, [Part(text=message)])

    # -- delivering (execute / cancel) ------------------------------------------------------------------

    async def drain(self, enqueue: Callable[[Any], Awaitable[None]]) -> None:
        """Deliver queued events through ``enqueue`` until a terminal or input-required state has been delivered.
        One drainer at a time; a later one returns at once when the task is already terminal."""
        async with self._drain_lock:
            while self.delivered_state not in TERMINAL:
                event = await self._recv.receive()
                await enqueue(event)
                if isinstance(event, TaskStatusUpdateEvent):
                    self.delivered_state = event.status.state
                    if event.status.state in PAUSED:
                        return


class Conversation:
    """One (owner, contextId) conversation: its engine session (opened on first use), runs and pump."""

    def __init__(self, owner: str, context_id: str, host: Conversations) -> None:
        self.owner = owner
        self.context_id = context_id
        self.host = host
        self.files_dir = conversation_dir(host.state_dir, owner, context_id) / "files"
        self.session: Any = None
        self.last_active = anyio.current_time()
        self.turns = 0  # prompts delivered (status, conversation.get)
        self.last_task_id: str | None = None
        self.updated_ms = int(time.time() * 1000)
        self._open_lock = anyio.Lock()
        self._last_ticket = anyio.Event()  # set when the previous prompt was delivered: prompts keep arrival order
        self._last_ticket.set()
        self.fresh_note: str | None = None  # set when the session was reopened afresh after earlier turns
        # since this process started, the agent conversation went on afresh (a new message after a resume that
        # failed, a replay): a request parked from before the restart can no longer reach the agent that asked it
        self.went_fresh = False
        self.kept_open_said = False  # the log said once that this idle session stays open (its agent cannot resume)
        self.cost_usd = 0.0  # the running total its agent's session last reported (ContextUsage.cost_usd)
        self._inflight: TaskRun | None = None
        self._by_prompt: dict[str, TaskRun] = {}
        self._by_turn: dict[str, TaskRun] = {}

    @property
    def runs(self) -> list[TaskRun]:
        return list({id(r): r for r in [*self._by_prompt.values(), *self._by_turn.values()]}.values())

    @property
    def live(self) -> bool:
        """Whether this conversation holds an open agent session."""
        return self.session is not None and not self.session.closed

    @property
    def holds_resume_token(self) -> bool:
        """Whether its session (open or closed) has a resume token: what :func:`.tasks.state.on_drain` is told as
        ``resumable`` (a drain parks a waiting task only then)."""
        return self.session is not None and bool(self.session.snapshot().resume_token)

    @property
    def pending(self) -> bool:
        """Whether a session is being opened for it or a prompt waits for its turn (:meth:`ticket`)."""
        return self._open_lock.locked() or not self._last_ticket.is_set()

    @property
    def idle(self) -> bool:
        """Live, no task of it live, and its session Idle: closing it loses nothing (the next message resumes)."""
        busy = any(r.conversation is self for r in self.host.runs.values())
        return self.live and not busy and self.session.status == "Idle"

    @property
    def resumable(self) -> bool:
        """Whether closing the live session loses nothing: the agent advertises Resume and the session has a
        resume token (the next message reopens it where it was)."""
        if not self.live:
            return False
        info = self.session.info()
        return bool(info.resume_token) and info.details.capabilities.has("Resume")

    async def session_for(self, opening: Opening = "resume") -> Any:
        """The live session, opening it when there is none as ``opening`` says (:data:`Opening`: resume the stored
        agent conversation when there is one, else afresh; ``"require_resume"``: never afresh, ``ResumeFailed``
        instead; ``"fresh"``: never resume); opening one first makes room in the pool
        (:meth:`Conversations.make_room`). Raises what :meth:`AgentSessions.open` raises, and ``ResumeFailed``
        for ``"require_resume"`` once the conversation :attr:`went_fresh` (live or not: a fresh session's own token,
        resumed, is not the conversation the parked request was asked in)."""
        async with self._open_lock:
            if opening == "require_resume" and self.went_fresh:
                raise ResumeFailed(
                    "after the restart this conversation went on in a fresh agent session, which "
                    "never saw the request this answer is for"
                )
            if not self.live:
                await self.host.make_room(self)
                try:
                    self.session = await self.host.sessions.open(self, opening)
                finally:
                    self.host.opening.discard(self)
                self.host.start_pump(self._pump, self.session)
            self.last_active = anyio.current_time()
            return self.session

    def ticket(self) -> tuple[anyio.Event, anyio.Event]:
        """Take a place in this conversation's prompt order (call it before any await): returns (wait for this,
        set this when delivered)."""
        previous, mine = self._last_ticket, anyio.Event()
        self._last_ticket = mine
        return previous, mine

    async def prompt(
        self,
        run: TaskRun,
        prompt: PromptIn,
        ticket: tuple[anyio.Event, anyio.Event],
        opening: Opening = "resume",
        replay: Replay | None = None,
    ) -> None:
        """Deliver ``prompt`` for ``run`` once every earlier ticket's prompt was delivered, in a session opened as
        ``opening`` says (:meth:`session_for`): Started binds the run to its turn, Queued leaves it SUBMITTED,
        Steered completes it. With ``replay``, a resume refused because the agent never saved the session
        (``ResumeFailed.never_saved``) is not the end: ``await replay(err)`` returns the prompt to give a fresh
        session instead (still in this ticket's place, so no other prompt of the conversation gets in first), or
        raises :class:`ReplayRefused`. Engine errors and ``ReplayRefused`` propagate (the caller fails the task)."""
        previous, mine = ticket
        try:
            await previous.wait()
            try:
                session = await self.session_for(opening)
            except ResumeFailed as err:
                if replay is None or not err.never_saved:
                    raise
                prompt = await replay(err)
                session = await self.session_for("fresh")
            if run.terminal:
                return  # cancelled before its prompt was delivered: it never runs
            if self.fresh_note:  # say so on the task: the agent no longer knows the earlier turns
                note, self.fresh_note = self.fresh_note, None
                run.status(TaskState.TASK_STATE_WORKING, [Part(text=note)], metadata={"freshSession": True})
            self._inflight = run
            try:
                delivery = await session.prompt(prompt.text, list(prompt.attachments))
            finally:
                self._inflight = None
            run.prompt_id = delivery.prompt_id
            self._by_prompt[delivery.prompt_id] = run
            self.turns += 1
            self.last_task_id = run.task_id
            self.updated_ms = int(time.time() * 1000)
        finally:
            mine.set()
        kind = delivery.kind
        if kind.TAG == "Started" and run.turn_id is None:
            self._bind(run, kind.turn_id)
        elif kind.TAG == "Steered":
            self._by_prompt.pop(delivery.prompt_id, None)
            owner = self._by_turn.get(kind.turn_id)
            note = f"steered into the running turn {kind.turn_id}" + (f" of task {owner.task_id}" if owner else "")
            delivered = [Part(text=f"Delivered: {note}."), wire_part(kind, DELIVERY_MEDIA_TYPE)]
            run.status(TaskState.TASK_STATE_COMPLETED, delivered)
        elif kind.TAG == "Queued":
            paused = self.host.paused()
            said = (
                f"The instance is {paused}; this prompt runs when it is resumed."
                if paused is not None
                else f"Queued behind {kind.position + 1} prompt(s) of this conversation."
            )
            run.status(TaskState.TASK_STATE_SUBMITTED, [Part(text=said)])

    async def cancel(self, run: TaskRun) -> None:
        """Cancel ``run``: dequeue its prompt if it has not started, else cancel the running turn (it ends
        CANCELED when the agent confirms)."""
        session = self.session
        if session is None or session.closed or run.terminal or (run.prompt_id is None and run.turn_id is None):
            run.status(TaskState.TASK_STATE_CANCELED, [Part(text="Cancelled before it started.")])
            return
        if run.turn_id is None and run.prompt_id is not None:
            try:
                await session.dequeue(run.prompt_id)
            except AnyagentError:
                pass  # it started meanwhile: cancel the turn below
            else:
                run.status(TaskState.TASK_STATE_CANCELED, [Part(text="Cancelled before it started.")])
                return
        await session.cancel()

    def forget(self, run: TaskRun) -> None:
        self.last_active = anyio.current_time()
        if run.prompt_id is not None:
            self._by_prompt.pop(run.prompt_id, None)
        if run.turn_id is not None:
            self._by_turn.pop(run.turn_id, None)
        self.host.runs.pop(run.task_id, None)

    def _bind(self, run: TaskRun, turn_id: str) -> None:
        run.turn_id = turn_id
        self._by_turn[turn_id] = run

    # -- the pump -----------------------------------------------------------------------------------------

    async def _pump(self, session: Any) -> None:
        reason = "the agent's session ended"
        try:
            async for event in session.events():
                self._route(event)
        except AnyagentError as err:
            reason = f"the agent's session ended: {err.kind}: {err.message}"
        for run in self.runs:
            run.fail(reason)

    def _route(self, event: Any) -> None:
        kind = event.kind
        tag = kind_tag(kind)
        if tag == "SessionUpdated":
            self.host.sessions.remember(self, kind.value.resume_token)
            return
        if tag == "ContextUsage":
            self.host.spent.count(self, kind, event.extensions)
            if self.host.on_usage is not None:
                self.host.on_usage(kind, event.extensions)
        turn = event.turn_info
        if turn is None:
            return
        if tag == "TurnStarted":
            origin = kind.origin
            if isinstance(origin, PromptOrigin):
                run = self._by_prompt.get(origin.value)
                if run is None and self._inflight is not None and self._inflight.prompt_id is None:
                    run = self._inflight
                    run.prompt_id = origin.value
                    self._by_prompt[origin.value] = run
                if run is not None:
                    self._bind(run, turn.id)
                    run.status(TaskState.TASK_STATE_WORKING)
            return
        run = self._by_turn.get(turn.id)
        if run is None:
            return  # an agent-originated turn: no task runs it
        if run.report is not None:
            run.report.event(event)
        _translate(run, event, tag)


async def _cancel_turn(session: Any) -> None:
    try:
        await session.cancel()
    except AnyagentError as err:
        log.warning("cancelling the replayed turn failed: %s", err.message)


async def _deliver(session: Any, request_id: str, answer: Any) -> None:
    try:
        await session.answer(request_id, answer)
    except AnyagentError as err:
        log.warning("the carried answer to request %s was refused: %s", request_id, err.message)


def _flush_reasoning(run: TaskRun, message_id: str) -> None:
    # Reasoning is sent whole, one status update per reasoning message: each update lands in the task's history.
    text = "".join(run.reasoning.pop(message_id, []))
    if text:
        part = wire_part({"ReasoningDelta": {"message_id": message_id, "text": text}}, REASONING_MEDIA_TYPE)
        run.status(TaskState.TASK_STATE_WORKING, [part])


def _translate(run: TaskRun, event: Any, tag: str) -> None:
    kind = event.kind
    top = event.turn_info.parent_tool_id is None
    if tag == "ContextUsage" and top:
        run.usage = kind
    if tag == "TextDelta" and top:
        run.text_chunk(kind.text)
    elif tag == "ReasoningDelta" and top:
        run.reasoning.setdefault(kind.message_id, []).append(kind.text)
    elif tag == "MessageEnded":
        _flush_reasoning(run, kind.message_id)
    elif tag == "RequestOpened":
        for message_id in list(run.reasoning):
            _flush_reasoning(run, message_id)
        run.request = kind.value
        if run.carried is not None and same_request(run.carried[0], kind.value):
            answer, run.carried = run.carried[1], None
            said = (
                "The replayed turn asked again; the answer given before the restart was applied."
                if run.replayed
                else "The resumed agent asked again; the answer given before the restart was delivered."
            )
            run.status(TaskState.TASK_STATE_WORKING, [Part(text=said), event_part(event)])
            run.conversation.host.start_pump(_deliver, run.conversation.session, kind.value.value.id, answer)
            return
        if run.replayed and run.carried is not None:
            # a replay is driven to the question that was answered, or not at all: nobody answered this one
            run.fail(
                f"The turn was replayed in a fresh agent conversation, but the agent asked something else "
                f"({request_text(kind.value)}) before what was answered ({request_text(run.carried[0])}), so "
                f"the answer was not applied and the turn was cancelled."
            )
            run.conversation.host.start_pump(_cancel_turn, run.conversation.session)
            return
        run.status(TaskState.TASK_STATE_INPUT_REQUIRED, [Part(text=request_text(kind.value)), event_part(event)])
    elif tag == "RequestClosed":
        if run.request is not None and run.request.value.id == kind.request_id:
            run.request = None
            run.status(TaskState.TASK_STATE_WORKING, [event_part(event)])
    elif tag == "TurnEnded":
        for message_id in list(run.reasoning):
            _flush_reasoning(run, message_id)
        run.request = None
        session = run.conversation.session
        token = session.snapshot().resume_token if session is not None else None
        if run.replayed and run.carried is not None:  # it never asked what was answered
            run.status(
                TaskState.TASK_STATE_FAILED,
                [
                    Part(
                        text=(
                            f"The turn was replayed in a fresh agent conversation, but it ended without asking again what was "
                            f"answered ({request_text(run.carried[0])}), so the answer was not applied. The agent's last words: "
                            f"{_final_text(run, kind.stop)}"
                        )
                    ),
                    event_part(event),
                ],
                turn_metadata(kind.stop, run.usage, token),
            )
            return
        run.status(
            from_stop(kind.stop),
            [Part(text=_final_text(run, kind.stop)), event_part(event)],
            turn_metadata(kind.stop, run.usage, token),
        )
    elif tag in DETAIL_KINDS or tag in ("TextDelta", "ReasoningDelta"):
        run.status(TaskState.TASK_STATE_WORKING, [event_part(event)])


def _final_text(run: TaskRun, stop: Any) -> str:
    tag = kind_tag(stop)
    if tag == "Completed":
        return "".join(run.text) or "The turn completed."
    if tag == "Cancelled":
        return "The turn was cancelled."
    if tag == "Refused":
        return "The agent refused the prompt."
    return f"The turn failed: {stop.message}"


class AgentSessions(Protocol):
    """The engine sessions of the conversations (:class:`~.sessions.ConversationSessions` is the daemon's)."""

    async def open(self, conversation: Conversation, opening: Opening = "resume") -> Any:
        """The conversation's engine session, opened as ``opening`` says (:data:`Opening`); its resume token is
        stored. Raises what ``Runtime.open`` raises, and ``ResumeFailed`` (``"require_resume"``)."""

    def remember(self, conversation: Conversation, token: str | None) -> None:
        """Store ``token`` (when there is one) as the conversation's resume token."""


class Spent:
    """What one agent's conversations spent since the daemon started, from their ``ContextUsage`` events: the tokens
    read and written (the ``anyagentd/tokens`` extension's ``in``/``out``, counts since the previous report) and the
    cost in US dollars (``cost_usd``: a running total per agent session, so each report adds what it grew by; a
    smaller one is a new session's, counted whole). O(1) per event."""

    def __init__(self) -> None:
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0

    def count(self, conversation: Conversation, usage: Any, extensions: dict[str, Any] | None) -> None:
        reported = reported_tokens(extensions)
        if reported is not None:
            self.tokens_in += reported[0]
            self.tokens_out += reported[1]
        cost = usage.cost_usd
        if cost is not None and cost >= 0:
            grew = cost - conversation.cost_usd if cost >= conversation.cost_usd else cost
            self.cost_usd += grew
            conversation.cost_usd = cost

    def values(self) -> dict[str, Any]:
        return {"tokensIn": self.tokens_in, "tokensOut": self.tokens_out, "costUsd": round(self.cost_usd, 6)}


class Conversations:
    """Every conversation of one agent, keyed (owner, contextId), and every live run, keyed by task id.

    ``sessions`` (:class:`AgentSessions`, which knows the runtime and the agent) opens a conversation's engine
    session and stores its resume tokens; ``start_pump(fn, session)`` runs a pump in the daemon's task
    group; ``paused()`` says how the instance is paused
    (``"paused by the operator (maintenance)"``), ``None`` while it is not — a prompt queued then waits for the
    resume, and its task says so rather than name a queue. ``limits`` are the agent's own: ``max_live`` caps its
    live agents (0: no cap of its own), ``idle_close`` closes its idle ones (:meth:`reap_idle`). ``pool`` is the
    daemon's :class:`~.pool.Pool` over every agent (``[a2a.pool]``: past its ``max_live`` or ``max_rss_mb`` any
    agent's least recently used idle conversation is closed before another opens); without one this makes a private
    pool of ``limits`` and ``rss`` (bytes of the agents' process tree) with itself its only member — a one-agent
    daemon, whose bounds are then both its own and the daemon's. ``agent`` (its id, when the daemon serves several)
    is named in its log lines."""

    def __init__(
        self,
        state_dir: Path,
        *,
        sessions: AgentSessions,
        start_pump: Callable[..., None],
        limits: PoolLimits = DEFAULT_LIMITS,
        rss: Callable[[], int] = process_tree_rss,
        paused: Callable[[], str | None] = lambda: None,
        pool: Pool | None = None,
        agent: str = "",
    ) -> None:
        self.state_dir = state_dir
        self.paused = paused
        self.sessions = sessions
        self.start_pump = start_pump
        self.limits = limits
        self.agent = agent
        self.conversations: dict[tuple[str, str], Conversation] = {}
        self.runs: dict[str, TaskRun] = {}
        self.opening: set[Conversation] = set()  # reserved a place in the pool, session not yet open
        self.evictions = 0
        self.idle_closes = 0
        self.pool = pool if pool is not None else Pool(limits, rss)
        self.pool.join(self)
        self.spent = Spent()
        self.on_usage: Callable[[Any, dict[str, Any]], None] | None = None
        """Told every ``ContextUsage`` event (its kind and extensions): the metrics' token counts."""

    @property
    def tag(self) -> str:
        """What its log lines begin with: ``"agent <id>: "``, or nothing for an agent with no id."""
        return f"agent {self.agent}: " if self.agent else ""

    @property
    def rss(self) -> Callable[[], int]:
        """The pool's measure of the agents' process tree, in bytes."""
        return self.pool.rss

    def keys(self) -> set[tuple[str, str]]:
        """The (owner, contextId) of every conversation in memory (a copy), live session or not: a message's
        conversation is in it from before the message saves any file (:meth:`conversation`)."""
        return set(self.conversations)

    def in_use(self) -> set[tuple[str, str]]:
        """The (owner, contextId) of the conversations in use now: an agent session open or opening, a task of it
        running, or a prompt waiting for its turn — what retention must neither prune nor forget. O(conversations +
        runs)."""
        busy = {id(r.conversation) for r in self.runs.values()} | {id(c) for c in self.opening}
        return {key for key, c in self.conversations.items() if c.live or c.pending or id(c) in busy}

    def forget(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop from memory each conversation of ``pairs`` (retention pruned its row: it has no task left) that is
        not in use; returns how many went. Synchronous, so nothing can take one into use between the check and
        the drop; a later message for it starts a new entry, as after a restart."""
        in_use = self.in_use()
        gone = [key for key in pairs if key in self.conversations and key not in in_use]
        for key in gone:
            del self.conversations[key]
        return len(gone)

    def live(self) -> list[Conversation]:
        """The conversations holding an open agent session."""
        return [c for c in self.conversations.values() if c.live]

    def values(self) -> dict[str, Any]:
        """The pool as ``status`` shows it (``values``, :meth:`.pool.Pool.values_of`): this agent's live agents, the
        cap that holds it, the agents' tree RSS in bytes, its evictions and idle closes since start; and what its
        conversations spent since start (:class:`Spent`: ``tokensIn``, ``tokensOut``, ``costUsd``)."""
        return {**self.pool.values_of(self), **self.spent.values()}

    async def make_room(self, opening: Conversation) -> None:
        """Reserve ``opening`` a place among the live agents (:meth:`.pool.Pool.make_room`: least recently used idle
        conversations are closed while this agent's cap or the daemon's is reached; when none is idle it opens past
        the cap, saying so in the log, rather than fail a message). The caller discards ``opening`` from
        :attr:`opening` once its session is open."""
        await self.pool.make_room(self, opening)

    def conversation(self, owner: str, context_id: str) -> Conversation:
        key = (owner, context_id)
        found = self.conversations.get(key)
        if found is None:
            found = self.conversations[key] = Conversation(owner, context_id, self)
        return found

    def new_run(self, conversation: Conversation, task_id: str) -> TaskRun:
        run = TaskRun(task_id, conversation.context_id, conversation)
        self.runs[task_id] = run
        conversation.last_active = anyio.current_time()
        return run

    async def close_idle(self, idle: float) -> None:
        """Close the session of every conversation with no live task, an Idle session and no activity for ``idle``
        seconds whose agent can resume (the next message reopens it where it was); one whose agent cannot stays open
        (closing it would lose the conversation; only the cap, :meth:`make_room`, closes it)."""
        busy = {id(r.conversation) for r in self.runs.values()}
        now = anyio.current_time()
        for conversation in list(self.conversations.values()):
            session = conversation.session
            if (
                session is None
                or session.closed
                or id(conversation) in busy
                or session.status != "Idle"
                or now - conversation.last_active < idle
            ):
                continue
            if not conversation.resumable:
                # closing it would lose the conversation: only the cap (eviction) may close it
                if not conversation.kept_open_said:
                    conversation.kept_open_said = True
                    log.info(
                        "%sconversation %s is idle, but its agent cannot resume: its session stays open (the "
                        "pool's cap still bounds it)",
                        self.tag,
                        conversation.context_id,
                    )
                continue
            log.info("%sclosing the idle session of conversation %s", self.tag, conversation.context_id)
            self.idle_closes += 1
            await session.close()

    async def reap_idle(self) -> None:
        """Run :meth:`close_idle` with ``limits.idle_close`` every quarter of it (at most 10 s), forever; returns at
        once when it is 0 (never)."""
        idle = self.limits.idle_close
        while idle > 0:
            await anyio.sleep(min(idle / 4, 10.0))
            await self.close_idle(idle)

    def parked_at_drain(self, conversation: Conversation) -> bool:
        """Whether a task of ``conversation`` is parked by the drain (:func:`.tasks.state.on_drain`: it waits for
        input and the agent can resume), so its agent must be left waiting: its answer after the restart reaches
        the resumed agent as the answer to that question."""
        states = [run.state for run in self.runs.values() if run.conversation is conversation]
        if not states:
            return False
        resumable = conversation.holds_resume_token  # as Lifecycle.drain asks on_drain
        return any(on_drain(state, run_task=False, resumable=resumable) == PARK for state in states)

    def left_waiting(self) -> list[Any]:
        """The live sessions the drain leaves waiting (``Runtime.drain(leave_waiting=…)``): those of the
        conversations whose task it parks (:meth:`parked_at_drain`). Each closes with ``answer_pending=False``: the
        agent ended as a kill -9 would leave it, its saved conversation still ending with the open question (issue
        25: a denial at drain, then "the answer is allow" after the restart, made its history contradict
        itself)."""
        return [c.session for c in self.live() if self.parked_at_drain(c)]
