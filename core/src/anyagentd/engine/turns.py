"""Every rule of a session's turns, in one place and without I/O (``docs/engine.md#turn-boundaries``).

:class:`Turns` holds one session's turn state (the running :class:`Turn`, the prompt queue, the steer in flight,
the status) and is moved only by its report methods: a prompt arrived, the agent acknowledged or ended a turn or
answered a steer, an event arrived, a cancel was asked or its grace expired, the quiet timer fired, a request was
answered, the session shuts down. Each method returns, in order, what the shell (:class:`~.session.Session`) must
do: :class:`Emit` an event, note something for the projections, or perform one I/O action (:class:`StartTurn`,
:class:`SendSteer`, :class:`ForwardCancel`, :class:`AutoApprove`), which is always last. Nothing here awaits, reads a
clock or touches an adapter; the shell feeds the outcome of an action back (``start_failed``, ``steer_failed``…).

The phases (:data:`Phase`) are derived from that state, and :data:`MOVES` is the only list of the moves a report
makes (phase × report → the phases it may lead to; an empty set: the report is refused in that phase with the
error the commands raise, ``SessionClosed`` or ``SessionBusy``). Every report method checks its move against the
table (:class:`TurnStateError` for one the table lacks: a bug here, never the caller's input), except
:meth:`Turns.delta`, the flood path, which never changes the phase.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..errors import AnyagentError, InvalidRequest, SessionBusy, SessionClosed
from ..model import (
    ACTIVE_TOOL_STATUSES,
    COMPLETED_INFERRED,
    ENGINE_OWNED_KINDS,
    Delivery,
    FailedStop,
    MessageEnded,
    PermissionRequested,
    PromptOrigin,
    Queued,
    ReasoningDelta,
    RequestClosed,
    SessionStatus,
    StatusChanged,
    Steered,
    TextDelta,
    ToolUpdated,
    TurnContext,
    TurnEnded,
    TurnStarted,
    UserMessage,
    diagnostic,
    kind_tag,
)

Phase = Literal["idle", "unacked", "running", "cancelling_unacked", "cancelling", "closed"]
"""``idle``: no turn runs; ``unacked``: a prompted turn the agent has not acknowledged
(``docs/engine.md#turnack-gating``); ``running``: an acknowledged turn; ``cancelling_unacked`` /
``cancelling``: the same once cancelled; ``closed``: the session shut down (nothing starts any more)."""
Report = Literal[
    "prompt",
    "steer_failed",
    "steered",
    "ack",
    "event",
    "turn_ended",
    "start_failed",
    "promote",
    "answer",
    "answered",
    "cancel",
    "cancel_grace",
    "quiet",
    "compact",
    "dequeue",
    "shutdown",
]

# The one list of each: the Literal types (what the checker holds callers to) read at run time.
PHASES: tuple[Phase, ...] = get_args(Phase)
REPORTS: tuple[Report, ...] = get_args(Report)

_TURN_PHASES: tuple[Phase, ...] = ("unacked", "running", "cancelling_unacked", "cancelling")


def _moves() -> dict[Phase, dict[Report, frozenset[Phase]]]:
    table: dict[Phase, dict[Report, frozenset[Phase]]] = {}
    for phase in PHASES:
        keep = frozenset({phase})
        row: dict[Report, frozenset[Phase]] = {report: keep for report in REPORTS}
        table[phase] = row
    # Idle: a prompt or the head of the queue starts a turn (or queues), content opens an agent turn.
    table["idle"].update(
        {
            "prompt": frozenset({"idle", "unacked"}),
            "promote": frozenset({"idle", "unacked"}),
            "event": frozenset({"idle", "running"}),
            "compact": frozenset({"running"}),
            "shutdown": frozenset({"closed"}),
        }
    )
    for phase in _TURN_PHASES:
        row = table[phase]
        row.update(
            {
                "compact": frozenset(),
                "quiet": frozenset({"idle"}),
                "start_failed": frozenset({phase, "idle"}),
                "shutdown": frozenset({"closed"}),
            }
        )
    # The acknowledgement: frames from now on are the turn's.
    table["unacked"]["ack"] = frozenset({"running"})
    table["cancelling_unacked"]["ack"] = frozenset({"cancelling"})
    # A turn end is the acknowledged turn's (an unacknowledged turn's is stale: dropped).
    table["running"]["turn_ended"] = frozenset({"idle"})
    table["cancelling"]["turn_ended"] = frozenset({"idle"})
    # Cancel marks the turn; its grace ends it when the agent did not.
    table["unacked"]["cancel"] = frozenset({"cancelling_unacked"})
    table["running"]["cancel"] = frozenset({"cancelling"})
    table["cancelling_unacked"]["cancel_grace"] = frozenset({"idle"})
    table["cancelling"]["cancel_grace"] = frozenset({"idle"})
    # Closed: the commands are refused; the agent's late reports change nothing.
    for report in ("prompt", "answer", "cancel", "compact", "dequeue"):
        table["closed"][report] = frozenset()
    return table


MOVES: dict[Phase, dict[Report, frozenset[Phase]]] = _moves()
"""Phase × report → the phases the report may lead to; ``frozenset()``: refused in that phase."""


class TurnStateError(RuntimeError):
    """A move :data:`MOVES` does not allow (a bug in :class:`Turns`, never the caller's input)."""


# ------------------------------------------------------------------------------------------------ state


@dataclass
class Turn:
    """The running turn: its id, whether the agent started it (``agent_originated``) and acknowledged it
    (``acked``), its open messages, open requests (id -> Request) and tools (id -> ToolStatus), and whether the
    engine forwarded a cancel (``cancelled``: failures reported from then on are the cancel's)."""

    id: str
    agent_originated: bool
    acked: bool
    open_messages: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    open_requests: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    cancelled: bool = False
    contexts: dict[str | None, TurnContext] = field(default_factory=dict)

    def context(self, parent_tool_id: str | None = None) -> TurnContext:
        """The turn_info for this turn's events (one instance per parent tool id; events share it)."""
        context = self.contexts.get(parent_tool_id)
        if context is None:
            context = self.contexts[parent_tool_id] = TurnContext(id=self.id, parent_tool_id=parent_tool_id)
        return context


@dataclass
class Prompt:
    """A prompt the session took: its id (``p1``, ``p2``…) and its input, opaque here (the adapter's
    ``PromptInput``)."""

    prompt_id: str
    input: Any


@dataclass
class Steer:
    """The steer in flight: its prompt and the turn it was sent to."""

    prompt: Prompt
    turn_id: str


# ------------------------------------------------------------------------------------------------ outputs


@dataclass(frozen=True, slots=True)
class Emit:
    """Emit this event."""

    kind: Any
    turn_info: TurnContext | None = None
    extensions: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class NotePrompt:
    """Tell the projections a prompt runs in ``turn_id`` (before its ``TurnStarted``)."""

    prompt: Prompt
    turn_id: str
    steered: bool = False


@dataclass(frozen=True, slots=True)
class NoteAnswer:
    """Tell the projections how a request was answered (before its ``RequestClosed``)."""

    request_id: str
    answer: Any


@dataclass(frozen=True, slots=True)
class TurnOpened:
    """A turn began: the shell's waiters for its end start waiting."""

    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnClosed:
    """The turn ended: wake its waiters, disarm the quiet timer."""

    turn_id: str


@dataclass(frozen=True, slots=True)
class Rearm:
    """Re-arm the quiet timer from :meth:`Turns.quiet`."""


@dataclass(frozen=True, slots=True)
class SettleSteer:
    """The steer in flight is settled: its ``prompt`` call returns ``delivery`` or raises ``error``."""

    delivery: Delivery | None = None
    error: AnyagentError | None = None


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The prompt was queued at ``position`` (action-free: the ``prompt`` call returns ``Queued``)."""

    delivery: Delivery


@dataclass(frozen=True, slots=True)
class StartTurn:
    """I/O: send StartTurn for ``turn_id``; on an ``AnyagentError`` report :meth:`Turns.start_failed`."""

    turn_id: str
    prompt: Prompt


@dataclass(frozen=True, slots=True)
class SendSteer:
    """I/O: send Steer; if it raises report :meth:`Turns.steer_failed`, else wait for the steer to be settled."""

    prompt: Prompt


@dataclass(frozen=True, slots=True)
class ForwardCancel:
    """I/O: forward Cancel to the adapter, then report :meth:`Turns.cancel_sent`."""

    turn_id: str
    first: bool


@dataclass(frozen=True, slots=True)
class StartGrace:
    """Start the cancel deadline of ``turn_id``: after ``cancel_grace`` report :meth:`Turns.grace_expired`."""

    turn_id: str


@dataclass(frozen=True, slots=True)
class AutoApprove:
    """I/O: answer this permission request for the caller (``permission_mode`` AutoApprove)."""

    request: Any


REARM = Rearm()
_MESSAGE_CLASSES: frozenset[type[TextDelta | ReasoningDelta | UserMessage]] = frozenset(
    {TextDelta, ReasoningDelta, UserMessage}
)
CONTENT_KINDS = frozenset({"TextDelta", "ReasoningDelta", "UserMessage", "RequestOpened"})
MESSAGE_KINDS = frozenset({"TextDelta", "ReasoningDelta", "UserMessage"})


def is_content(tag: str, kind: Any) -> bool:
    """Whether an event is turn content: a message delta, a request, or a tool ``Pending``/``Running``."""
    if tag == "ToolUpdated":
        return kind.value.status in ACTIVE_TOOL_STATUSES
    return tag in CONTENT_KINDS


# ------------------------------------------------------------------------------------------------ the machine


class Turns:
    """One session's turn rules (module docstring). ``deterministic`` is (prompted, agent-originated): whether the
    adapter reports the end of each kind of turn (else the quiet timer infers it)."""

    def __init__(self) -> None:
        self.turn: Turn | None = None
        self.queue: deque[Prompt] = deque()
        self.steer: Steer | None = None
        self.status: SessionStatus = "Idle"
        self.closing = False  # nothing more is promoted (close began, or the primary reader lagged)
        self.closed = False  # shut down: the commands are refused, nothing starts
        self.owed_end = False  # the engine ended a cancelled turn itself; the agent's own end may still come
        self.deterministic = (True, True)
        self._turn_ids = itertools.count(1)
        self._prompt_ids = itertools.count(1)

    @property
    def phase(self) -> Phase:
        if self.closed:
            return "closed"
        turn = self.turn
        if turn is None:
            return "idle"
        if turn.cancelled:
            return "cancelling" if turn.acked else "cancelling_unacked"
        return "running" if turn.acked else "unacked"

    def _check(self, report: Report, before: Phase) -> None:
        after = self.phase
        if after not in MOVES[before][report]:
            raise TurnStateError(f"{report} moved the session from {before} to {after}")

    def _refuse(self, report: Report) -> Phase:
        # The phase a command finds; the error the command raises when the table refuses it there.
        phase = self.phase
        if not MOVES[phase][report]:
            raise SessionClosed() if phase == "closed" else SessionBusy()
        return phase

    # -------------------------------------------------------------------------------------- prompts

    def prompt(self, prompt_input: Any, *, held: bool, can_steer: bool) -> list[Any]:
        """A prompt arrived. Idle with nothing queued and admission not ``held``: a prompted turn starts (ends in
        :class:`StartTurn`); a turn running, no steer in flight, not held and the agent ``can_steer``: a steer
        (ends in :class:`SendSteer`); else it is queued (ends in :class:`Enqueued`). ``SessionClosed`` once
        closed."""
        before = self._refuse("prompt")
        prompt = Prompt(f"p{next(self._prompt_ids)}", prompt_input)
        out: list[Any] = []
        if self.turn is None and not self.queue and not held:
            turn = self._begin(prompt, out)
            out.append(StartTurn(turn.id, prompt))
        elif self.turn is not None and self.steer is None and not held and can_steer:
            self.steer = Steer(prompt, self.turn.id)
            out.append(SendSteer(prompt))
        else:
            self.queue.append(prompt)
            self._status(out)
            out.append(Enqueued(Delivery(prompt_id=prompt.prompt_id, kind=Queued(position=len(self.queue) - 1))))
        self._check("prompt", before)
        return out

    def steer_failed(self, prompt: Prompt) -> list[Any]:
        """``steer()`` raised: the prompt goes to the head of the queue (ends in :class:`Enqueued`, position 0).
        Nothing if the steer was settled meanwhile (its turn ended, the session shut down): that delivery stands."""
        before = self.phase
        if self.steer is None or self.steer.prompt is not prompt:
            return []
        self.steer = None
        out: list[Any] = []
        self.queue.appendleft(prompt)
        self._status(out)
        out.append(Enqueued(Delivery(prompt_id=prompt.prompt_id, kind=Queued(position=0))))
        self._check("steer_failed", before)
        return out

    def steered(self, accepted: bool) -> list[Any]:
        """The agent answered the steer: accepted only if the same turn still runs; else the prompt goes to the
        head of the queue. Settles the steer (:class:`SettleSteer`)."""
        before = self.phase
        out: list[Any] = []
        self._resolve_steer(accepted, out)
        self._check("steered", before)
        return out

    def _resolve_steer(self, accepted: bool, out: list[Any]) -> None:
        steer, self.steer = self.steer, None
        if steer is None:
            return
        prompt = steer.prompt
        if accepted and self.turn is not None and self.turn.id == steer.turn_id:
            out.append(NotePrompt(prompt, steer.turn_id, steered=True))
            out.append(SettleSteer(Delivery(prompt_id=prompt.prompt_id, kind=Steered(turn_id=steer.turn_id))))
        else:
            self.queue.appendleft(prompt)
            out.append(SettleSteer(Delivery(prompt_id=prompt.prompt_id, kind=Queued(position=0))))

    def dequeue(self, prompt_id: str) -> list[Any]:
        """Remove a queued prompt (it never starts); ``InvalidRequest`` if it is not queued."""
        before = self._refuse("dequeue")
        for queued in self.queue:
            if queued.prompt_id == prompt_id:
                self.queue.remove(queued)
                out: list[Any] = []
                self._status(out)
                self._check("dequeue", before)
                return out
        raise InvalidRequest(f"prompt {prompt_id!r} is not queued")

    def promote(self, *, held: bool, reports_waiting: bool) -> list[Any]:
        """Start the head of the queue (ends in :class:`StartTurn`) when no turn runs, the session is not closing,
        admission does not hold and no report waits in the adapter's channel; else nothing."""
        before = self.phase
        if self.turn is not None or not self.queue or self.closing or self.closed or held or reports_waiting:
            return []
        out: list[Any] = []
        prompt = self.queue.popleft()
        turn = self._begin(prompt, out)
        out.append(StartTurn(turn.id, prompt))
        self._check("promote", before)
        return out

    def start_failed(self, turn_id: str, message: str) -> list[Any]:
        """StartTurn raised: that turn, if it still runs, ends ``Failed{message}``."""
        before = self.phase
        out: list[Any] = []
        if self.turn is not None and self.turn.id == turn_id:
            self._end(FailedStop(message=message), out)
        self._check("start_failed", before)
        return out

    def compact(self) -> tuple[str, list[Any]]:
        """Compact runs as an agent-originated turn: returns its id and what to do. ``SessionBusy`` while a turn
        runs, ``SessionClosed`` once closed. A refusal by the agent is :meth:`start_failed` of that id."""
        before = self._refuse("compact")
        out: list[Any] = []
        turn = self._begin(None, out)
        self._check("compact", before)
        return turn.id, out

    # -------------------------------------------------------------------------------------- the agent's reports

    def ack(self) -> list[Any]:
        """The agent took the last StartTurn: what comes from now on is the running turn's."""
        before = self.phase
        if self.turn is not None:
            self.turn.acked = True
            self.owed_end = False  # what comes after the ack is the new turn's
        self._check("ack", before)
        return []

    def delta(self, kind: Any, parent_tool_id: str | None) -> TurnContext | None:
        """The flood path: a message delta of the running, acknowledged turn is noted open and gets its
        turn_info (the shell emits it and re-arms). ``None`` for anything else (give it to :meth:`event`)."""
        turn = self.turn
        if turn is None or not turn.acked or kind.__class__ not in _MESSAGE_CLASSES:
            return None
        turn.open_messages[kind.message_id] = None
        return turn.context(parent_tool_id)

    def event(
        self,
        kind: Any,
        parent_tool_id: str | None = None,
        extensions: dict[str, Any] | None = None,
        *,
        auto_approve: bool = False,
    ) -> list[Any]:
        """An event the adapter reported. Engine-owned kinds are dropped (a Warning); before the ack, content and
        ``MessageEnded`` are stale (dropped) and the rest passes with no turn_info; content while idle opens an
        agent-originated turn (not once closed: dropped); a ``Failed`` tool of a cancelled turn reads
        ``Cancelled``; a permission request with ``auto_approve`` ends in :class:`AutoApprove` (never open)."""
        tag = kind_tag(kind)
        if tag in ENGINE_OWNED_KINDS:
            return [Emit(diagnostic("Warning", f"adapter emitted engine-owned {tag}; dropped"))]
        before = self.phase
        turn = self.turn
        content = is_content(tag, kind)
        if turn is not None and not turn.acked:
            if content or tag == "MessageEnded":
                return []  # stale: it belongs to the previous turn
            return [Emit(kind, None, extensions)]
        out: list[Any] = []
        if turn is None:
            if not content:
                return [Emit(kind, None, extensions)]
            if self.closed:
                return []  # nothing starts after close
            turn = self._begin(None, out)
        if tag in MESSAGE_KINDS:
            turn.open_messages[kind.message_id] = None
        elif tag == "MessageEnded":
            turn.open_messages.pop(kind.message_id, None)
        elif tag == "ToolUpdated":
            if turn.cancelled and kind.value.status == "Failed":  # a tool our cancel stopped
                kind = ToolUpdated(value=kind.value.model_copy(update={"status": "Cancelled"}))
            turn.tools[kind.value.id] = kind.value.status
        elif tag == "RequestOpened":
            request = kind.value
            if auto_approve and isinstance(request, PermissionRequested):
                out.append(AutoApprove(request))
                self._check("event", before)
                return out
            turn.open_requests[request.value.id] = request
        out.append(Emit(kind, turn.context(parent_tool_id), extensions))
        if tag == "RequestOpened":
            self._status(out)
        out.append(REARM)
        self._check("event", before)
        return out

    def turn_ended(self, stop: Any) -> list[Any]:
        """The agent ended the running turn: it ends with ``stop`` (``Failed`` reads ``Cancelled`` once cancelled).
        Before the ack it is the previous turn's (dropped); while idle it is late: a Warning, except while closing
        and for a cancelled turn the engine ended itself."""
        before = self.phase
        out: list[Any] = []
        turn = self.turn
        if turn is None:
            if self.owed_end:  # the late end of a cancelled turn the engine already ended
                self.owed_end = False
            elif not self.closing:  # on close the engine ended the turn itself; the agent's own end comes late
                out.append(Emit(diagnostic("Warning", "the agent ended a turn while the session was idle")))
        elif turn.acked:
            if turn.cancelled and kind_tag(stop) == "Failed":  # failing on the way out of a cancel is the cancel
                stop = "Cancelled"
            self._end(stop, out)
        self._check("turn_ended", before)
        return out

    # -------------------------------------------------------------------------------------- requests

    def take_request(self, request_id: str, fits: Callable[[Any], None]) -> tuple[Turn, Any]:
        """An answer to ``request_id`` arrived: ``fits(request)`` raises if the answer does not fit it (then it
        stays open); returns its turn and request, no longer open until :meth:`answered` closes it or
        :meth:`answer_failed` opens it again. ``InvalidRequest`` if it is not open, ``SessionClosed`` once
        closed."""
        self._refuse("answer")
        turn = self.turn
        request = turn.open_requests.get(request_id) if turn else None
        if turn is None or request is None:
            raise InvalidRequest(f"request {request_id!r} is not open")
        fits(request)
        del turn.open_requests[request_id]
        return turn, request

    def answer_failed(self, turn: Turn, request_id: str, request: Any) -> None:
        """The adapter's ``answer()`` raised: the request is open again if its turn still runs."""
        if self.turn is turn:
            turn.open_requests[request_id] = request

    def answered(self, turn: Turn, request_id: str, answer: Any) -> list[Any]:
        """The adapter took the answer: the request closes (if its turn still runs)."""
        before = self.phase
        out: list[Any] = []
        turn.open_requests.pop(request_id, None)
        if self.turn is turn:
            out += (NoteAnswer(request_id, answer), Emit(RequestClosed(request_id=request_id), turn.context()), REARM)
        self._status(out)
        self._check("answered", before)
        return out

    # -------------------------------------------------------------------------------------- cancel and timers

    def cancel(self, clear_queue: bool = False) -> list[Any]:
        """Cancel asked: ``clear_queue`` empties the queue; no turn: nothing else; else the turn is marked
        cancelled, its open requests close, and the cancel is forwarded (ends in :class:`ForwardCancel`)."""
        before = self._refuse("cancel")
        out: list[Any] = []
        if clear_queue:
            self.queue.clear()
        turn = self.turn
        if turn is None:
            self._status(out)
            self._check("cancel", before)
            return out
        first = not turn.cancelled
        turn.cancelled = True
        self._close_requests(turn, out)
        out.append(REARM)
        self._status(out)
        out.append(ForwardCancel(turn.id, first))
        self._check("cancel", before)
        return out

    def cancel_sent(self, sent: ForwardCancel) -> list[Any]:
        """The adapter took the cancel: on the first cancel of a turn still running, its deadline starts
        (:class:`StartGrace`)."""
        if sent.first and self.turn is not None and self.turn.id == sent.turn_id:
            return [StartGrace(sent.turn_id)]
        return []

    def grace_expired(self, turn_id: str, grace: float) -> list[Any]:
        """``cancel_grace`` passed since the first cancel of ``turn_id``: if it still runs (and the session is not
        shut down) it ends ``Cancelled`` with a Warning, and the agent's own end of it is owed (dropped when it
        comes)."""
        before = self.phase
        turn = self.turn
        if turn is None or turn.id != turn_id or self.closed:
            return []
        out: list[Any] = [
            Emit(
                diagnostic(
                    "Warning", f"the agent did not end the turn within {grace:g} s of the cancel; ended Cancelled"
                ),
                turn.context(),
            )
        ]
        self.owed_end = True
        self._end("Cancelled", out)
        self._check("cancel_grace", before)
        return out

    def quiet(self) -> Literal["prompted", "agent"] | None:
        """Which quiet timer the running turn needs (``docs/engine.md#inferred-completion``), or ``None``: no turn,
        the adapter reports that kind of turn's end, a request is open or a tool runs."""
        turn = self.turn
        if turn is None or self.deterministic[1 if turn.agent_originated else 0]:
            return None
        if turn.open_requests or any(s in ACTIVE_TOOL_STATUSES for s in turn.tools.values()):
            return None
        return "agent" if turn.agent_originated else "prompted"

    def quiet_expired(self) -> list[Any]:
        """The quiet timer fired: the running turn ends ``Completed{Inferred}``."""
        before = self.phase
        out: list[Any] = []
        if self.turn is not None:
            self._end(COMPLETED_INFERRED, out)
        self._check("quiet", before)
        return out

    def shutdown(self, stop: Any) -> list[Any]:
        """The session shuts down (close, the agent's death, lost login, a protocol failure): a steer in flight
        fails ``SessionClosed``, the queue empties, the running turn ends with ``stop``; closed from now on."""
        before = self.phase
        out: list[Any] = []
        self.closing = self.closed = True
        if self.steer is not None:
            self.steer = None
            out.append(SettleSteer(error=SessionClosed()))
        self.queue.clear()  # nothing queued will ever run: the last status must say so (issue 16.7)
        if self.turn is not None:
            self._end(stop, out)
        self._status(out)
        self._check("shutdown", before)
        return out

    # -------------------------------------------------------------------------------------- internals

    def _status(self, out: list[Any]) -> None:
        turn = self.turn
        if turn is not None:
            status: SessionStatus = "NeedsInput" if turn.open_requests else "Working"
        else:
            status = "Working" if self.queue else "Idle"
        if status != self.status:
            self.status = status
            out.append(Emit(StatusChanged(value=status)))

    def _begin(self, prompt: Prompt | None, out: list[Any]) -> Turn:
        # A prompted turn (unacknowledged until the agent takes it) or an agent-originated one (None).
        agent = prompt is None
        turn = self.turn = Turn(id=f"t{next(self._turn_ids)}", agent_originated=agent, acked=agent)
        out.append(TurnOpened(turn.id))
        if prompt is not None:
            out.append(NotePrompt(prompt, turn.id))
        out.append(
            Emit(
                TurnStarted(origin="Agent" if agent else PromptOrigin(value=prompt.prompt_id)),  # type: ignore[union-attr]
                turn.context(),
            )
        )
        self._status(out)
        out.append(REARM)
        return turn

    @staticmethod
    def _close_requests(turn: Turn, out: list[Any]) -> None:
        for request_id in list(turn.open_requests):
            del turn.open_requests[request_id]
            out.append(Emit(RequestClosed(request_id=request_id), turn.context()))

    def _end(self, stop: Any, out: list[Any]) -> None:
        # Ending a turn (docs/engine.md#turn-boundaries): its messages end, its requests close, TurnEnded, idle; a
        # steer still in flight goes to the head of the queue.
        turn = self.turn
        assert turn is not None
        for message_id in list(turn.open_messages):
            out.append(Emit(MessageEnded(message_id=message_id), turn.context()))
        self._close_requests(turn, out)
        background = sorted(t for t, status in turn.tools.items() if status in ACTIVE_TOOL_STATUSES)
        out.append(Emit(TurnEnded(stop=stop, background=background), turn.context()))
        self.turn = None
        out.append(TurnClosed(turn.id))
        if self.steer is not None:
            self._resolve_steer(False, out)
        self._status(out)


__all__ = [
    "MOVES",
    "PHASES",
    "REPORTS",
    "AutoApprove",
    "Emit",
    "Enqueued",
    "ForwardCancel",
    "NoteAnswer",
    "NotePrompt",
    "Phase",
    "Prompt",
    "Rearm",
    "Report",
    "SendSteer",
    "SettleSteer",
    "StartGrace",
    "StartTurn",
    "Steer",
    "Turn",
    "TurnClosed",
    "TurnOpened",
    "TurnStateError",
    "Turns",
    "is_content",
]
