"""Live projections of a session, kept by the engine from the events it emits (never by adapters).

:class:`Projections` folds each event, as it is emitted, into what a reader wants at any moment without replaying
the stream: the transcript (user prompts, assistant messages assembled from their deltas, reasoning, tool calls
with their latest status, requests and their answers), the current plan and its progress (``"n/m done"``), the
open requests, usage (context tokens, window, cost, tokens in/out when the agent reports them), the current tool,
the phase and the time of the last event. The engine adds what the events do not carry: a prompt's text
(:meth:`Projections.note_prompt`), a request's answer (:meth:`Projections.note_answer`) and the end of the session
(:meth:`Projections.note_closed`). These feed the A2A ops ``conversation.get``, ``plan.get`` and ``status.activity``.

Cost per event: a dict lookup on the tag (for another delta of the same message, a class test) and a few attribute
stores; a delta appends its text to a list (joined when read), and event models are kept by reference, rendered only
by ``to_json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..model import ACTIVE_TOOL_STATUSES, kind_tag

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from ..model import (
        Answer,
        ContextUsage,
        EventKind,
        MessageEnded,
        PlanEntry,
        PlanUpdated,
        ReasoningDelta,
        Request,
        RequestClosed,
        RequestOpened,
        TextDelta,
        ToolOutputDelta,
        ToolUpdate,
        ToolUpdated,
        TurnContext,
        TurnEnded,
        TurnStarted,
        UserMessage,
    )

TOKENS_EXTENSION = "anyagentd/tokens"
"""Extension an adapter may put on a ``ContextUsage`` event: ``{"in": int, "out": int}``, the tokens the agent's
model read and wrote since the previous report; the usage projection sums them (the event model itself carries
only the context occupancy)."""

Phase = Literal["idle", "working", "thinking", "responding", "tool", "needs_input", "closed"]
EntryKind = Literal["prompt", "message", "reasoning", "tool", "request"]
_COMPACT_PARTS = 512  # join a message's delta list when it gets this long, so a long answer stays one string


def _dump(model: BaseModel | None) -> Any:
    """``model`` as JSON-able data (arbitrary JSON: the model's own shape), None for None."""
    return None if model is None else model.model_dump(mode="json")


@dataclass(slots=True, eq=False)
class Entry:
    """One transcript entry.

    ``kind``: prompt (the caller's, ``role`` user), message (``role`` user for provider-originated user content,
    assistant otherwise), reasoning, tool, request. ``id``: the prompt, message, tool or request id. ``status``:
    a tool's latest ``ToolStatus``; a request's ``open`` / ``answered`` / ``closed`` (closed unanswered: by
    cancel, close, or the turn's end); a prompt's ``started`` / ``steered``; None for messages. ``tool`` holds the
    latest ``ToolUpdate``, ``request`` the ``Request`` and ``answer`` the ``Answer`` (models, by reference).
    """

    kind: EntryKind
    role: Literal["user", "assistant"]
    id: str
    turn_id: str | None = None
    parent_tool_id: str | None = None
    status: str | None = None
    tool: ToolUpdate | None = None
    request: Request | None = None
    answer: Answer | None = None
    attachments: tuple[str, ...] = ()
    parts: list[str] = field(default_factory=list, repr=False)
    """The pieces :attr:`text` joins (appended by :meth:`append`; the projections' fast path appends in place)."""

    @property
    def text(self) -> str:
        """The text: a prompt's, a message's assembled deltas, a tool's streamed output (``ToolOutputDelta``)."""
        parts = self.parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    def append(self, text: str) -> None:
        """Add ``text`` to the entry's text (pieces are joined every ``_COMPACT_PARTS`` appends)."""
        parts = self.parts
        parts.append(text)
        if len(parts) >= _COMPACT_PARTS:
            parts[:] = ["".join(parts)]

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict: kind, role, id, turn_id, parent_tool_id, status, text, and tool / request / answer /
        attachments where they apply."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "role": self.role,
            "id": self.id,
            "turn_id": self.turn_id,
            "parent_tool_id": self.parent_tool_id,
            "status": self.status,
            "text": self.text,
        }
        if self.kind == "tool":
            out["tool"] = _dump(self.tool)
        elif self.kind == "request":
            out["request"] = _dump(self.request)
            out["answer"] = _dump(self.answer)
        elif self.kind == "prompt":
            out["attachments"] = list(self.attachments)
        return out


@dataclass(slots=True)
class Usage:
    """Usage as last reported: ``used_tokens`` in the context window of ``window_tokens`` (None: unknown),
    ``cost_usd`` (US dollars, as the agent reports it: a running total for the agents that report one),
    ``tokens_in`` / ``tokens_out`` summed over the session from :data:`TOKENS_EXTENSION` (None: never reported),
    ``reports``: how many ``ContextUsage`` events arrived."""

    used_tokens: int | None = None
    window_tokens: int | None = None
    cost_usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    reports: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "used_tokens": self.used_tokens,
            "window_tokens": self.window_tokens,
            "cost_usd": self.cost_usd,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "reports": self.reports,
        }


class Projections:
    """The projections of one session; read the attributes at any moment (also after close).

    ``transcript`` (list of :class:`Entry`), ``plan`` (the latest ``PlanEntry`` list, None before any),
    ``progress`` (``"n/m done"`` or None), ``open_requests`` (the ``Request`` models now open, oldest first),
    ``usage`` (:class:`Usage`), ``current_tool`` (the ``ToolUpdate`` most recently updated while still
    Pending/Running, else None), ``phase`` (idle, working, thinking, responding, tool, needs_input, closed),
    ``turn_id`` (the running turn's), ``turns`` (turns started), ``last_activity`` (epoch seconds of the last
    event, None before any).
    """

    def __init__(self) -> None:
        self.transcript: list[Entry] = []
        self.plan: list[PlanEntry] | None = None
        self.usage = Usage()
        self.current_tool: ToolUpdate | None = None
        self.phase: Phase = "idle"
        self.turn_id: str | None = None
        self.turns = 0
        self._requests: dict[str, Entry] = {}  # open request id -> entry
        self._messages: dict[tuple[str | None, str, str], Entry] = {}  # (parent, message id, kind) -> open entry
        self._tools: dict[str, Entry] = {}  # tool id -> entry (latest call with that id)
        self._last_ns: int | None = None
        # The delta fast path: the last delta's class, turn context (one shared instance per turn and parent) and
        # message id, and its entry's parts; any other event clears it.
        self._fast: tuple[type, TurnContext | None, str] | None = None
        self._fast_parts: list[str] = []
        # Dispatch on the tag: each handler takes its tag's kind (the tag names the kind's class, so `Any` here).
        self._handlers: dict[str, Callable[[Any, TurnContext | None, dict[str, Any] | None], None]] = {
            "TurnStarted": self._turn_started,
            "TextDelta": self._text,
            "ReasoningDelta": self._reasoning,
            "UserMessage": self._user_message,
            "MessageEnded": self._message_ended,
            "ToolUpdated": self._tool,
            "ToolOutputDelta": self._tool_output,
            "PlanUpdated": self._plan,
            "RequestOpened": self._request_opened,
            "RequestClosed": self._request_closed,
            "ContextUsage": self._context_usage,
            "TurnEnded": self._turn_ended,
        }

    # ------------------------------------------------------------------------------------------- reading

    @property
    def open_requests(self) -> list[Request]:
        return [entry.request for entry in self._requests.values() if entry.request is not None]  # all have one

    @property
    def progress(self) -> str | None:
        plan = self.plan
        if not plan:
            return None
        done = sum(1 for entry in plan if entry.status == "Completed")
        return f"{done}/{len(plan)} done"

    @property
    def last_activity(self) -> float | None:
        return None if self._last_ns is None else self._last_ns / 1e9

    def to_json(self, *, limit: int | None = None) -> dict[str, Any]:
        """Everything as JSON-able data; ``limit`` keeps only the newest transcript entries."""
        entries = self.transcript if limit is None else self.transcript[-limit:] if limit > 0 else []
        return {
            "transcript": [entry.to_json() for entry in entries],
            "plan": None if self.plan is None else [_dump(entry) for entry in self.plan],
            "progress": self.progress,
            "open_requests": [_dump(request) for request in self.open_requests],
            "usage": self.usage.to_json(),
            "current_tool": _dump(self.current_tool),
            "phase": self.phase,
            "turn_id": self.turn_id,
            "turns": self.turns,
            "last_activity": self.last_activity,
        }

    # ------------------------------------------------------------------------------------------- folding

    def apply(self, kind: EventKind, turn_info: TurnContext | None, extensions: dict[str, Any] | None, ns: int) -> None:
        """Fold one emitted event (its kind, turn context, extensions — JSON values — and wall clock in ns) in."""
        self._last_ns = ns
        fast = self._fast
        # The fast path's `type: ignore`s: `kind` is of the last delta's class (fast[0]), so a delta (no cast on it).
        # It tests the class, not the tag: kind_tag per event was 3 % of a flood's CPU (issue 31).
        if fast is not None and fast[0] is kind.__class__ and fast[1] is turn_info and fast[2] == kind.message_id:  # type: ignore[union-attr]
            parts = self._fast_parts  # another delta of the same message: nothing else changed since the last
            parts.append(kind.text)  # type: ignore[union-attr]
            if len(parts) >= _COMPACT_PARTS:
                parts[:] = ["".join(parts)]
            return
        self._fast = None
        handler = self._handlers.get(kind_tag(kind))
        if handler is not None:
            handler(kind, turn_info, extensions)

    def note_prompt(
        self, prompt_id: str, text: str, attachments: tuple[str, ...], turn_id: str, *, steered: bool = False
    ) -> None:
        """A caller's prompt went to the agent, starting ``turn_id`` or steered into it."""
        entry = Entry(
            "prompt",
            "user",
            prompt_id,
            turn_id,
            status="steered" if steered else "started",
            attachments=tuple(attachments),
        )
        entry.parts.append(text)
        self.transcript.append(entry)

    def note_answer(self, request_id: str, answer: Answer) -> None:
        """The caller answered an open request (its RequestClosed follows)."""
        entry = self._requests.get(request_id)
        if entry is not None:
            entry.answer = answer

    def note_closed(self) -> None:
        """The session ended."""
        self.phase = "closed"
        self.current_tool = None

    def _turn_started(
        self, kind: TurnStarted, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        self.turn_id = turn_info.id if turn_info is not None else None
        self.turns += 1
        self.phase = "working"

    def _delta(
        self,
        kind: TextDelta | ReasoningDelta | UserMessage,
        turn_info: TurnContext | None,
        entry_kind: EntryKind,
        role: Literal["user", "assistant"],
        phase: Phase,
    ) -> None:
        parent = turn_info.parent_tool_id if turn_info is not None else None
        key = (parent, kind.message_id, entry_kind)
        entry = self._messages.get(key)
        if entry is None:
            turn_id = turn_info.id if turn_info is not None else None
            entry = self._messages[key] = Entry(entry_kind, role, kind.message_id, turn_id, parent)
            self.transcript.append(entry)
        entry.append(kind.text)
        if not self._requests:
            self.phase = phase
        self._fast, self._fast_parts = (kind.__class__, turn_info, kind.message_id), entry.parts

    def _text(self, kind: TextDelta, turn_info: TurnContext | None, extensions: dict[str, Any] | None) -> None:
        self._delta(kind, turn_info, "message", "assistant", "responding")

    def _reasoning(
        self, kind: ReasoningDelta, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        self._delta(kind, turn_info, "reasoning", "assistant", "thinking")

    def _user_message(
        self, kind: UserMessage, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        self._delta(kind, turn_info, "message", "user", "working")

    def _message_ended(
        self, kind: MessageEnded, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        parent = turn_info.parent_tool_id if turn_info is not None else None
        for entry_kind in ("message", "reasoning"):
            self._messages.pop((parent, kind.message_id, entry_kind), None)

    def _tool(self, kind: ToolUpdated, turn_info: TurnContext | None, extensions: dict[str, Any] | None) -> None:
        tool = kind.value
        entry = self._tools.get(tool.id)
        if entry is None or (entry.turn_id is not None and turn_info is not None and entry.turn_id != turn_info.id):
            parent = turn_info.parent_tool_id if turn_info is not None else None
            turn_id = turn_info.id if turn_info is not None else None
            entry = self._tools[tool.id] = Entry("tool", "assistant", tool.id, turn_id, parent)
            self.transcript.append(entry)
        entry.tool = tool
        entry.status = tool.status
        if tool.status in ACTIVE_TOOL_STATUSES:
            self.current_tool = tool
            if not self._requests:
                self.phase = "tool"
        elif self.current_tool is not None and self.current_tool.id == tool.id:
            self.current_tool = None
            if self.phase == "tool":
                self.phase = "working"

    def _tool_output(
        self, kind: ToolOutputDelta, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        entry = self._tools.get(kind.tool_id)
        if entry is not None:
            entry.append(kind.text)

    def _plan(self, kind: PlanUpdated, turn_info: TurnContext | None, extensions: dict[str, Any] | None) -> None:
        self.plan = list(kind.entries)

    def _request_opened(
        self, kind: RequestOpened, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        request = kind.value
        turn_id = turn_info.id if turn_info is not None else None
        parent = turn_info.parent_tool_id if turn_info is not None else None
        entry = Entry("request", "assistant", request.value.id, turn_id, parent, status="open", request=request)
        self._requests[entry.id] = entry
        self.transcript.append(entry)
        self.phase = "needs_input"

    def _request_closed(
        self, kind: RequestClosed, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        entry = self._requests.pop(kind.request_id, None)
        if entry is not None:
            entry.status = "answered" if entry.answer is not None else "closed"
        if not self._requests and self.phase == "needs_input":
            self.phase = "working" if self.turn_id is not None else "idle"

    def _context_usage(
        self, kind: ContextUsage, turn_info: TurnContext | None, extensions: dict[str, Any] | None
    ) -> None:
        usage = self.usage
        usage.used_tokens = kind.used_tokens
        usage.reports += 1
        if kind.window_tokens is not None:
            usage.window_tokens = kind.window_tokens
        if kind.cost_usd is not None:
            usage.cost_usd = kind.cost_usd
        reported = reported_tokens(extensions)
        if reported is not None:
            usage.tokens_in = (usage.tokens_in or 0) + reported[0]
            usage.tokens_out = (usage.tokens_out or 0) + reported[1]

    def _turn_ended(self, kind: TurnEnded, turn_info: TurnContext | None, extensions: dict[str, Any] | None) -> None:
        self.turn_id = None
        self._messages.clear()
        self.current_tool = None
        self.phase = "idle"


def reported_tokens(extensions: dict[str, Any] | None) -> tuple[int, int] | None:
    """``(in, out)``: the tokens a ``ContextUsage`` event's :data:`TOKENS_EXTENSION` reports since the previous
    report (a missing or malformed count is 0); ``None`` when the event carries no such extension. Pure."""
    tokens = extensions.get(TOKENS_EXTENSION) if extensions else None
    if not isinstance(tokens, dict):
        return None
    counts = [tokens.get(name) for name in ("in", "out")]
    in_, out = (v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0 for v in counts)
    return in_, out


__all__ = ["Entry", "Projections", "TOKENS_EXTENSION", "Usage", "reported_tokens"]
