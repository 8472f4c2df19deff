"""The session engine: one live session between a caller and an agent adapter.

The adapter translates; this module decides (``docs/engine.md#who-decides-what``): turn boundaries and ids, TurnAck
gating of stale frames, prompt delivery (Started / Steered / Queued) and queue promotion, which requests are open
and whether an answer fits them, AutoApprove, status derivation, inferred completion, cancel, close, and what an
agent's death or lost login does to the turn and the session.

Concurrency: command methods run in the caller's task, the report pump and the quiet timer in the session's own
task group. State changes happen between awaits, so each step is atomic on the event loop. Every event is appended
to the session's :class:`~.event_log.EventLog` and folded into its :class:`~.projections.Projections`; the engine
never waits for a reader. The primary reader (:meth:`Session.events` / :meth:`Session.event_batches`, the wire's)
exists from the start: leaving more than ``event_bound`` events undrained gets the session closed
(``ConsumerLagged``). Readers from :meth:`Session.subscribe` are independent: one that lags is dropped alone.
While it hands over a burst of reports, the engine yields to its readers whenever one is half way to its bound, so
a reader in the same process that never blocks never lags (issue 20.5).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import ValidationError

from ..adapters.interface import (
    AdapterLink,
    AgentConnection,
    AuthLost,
    EventReport,
    Exited,
    InfoChanged,
    PromptInput,
    Report,
    SteeredReport,
    TurnAck,
    TurnEndedReport,
)
from ..adapters.spawns import recording_spawns
from ..errors import (
    AnyagentError,
    AuthRequired,
    ConsumerLagged,
    Draining,
    HandshakeTimeout,
    InvalidConfiguration,
    InvalidRequest,
    ProcessExited,
    ProtocolFailed,
    ResumeFailed,
    SessionBusy,
    SessionClosed,
    UnsupportedFeature,
)
from ..model import (
    ANSWER,
    AgentInstallation,
    AnswerPermission,
    AnswerQuestion,
    ConfigValue,
    Delivery,
    Event,
    FailedStop,
    PermissionMode,
    PermissionRequested,
    RollbackScope,
    SessionInfo,
    SessionStatus,
    SessionUpdated,
    Started,
    TurnContext,
    diagnostic,
)
from .admission import Admission
from .event_log import EventLog, Subscription
from .event_parts import EventParts
from .projections import Projections
from .settings import EngineSettings
from .turns import (
    AutoApprove,
    Emit,
    ForwardCancel,
    NoteAnswer,
    NotePrompt,
    Prompt,
    Rearm,
    SendSteer,
    SettleSteer,
    StartGrace,
    StartTurn,
    TurnClosed,
    TurnOpened,
    Turns,
)

if TYPE_CHECKING:
    from ..adapters.process import AgentProcess
    from ..model import Answer, StopReason

_session_ids = itertools.count(1)
# EventParts built without its generated __new__ (a Python call): appending a delta's parts, reading them back and
# formatting its line cost 1.17 us with a plain tuple, 1.51 us with EventParts(...), 1.37 us with this (issue 30;
# about 6 % and 3.5 % of the in-process flood's CPU per event). The class is the same: the log tests it.
_new_parts = tuple.__new__


def next_session_id() -> str:
    """A process-global session id, ``s1``, ``s2``…"""
    return f"s{next(_session_ids)}"


@dataclass
class _SteerWaiter:
    # The prompt() call waiting for its steer to be settled (turns.SettleSteer).
    done: anyio.Event = field(default_factory=anyio.Event)
    delivery: Delivery | None = None
    error: AnyagentError | None = None


class Session:
    """A live session: the Python API's handle and the engine behind the wire's session commands.

    Built by ``Runtime.open``; use :meth:`prompt`, :meth:`answer`, :meth:`cancel`, :meth:`dequeue`,
    :meth:`configure`, :meth:`rollback`, :meth:`compact`, :meth:`info`, :meth:`close`, and read
    :meth:`events` (or :meth:`subscribe`, :attr:`log`, :attr:`projections`). Commands on a closed session raise
    ``SessionClosed``. ``owner`` (an opaque principal id) and ``labels`` are the caller's, set at open.
    """

    def __init__(
        self,
        session_id: str,
        installation: AgentInstallation,
        *,
        permission_mode: PermissionMode | None,
        settings: EngineSettings,
        on_closed: Any = None,
        owner: str | None = None,
        labels: dict[str, str] | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.id = session_id
        self.owner = owner
        self.labels: dict[str, str] = dict(labels or {})
        self.closed_at: float | None = None  # time.monotonic() when the session ended
        self.installation = installation
        self.permission_mode: PermissionMode = permission_mode or "Ask"
        self.settings = settings
        self._on_closed = on_closed
        self._conn: AgentConnection | None = None
        self._info: SessionInfo | None = None
        self._turns = Turns()  # the turn rules (engine/turns.py); this class performs what they decide
        self._steer_waiter: _SteerWaiter | None = None
        self._admission = admission or Admission()
        self.log = EventLog(max(settings.log_size, settings.event_bound))
        self.projections = Projections()
        # The primary reader exists from the start, so events wait for events()/event_batches() (the wire's).
        self._primary = self.log.subscribe(0, bound=settings.event_bound, on_lag=self._lagged, raise_on_lag=False)
        self._reports: MemoryObjectReceiveStream[Report] | None = None
        self._terminal_error: AnyagentError | None = None
        self._closed = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._shutdown_started = False
        self._connected = anyio.Event()
        self._consumed = False  # an events() iterator is active
        self._quiet_deadline: float | None = None
        self._timer_wake = anyio.Event()
        self._turn_ended = anyio.Event()  # set when the running turn ends (a new one per turn)
        self._turn_ended.set()
        self._spawned: list[AgentProcess] = []  # what the adapter started while connecting (recording_spawns)
        self.killed_at_close: tuple[int, ...] = ()
        """The pids of the agent's processes the engine killed because they were still running ``close_grace``
        seconds after the session's close began, whatever the connection's ``close()``/``kill()`` did (empty when
        they ended the agent themselves). The conformance kit reads it (``test_close_leaves_no_process``)."""

    # ------------------------------------------------------------------------------------------- lifecycle

    async def connect(self, adapter: Any, options: Any, *, no_tools: bool = False, buffer: int | None = None) -> None:
        """Connect the adapter (spawn + handshake, bounded by ``handshake_timeout``) and build the info snapshot.

        Every :class:`~..adapters.process.AgentProcess` the adapter starts meanwhile (or later, from the tasks it
        starts meanwhile) is the session's: what of it still runs when a connect fails, or ``close_grace`` seconds
        after close began, the engine kills (:meth:`close`).

        Raises what the adapter raises (``SpawnFailed``, ``HandshakeTimeout``, ``ResumeFailed``…; an untyped
        exception as ``ProtocolFailed``), and ``InvalidConfiguration`` when ``options.configure`` names an unknown
        option or a value of the wrong type.
        """
        assert self._tg is not None, "start Session.run first"
        size = buffer or getattr(adapter, "report_buffer", None) or self.settings.adapter_buffer
        send, self._reports = anyio.create_memory_object_stream[Report](size)
        link = AdapterLink(send, self._tg.start_soon)
        try:
            with anyio.fail_after(self.settings.handshake_timeout), recording_spawns(self._spawned):
                conn = await adapter.connect(self.installation, options, link, no_tools=no_tools)
        except BaseException as err:
            with anyio.CancelScope(shield=True):
                await self._kill_left(self._spawned)  # the adapter had its chance to stop what it started
            self._abandon()
            if isinstance(err, TimeoutError):
                raise HandshakeTimeout() from None
            if isinstance(err, Exception) and not isinstance(err, AnyagentError):
                # an adapter bug must not take the caller (or the wire) down
                raise ProtocolFailed(f"{type(err).__name__}: {err}", "the adapter failed to connect") from err
            raise
        self._conn = conn
        try:
            self._check_creation_options(conn, options)
        except AnyagentError:
            await self._shutdown_agent()
            self._abandon()
            raise
        self._turns.deterministic = (conn.deterministic_turn_end, conn.deterministic_agent_turn_end)
        self._info = SessionInfo(
            id=self.id,
            agent=self.installation,
            details=conn.details,
            configuration=conn.configuration,
            resume_token=conn.resume_token,
            title=conn.title,
            status="Idle",
        )
        self._connected.set()

    def _abandon(self) -> None:
        # connect failed: no session was ever announced, so end quietly.
        self._shutdown_started = self._turns.closing = True
        self.log.close()
        if self._scope is not None:
            self._scope.cancel()

    @staticmethod
    def _check_creation_options(conn: AgentConnection, options: Any) -> None:
        caps = conn.details.capabilities
        if options.resume and not caps.has("Resume"):
            raise ResumeFailed(f"{conn.details.version or 'this agent'} cannot resume sessions")
        if (options.fork or options.fork_at) and not caps.has("Fork"):
            raise UnsupportedFeature("this agent cannot fork sessions")
        for option_id, value in options.configure.items():
            option = conn.details.option(option_id)
            if option is None:
                raise InvalidConfiguration(f"unknown option {option_id!r}")
            if not option.accepts(value):
                raise InvalidConfiguration(f"value {json.dumps(value)} does not fit option {option_id!r}")

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's own task group (adapter tasks, report pump, quiet timer); returns when the session has
        ended. Start it with ``await task_group.start(session.run)`` before :meth:`connect`."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await self._connected.wait()
                tg.start_soon(self._pump)
                tg.start_soon(self._timer)
        self._closed.set()

    # ------------------------------------------------------------------------------------------- reading

    def info(self) -> SessionInfo:
        """The live snapshot (status included). Raises ``SessionClosed`` after close (as the wire's ``info``)."""
        self._check_open()
        return self._snapshot()

    def snapshot(self) -> SessionInfo:
        """The last ``SessionInfo`` (status included), also after close, until the runtime retires the session."""
        return self._snapshot()

    @property
    def status(self) -> SessionStatus:
        return self._turns.status

    @property
    def closed(self) -> bool:
        return self._closed.is_set() or self._turns.closing

    @property
    def running(self) -> bool:
        """Whether a turn is in flight."""
        return self._turns.turn is not None

    @property
    def connection(self) -> AgentConnection | None:
        """The adapter's live ``AgentConnection`` (``None`` before connect), for tools that check an adapter
        itself, like the conformance kit (``anyagentd_testing.conformance``): what process it left running, what
        it refuses. Commands go through the Session; a caller that drives the connection directly bypasses the
        engine's decisions."""
        return self._conn

    async def wait_turn_ended(self) -> None:
        """Return once no turn is in flight (at once when none is); a session's end ends its turn."""
        while self._turns.turn is not None:
            await self._turn_ended.wait()

    def release_queue(self) -> None:
        """Admission no longer holds (``Runtime.resume``): promote the first waiting prompt, in the session's own
        task; the next ones follow at each turn's end."""
        if self._tg is not None and self._turns.queue and not self._turns.closing:
            self._tg.start_soon(self._promote)

    async def events(self) -> AsyncIterator[Event]:
        """The session's events in ``sequence`` order; ends after close. If the session ended in failure
        (``ProcessExited``, ``AuthRequired``, ``ConsumerLagged``) that error is raised once, after the last event.
        Single consumer: a second iterator while one is active raises ``InvalidRequest``. It reads the primary
        reader, bounded by ``event_bound``: see :meth:`subscribe` for more readers. It takes one event at a time
        (a consumer that stops early leaves the rest to the next iterator) and never yields to the event loop
        while events wait, so a consumer that never blocks keeps up with any burst."""
        self._claim_primary()
        try:
            async for batch in self._batches(1):
                yield batch[0]
        finally:
            self._consumed = False  # closing this iterator frees the primary reader at once

    async def event_batches(self, max_events: int = 1024, *, parts: bool = False) -> AsyncIterator[list[Any]]:
        """Like :meth:`events`, but yields every event already waiting (up to ``max_events``) as one list, so a
        consumer that writes them together keeps up with a fast agent. With ``parts`` a list may hold an event's
        parts tuple in place of its model (see :mod:`.event_log`; ``self.log.model`` builds it): the wire's writer
        formats its lines from them without building a model per event."""
        self._claim_primary()
        try:
            async for batch in self._batches(max_events, parts):
                yield batch
        finally:
            self._consumed = False

    def _claim_primary(self) -> None:
        if self._consumed:
            raise InvalidRequest("this session's events already have a consumer")
        self._consumed = True

    async def _batches(self, max_events: int, parts: bool = False) -> AsyncIterator[list[Any]]:
        primary = self._primary
        while (batch := await primary.next_batch(max_events, parts=parts)) is not None:
            yield batch
        error, self._terminal_error = self._terminal_error, None
        if error is not None:
            raise error

    def subscribe(self, after: int = 0, *, bound: int | None = None) -> Subscription:
        """An independent reader of this session's events after sequence ``after`` (0: from the oldest the log
        still holds; ``.dropped`` counts the events older than the ring it missed). Any number may read at once.
        ``bound`` (default ``event_bound``, at most the log's capacity) counts the events that arrived since it
        subscribed and it left undrained: past it, this reader alone gets ``ConsumerLagged`` (after the events it
        held) and the session goes on. It ends after the session's last event (without the session's error:
        that is :meth:`events`'s); after close it replays what the log holds, until the session is retired.
        ``InvalidRequest`` for a negative ``after`` or a ``bound`` below 1."""
        return self.log.subscribe(after, bound=self.settings.event_bound if bound is None else bound)

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # ------------------------------------------------------------------------------------------- commands

    async def prompt(self, text: str, attachments: list[str] | tuple[str, ...] = ()) -> Delivery:
        """Submit a prompt (the wire's ``prompt``): start a turn when idle, steer the running turn when the agent
        can, else queue it. Returns the ``Delivery``; its ``prompt_id`` is stable across promotion."""
        self._check_open()
        if self._admission.draining:
            raise Draining()
        if not isinstance(text, str) or not all(isinstance(a, str) for a in attachments):
            raise InvalidRequest("a prompt is text plus attachment paths, all strings")
        # paused admission holds: nothing new starts or steers, the prompt waits in the queue
        action = self._perform(
            self._turns.prompt(
                PromptInput(text, tuple(attachments)),
                held=self._admission.holds,
                can_steer=self._details().capabilities.has("Steer"),
            )
        )
        if isinstance(action, StartTurn):
            await self._start_turn(action)
            return Delivery(prompt_id=action.prompt.prompt_id, kind=Started(turn_id=action.turn_id))
        if isinstance(action, SendSteer):
            return await self._send_steer(action.prompt)
        return action.delivery

    async def dequeue(self, prompt_id: str) -> None:
        """Remove a queued prompt; it never starts. ``InvalidRequest`` if it is not queued (any more)."""
        self._check_open()
        self._perform(self._turns.dequeue(prompt_id))

    async def answer(self, request_id: str, answer: Answer) -> None:
        """Answer an open request of the running turn. The answer must fit it (a Permission choice among its
        options; for a Question one answer per question, Text only where free text is allowed, Choices non-empty,
        several only for multi-select, ids among the choices); otherwise ``InvalidRequest`` and it stays open."""
        self._check_open()
        if not isinstance(answer, (AnswerPermission, AnswerQuestion)):
            try:
                answer = ANSWER.validate_python(answer)
            except ValidationError as err:
                raise InvalidRequest(
                    f"not an Answer: {answer!r} (expected AnswerPermission, AnswerQuestion or their JSON)",
                    'answers are {"Permission": choice} or {"Question": [...]}',
                ) from err
        turns = self._turns
        turn, request = turns.take_request(request_id, lambda request: _validate_answer(request, answer))
        try:
            await self._connection().answer(request_id, answer)
        except BaseException:
            turns.answer_failed(turn, request_id, request)
            raise
        self._perform(turns.answered(turn, request_id, answer))

    async def cancel(self, clear_queue: bool = False) -> None:
        """Cancel the running turn (idempotent when idle); ``clear_queue`` also drops queued prompts. Open
        requests are closed at once; the turn ends ``Cancelled`` when the agent confirms, or after
        ``settings.cancel_grace`` seconds without its confirmation (with a Warning diagnostic). From the cancel on,
        a ``Failed`` stop or tool the agent reports for this turn reads ``Cancelled``."""
        self._check_open()
        action = self._perform(self._turns.cancel(clear_queue))
        if not isinstance(action, ForwardCancel):
            return  # no turn running
        await self._connection().cancel()
        grace = self._perform(self._turns.cancel_sent(action))
        if isinstance(grace, StartGrace) and self._tg is not None:
            self._tg.start_soon(self._cancel_deadline, grace.turn_id)

    async def _cancel_deadline(self, turn_id: str) -> None:
        # The engine owns the cancel: an agent that never confirms it must not hold the turn (and the queue).
        grace = self.settings.cancel_grace
        await anyio.sleep(grace)
        if self._shutdown_started:
            return
        if self._perform_all(self._turns.grace_expired(turn_id, grace)):
            await self._promote()

    async def configure(self, option: str, value: ConfigValue) -> None:
        """Change a live option. ``InvalidConfiguration`` for an unknown option, a creation-only one, or a value of
        the wrong type (Select: one of its choice values; Boolean: a bool). Confirmed by ``SessionUpdated``."""
        self._check_open()
        spec = self._details().option(option)
        if spec is None:
            raise InvalidConfiguration(f"unknown option {option!r}")
        if not spec.live:
            raise InvalidConfiguration(f"option {option!r} is creation-only")
        if not spec.accepts(value):
            raise InvalidConfiguration(f"value {json.dumps(value)} does not fit option {option!r}")
        await self._connection().configure(option, value)

    async def rollback(self, turns: int, scope: RollbackScope = "Conversation") -> None:
        """Drop the last ``turns`` turns (and, for ``ConversationAndFiles``, their file changes). Needs the
        Rollback (RollbackFiles) capability and an idle session (``SessionBusy``). Success emits
        ``SessionUpdated``; a refusal by the agent emits a Warning diagnostic and raises."""
        self._check_open()
        if turns < 1:
            raise InvalidRequest("rollback needs turns >= 1")
        needed = "RollbackFiles" if scope == "ConversationAndFiles" else "Rollback"
        if not self._details().capabilities.has(needed):
            raise UnsupportedFeature(f"this agent does not support {needed}")
        if self._turns.turn is not None:
            raise SessionBusy()
        try:
            await self._connection().rollback(turns, scope)
        except AnyagentError as err:
            self._emit(diagnostic("Warning", f"rollback refused: {err.message}"))
            raise
        self._emit(SessionUpdated(value=self._snapshot()))

    async def compact(self) -> None:
        """Summarize the context on demand; needs Compact and an idle session. Runs as an agent-originated turn
        confirmed by ``ContextCompacted`` then a lower ``ContextUsage``."""
        self._check_open()
        if not self._details().capabilities.has("Compact"):
            raise UnsupportedFeature("this agent cannot compact its context")
        turn_id, out = self._turns.compact()  # SessionBusy while a turn runs
        self._perform(out)
        try:
            await self._connection().compact()
        except AnyagentError as err:
            self._perform(self._turns.start_failed(turn_id, err.message))
            raise

    async def close(self, *, answer_pending: bool = True) -> None:
        """Close the session: a pending steer fails with ``SessionClosed``, the running turn ends ``Cancelled``
        (open messages and requests closed first), the agent is shut down, and the event stream ends. Idempotent
        (a second call waits for the first). Returns once the agent's processes are gone.

        ``answer_pending=False`` ends the agent the way a crash would leave it (``docs/engine.md#close``): through
        the connection's :meth:`~anyagentd.adapters.interface.AgentConnection.close_unanswered`, which neither
        answers its open requests nor interrupts its turn, so its saved conversation still ends with the open
        question and a resumed agent can be given the answer to it (the A2A drain of a task waiting for input).
        The session's own events are the same either way.

        The shutdown (``docs/engine.md#close``): the connection's ``close()`` gets ``close_grace`` seconds; when it
        has not returned by then, or raised, ``kill()`` follows (bounded by ``close_grace`` too). Then whatever of
        the agent's process tree (:meth:`AgentProcess.running
        <anyagentd.adapters.process.AgentProcess.running>` of the processes started during :meth:`connect`, and
        the connection's ``process``) still runs once ``close_grace`` has passed since close began is SIGKILLed
        by the engine, whatever ``close()`` did: its pids go to :attr:`killed_at_close`, with a Warning
        diagnostic."""
        if self._shutdown_started:
            await self._closed.wait()
            return
        await self._shutdown(None, stop="Cancelled", answer_pending=answer_pending)

    async def fail(self, error: AnyagentError) -> None:
        """End the session as if its agent broke its protocol: the running turn ends Failed with ``error``'s
        message, the agent is shut down, and the event stream ends with ``error``. A session already ending keeps
        its own end. Returns once the agent is shut down."""
        await self._shutdown(error, FailedStop(message=error.message))

    # ------------------------------------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._turns.closing or self._closed.is_set():
            raise SessionClosed()

    def _connection(self) -> AgentConnection:
        assert self._conn is not None
        return self._conn

    def _details(self) -> Any:
        assert self._info is not None
        return self._info.details

    def _snapshot(self) -> SessionInfo:
        assert self._info is not None
        return self._info.model_copy(update={"status": self._turns.status})

    def _emit(self, kind: Any, turn_info: TurnContext | None = None, extensions: dict[str, Any] | None = None) -> None:
        log = self.log
        if log.closed:
            return  # the session has ended: nothing more is emitted
        ns = time.time_ns()
        log.append(_new_parts(EventParts, (log.newest_seq + 1, ns, self.id, turn_info, kind, extensions)))
        self.projections.apply(kind, turn_info, extensions, ns)

    def _lagged(self, reader: Subscription) -> None:
        # The primary consumer stalled: it gets the events it held, then the error; shut the session down without
        # blocking the caller.
        if self._terminal_error is None:
            self._terminal_error = ConsumerLagged(
                f"more than {self.settings.event_bound} events undrained", f"session {self.id} closed"
            )
        self._turns.closing = True  # refuse commands from now on
        if self._tg is not None and not self._shutdown_started:
            self._tg.start_soon(self._shutdown, None, "Cancelled")

    def _perform(self, out: list[Any]) -> Any:
        """Do, in order, what the turn rules returned (:mod:`.turns`): emit its events, note prompts and answers
        for the projections, wake a turn's or a steer's waiters, re-arm the quiet timer. Returns the I/O action
        the rules ended with (``StartTurn``, ``SendSteer``, ``ForwardCancel``, ``StartGrace``, ``AutoApprove``,
        ``Enqueued``) for the caller to perform, or ``None``."""
        action = None
        for item in out:
            cls = item.__class__
            if cls is Emit:
                self._emit(item.kind, item.turn_info, item.extensions)
            elif cls is Rearm:
                self._rearm()
            elif cls is TurnOpened:
                self._turn_ended = anyio.Event()
            elif cls is TurnClosed:
                self._turn_ended.set()
                self._quiet_deadline = None
            elif cls is NotePrompt:
                prompt = item.prompt
                self.projections.note_prompt(
                    prompt.prompt_id, prompt.input.text, prompt.input.attachments, item.turn_id, steered=item.steered
                )
            elif cls is NoteAnswer:
                self.projections.note_answer(item.request_id, item.answer)
            elif cls is SettleSteer:
                waiter, self._steer_waiter = self._steer_waiter, None
                if waiter is not None:
                    waiter.delivery, waiter.error = item.delivery, item.error
                    waiter.done.set()
            else:
                action = item
        return action

    def _perform_all(self, out: list[Any]) -> bool:
        """:meth:`_perform` for rules that end in no action; returns whether they returned anything."""
        self._perform(out)
        return bool(out)

    async def _start_turn(self, action: StartTurn) -> None:
        # StartTurn for a turn the rules began; a failure ends that turn Failed (turns.start_failed) and is raised.
        try:
            await self._connection().start_turn(action.turn_id, action.prompt.input)
        except AnyagentError as err:
            self._perform(self._turns.start_failed(action.turn_id, err.message))
            raise

    async def _send_steer(self, prompt: Prompt) -> Delivery:
        waiter = self._steer_waiter = _SteerWaiter()
        try:
            await self._connection().steer(prompt.input)
        except AnyagentError:
            if not waiter.done.is_set():  # else the steer was settled meanwhile: that delivery stands
                self._steer_waiter = None
                return self._perform(self._turns.steer_failed(prompt)).delivery
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.delivery is not None
        return waiter.delivery

    async def _promote(self) -> None:
        # Idle, nothing left from the adapter, a prompt waiting, admission not held: start it (FIFO).
        reports = self._reports
        action = self._perform(
            self._turns.promote(
                held=self._admission.holds,
                reports_waiting=reports is not None and bool(reports.statistics().current_buffer_used),
            )
        )
        if action is not None:
            try:
                await self._start_turn(action)
            except AnyagentError:
                pass  # the turn already ended Failed; the error is in the stream

    # ------------------------------------------------------------------------------------------- reports

    async def _pump(self) -> None:
        reports = self._reports
        assert reports is not None
        receive_nowait = reports.receive_nowait  # a run of reports per wake-up, one bound call each
        while True:
            try:
                report = receive_nowait()
            except anyio.WouldBlock:
                await self._promote()
                try:
                    report = await reports.receive()
                except anyio.EndOfStream:
                    return
            except anyio.EndOfStream:
                return
            if not self._on_delta(report):
                await self._handle(report)
            if self.log.behind:
                await anyio.lowlevel.checkpoint()  # a burst: let the readers drain before they reach their bound

    async def _handle(self, report: Report) -> None:
        if isinstance(report, EventReport):
            await self._on_event(report)
        elif isinstance(report, TurnAck):
            self._turns.ack()
        elif isinstance(report, TurnEndedReport):
            self._perform(self._turns.turn_ended(report.stop))
        elif isinstance(report, SteeredReport):
            self._perform(self._turns.steered(report.accepted))
        elif isinstance(report, InfoChanged):
            self._on_info_changed(report)
        elif isinstance(report, AuthLost):
            await self._shutdown(AuthRequired(report.login), stop=FailedStop(message="agent needs login"))
        elif isinstance(report, Exited) and not self._shutdown_started:
            error = ProcessExited(report.status, report.stderr)
            await self._shutdown(error, stop=FailedStop(message="agent exited during the turn"))

    def _on_delta(self, report: Report) -> bool:
        """The flood path, straight from :meth:`_pump`: a text delta of the running, acknowledged turn (what
        :meth:`_on_event` does for it, in order, without its dispatch). Returns False for any other report."""
        if report.__class__ is not EventReport:
            return False
        context = self._turns.delta(report.kind, report.parent_tool_id)
        if context is None:
            return False
        self._emit(report.kind, context, report.extensions)
        self._rearm()
        return True

    async def _on_event(self, report: EventReport) -> None:
        action = self._perform(
            self._turns.event(
                report.kind,
                report.parent_tool_id,
                report.extensions,
                auto_approve=self.permission_mode == "AutoApprove",
            )
        )
        if isinstance(action, AutoApprove):
            await self._auto_approve(action.request)

    async def _auto_approve(self, request: PermissionRequested) -> None:
        options = request.value.options
        choice = "AllowOnce" if "AllowOnce" in options or not options else options[0]
        if choice not in ("AllowOnce", "AllowAlways"):
            choice = "AllowAlways" if "AllowAlways" in options else "AllowOnce"
        await self._connection().answer(request.value.id, AnswerPermission(value=choice))

    def _on_info_changed(self, change: InfoChanged) -> None:
        assert self._info is not None
        update = {
            name: getattr(change, name)
            for name in ("details", "configuration", "resume_token", "title")
            if getattr(change, name) is not None
        }
        if change.deterministic_turn_end is not None or change.deterministic_agent_turn_end is not None:
            prompted, agent = self._turns.deterministic
            self._turns.deterministic = (
                prompted if change.deterministic_turn_end is None else change.deterministic_turn_end,
                agent if change.deterministic_agent_turn_end is None else change.deterministic_agent_turn_end,
            )
        if update:
            self._info = self._info.model_copy(update=update)
            self._emit(SessionUpdated(value=self._snapshot()))

    # ------------------------------------------------------------------------------------------- quiet timer

    def _rearm(self) -> None:
        which = self._turns.quiet()
        if which is None:
            self._quiet_deadline = None
            return
        quiet = self.settings.quiet_agent if which == "agent" else self.settings.quiet_prompted
        was_unarmed = self._quiet_deadline is None
        self._quiet_deadline = anyio.current_time() + quiet
        if was_unarmed:
            self._timer_wake.set()

    async def _timer(self) -> None:
        while True:
            self._timer_wake = anyio.Event()
            deadline = self._quiet_deadline
            if deadline is None:
                await self._timer_wake.wait()
                continue
            delay = deadline - anyio.current_time()
            if delay > 0:
                with anyio.move_on_after(delay):
                    await self._timer_wake.wait()
                continue
            self._quiet_deadline = None
            if self._perform_all(self._turns.quiet_expired()):
                await self._promote()

    # ------------------------------------------------------------------------------------------- shutdown

    async def _shutdown(self, error: AnyagentError | None, stop: StopReason, *, answer_pending: bool = True) -> None:
        if self._shutdown_started:
            return
        self._shutdown_started = True
        if self._terminal_error is None:
            self._terminal_error = error
        self._perform(self._turns.shutdown(stop))
        with anyio.CancelScope(shield=True):
            await self._shutdown_agent(answer_pending)
        self.projections.note_closed()
        self.closed_at = time.monotonic()
        self.log.close()
        if self._scope is not None:
            self._scope.cancel()
        else:
            self._closed.set()
        if self._on_closed is not None:
            self._on_closed(self)

    async def _shutdown_agent(self, answer_pending: bool = True) -> None:
        # See close(): the connection's close() (close_unanswered() when the agent's open requests are left
        # unanswered), its kill() when that runs out or raises, then the engine's own kill of what still runs at
        # the end of the grace.
        conn = self._conn
        if conn is None:
            return
        grace = self.settings.close_grace
        with anyio.move_on_after(grace) as scope:
            try:
                await (conn.close() if answer_pending else conn.close_unanswered())
            except Exception:  # noqa: BLE001 - a failing close still ends in a kill
                scope.cancel()
        if scope.cancelled_caught or scope.cancel_called:
            with anyio.move_on_after(grace):
                try:
                    await conn.kill()
                except Exception:  # noqa: BLE001 - what it left running is killed below
                    pass
        processes = self._processes()
        if not any(process.running() for process in processes):
            return
        with anyio.move_on_after(scope.deadline - anyio.current_time()):  # what is left of the grace
            for process in processes:
                await process.wait()  # the agents themselves
            while any(process.running() for process in processes):
                await anyio.sleep(0.05)  # what they leave behind, until it has ended or the grace has
        killed = await self._kill_left(processes)
        if killed:
            self.killed_at_close = tuple(killed)
            self._emit(
                diagnostic(
                    "Warning",
                    f"the agent's processes {killed} were still running {grace:g} s after "
                    "close began (the adapter's close() left them); killed",
                )
            )

    def _processes(self) -> list[AgentProcess]:
        # The session's agent processes: those started while it connected, and the connection's own `process`
        # (a ProcessConnection's), once each. The process toolkit is loaded only if the adapter uses it.
        found = list(self._spawned)
        own = getattr(self._conn, "process", None)
        if own is not None and all(own is not p for p in found):
            from ..adapters.process import AgentProcess

            if isinstance(own, AgentProcess):
                found.append(own)
        return found

    @staticmethod
    async def _kill_left(processes: list[AgentProcess]) -> list[int]:
        # SIGKILL the tree (group and lineage) of each process with something still running; returns those pids.
        killed: list[int] = []
        for process in processes:
            running = process.running()
            if running:
                killed += running
                await process.kill()
        return sorted(killed)


def _validate_answer(request: Any, answer: Any) -> None:
    if isinstance(request, PermissionRequested):
        if not isinstance(answer, AnswerPermission):
            raise InvalidRequest("a permission request needs a Permission answer")
        if answer.value not in request.value.options:
            raise InvalidRequest(f"{answer.value} is not among the offered options {request.value.options}")
        return
    if not isinstance(answer, AnswerQuestion):
        raise InvalidRequest("a question needs a Question answer")
    questions = request.value.questions
    if len(answer.value) != len(questions):
        raise InvalidRequest(f"expected {len(questions)} answers, got {len(answer.value)}")
    for question, reply in zip(questions, answer.value, strict=True):
        if reply.TAG == "Text":
            if not question.allows_free_text:
                raise InvalidRequest(f"question {question.id!r} does not allow free text")
            continue
        chosen = reply.value
        if not chosen:
            raise InvalidRequest(f"question {question.id!r}: choose at least one choice")
        if len(chosen) > 1 and not question.multi_select:
            raise InvalidRequest(f"question {question.id!r} allows one choice")
        offered = {c.id for c in question.choices}
        unknown = [c for c in chosen if c not in offered]
        if unknown:
            raise InvalidRequest(f"question {question.id!r}: unknown choices {unknown}")


__all__ = ["Session", "next_session_id"]
