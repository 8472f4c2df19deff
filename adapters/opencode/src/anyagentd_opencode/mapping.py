"""opencode's server-sent events → the event model, for one session: the connection's protocol state
(``docs/agents/opencode.md#events-to-events``).

Events (``{"type": ..., "properties": {...}}``, opencode 1.18): ``message.updated`` (a message's role),
``message.part.updated`` (a part's snapshot: text, reasoning, tool with its ``state``, step-finish with tokens),
``message.part.delta`` (text appended to a part), ``permission.asked``, ``session.error``, ``session.idle`` (the
prompt is done). Text parts of assistant messages become TextDelta (from the deltas, or from the snapshot where no
delta came), tool parts ToolUpdated, a step-finish ContextUsage (with ``anyagentd/tokens``, once a part: see
:func:`step_tokens`), the end of an assistant message MessageEnded (with
``opencode/fork_point`` = its message id, the ``fork_at`` that keeps the history up to it). The summary a compaction
writes (an assistant message with ``summary``) is the agent's bookkeeping: nothing of it is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anyagentd.engine.projections import TOKENS_EXTENSION
from anyagentd.model import (
    Command,
    ContextUsage,
    FileDiff,
    MessageEnded,
    PathInput,
    PermissionRequest,
    PermissionRequested,
    ReasoningDelta,
    RequestOpened,
    TextDelta,
    ToolUpdate,
    ToolUpdated,
)

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink
    from anyagentd.model import ToolInput

FORK_POINT = "opencode/fork_point"
"""Extension on MessageEnded: the message's id, usable as ``fork_at``."""

TOOL_KINDS = {
    "write": "Edit",
    "edit": "Edit",
    "patch": "Edit",
    "bash": "Execute",
    "read": "Read",
    "glob": "Search",
    "grep": "Search",
    "list": "Search",
    "webfetch": "Fetch",
    "task": "Subagent",
}
TOOL_STATUS = {"pending": "Pending", "running": "Running", "completed": "Completed", "error": "Failed"}
PERMISSION_KINDS = {"edit": "Edit", "bash": "Execute", "webfetch": "Fetch"}


def tool_update(part: dict[str, Any]) -> ToolUpdate:
    """A tool part's snapshot as a ``ToolUpdate`` (id: the model's call id)."""
    state = part.get("state") or {}
    args = state.get("input") or {}
    name = str(part.get("tool") or "tool")
    kind = TOOL_KINDS.get(name, "Other")
    tool_input: ToolInput = "None"
    if isinstance(args.get("command"), str):
        tool_input = Command(command=args["command"])
    elif isinstance(args.get("filePath"), str):
        tool_input = PathInput(value=args["filePath"])
    diffs = []
    if name == "write" and isinstance(args.get("content"), str) and isinstance(args.get("filePath"), str):
        diffs.append(FileDiff(path=args["filePath"], new_text=args["content"]))
    output = state.get("output") if isinstance(state.get("output"), str) else state.get("error")
    return ToolUpdate(
        id=str(part.get("callID") or part.get("id")),
        kind=kind,
        title=str(state.get("title") or name),
        status=TOOL_STATUS.get(state.get("status"), "Running"),
        input=tool_input,
        output=output if isinstance(output, str) else None,
        diffs=diffs,
    )


def step_tokens(tokens: dict[str, Any]) -> dict[str, int] | None:
    """The :data:`~anyagentd.engine.projections.TOKENS_EXTENSION` value of a step-finish part's ``tokens`` (one
    model call), or None when it counts none: ``in`` = ``input`` + ``cache.read`` + ``cache.write`` (opencode's
    ``input`` leaves the cached tokens out), ``out`` = ``output`` + ``reasoning``."""
    cache = tokens.get("cache") or {}

    def count(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    counted = {
        "in": count(tokens.get("input")) + count(cache.get("read")) + count(cache.get("write")),
        "out": count(tokens.get("output")) + count(tokens.get("reasoning")),
    }
    return counted if counted["in"] or counted["out"] else None


class SessionEvents:
    """One session's protocol state and the mapping of its events; ``link`` is the connection's. Besides what the
    events have shown, it holds the turn the connection runs: ``turn`` (a prompt of ours, or a compaction, is
    running until ``session.idle``) and ``cancelled`` (we aborted it)."""

    def __init__(self, link: AdapterLink, session_id: str) -> None:
        self.link = link
        self.session_id = session_id
        self.roles: dict[str, str] = {}  # message id → role
        self.parts: dict[str, str] = {}  # part id → type
        self.emitted: dict[str, int] = {}  # text part id → characters reported
        self.tools: dict[str, ToolUpdate] = {}  # call id → last update
        self.counted: set[str] = set()  # step-finish part ids whose tokens were reported (a snapshot may repeat)
        self.open_messages: set[str] = set()
        self.error: str | None = None
        self.turn = False
        self.cancelled = False

    def ours(self, props: dict[str, Any]) -> bool:
        sid = props.get("sessionID") or (props.get("info") or {}).get("sessionID")
        if sid is None and isinstance(props.get("part"), dict):
            sid = props["part"].get("sessionID")
        return sid == self.session_id

    async def handle(self, event: dict[str, Any]) -> str | None:
        """Report what ``event`` shows; returns ``"idle"`` when the session is done with the prompt (or the
        compaction), ``"compacted"`` when a compaction was written, else ``None``."""
        kind = event.get("type")
        props = event.get("properties") or {}
        if not isinstance(props, dict) or not self.ours(props):
            return None
        if kind == "message.updated":
            info = props.get("info") or {}
            role = "summary" if info.get("summary") is True and info.get("role") == "assistant" else info.get("role")
            self.roles[str(info.get("id"))] = str(role)
            if info.get("role") == "assistant" and (info.get("time") or {}).get("completed"):
                await self._end_message(str(info.get("id")))
        elif kind == "message.part.updated":
            await self._part(props.get("part") or {})
        elif kind == "message.part.delta":
            await self._delta(props)
        elif kind == "session.error":
            error = props.get("error") or {}
            self.error = str((error.get("data") or {}).get("message") or error.get("name") or "opencode failed")
        elif kind == "session.compacted":
            return "compacted"
        elif kind == "session.idle":
            for message_id in sorted(self.open_messages):
                await self._end_message(message_id)
            return "idle"
        return None

    async def _part(self, part: dict[str, Any]) -> None:
        part_id, message_id, kind = str(part.get("id")), str(part.get("messageID")), part.get("type")
        self.parts[part_id] = str(kind)
        if self.roles.get(message_id) in ("user", "summary"):
            return
        if kind in ("text", "reasoning") and isinstance(part.get("text"), str):
            text = part["text"]
            done = self.emitted.get(part_id, 0)
            if len(text) > done:
                await self._text(kind, message_id, part_id, text[done:])
        elif kind == "tool":
            update = tool_update(part)
            if self.tools.get(update.id) != update:
                self.tools[update.id] = update
                await self.link.emit(ToolUpdated(value=update))
        elif kind == "step-finish":
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            used = sum(int(tokens.get(k) or 0) for k in ("input", "output", "reasoning"))
            used += int(cache.get("read") or 0) + int(cache.get("write") or 0)
            cost = part.get("cost")
            counted = step_tokens(tokens) if part_id not in self.counted else None
            self.counted.add(part_id)
            await self.link.emit(
                ContextUsage(used_tokens=used, cost_usd=float(cost) if cost is not None else None),
                extensions={TOKENS_EXTENSION: counted} if counted else None,
            )

    async def _delta(self, props: dict[str, Any]) -> None:
        part_id, message_id = str(props.get("partID")), str(props.get("messageID"))
        delta = props.get("delta")
        kind = self.parts.get(part_id)
        if (
            self.roles.get(message_id) in ("user", "summary")
            or props.get("field", "text") != "text"
            or not isinstance(delta, str)
        ):
            return
        if kind in ("text", "reasoning"):
            await self._text(kind, message_id, part_id, delta)

    async def _text(self, kind: str, message_id: str, part_id: str, text: str) -> None:
        self.emitted[part_id] = self.emitted.get(part_id, 0) + len(text)
        self.open_messages.add(message_id)
        event = TextDelta if kind == "text" else ReasoningDelta
        await self.link.emit(event(message_id=message_id, text=text))

    async def _end_message(self, message_id: str) -> None:
        if message_id in self.open_messages:
            self.open_messages.discard(message_id)
            await self.link.emit(MessageEnded(message_id=message_id), extensions={FORK_POINT: message_id})

    def permission(self, props: dict[str, Any]) -> RequestOpened:
        """The RequestOpened for a ``permission.asked`` event."""
        request_id = str(props.get("id"))
        tool = props.get("tool") or {}
        call = tool.get("callID") if isinstance(tool, dict) else None
        known = self.tools.get(str(call)) if call else None
        meta = props.get("metadata") or {}
        kind = PERMISSION_KINDS.get(str(props.get("permission")), "Other")
        if known is None:
            known = ToolUpdate(
                id=str(call or request_id), kind=kind, title=str(props.get("permission")), status="Pending"
            )
        if kind == "Edit" and not known.diffs and isinstance(meta.get("filepath"), str):
            known = known.model_copy(update={"locations": [meta["filepath"]]})
        request = PermissionRequest(
            id=request_id,
            tool=known,
            options=["AllowOnce", "AllowAlways", "DenyOnce"],
            detail=", ".join(map(str, props.get("patterns") or [])) or None,
        )
        return RequestOpened(value=PermissionRequested(value=request))
