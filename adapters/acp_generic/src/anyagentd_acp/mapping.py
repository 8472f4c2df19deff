"""ACP ``session/update`` notifications and session state → anyagentd's event model.

- :class:`UpdateMapper` turns each ``session/update`` (validated with the ``acp`` schema) into events:
  ``agent_message_chunk`` → TextDelta, ``agent_thought_chunk`` → ReasoningDelta, ``user_message_chunk`` →
  UserMessage, ``tool_call`` / ``tool_call_update`` → one cumulative ToolUpdated per update, ``plan`` →
  PlanUpdated, ``usage_update`` → ContextUsage (with ``cost_usd`` for a USD cost); ``available_commands_update``,
  ``current_mode_update``, ``config_option_update`` and ``session_info_update`` change the session's facts
  (reported with ``info_changed``). An update the schema refuses becomes an Info diagnostic carrying the raw
  update in extensions under :data:`RAW_UPDATE`. When the prompt is answered, :meth:`UpdateMapper.end_turn`
  ends the tools the agent reported but left open (see there).
- :class:`SessionState` holds the agent's modes, config options, commands and capabilities, and builds
  ``AgentDetails`` / ``SessionConfiguration`` from them (modes → the live ``mode`` option, set with
  ``session/set_mode``; config options → live options, set with ``session/set_config_option``).
- Permission options: :data:`PERMISSION_KINDS` maps ACP option kinds to ``PermissionChoice``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from acp import schema as acp
from pydantic import ValidationError

from anyagentd.adapters.cancelled_commands import Stopped, command_texts
from anyagentd.mcp.names import split_mcp_tool_name
from anyagentd.model import (
    ACTIVE_TOOL_STATUSES,
    AgentDetails,
    Capabilities,
    Command,
    ConfigChoice,
    ConfigOption,
    ContextUsage,
    FailedStop,
    FileDiff,
    Mcp,
    MessageEnded,
    PathInput,
    PatternInput,
    PlanEntry,
    PlanUpdated,
    QueryInput,
    RawTool,
    ReasoningDelta,
    Select,
    SessionConfiguration,
    SlashCommand,
    TextDelta,
    ToolUpdate,
    ToolUpdated,
    UrlInput,
    UserMessage,
    diagnostic,
)

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink
    from anyagentd.model import AuthStatus, StopReason, ToolInput

RAW_UPDATE = "acp/raw_update"
"""Extension key of an unparseable (or unmapped) update's raw JSON."""

CLOSED_AT_TURN_END = "acp/closed_at_turn_end"
"""Extension key (value ``true``) of a ToolUpdated whose final status the adapter inferred from the prompt's
answer because the agent never sent one (:meth:`UpdateMapper.end_turn`)."""

STOPPED_PROCESSES = "acp/stopped_processes"
"""Extension key of a cancelled tool's end when anyagentd stopped the command it left running:
``{"pids": [int], "signal": "SIGTERM" | "SIGKILL"}`` (:mod:`anyagentd.adapters.cancelled_commands`)."""

TOOL_KINDS = {
    "read": "Read",
    "edit": "Edit",
    "delete": "Delete",
    "move": "Move",
    "search": "Search",
    "execute": "Execute",
    "think": "Think",
    "fetch": "Fetch",
    "switch_mode": "Other",
    "other": "Other",
}
TOOL_STATUSES = {"pending": "Pending", "in_progress": "Running", "completed": "Completed", "failed": "Failed"}
PLAN_STATUSES = {"pending": "Pending", "in_progress": "InProgress", "completed": "Completed"}
PERMISSION_KINDS = {
    "allow_once": "AllowOnce",
    "allow_always": "AllowAlways",
    "reject_once": "DenyOnce",
    "reject_always": "DenyAlways",
}
"""ACP ``PermissionOptionKind`` → anyagentd ``PermissionChoice``."""

STOP_REASONS: dict[str, Literal["Completed", "Cancelled", "Refused"]] = {
    "end_turn": "Completed",
    "cancelled": "Cancelled",
    "refusal": "Refused",
}
"""ACP ``stopReason`` → stop (anything else: Failed with the reason as message)."""

_NOTIFICATION = acp.SessionNotification


def stop_reason(reason: str | None) -> StopReason:
    """The ``StopReason`` for an ACP prompt response's ``stopReason``."""
    from anyagentd.model import COMPLETED_PROTOCOL, FailedStop

    mapped = STOP_REASONS.get(reason or "")
    if mapped == "Completed":
        return COMPLETED_PROTOCOL
    if mapped is not None:
        return mapped
    return FailedStop(message=f"the agent stopped: {reason or 'no stop reason'}")


# ------------------------------------------------------------------------------------------------ tools


def _dump(value: object) -> Any:
    """``value`` as JSON (a model's JSON dump; anything else as it is)."""
    return value.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value


def tool_input(kind: str, raw: object, locations: list[str]) -> ToolInput:
    """A ``ToolInput`` guessed from the ACP tool kind and its ``rawInput`` (``"None"`` when nothing fits)."""
    raw = raw if isinstance(raw, dict) else {}
    if kind == "Execute":
        command = raw.get("command") or raw.get("cmd")
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        if isinstance(command, str) and command:
            cwd = raw.get("cwd")
            return Command(command=command, cwd=cwd if isinstance(cwd, str) else None)
    if kind == "Fetch" and isinstance(raw.get("url"), str):
        return UrlInput(value=raw["url"])
    if kind == "Search":
        if isinstance(raw.get("query"), str):
            return QueryInput(value=raw["query"])
        if isinstance(raw.get("pattern"), str):
            return PatternInput(value=raw["pattern"])
    for key in ("file_path", "path", "abs_path"):
        if isinstance(raw.get(key), str):
            return PathInput(value=raw[key])
    if locations and kind in ("Read", "Edit", "Delete", "Move"):
        return PathInput(value=locations[0])
    return "None"


def merge_tool(previous: ToolUpdate | None, call: acp.ToolCallStart | acp.ToolCallUpdate) -> ToolUpdate:
    """Merge an ACP ``ToolCall`` / ``ToolCallUpdate`` (start, progress, or a permission's tool) into the
    cumulative snapshot: fields present in the update replace the previous ones (ACP "replace" semantics for
    locations); text content (else a textual ``rawOutput``) becomes ``output`` and diff content ``diffs`` — both
    kept from earlier updates when a later one carries none, so the snapshot stays cumulative; ``rawInput``
    becomes ``raw``."""
    base = previous or ToolUpdate(id=call.tool_call_id, status="Pending")
    update: dict[str, Any] = {}
    kind = getattr(call, "kind", None)
    if kind:
        update["kind"] = TOOL_KINDS.get(kind, "Other")
    if getattr(call, "title", None):
        update["title"] = call.title
    mcp_tool = split_mcp_tool_name(update.get("title", base.title))  # claude-agent-acp titles MCP calls so
    if mcp_tool is not None:
        update["kind"] = Mcp(server=mcp_tool[0], tool=mcp_tool[1])
    status = getattr(call, "status", None)
    if status:
        update["status"] = TOOL_STATUSES.get(status, base.status)
    content = getattr(call, "content", None)
    if content is not None:
        texts, diffs = [], []
        for item in content:
            if isinstance(item, acp.FileEditToolCallContent):
                diffs.append(FileDiff(path=item.path, old_text=item.old_text, new_text=item.new_text))
            elif isinstance(item, acp.ContentToolCallContent):
                block = item.content
                if isinstance(block, acp.TextContentBlock):
                    texts.append(block.text)
                elif isinstance(block, acp.ResourceContentBlock):
                    texts.append(block.uri)
        if texts:
            update["output"] = "\n".join(texts)
        if diffs:
            update["diffs"] = diffs
    raw_output = getattr(call, "raw_output", None)
    if raw_output is not None and "output" not in update:
        text = raw_output if isinstance(raw_output, str) else None
        if isinstance(raw_output, dict):
            text = next(
                (
                    raw_output[k]
                    for k in ("aggregated_output", "formatted_output", "output", "stdout")
                    if isinstance(raw_output.get(k), str)
                ),
                None,
            )
        if text is not None:
            update["output"] = text
    locations = getattr(call, "locations", None)
    if locations is not None:
        update["locations"] = [loc.path if loc.line is None else f"{loc.path}:{loc.line}" for loc in locations]
    raw_input = getattr(call, "raw_input", None)
    merged = base.model_copy(update=update)
    if raw_input is not None:
        merged = merged.model_copy(update={"raw": RawTool(name=merged.title or merged.kind, input=raw_input)})
    if raw_input is not None or "kind" in update or "locations" in update:
        paths = [p.rsplit(":", 1)[0] if p.rsplit(":", 1)[-1].isdigit() else p for p in merged.locations]
        guessed = tool_input(
            merged.kind if isinstance(merged.kind, str) else "Other", merged.raw.input if merged.raw else None, paths
        )
        if guessed != "None" or merged.input == "None":
            merged = merged.model_copy(update={"input": guessed})
    return merged


# ------------------------------------------------------------------------------------------------ session state


@dataclass
class SessionState:
    """What the agent said about itself and its session; builds ``AgentDetails`` and ``SessionConfiguration``."""

    version: str | None = None
    auth: AuthStatus = "Unknown"
    features: list[str] = field(default_factory=list)
    mcp_transports: list[str] = field(default_factory=list)
    modes: acp.SessionModeState | None = None
    config: list[Any] = field(default_factory=list)  # SessionConfigOptionSelect | SessionConfigOptionBoolean
    commands: list[SlashCommand] = field(default_factory=list)

    def option_kind(self, option_id: str) -> str | None:
        """``"config"`` (session/set_config_option), ``"mode"`` (session/set_mode) or ``None``."""
        if any(o.id == option_id for o in self.config):
            return "config"
        if option_id == "mode" and self.modes is not None:
            return "mode"
        return None

    def options(self) -> list[ConfigOption]:
        out = []
        for opt in self.config:
            if isinstance(opt, acp.SessionConfigOptionBoolean):
                kind: Any = "Boolean"
            else:
                choices = []
                for item in opt.options:
                    group = item.options if isinstance(item, acp.SessionConfigSelectGroup) else [item]
                    choices += [ConfigChoice(value=c.value, label=c.name, description=c.description) for c in group]
                kind = Select(choices=choices)
            category = opt.category if isinstance(opt.category, str) else None
            out.append(
                ConfigOption(
                    id=opt.id, name=opt.name, category=category, kind=kind, current=opt.current_value, live=True
                )
            )
        if self.modes is not None and not any(o.id == "mode" for o in out):
            choices = [
                ConfigChoice(value=m.id, label=m.name, description=m.description) for m in self.modes.available_modes
            ]
            out.insert(
                0,
                ConfigOption(
                    id="mode",
                    name="Mode",
                    category="mode",
                    kind=Select(choices=choices),
                    current=self.modes.current_mode_id,
                    live=True,
                ),
            )
        return out

    def configuration(self) -> SessionConfiguration:
        return SessionConfiguration(options={o.id: o.current for o in self.options() if o.current is not None})

    def details(self) -> AgentDetails:
        features = list(self.features)
        if self.commands and "SlashCommands" not in features:
            features.append("SlashCommands")
        return AgentDetails(
            version=self.version,
            auth=self.auth,
            capabilities=Capabilities(features=features, mcp_transports=list(self.mcp_transports)),
            config_options=self.options(),
            commands=list(self.commands),
        )

    def set_commands(self, commands: list[acp.AvailableCommand]) -> None:
        self.commands = []
        for c in commands:
            hint = getattr(getattr(c, "input", None), "root", None)
            self.commands.append(
                SlashCommand(name=c.name, description=c.description or "", input_hint=getattr(hint, "hint", None))
            )

    def set_mode(self, mode_id: str) -> None:
        if self.modes is not None:
            self.modes = self.modes.model_copy(update={"current_mode_id": mode_id})
        for i, opt in enumerate(self.config):
            if opt.id == "mode" and isinstance(opt, acp.SessionConfigOptionSelect):
                self.config[i] = opt.model_copy(update={"current_value": mode_id})


# ------------------------------------------------------------------------------------------------ updates


class UpdateMapper:
    """Maps one session's ``session/update`` notifications to reports on ``link`` (see the module doc).

    ``suppress_content`` drops conversation content (chunks, tools, plans, usage) while set: ``session/load``
    replays the history, and a resumed session starts without replay. Facts (commands, modes, options, title)
    are always applied.
    """

    def __init__(self, link: AdapterLink, state: SessionState) -> None:
        self.link = link
        self.state = state
        self.tools: dict[str, ToolUpdate] = {}
        self._open_tools: set[str] = set()  # ids of tools reported Pending/Running
        self.suppress_content = False
        self._message_ids = itertools.count(1)
        self._segment: tuple[str, str] | None = None  # (update kind, message id) of the open message

    async def new_turn(self) -> None:
        """A prompt starts: the next chunk opens a new message."""
        await self._end_segment()

    async def _end_segment(self) -> None:
        segment, self._segment = self._segment, None
        if segment is not None:
            await self.link.emit(MessageEnded(message_id=segment[1]))

    async def _message_id(self, kind: str, given: str | None) -> str:
        if self._segment is not None and self._segment[0] == kind and (given is None or given == self._segment[1]):
            return self._segment[1]
        await self._end_segment()
        message_id = given or f"acp-m{next(self._message_ids)}"
        self._segment = (kind, message_id)
        return message_id

    async def handle(self, params: Any) -> None:
        """Handle one ``session/update``'s params (raw JSON)."""
        try:
            note = _NOTIFICATION.model_validate(params)
        except ValidationError as err:
            kind = params.get("update", {}).get("sessionUpdate") if isinstance(params, dict) else None
            first = err.errors()[0]["msg"] if err.errors() else str(err)
            await self.link.emit(
                diagnostic("Info", f"unparseable ACP session/update {kind or ''}: {first}".strip()),
                extensions={RAW_UPDATE: params},
            )
            return
        await self.apply(note.update, params)

    async def apply(self, update: object, raw: Any = None) -> None:
        """Map one ``session/update``'s ``update`` (an ACP model; ``raw``: its params' JSON, for diagnostics)."""
        link = self.link
        if isinstance(update, (acp.AgentMessageChunk, acp.AgentThoughtChunk, acp.UserMessageChunk)):
            if self.suppress_content:
                return
            block = update.content
            if not isinstance(block, acp.TextContentBlock):
                text = f"[{block.type}: {getattr(block, 'uri', '') or getattr(block, 'mime_type', '')}]"
            else:
                text = block.text
            if not text:
                return
            kind = update.session_update
            message_id = await self._message_id(kind, update.message_id)
            if isinstance(update, acp.AgentMessageChunk):
                await link.emit(TextDelta(message_id=message_id, text=text))
            elif isinstance(update, acp.AgentThoughtChunk):
                await link.emit(ReasoningDelta(message_id=message_id, text=text))
            else:
                await link.emit(UserMessage(message_id=message_id, text=text))
        elif isinstance(update, (acp.ToolCallStart, acp.ToolCallProgress)):
            if self.suppress_content:
                return
            await self._end_segment()
            tool = merge_tool(self.tools.get(update.tool_call_id), update)
            if isinstance(update, acp.ToolCallStart) and update.status is None:
                tool = tool.model_copy(update={"status": "Pending"})
            self.tools[tool.id] = tool
            if tool.status in ACTIVE_TOOL_STATUSES:
                self._open_tools.add(tool.id)
            else:
                self._open_tools.discard(tool.id)
            await link.emit(ToolUpdated(value=tool))
        elif isinstance(update, acp.AgentPlanUpdate):
            if self.suppress_content:
                return
            entries = [PlanEntry(text=e.content, status=PLAN_STATUSES.get(e.status, "Pending")) for e in update.entries]
            await link.emit(PlanUpdated(entries=entries))
        elif isinstance(update, acp.AgentPlanRemovedUpdate):
            if not self.suppress_content:
                await link.emit(PlanUpdated(entries=[]))
        elif isinstance(update, acp.UsageUpdate):
            if self.suppress_content:
                return
            cost = update.cost.amount if update.cost is not None and update.cost.currency.upper() == "USD" else None
            await link.emit(ContextUsage(used_tokens=update.used, window_tokens=update.size, cost_usd=cost))
        elif isinstance(update, acp.AvailableCommandsUpdate):
            self.state.set_commands(update.available_commands)
            await link.info_changed(details=self.state.details())
        elif isinstance(update, acp.CurrentModeUpdate):
            self.state.set_mode(update.current_mode_id)
            await link.info_changed(details=self.state.details(), configuration=self.state.configuration())
        elif isinstance(update, acp.ConfigOptionUpdate):
            self.state.config = list(update.config_options)
            await link.info_changed(details=self.state.details(), configuration=self.state.configuration())
        elif isinstance(update, acp.SessionInfoUpdate):
            if update.title:
                await link.info_changed(title=update.title)
        else:
            await link.emit(
                diagnostic("Info", f"unmapped ACP session/update {getattr(update, 'session_update', '?')}"),
                extensions={RAW_UPDATE: raw if raw is not None else _dump(update)},
            )

    def permission_tool(self, call: acp.ToolCallUpdate) -> ToolUpdate:
        """The tool snapshot a permission request is about (merged into, and kept with, the session's tools)."""
        previous = self.tools.get(call.tool_call_id)
        self.tools[call.tool_call_id] = merge_tool(previous, call.model_copy(update={"content": None}))
        return merge_tool(previous, call)

    def open_commands(self) -> dict[str, list[str]]:
        """Tool id → the command lines to look for (:func:`~anyagentd.adapters.cancelled_commands.command_texts`),
        for each Execute tool reported Pending/Running since its last final status: from its raw input's
        ``command`` / ``cmd`` (a string or an argv), else its ``Command`` input."""
        out: dict[str, list[str]] = {}
        for tool_id in sorted(self._open_tools):
            tool = self.tools[tool_id]
            if tool.kind != "Execute":
                continue
            raw = tool.raw.input if tool.raw is not None and isinstance(tool.raw.input, dict) else {}
            command = raw.get("command") or raw.get("cmd")
            texts = command_texts(command) if isinstance(command, (str, list)) else []
            if isinstance(tool.input, Command) and tool.input.command not in texts:
                texts.append(tool.input.command)
            if texts:
                out[tool_id] = texts
        return out

    async def end_turn(self, stop: StopReason, stopped: Mapping[str, Stopped] | None = None) -> list[str]:
        """The prompt was answered with ``stop`` (a ``StopReason``): end the open message, then end every tool
        reported Pending/Running since its last final status, with extension :data:`CLOSED_AT_TURN_END`.

        ACP's prompt turn ("Check for Completion") has the agent answer ``session/prompt`` only when no tool call
        is pending, so such a tool is over; only its final ``tool_call_update`` is missing (codex-acp 0.16.0
        sometimes never sends an exec command's). Its status follows the stop: Cancelled for a cancelled turn,
        Failed for a failed one, else Completed when it was running (its result went back to the model) and
        Cancelled when it never started. Without this it would stay Running, and the engine would list it in
        TurnEnded's ``background`` as a tool still running.

        ``stopped``: tool id → what the connection did to the command the tool left running (a cancelled turn:
        codex-acp answers a cancel while its command runs on). A tool whose processes were stopped ends with
        extension :data:`STOPPED_PROCESSES` too; one with survivors is not ended (it stays Running, so the
        engine lists it in ``background``). Returns the ids of those, for :meth:`end_lingering` once they are
        gone."""
        await self._end_segment()
        stopped = stopped or {}
        open_tools, self._open_tools = self._open_tools, set()
        lingering = []
        for tool_id in sorted(open_tools):
            tool = self.tools[tool_id]
            done = stopped.get(tool_id)
            if done is not None and done.survivors:
                lingering.append(tool_id)
                continue
            if stop == "Cancelled" or isinstance(stop, FailedStop):
                status = "Cancelled" if stop == "Cancelled" else "Failed"
            else:
                status = "Completed" if tool.status == "Running" else "Cancelled"
            self.tools[tool_id] = tool = tool.model_copy(update={"status": status})
            extensions: dict[str, Any] = {CLOSED_AT_TURN_END: True}
            if done is not None:
                extensions[STOPPED_PROCESSES] = {"pids": list(done.pids), "signal": done.signal}
            await self.link.emit(ToolUpdated(value=tool), extensions=extensions)
        return lingering

    async def end_lingering(self, tool_id: str, stopped: Stopped) -> None:
        """End as Cancelled the tool ``tool_id`` left Running by :meth:`end_turn` because its processes outlived
        the stop, once they are gone (extension :data:`STOPPED_PROCESSES`). Nothing when the agent ended it
        meanwhile."""
        tool = self.tools.get(tool_id)
        if tool is None or tool.status not in ACTIVE_TOOL_STATUSES or tool_id in self._open_tools:
            return
        self.tools[tool_id] = tool = tool.model_copy(update={"status": "Cancelled"})
        await self.link.emit(
            ToolUpdated(value=tool),
            extensions={STOPPED_PROCESSES: {"pids": list(stopped.pids), "signal": stopped.signal}},
        )

    async def end_message(self) -> None:
        """End the open message (a permission request interrupts it)."""
        await self._end_segment()


__all__ = [
    "CLOSED_AT_TURN_END",
    "PERMISSION_KINDS",
    "RAW_UPDATE",
    "STOPPED_PROCESSES",
    "SessionState",
    "UpdateMapper",
    "merge_tool",
    "stop_reason",
    "tool_input",
]
