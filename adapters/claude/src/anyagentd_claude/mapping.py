"""Claude Code's stream-json stdout frames → normalized events (``docs/agents/claude.md#frames-to-events``).

:class:`FrameMapper` is the per-session state machine; :meth:`FrameMapper.handle` takes one parsed stdout frame
(anything but ``control_request``/``control_response``, which :mod:`.connection` routes) and reports through an
:class:`~anyagentd.adapters.interface.AdapterLink` (or anything with the same ``emit``/``turn_ended``/
``info_changed``/``auth_lost`` methods). It never raises on a frame: whatever it cannot read becomes an Info
diagnostic carrying the raw frame in ``extensions["claude/raw"]``.

Mapping, by frame:

- ``stream_event``: ``message_start`` opens a message (its API id becomes ``message_id``), ``text_delta`` →
  TextDelta, ``thinking_delta`` → ReasoningDelta, ``message_stop`` → MessageEnded with extension
  ``claude/fork_point`` = the uuid of the message's last ``assistant`` line (usable as ``fork_at``).
- ``assistant``: one line per content block. ``tool_use`` → ToolUpdated Running (``TodoWrite`` →
  PlanUpdated). Text/thinking of a message that was not streamed (subagents, ``<synthetic>`` messages) is
  emitted from the line itself; a synthetic message with an ``error`` becomes a Warning diagnostic (the turn's
  ``result`` carries the failure), and ``error: "authentication_failed"`` reports auth lost.
- ``user``: ``tool_result`` blocks → ToolUpdated Completed/Failed with the output text (a background Bash stays
  Running until its ``task_notification``; the engine reads a failure after a cancel as Cancelled); a subagent's
  prompt → UserMessage; replays of our own prompts are dropped; ``<local-command-stdout>`` output during a turn → text.
- ``system``: ``init`` → resume token (``session_id``) and the ``mode`` option; ``status`` → the ``mode``
  option, a failed compaction → Warning; ``compact_boundary`` → ``ContextCompacted`` then ContextUsage
  (``post_tokens``); ``api_retry`` → Warning; ``task_notification`` → the background tool's end.
- ``result`` → ContextUsage (tokens of the last main-thread API call: input + cache + output, window from
  ``modelUsage[*].contextWindow``, ``cost_usd`` = ``total_cost_usd``; the ``anyagentd/tokens`` extension: the
  turn's tokens from the result's ``usage``, see :func:`turn_tokens` — reported once, at the turn's end) then TurnEnded: ``is_error`` false →
  Completed(Protocol); aborted or interrupted → Cancelled; else Failed(result/errors text), which the engine reads
  as Cancelled when it follows our interrupt.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from anyagentd.engine.projections import TOKENS_EXTENSION
from anyagentd.model import (
    COMPLETED_PROTOCOL,
    ContextUsage,
    FailedStop,
    MessageEnded,
    PlanUpdated,
    ReasoningDelta,
    SessionConfiguration,
    TextDelta,
    ToolUpdate,
    ToolUpdated,
    UserMessage,
    diagnostic,
)

from .state import ClaudeState
from .tools import PLAN_TOOL, plan_entries, result_text, tool_update

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink
    from anyagentd.model import ConfigValue, LoginMethod, StopReason

FORK_POINT = "claude/fork_point"
"""Extension on MessageEnded: the uuid of the message's last ``assistant`` line, usable as ``fork_at``."""

RAW = "claude/raw"
"""Extension on the Info diagnostic of an unknown frame: the frame itself."""

IGNORED_SYSTEM = frozenset(
    {
        "hook_started",
        "hook_progress",
        "hook_response",
        "session_state_changed",
        "task_started",
        "task_progress",
        "files_persisted",
        "elicitation_complete",
        "notification",
    }
)
"""``system`` subtypes that carry nothing the event model has a place for; dropped silently."""

IGNORED_TYPES = frozenset(
    {
        "keep_alive",
        "tool_progress",
        "prompt_suggestion",
        "rate_limit_event",
        "auth_status",
        "tool_use_summary",
        "streamlined_text",
        "streamlined_tool_use_summary",
    }
)
"""Top-level frame types dropped silently (progress ticks, suggestions, rate-limit notices)."""

_LOCAL_OUTPUT = re.compile(r"<local-command-(stdout|stderr)>(.*?)</local-command-\1>", re.S)
_BACKGROUND_ID = re.compile(r"running in background with ID:\s*(\S+)", re.I)


class FrameMapper:
    """Per-session mapping of stdout frames: open messages, the usage of the last API call, background tasks.

    ``link``: where reports go. ``state``: the session's protocol state (:class:`~.state.ClaudeState`, shared with
    the connection: the turn, the session id, the options, the tool snapshots); a fresh one when omitted.
    ``cwd``: the session directory. ``login``: the login methods reported when auth is lost.
    """

    def __init__(
        self,
        link: AdapterLink,
        state: ClaudeState | None = None,
        *,
        cwd: str | None = None,
        login: list[LoginMethod] | None = None,
    ) -> None:
        self.link = link
        self.state = state if state is not None else ClaudeState()
        self.cwd = cwd
        self.login = list(login or [])
        self._tool_names: dict[str, str] = {}
        self._background: dict[str, str] = {}  # background task id -> tool id
        self._streamed: set[str] = set()  # API message ids seen in message_start
        self._streaming: dict[str | None, str] = {}  # parent -> message id being streamed
        self._fork_points: dict[str, str] = {}  # message id -> uuid of its last assistant line
        self._unstreamed: dict[str | None, str] = {}  # parent -> open message id that is not streamed
        self._usage_in = 0
        self._usage_out = 0
        self._last_window: int | None = None

    # ------------------------------------------------------------------------------------------- entry

    async def handle(self, frame: Any) -> None:
        """Map one stdout frame (decoded JSON). Never raises: a frame it cannot read becomes an Info diagnostic."""
        try:
            if not isinstance(frame, dict):
                await self._unknown(frame, "a stdout line that is not a JSON object")
                return
            kind = frame.get("type")
            handler = {
                "stream_event": self._stream_event,
                "assistant": self._assistant,
                "user": self._user,
                "system": self._system,
                "result": self._result,
            }.get(kind)  # type: ignore[arg-type]
            if handler is not None:
                await handler(frame)
            elif kind not in IGNORED_TYPES:
                await self._unknown(frame, f"unknown Claude Code frame type {kind!r}")
        except Exception as exc:  # noqa: BLE001 - never crash on a frame
            await self._unknown(frame, f"could not map a Claude Code frame ({type(exc).__name__}: {exc})")

    async def _unknown(self, frame: Any, message: str) -> None:
        await self.link.emit(diagnostic("Info", message), extensions={RAW: frame})

    # ------------------------------------------------------------------------------------------- stream events

    async def _stream_event(self, frame: dict[str, Any]) -> None:
        event = frame.get("event") or {}
        parent = frame.get("parent_tool_use_id")
        etype = event.get("type")
        if etype == "message_start":
            message = event.get("message") or {}
            mid = message.get("id") or frame.get("uuid") or "message"
            self._streamed.add(mid)
            self._streaming[parent] = mid
            if parent is None:
                usage = message.get("usage") or {}
                self._usage_in = (
                    _int(usage.get("input_tokens"))
                    + _int(usage.get("cache_creation_input_tokens"))
                    + _int(usage.get("cache_read_input_tokens"))
                )
                self._usage_out = _int(usage.get("output_tokens"))
        elif etype == "content_block_delta":
            delta = event.get("delta") or {}
            mid = self._streaming.get(parent)
            if mid is None:
                return
            if delta.get("type") == "text_delta" and delta.get("text"):
                await self.link.emit(TextDelta(message_id=mid, text=delta["text"]), parent_tool_id=parent)
            elif delta.get("type") == "thinking_delta" and delta.get("thinking"):
                await self.link.emit(ReasoningDelta(message_id=mid, text=delta["thinking"]), parent_tool_id=parent)
        elif etype == "message_delta":
            usage = event.get("usage") or {}
            if parent is None and "output_tokens" in usage:
                self._usage_out = _int(usage.get("output_tokens"))
        elif etype == "message_stop":
            mid = self._streaming.pop(parent, None)
            if mid is not None:
                fork = self._fork_points.get(mid)
                await self.link.emit(
                    MessageEnded(message_id=mid), parent_tool_id=parent, extensions={FORK_POINT: fork} if fork else None
                )
        # content_block_start/stop, ping, input_json_delta, signature_delta: nothing to report

    # ------------------------------------------------------------------------------------------- assistant

    async def _assistant(self, frame: dict[str, Any]) -> None:
        message = frame.get("message") or {}
        parent = frame.get("parent_tool_use_id")
        mid = message.get("id") or frame.get("uuid") or "message"
        if frame.get("uuid"):
            self._fork_points[mid] = frame["uuid"]
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if content else []
        synthetic = message.get("model") == "<synthetic>"
        if synthetic and frame.get("error"):
            text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            await self.link.emit(
                diagnostic("Warning", text or f"Claude Code error: {frame['error']}"), parent_tool_id=parent
            )
            if frame.get("error") == "authentication_failed":
                await self.link.auth_lost(self.login)
            return
        streamed = mid in self._streamed
        if not streamed:
            previous = self._unstreamed.get(parent)
            if previous is not None and previous != mid:
                await self._end_unstreamed(parent)
        for block in blocks:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_use":
                await self._tool_use(block, parent)
            elif streamed:
                continue
            elif btype == "text" and block.get("text"):
                self._unstreamed[parent] = mid
                await self.link.emit(TextDelta(message_id=mid, text=block["text"]), parent_tool_id=parent)
            elif btype == "thinking" and block.get("thinking"):
                self._unstreamed[parent] = mid
                await self.link.emit(ReasoningDelta(message_id=mid, text=block["thinking"]), parent_tool_id=parent)
        if synthetic and not streamed:
            await self._end_unstreamed(parent)

    async def _end_unstreamed(self, parent: str | None) -> None:
        mid = self._unstreamed.pop(parent, None)
        if mid is not None:
            fork = self._fork_points.get(mid)
            await self.link.emit(
                MessageEnded(message_id=mid), parent_tool_id=parent, extensions={FORK_POINT: fork} if fork else None
            )

    async def _tool_use(self, block: dict[str, Any], parent: str | None) -> None:
        tool_id = str(block.get("id") or "")
        name = str(block.get("name") or "tool")
        self._tool_names[tool_id] = name
        self.state.tool_parents[tool_id] = parent
        if name == PLAN_TOOL:
            await self.link.emit(PlanUpdated(entries=plan_entries(block.get("input"))), parent_tool_id=parent)
            return
        update = tool_update(tool_id, name, block.get("input"), self.cwd)
        self.state.tools[tool_id] = update
        await self.link.emit(ToolUpdated(value=update), parent_tool_id=parent)

    # ------------------------------------------------------------------------------------------- user

    async def _user(self, frame: dict[str, Any]) -> None:
        message = frame.get("message") or {}
        parent = frame.get("parent_tool_use_id")
        content = message.get("content")
        if frame.get("isReplay"):
            text = content if isinstance(content, str) else _texts(content)
            outputs = [m.group(2).strip() for m in _LOCAL_OUTPUT.finditer(text or "")]
            if outputs and self.state.turn_running:
                mid = str(frame.get("uuid") or "local-command")
                await self.link.emit(TextDelta(message_id=mid, text="\n".join(outputs)), parent_tool_id=parent)
                await self.link.emit(MessageEnded(message_id=mid), parent_tool_id=parent)
            return
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                await self._tool_result(block, frame, parent)
            if results:
                return
        if parent is not None and not frame.get("isSynthetic"):
            text = content if isinstance(content, str) else _texts(content)
            if text:
                mid = str(frame.get("uuid") or f"user-{parent}")
                await self.link.emit(UserMessage(message_id=mid, text=text), parent_tool_id=parent)
        # Other user lines ("[Request interrupted by user]", compaction summaries, meta lines) are the
        # CLI's own bookkeeping: the turn's end and ContextCompacted already say it.

    async def _tool_result(self, block: dict[str, Any], frame: dict[str, Any], parent: str | None) -> None:
        tool_id = str(block.get("tool_use_id") or "")
        name = self._tool_names.get(tool_id)
        if name == PLAN_TOOL:
            return
        output = result_text(block.get("content"))
        structured = frame.get("tool_use_result")
        previous = self.state.tools.get(tool_id) or ToolUpdate(id=tool_id)
        status = "Failed" if block.get("is_error") else "Completed"
        if status == "Completed" and name == "Bash":
            task = structured.get("backgroundTaskId") if isinstance(structured, dict) else None
            match = _BACKGROUND_ID.search(output)
            task = task or (match.group(1) if match else None)
            if task:
                self._background[str(task)] = tool_id
                status = "Running"
        update = previous.model_copy(update={"status": status, "output": output})
        self.state.tools[tool_id] = update
        await self.link.emit(ToolUpdated(value=update), parent_tool_id=self.state.tool_parents.get(tool_id, parent))

    # ------------------------------------------------------------------------------------------- system

    async def _system(self, frame: dict[str, Any]) -> None:
        subtype = frame.get("subtype")
        if subtype == "init":
            self.state.last_init = frame
            if self.state.session_seen(frame.get("session_id")):
                await self.link.info_changed(resume_token=self.state.session_id)
            if isinstance(frame.get("permissionMode"), str):
                await self.set_options(mode=frame["permissionMode"])
        elif subtype == "status":
            if isinstance(frame.get("permissionMode"), str):
                await self.set_options(mode=frame["permissionMode"])
            if frame.get("compact_result") == "failed":
                reason = frame.get("compact_error") or "unknown reason"
                await self.link.emit(diagnostic("Warning", f"compaction failed: {reason}"))
        elif subtype == "compact_boundary":
            meta = frame.get("compact_metadata") or {}
            await self.link.emit("ContextCompacted")
            post = meta.get("post_tokens")
            if isinstance(post, int) and post >= 0:
                window = self._window_hint()
                await self.link.emit(ContextUsage(used_tokens=post, window_tokens=window))
        elif subtype == "api_retry":
            status = frame.get("error_status")
            await self.link.emit(
                diagnostic(
                    "Warning",
                    f"model API request failed ({status if status is not None else 'no response'}: "
                    f"{frame.get('error')}); retry {frame.get('attempt')}/{frame.get('max_retries')} "
                    f"in {frame.get('retry_delay_ms')} ms",
                )
            )
        elif subtype == "task_notification":
            await self._task_notification(frame)
        elif subtype == "local_command_output":
            if self.state.turn_running and frame.get("content"):
                mid = str(frame.get("uuid") or "local-command")
                await self.link.emit(TextDelta(message_id=mid, text=str(frame["content"])))
                await self.link.emit(MessageEnded(message_id=mid))
        elif subtype not in IGNORED_SYSTEM:
            await self._unknown(frame, f"unknown Claude Code system frame {subtype!r}")

    async def _task_notification(self, frame: dict[str, Any]) -> None:
        tool_id = frame.get("tool_use_id") or self._background.get(str(frame.get("task_id")))
        if not tool_id or tool_id not in self.state.tools:
            return
        self._background = {k: v for k, v in self._background.items() if v != tool_id}
        status = {"completed": "Completed", "failed": "Failed", "stopped": "Cancelled"}.get(
            str(frame.get("status")), "Completed"
        )
        previous = self.state.tools[tool_id]
        summary = frame.get("summary")
        output = "\n".join(p for p in (previous.output, summary if isinstance(summary, str) else None) if p)
        update = previous.model_copy(update={"status": status, "output": output or previous.output})
        self.state.tools[tool_id] = update
        await self.link.emit(ToolUpdated(value=update), parent_tool_id=self.state.tool_parents.get(tool_id))

    async def set_options(self, **changes: ConfigValue) -> None:
        """Update option values; report ``info_changed(configuration=...)`` when something changed."""
        options = self.state.options
        if all(options.get(k) == v for k, v in changes.items()):
            return
        options.update(changes)
        await self.link.info_changed(configuration=SessionConfiguration(options=dict(options)))

    # ------------------------------------------------------------------------------------------- result

    def _window_hint(self, model_usage: object = None) -> int | None:
        usage = model_usage if isinstance(model_usage, dict) else {}
        windows = [m.get("contextWindow") for m in usage.values() if isinstance(m, dict)]
        windows = [w for w in windows if isinstance(w, int) and w > 0]
        if not windows:
            return self._last_window
        model = (self.state.last_init or {}).get("model")
        chosen = usage.get(model, {}).get("contextWindow") if isinstance(usage.get(model), dict) else None
        self._last_window = chosen if isinstance(chosen, int) and chosen > 0 else windows[-1]
        return self._last_window

    async def _result(self, frame: dict[str, Any]) -> None:
        for parent in list(self._unstreamed):
            await self._end_unstreamed(parent)
        for parent, mid in list(self._streaming.items()):  # a stream cut by an interrupt
            self._streaming.pop(parent, None)
            await self.link.emit(MessageEnded(message_id=mid), parent_tool_id=parent)
        usage = frame.get("usage") or {}
        tokens = turn_tokens(usage)
        used = self._usage_in + self._usage_out or tokens["in"] + tokens["out"]
        window = self._window_hint(frame.get("modelUsage"))
        cost = frame.get("total_cost_usd")
        if used > 0:
            await self.link.emit(
                ContextUsage(
                    used_tokens=used,
                    window_tokens=window,
                    cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
                ),
                extensions={TOKENS_EXTENSION: tokens} if tokens["in"] or tokens["out"] else None,
            )
        self._usage_in = self._usage_out = 0
        stop = self.stop_reason(frame)
        self.state.turn_ended()
        await self.link.turn_ended(stop)

    def stop_reason(self, frame: dict[str, Any]) -> StopReason:
        """The ``StopReason`` of a ``result`` frame."""
        terminal = str(frame.get("terminal_reason") or "")
        if not frame.get("is_error"):
            return COMPLETED_PROTOCOL
        if terminal.startswith("aborted") or terminal == "interrupted":
            return "Cancelled"
        text = frame.get("result")
        if not isinstance(text, str) or not text:
            errors = frame.get("errors")
            text = "; ".join(str(e) for e in errors) if isinstance(errors, list) and errors else None
        return FailedStop(message=text or f"Claude Code turn failed ({frame.get('subtype') or 'error'})")


def turn_tokens(usage: object) -> dict[str, int]:
    """The :data:`~anyagentd.engine.projections.TOKENS_EXTENSION` value of a ``result`` frame's ``usage`` (Claude
    Code's sum over the turn's API calls): ``in`` = input + cache creation + cache read tokens, ``out`` = output
    tokens; missing or non-positive fields count 0."""
    usage = usage if isinstance(usage, dict) else {}
    return {
        "in": _int(usage.get("input_tokens"))
        + _int(usage.get("cache_creation_input_tokens"))
        + _int(usage.get("cache_read_input_tokens")),
        "out": _int(usage.get("output_tokens")),
    }


def _int(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _texts(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""
