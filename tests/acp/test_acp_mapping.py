"""Unit tests of the ACP mapping: recorded transcripts of the real agents, tool merging, options, launch args."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import schema as s

from anyagentd.adapters.interface import EventReport, InfoChanged, PromptInput
from anyagentd.errors import InvalidConfiguration
from anyagentd.model import AgentInstallation
from anyagentd_acp.connection import login_methods, mcp_renderers, prompt_blocks
from anyagentd_acp.launch import extra_args, launch_argv
from anyagentd_acp.mapping import (
    CLOSED_AT_TURN_END,
    RAW_UPDATE,
    SessionState,
    UpdateMapper,
    merge_tool,
    stop_reason,
)

FIXTURES = Path(__file__).with_name("fixtures")
pytestmark = pytest.mark.anyio


class RecordingLink:
    def __init__(self) -> None:
        self.reports: list[Any] = []

    async def emit(self, kind: Any, *, parent_tool_id: Any = None, extensions: Any = None) -> None:
        self.reports.append(EventReport(kind, parent_tool_id, extensions))

    async def info_changed(self, **changes: Any) -> None:
        self.reports.append(InfoChanged(**changes))

    def events(self, name: str) -> list[Any]:
        return [r.kind for r in self.reports if isinstance(r, EventReport) and getattr(r.kind, "TAG", r.kind) == name]


async def replay(name: str) -> RecordingLink:
    link = RecordingLink()
    mapper = UpdateMapper(link, SessionState())
    for line in (FIXTURES / name).read_text().splitlines():
        message = json.loads(line)
        if message.get("method") == "session/update":
            await mapper.handle(message["params"])
    return link


async def test_codex_acp_transcript() -> None:
    link = await replay("codex-acp.stdout.jsonl")
    assert "".join(e.text for e in link.events("TextDelta")) == "Running the first command."
    tools = link.events("ToolUpdated")
    assert [t.value.status for t in tools] == ["Running", "Completed"]
    assert tools[0].value.kind == "Execute" and tools[0].value.input.command.endswith("echo allowed > allowed.txt")
    usage = link.events("ContextUsage")
    assert usage[0].used_tokens == 1772 and usage[0].window_tokens == 258400 and usage[0].cost_usd is None
    infos = [r for r in link.reports if isinstance(r, InfoChanged)]
    assert infos and any(c.name == "review" for c in infos[0].details.commands)
    assert not link.events("Diagnostic")


async def test_claude_agent_acp_transcript() -> None:
    link = await replay("claude-agent-acp.stdout.jsonl")
    tools = link.events("ToolUpdated")
    assert tools and {t.value.kind for t in tools} <= {"Execute", "Edit", "Other", "Read"}
    last = {t.value.id: t.value for t in tools}
    assert any(t.status == "Completed" for t in last.values())
    usage = link.events("ContextUsage")
    assert usage and usage[-1].cost_usd is not None and usage[-1].cost_usd > 0
    assert not link.events("Diagnostic")


async def test_unparseable_update_is_an_info_diagnostic() -> None:
    link = RecordingLink()
    mapper = UpdateMapper(link, SessionState())
    raw = {"sessionId": "x", "update": {"sessionUpdate": "nope"}}
    await mapper.handle(raw)
    (report,) = link.reports
    assert report.kind.value.level == "Info" and report.extensions == {RAW_UPDATE: raw}


async def test_message_ids_and_suppressed_replay() -> None:
    link = RecordingLink()
    mapper = UpdateMapper(link, SessionState())
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}}
    thought = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t"}}
    for update in (chunk, chunk, thought, chunk):
        await mapper.handle({"sessionId": "x", "update": update})
    ids = [getattr(r.kind, "message_id", None) for r in link.reports]
    tags = [r.kind.TAG for r in link.reports]
    assert tags == ["TextDelta", "TextDelta", "MessageEnded", "ReasoningDelta", "MessageEnded", "TextDelta"]
    assert ids[0] == ids[1] == ids[2] != ids[3] and ids[5] not in ids[:5]
    mapper.suppress_content = True
    await mapper.handle({"sessionId": "x", "update": chunk})
    assert len(link.reports) == 6


SID = "01a231be-8c48-7313-8c39-dda7118f372d"
CALL = "call_mock_cd88422399a1457ca757cebe"
UNFINISHED_EXEC = [  # codex-acp 0.16.0 under load (trimmed): the exec's tool_call, never its completed update
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Writing the file."}},
    {
        "sessionUpdate": "tool_call",
        "toolCallId": CALL,
        "title": "printf 'hi\\n' > out.txt",
        "kind": "execute",
        "status": "in_progress",
        "rawInput": {"call_id": CALL, "command": ["/bin/bash", "-lc", "printf 'hi\\n' > out.txt"]},
    },
    {"sessionUpdate": "usage_update", "used": 9639, "size": 258400},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}},
    {"sessionUpdate": "usage_update", "used": 9739, "size": 258400},
]
"""Then ``{"result": {"stopReason": "end_turn"}}``; nothing about the tool came later (3 s watched)."""


async def ended_tools(updates: list[dict[str, Any]], reason: str) -> list[Any]:
    """The ToolUpdated reports (kind, extensions) of ``updates`` then the prompt's answer ``reason``."""
    link = RecordingLink()
    mapper = UpdateMapper(link, SessionState())
    for update in updates:
        await mapper.handle({"sessionId": SID, "update": update})
    await mapper.end_turn(stop_reason(reason))
    return [(r.kind.value, r.extensions) for r in link.reports if getattr(r.kind, "TAG", None) == "ToolUpdated"]


async def test_a_tool_left_running_at_end_turn_is_completed() -> None:
    (running, _), (done, extensions) = await ended_tools(UNFINISHED_EXEC, "end_turn")
    assert running.status == "Running" and running.input.command.endswith("out.txt")
    assert done.status == "Completed" and done.id == CALL and done.input == running.input
    assert extensions == {CLOSED_AT_TURN_END: True}


@pytest.mark.parametrize(
    ("reason", "status"), [("cancelled", "Cancelled"), ("max_tokens", "Failed"), ("refusal", "Completed")]
)
async def test_a_tool_left_open_follows_the_stop(reason: str, status: str) -> None:
    tools = await ended_tools(UNFINISHED_EXEC, reason)
    assert [t.status for t, _ in tools] == ["Running", status]


async def test_a_tool_that_never_started_is_cancelled_and_finished_tools_stay() -> None:
    pending = {"sessionUpdate": "tool_call", "toolCallId": "p", "title": "rm x", "kind": "execute", "status": "pending"}
    done = [
        {"sessionUpdate": "tool_call", "toolCallId": "d", "title": "ls", "kind": "execute", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "d", "status": "failed"},
    ]
    tools = await ended_tools([pending, *done], "end_turn")
    assert [(t.id, t.status) for t, _ in tools] == [
        ("p", "Pending"),
        ("d", "Running"),
        ("d", "Failed"),
        ("p", "Cancelled"),
    ]


async def test_only_reported_tools_are_ended_and_each_once() -> None:
    link = RecordingLink()
    mapper = UpdateMapper(link, SessionState())
    mapper.permission_tool(s.ToolCallUpdate(tool_call_id="asked", title="rm x", kind="execute", status="pending"))
    await mapper.end_turn(stop_reason("end_turn"))
    assert not link.events("ToolUpdated")  # a permission's tool the agent never reported: nothing to end
    for update in UNFINISHED_EXEC:
        await mapper.handle({"sessionId": SID, "update": update})
    await mapper.end_turn(stop_reason("end_turn"))
    await mapper.end_turn(stop_reason("end_turn"))  # the next prompt's end: the tool is over already
    assert [t.value.status for t in link.events("ToolUpdated")] == ["Running", "Completed"]


def test_merge_tool_is_cumulative() -> None:
    start = s.ToolCallStart(
        session_update="tool_call",
        tool_call_id="t",
        title="Edit",
        kind="edit",
        locations=[s.ToolCallLocation(path="/a")],
        raw_input={"file_path": "/a"},
    )
    tool = merge_tool(None, start)
    assert tool.status == "Pending" and tool.input.value == "/a" and tool.raw.input == {"file_path": "/a"}
    diff = s.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id="t",
        status="in_progress",
        content=[s.FileEditToolCallContent(type="diff", path="/a", old_text="x", new_text="y")],
    )
    tool = merge_tool(tool, diff)
    assert tool.status == "Running" and tool.diffs[0].new_text == "y"
    done = s.ToolCallProgress(
        session_update="tool_call_update", tool_call_id="t", status="failed", raw_output={"aggregated_output": "boom"}
    )
    tool = merge_tool(tool, done)
    assert tool.status == "Failed" and tool.output == "boom" and tool.diffs and tool.title == "Edit"


def test_mcp_tool_titles_give_the_mcp_kind() -> None:
    start = s.ToolCallStart(
        session_update="tool_call",
        tool_call_id="m",
        title="mcp__greeter__greet",
        kind="other",
        raw_input={"name": "world"},
    )
    tool = merge_tool(None, start)
    assert tool.kind.TAG == "Mcp" and (tool.kind.server, tool.kind.tool) == ("greeter", "greet")
    assert (
        merge_tool(
            None, s.ToolCallStart(session_update="tool_call", tool_call_id="o", title="Read a.txt", kind="read")
        ).kind
        == "Read"
    )


def test_stop_reasons() -> None:
    assert stop_reason("end_turn").source == "Protocol"
    assert stop_reason("cancelled") == "Cancelled" and stop_reason("refusal") == "Refused"
    assert stop_reason("max_tokens").TAG == "Failed" and "max_tokens" in stop_reason("max_tokens").message


def test_options_from_modes_and_config() -> None:
    state = SessionState(
        modes=s.SessionModeState(
            current_mode_id="a", available_modes=[s.SessionMode(id="a", name="A"), s.SessionMode(id="b", name="B")]
        ),
        config=[s.SessionConfigOptionBoolean(type="boolean", id="fast", name="Fast", current_value=True)],
    )
    options = {o.id: o for o in state.options()}
    assert options["mode"].live and [c.value for c in options["mode"].kind.choices] == ["a", "b"]
    assert options["fast"].kind == "Boolean" and options["fast"].current is True
    assert state.configuration().options == {"mode": "a", "fast": True}
    assert state.option_kind("mode") == "mode" and state.option_kind("fast") == "config"
    state.set_mode("b")
    assert state.configuration().options["mode"] == "b"


def test_launch_args_from_config_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = AgentInstallation(
        id="codex-acp", name="c", executable_path="/bin/codex-acp", source="Path", acp_args=["--acp"]
    )
    monkeypatch.setenv("ANYAGENTD_CODEX_ACP_ARGS", "-c 'model=gpt 5'")
    monkeypatch.delenv("ANYAGENTD_ACP_ARGS", raising=False)
    assert launch_argv(inst, {"args": {"codex-acp": ["-x"]}}) == ["/bin/codex-acp", "--acp", "-x", "-c", "model=gpt 5"]
    with pytest.raises(InvalidConfiguration):
        extra_args("codex-acp", {}, {"ANYAGENTD_CODEX_ACP_ARGS": "'unclosed"})


def test_prompt_blocks_and_renderers(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    image.write_bytes(b"\x89PNG")
    doc = tmp_path / "notes.md"
    doc.write_text("x")
    blocks = prompt_blocks(PromptInput("hi", (str(image), str(doc))), s.PromptCapabilities(image=True))
    assert [b.type for b in blocks] == ["text", "image", "resource_link"]
    blocks = prompt_blocks(PromptInput("hi", (str(image),)), s.PromptCapabilities(image=False))
    assert [b.type for b in blocks] == ["text", "resource_link"]
    assert set(mcp_renderers(s.McpCapabilities(http=True))) == {"Stdio", "Http"}
    init = s.InitializeResponse(
        protocol_version=1, auth_methods=[s.TerminalAuthMethod(type="terminal", id="l", name="Login", args=["login"])]
    )
    (method,) = login_methods("/bin/agent", init)
    assert method.command == ["/bin/agent", "login"]
