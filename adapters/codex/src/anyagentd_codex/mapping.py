"""App-server notifications → normalized events (``docs/agents/codex.md#notifications-to-events``).

:class:`NotificationMapper` translates; the session's protocol state it reads and records is the connection's
:class:`~.state.ThreadState`. :meth:`NotificationMapper.handle` takes one notification (``method``, ``params``)
and reports through an :class:`~anyagentd.adapters.interface.AdapterLink` (or anything with the same
``emit``/``turn_ended``/``info_changed``/``auth_lost`` methods). It never raises on a frame: whatever it cannot read becomes an Info diagnostic with the raw frame in ``extensions["codex/raw"]``.

Mapping:

- ``item/agentMessage/delta`` → TextDelta; reasoning ``summaryTextDelta``/``textDelta`` → ReasoningDelta;
  ``item/completed`` of an ``agentMessage``/``reasoning`` → its text if nothing was streamed, then MessageEnded
  with ``extensions["codex/fork_point"]`` = the Codex turn id (``fork_at`` for ``thread/fork``'s
  ``lastTurnId``) and ``codex/item_id``;
- ``item/started``/``item/completed`` of tools (:func:`tool_update`): ``commandExecution`` → Execute,
  ``fileChange`` → Edit (or Delete) with diffs, ``mcpToolCall`` → Mcp, ``webSearch`` → Search,
  ``collabAgentToolCall``/``subAgentActivity`` → Subagent, ``imageView`` → Read, ``dynamicToolCall`` and others →
  Other; ``item/commandExecution/outputDelta`` and ``item/fileChange/outputDelta`` → ToolOutputDelta;
- ``contextCompaction`` completed → ContextCompacted, then the latest ContextUsage again;
- ``turn/plan/updated`` → PlanUpdated; a ``plan`` item → text;
- ``thread/tokenUsage/updated`` → ContextUsage (``last.totalTokens`` of the window ``modelContextWindow``) with
  the ``anyagentd/tokens`` extension of the last call (:func:`call_tokens`), left off when the thread's ``total``
  is unchanged (a repeated report);
- ``account/rateLimits/updated`` → PlanUsageUpdated (when a window is reported);
- ``turn/completed`` → items still active become Cancelled (interrupted; their late ``item/completed`` is
  dropped) or Failed — except commands the connection could not stop (the state's ``survivors``), which stay Running and so
  are listed in TurnEnded.background — then
  TurnEnded: ``completed`` → Completed(Protocol), ``interrupted`` → Cancelled, ``failed`` → Failed(error message);
- ``error`` → Warning (``willRetry``) or Error diagnostic; ``codexErrorInfo: unauthorized`` or an HTTP 401 →
  auth lost; ``warning``/``configWarning``/``deprecationNotice``/``guardianWarning`` → Warning;
  ``thread/name/updated`` → title; ``model/rerouted`` → Info + the ``model`` option.

Subagents run in their own threads: frames whose ``threadId`` is not the session's thread are attributed to the
tool call that spawned the thread (``parent_tool_id``; the ``collabAgentToolCall``'s ``receiverThreadIds`` or the
``subAgentActivity``'s ``agentThreadId``, else the child thread id itself). A child's ``turn/started`` /
``turn/completed`` never start or end the session's turn; its prompt is a UserMessage.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from anyagentd.engine.projections import TOKENS_EXTENSION
from anyagentd.model import (
    COMPLETED_PROTOCOL,
    Command,
    ContextUsage,
    FailedStop,
    FileDiff,
    Mcp,
    MessageEnded,
    PathInput,
    PlanEntry,
    PlanUpdated,
    PlanUsage,
    PlanUsageUpdated,
    QueryInput,
    RawTool,
    ReasoningDelta,
    SessionConfiguration,
    SystemTime,
    TextDelta,
    TextInput,
    ToolOutputDelta,
    ToolUpdate,
    ToolUpdated,
    UsageWindow,
    UserMessage,
    diagnostic,
)

from . import protocol as p
from .state import ThreadState

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink
    from anyagentd.model import ConfigValue, LoginMethod, StopReason

RAW = "codex/raw"
FORK_POINT = "codex/fork_point"
ITEM_ID = "codex/item_id"

MESSAGE_ITEMS = frozenset({"agentMessage", "reasoning", "plan"})
QUIET_ITEMS = frozenset({"userMessage", "hookPrompt", "functionCallOutput", "enteredReviewMode", "exitedReviewMode"})

_STATUS = {
    "inProgress": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "declined": "Failed",
    "interrupted": "Cancelled",
}
_PLAN_STATUS = {"pending": "Pending", "inProgress": "InProgress", "completed": "Completed"}
_SHELL_WRAPPER = re.compile(r"^(?:/\S*/)?(?:ba|z)?sh -lc '(.*)'$", re.DOTALL)


# ------------------------------------------------------------------------------------------------ tools


def _command_text(item: dict[str, Any]) -> str:
    command = str(item.get("command") or "")
    actions = item.get("commandActions")
    if isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict) and actions[0].get("command"):
        return str(actions[0]["command"])
    match = _SHELL_WRAPPER.match(command)
    return match.group(1) if match else command


def split_unified_diff(diff: str) -> tuple[str, str]:
    """Old and new text of a unified diff's hunks (context lines in both)."""
    old: list[str] = []
    new: list[str] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("---", "+++", "@@", "\\")):
            continue
        if line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:
            text = line.removeprefix(" ")
            old.append(text)
            new.append(text)
    return "".join(old), "".join(new)


def file_diffs(changes: Any) -> tuple[list[FileDiff], list[str], bool]:
    """``fileChange.changes`` → diffs, paths, and whether every change is a deletion."""
    diffs: list[FileDiff] = []
    paths: list[str] = []
    deletes = 0
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict) or not change.get("path"):
            continue
        path = str(change["path"])
        kind = change.get("kind")
        kind = kind.get("type") if isinstance(kind, dict) else kind
        diff = str(change.get("diff") or "")
        paths.append(path)
        if kind == "add":
            diffs.append(FileDiff(path=path, old_text=None, new_text=diff))
        elif kind == "delete":
            deletes += 1
            diffs.append(FileDiff(path=path, old_text=diff, new_text=""))
        else:
            old, new = split_unified_diff(diff)
            diffs.append(FileDiff(path=path, old_text=old, new_text=new))
    return diffs, paths, bool(paths) and deletes == len(paths)


def _mcp_output(item: dict[str, Any]) -> str | None:
    error = item.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    result = item.get("result")
    if not isinstance(result, dict):
        return None
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    if result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return None


def tool_update(item: dict[str, Any], cwd: str | None = None, previous: ToolUpdate | None = None) -> ToolUpdate | None:
    """The ``ToolUpdate`` snapshot of a tool-like ``ThreadItem``; ``None`` for messages and bookkeeping items."""
    itype = item.get("type")
    item_id = str(item.get("id") or "")
    status = _STATUS.get(str(item.get("status")), "Running" if previous is None else previous.status)
    if itype == "commandExecution":
        command = _command_text(item)
        output = item.get("aggregatedOutput")
        if output is None and previous is not None:
            output = previous.output
        return ToolUpdate(
            id=item_id,
            kind="Execute",
            title=command,
            status=status,
            input=Command(command=command, cwd=item.get("cwd") or cwd),
            output=output,
            raw=RawTool(name="commandExecution", input={"command": item.get("command")}),
        )
    if itype == "fileChange":
        diffs, paths, deletes = file_diffs(item.get("changes"))
        title = ("Delete " if deletes else "Edit ") + ", ".join(paths) if paths else "Edit files"
        return ToolUpdate(
            id=item_id,
            kind="Delete" if deletes else "Edit",
            title=title,
            status=status,
            input=PathInput(value=paths[0]) if len(paths) == 1 else "None",
            diffs=diffs,
            locations=paths,
            output=previous.output if previous else None,
        )
    if itype == "mcpToolCall":
        server, tool = str(item.get("server") or ""), str(item.get("tool") or "")
        return ToolUpdate(
            id=item_id,
            kind=Mcp(server=server, tool=tool),
            title=f"{server}: {tool}",
            status=status,
            output=_mcp_output(item),
            raw=RawTool(name=f"mcp__{server}__{tool}", input=item.get("arguments")),
        )
    if itype == "webSearch":
        query = str(item.get("query") or "")
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        if action.get("type") == "openPage" and action.get("url"):
            return ToolUpdate(
                id=item_id,
                kind="Fetch",
                title=f"Open {action['url']}",
                status=status,
                input=TextInput(value=str(action["url"])),
            )
        status = _STATUS.get(str(item.get("status")), "Completed" if previous is not None else "Running")
        return ToolUpdate(
            id=item_id,
            kind="Search",
            title=f"Search: {query}" if query else "Web search",
            status=status,
            input=QueryInput(value=query) if query else "None",
        )
    if itype == "collabAgentToolCall":
        prompt = item.get("prompt")
        return ToolUpdate(
            id=item_id,
            kind="Subagent",
            title=str(item.get("tool") or "agent"),
            status=status,
            input=TextInput(value=prompt) if isinstance(prompt, str) and prompt else "None",
            raw=RawTool(
                name=str(item.get("tool") or "collabAgentToolCall"),
                input={k: item.get(k) for k in ("receiverThreadIds", "model", "prompt")},
            ),
        )
    if itype == "subAgentActivity":
        kind = item.get("kind")
        status = {
            "started": "Running",
            "interacted": "Running",
            "completed": "Completed",
            "interrupted": "Cancelled",
        }.get(str(kind), status)
        return ToolUpdate(
            id=item_id,
            kind="Subagent",
            title=str(item.get("agentPath") or "subagent"),
            status=status,
            raw=RawTool(name="subAgentActivity", input={"agentThreadId": item.get("agentThreadId")}),
        )
    if itype == "imageView":
        return ToolUpdate(
            id=item_id,
            kind="Read",
            title=f"View {item.get('path')}",
            status=status,
            input=PathInput(value=str(item.get("path") or "")),
            locations=[str(item.get("path") or "")],
        )
    if itype in ("dynamicToolCall", "imageGeneration", "sleep"):
        name = str(item.get("tool") or itype)
        return ToolUpdate(
            id=item_id, kind="Other", title=name, status=status, raw=RawTool(name=name, input=item.get("arguments"))
        )
    return None


# ------------------------------------------------------------------------------------------------ mapper


def _epoch(seconds: object) -> SystemTime | None:
    return (
        SystemTime(secs_since_epoch=int(seconds), nanos_since_epoch=0)
        if isinstance(seconds, int) and seconds >= 0
        else None
    )


def _window_label(minutes: int | None, fallback: str) -> str:
    if not minutes:
        return fallback
    if minutes % (60 * 24 * 7) == 0:
        weeks = minutes // (60 * 24 * 7)
        return "weekly" if weeks == 1 else f"{weeks}w"
    if minutes % (60 * 24) == 0:
        return f"{minutes // (60 * 24)}d"
    if minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m"


def call_tokens(last: p.TokenUsageBreakdown) -> dict[str, int] | None:
    """The :data:`~anyagentd.engine.projections.TOKENS_EXTENSION` value of one model call's usage, or None when it
    has none: ``in`` = ``inputTokens`` (cached input included, as in the Responses API's ``input_tokens``),
    ``out`` = ``outputTokens`` (reasoning included: ``reasoningOutputTokens`` is a part of it, so not added)."""
    tokens = {"in": max(0, last.inputTokens), "out": max(0, last.outputTokens)}
    return tokens if tokens["in"] or tokens["out"] else None


def plan_usage(snapshot: p.RateLimitSnapshot) -> PlanUsage | None:
    """A rate-limit snapshot → ``PlanUsage`` (``None`` when it reports no window)."""
    windows = []
    for name, window in (("primary", snapshot.primary), ("secondary", snapshot.secondary)):
        if window is None:
            continue
        windows.append(
            UsageWindow(
                label=_window_label(window.windowDurationMins, name),
                used_percent=max(0, min(255, int(window.usedPercent))),
                resets_at=_epoch(window.resetsAt),
            )
        )
    if not windows:
        return None
    return PlanUsage(plan=snapshot.planType, windows=windows)


def is_unauthorized(error: p.TurnError) -> bool:
    info = error.codexErrorInfo
    if info == "unauthorized":
        return True
    if isinstance(info, dict):
        for value in info.values():
            if isinstance(value, dict) and value.get("httpStatusCode") == 401:
                return True
    return False


class NotificationMapper:
    """Translation of notifications into events (see the module doc): it reads and records the session's
    protocol state in ``state`` (a :class:`~.state.ThreadState`, the connection's) and keeps none of its own.
    ``cwd``: the session directory; ``login``: the login methods reported when auth is lost."""

    def __init__(
        self, link: AdapterLink, state: ThreadState, *, cwd: str | None = None, login: list[LoginMethod] | None = None
    ) -> None:
        self.link = link
        self.state = state
        self.cwd = cwd
        self.login = login or []

    # ------------------------------------------------------------------------------------------ dispatch

    async def handle(self, method: str, params: Any, frame: Any = None) -> None:
        """Map one notification (``params`` and the whole ``frame`` as decoded JSON); never raises on its content."""
        try:
            await self._handle(method, params if isinstance(params, dict) else {}, frame)
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(x) for x in first.get("loc", ()))
            await self._unknown(frame, f"unreadable Codex {method} notification ({where}: {first.get('msg')})")
        except Exception as exc:  # noqa: BLE001 - never crash on a frame
            await self._unknown(frame, f"could not map Codex {method} ({type(exc).__name__}: {exc})")

    async def _unknown(self, frame: Any, message: str) -> None:
        await self.link.emit(diagnostic("Info", message), extensions={RAW: frame})

    def parent_of(self, thread_id: object) -> str | None:
        return self.state.parent_of(thread_id)

    async def _handle(self, method: str, params: dict[str, Any], frame: Any) -> None:
        if method in (p.N_ITEM_STARTED, p.N_ITEM_COMPLETED):
            note = p.ItemNotification.model_validate(params)
            await self._item(note, completed=method == p.N_ITEM_COMPLETED)
        elif method == p.N_AGENT_DELTA or method == p.N_PLAN_DELTA:
            note = p.DeltaNotification.model_validate(params)
            await self._delta(note, TextDelta)
        elif method in (p.N_REASONING_SUMMARY, p.N_REASONING_TEXT):
            note = p.DeltaNotification.model_validate(params)
            await self._delta(note, ReasoningDelta)
        elif method in (p.N_COMMAND_OUTPUT, p.N_FILE_OUTPUT):
            note = p.DeltaNotification.model_validate(params)
            if note.delta:
                await self.link.emit(
                    ToolOutputDelta(tool_id=note.itemId, text=note.delta), parent_tool_id=self.parent_of(note.threadId)
                )
        elif method == p.N_TURN_STARTED:
            note = p.TurnNotification.model_validate(params)
            if self.parent_of(note.threadId) is None:
                self.state.turn_id = note.turn.id
                self.state.turn_started = True
        elif method == p.N_TURN_COMPLETED:
            note = p.TurnNotification.model_validate(params)
            if self.parent_of(note.threadId) is None:
                await self.turn_completed(note.turn)
        elif method == p.N_PLAN_UPDATED:
            note = p.PlanNotification.model_validate(params)
            entries = [PlanEntry(text=s.step, status=_PLAN_STATUS.get(s.status, "Pending")) for s in note.plan]
            await self.link.emit(PlanUpdated(entries=entries), parent_tool_id=self.parent_of(note.threadId))
        elif method == p.N_TOKEN_USAGE:
            note = p.TokenUsageNotification.model_validate(params)
            if self.parent_of(note.threadId) is None:
                usage = ContextUsage(
                    used_tokens=max(0, note.tokenUsage.last.totalTokens),
                    window_tokens=note.tokenUsage.modelContextWindow,
                )
                self.state.last_usage = usage  # re-emitted after a compaction, without tokens
                total, self.state.last_total = self.state.last_total, note.tokenUsage.total
                tokens = call_tokens(note.tokenUsage.last) if note.tokenUsage.total != total else None
                await self.link.emit(usage, extensions={TOKENS_EXTENSION: tokens} if tokens else None)
        elif method == p.N_RATE_LIMITS:
            note = p.RateLimitsNotification.model_validate(params)
            usage = plan_usage(note.rateLimits)
            if usage is not None:
                await self.link.emit(PlanUsageUpdated(value=usage))
        elif method == p.N_ERROR:
            note = p.ErrorNotification.model_validate(params)
            text = note.error.message + (f" ({note.error.additionalDetails})" if note.error.additionalDetails else "")
            await self.link.emit(
                diagnostic("Warning" if note.willRetry else "Error", text or "Codex error"),
                parent_tool_id=self.parent_of(note.threadId),
                extensions={RAW: frame},
            )
            if is_unauthorized(note.error) and not note.willRetry:
                await self.link.auth_lost(self.login)
        elif method in (p.N_WARNING, p.N_DEPRECATION, p.N_GUARDIAN_WARNING):
            message = params.get("message") or params.get("summary") or json.dumps(params, ensure_ascii=False)
            await self.link.emit(diagnostic("Warning", str(message)))
        elif method == p.N_CONFIG_WARNING:
            details = params.get("details")
            text = str(params.get("summary") or "") + (f" {details}" if details else "")
            await self.link.emit(diagnostic("Warning", text.strip() or "Codex configuration warning"))
        elif method == p.N_THREAD_NAME:
            if params.get("threadId") == self.state.thread_id and isinstance(params.get("threadName"), str):
                await self.link.info_changed(title=params["threadName"])
        elif method == p.N_MODEL_REROUTED:
            await self.link.emit(
                diagnostic(
                    "Info",
                    f"Codex rerouted {params.get('fromModel')} to {params.get('toModel')} ({params.get('reason')})",
                )
            )
        elif method == p.N_MCP_PROGRESS:
            item_id, message = params.get("itemId"), params.get("message")
            if item_id and message:
                await self.link.emit(
                    ToolOutputDelta(tool_id=str(item_id), text=str(message) + "\n"),
                    parent_tool_id=self.parent_of(params.get("threadId")),
                )
        elif method == p.N_THREAD_STARTED:
            thread = params.get("thread") if isinstance(params.get("thread"), dict) else {}
            tid, parent = thread.get("id"), thread.get("parentThreadId")
            if tid and tid != self.state.thread_id and parent and tid not in self.state.child_threads:
                self.state.child_threads[str(tid)] = self.parent_of(parent) or str(tid)
        elif method in p.QUIET_NOTIFICATIONS:
            pass
        else:
            await self._unknown(frame, f"unknown Codex notification {method!r}")

    # ------------------------------------------------------------------------------------------ items

    async def _delta(self, note: p.DeltaNotification, kind: type[TextDelta | ReasoningDelta]) -> None:
        if not note.delta:
            return
        parent = self.parent_of(note.threadId)
        self.state.streamed.add(note.itemId)
        self.state.open_messages[note.itemId] = parent
        await self.link.emit(kind(message_id=note.itemId, text=note.delta), parent_tool_id=parent)

    async def _item(self, note: p.ItemNotification, *, completed: bool) -> None:
        item = note.item
        itype = item.get("type")
        item_id = str(item.get("id") or "")
        parent = self.parent_of(note.threadId)
        if itype in MESSAGE_ITEMS:
            if completed:
                await self._message_completed(item, note.turnId, parent)
            return
        if itype == "userMessage":
            if parent is not None and completed:
                text = "\n".join(
                    c.get("text", "")
                    for c in item.get("content") or []
                    if isinstance(c, dict) and c.get("type") == "text"
                )
                if text:
                    await self.link.emit(UserMessage(message_id=item_id, text=text), parent_tool_id=parent)
            return
        if itype == "contextCompaction":
            if completed and parent is None:
                await self.link.emit("ContextCompacted")
                if self.state.last_usage is not None:
                    await self.link.emit(self.state.last_usage)
            return
        if itype in QUIET_ITEMS:
            return
        if item_id in self.state.interrupted:
            return  # e.g. the command we killed at the interrupt, reported failed afterwards
        update = tool_update(item, self.cwd, self.state.tools.get(item_id))
        if update is None:
            await self._unknown(
                {"method": "item", "params": note.model_dump(mode="json")}, f"unknown Codex item type {itype!r}"
            )
            return
        if completed and update.status == "Running" and itype != "subAgentActivity":
            update = update.model_copy(update={"status": "Completed"})
        if itype == "collabAgentToolCall":
            for child in item.get("receiverThreadIds") or []:
                self.state.child_threads[str(child)] = item_id
        elif itype == "subAgentActivity" and item.get("agentThreadId"):
            self.state.child_threads.setdefault(str(item["agentThreadId"]), item_id)
        self.state.tools[item_id] = update
        self.state.tool_parents[item_id] = parent
        await self.link.emit(ToolUpdated(value=update), parent_tool_id=parent)

    async def _message_completed(self, item: dict[str, Any], turn_id: str, parent: str | None) -> None:
        item_id = str(item.get("id") or "")
        itype = item.get("type")
        if item_id not in self.state.streamed:
            if itype == "reasoning":
                parts = [*(item.get("summary") or []), *(item.get("content") or [])]
                text = "\n".join(str(t) for t in parts if t)
                if text:
                    await self.link.emit(ReasoningDelta(message_id=item_id, text=text), parent_tool_id=parent)
            else:
                text = item.get("text")
                if isinstance(text, str) and text:
                    await self.link.emit(TextDelta(message_id=item_id, text=text), parent_tool_id=parent)
            if not text:
                return
        self.state.streamed.discard(item_id)
        self.state.open_messages.pop(item_id, None)
        extensions = {ITEM_ID: item_id}
        if turn_id:
            extensions[FORK_POINT] = turn_id
        await self.link.emit(MessageEnded(message_id=item_id), parent_tool_id=parent, extensions=extensions)

    # ------------------------------------------------------------------------------------------ turn end

    async def turn_completed(self, turn: p.Turn) -> None:
        """End the session's turn: active tools → Cancelled (interrupted) / Failed (failed) / Completed (but the
        state's ``survivors``, still running, stay Running), open messages ended, then TurnEnded with the stop
        reason of ``turn.status``."""
        state = self.state
        status = turn.status
        leftover = "Cancelled" if status == "interrupted" else "Failed" if status == "failed" else None
        survivors, state.survivors = state.survivors, set()
        if leftover is not None:
            for tool_id, update in list(state.tools.items()):
                if update.status in ("Pending", "Running") and tool_id not in survivors:
                    if leftover == "Cancelled":
                        state.interrupted.add(tool_id)
                    done = update.model_copy(update={"status": leftover})
                    state.tools[tool_id] = done
                    await self.link.emit(ToolUpdated(value=done), parent_tool_id=state.tool_parents.get(tool_id))
        for item_id, parent in list(state.open_messages.items()):
            await self.link.emit(
                MessageEnded(message_id=item_id),
                parent_tool_id=parent,
                extensions={ITEM_ID: item_id, FORK_POINT: turn.id},
            )
        state.turn_ended(turn.id)
        await self.link.turn_ended(stop_reason(turn))

    async def set_options(self, **changes: ConfigValue) -> None:
        """Update the state's option values; report ``info_changed(configuration=...)`` when something changed."""
        options = self.state.options
        if all(options.get(k) == v for k, v in changes.items()):
            return
        options.update(changes)
        await self.link.info_changed(configuration=SessionConfiguration(options=dict(options)))


def stop_reason(turn: p.Turn) -> StopReason:
    """``turn/completed`` status → ``StopReason``."""
    if turn.status == "completed":
        return COMPLETED_PROTOCOL
    if turn.status == "interrupted":
        return "Cancelled"
    message = turn.error.message if turn.error is not None and turn.error.message else None
    return FailedStop(message=message or f"Codex turn {turn.status}")


__all__ = ["FORK_POINT", "RAW", "NotificationMapper", "call_tokens", "plan_usage", "stop_reason", "tool_update"]
