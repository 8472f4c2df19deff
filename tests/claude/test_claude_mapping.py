"""The Claude Code adapter's frame mapping, fed with real CLI transcripts (``fixtures/``, see
``docs/testing.md#recorded-transcripts``) and hand-written frames, through a fake link that collects the reports. No process runs here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anyagentd.adapters.interface import (
    EventReport,
    InfoChanged,
    PromptInput,
    TurnAck,
    TurnEndedReport,
)
from anyagentd.adapters.mcp_startup import McpStartup
from anyagentd.errors import InvalidConfiguration
from anyagentd.model import (
    AgentInstallation,
    AnswerPermission,
    AnswerQuestion,
    Authenticated,
    Choices,
    Command,
    CompletedStop,
    ContextUsage,
    FailedStop,
    Http,
    McpServer,
    MessageEnded,
    PermissionRequested,
    QuestionAsked,
    SessionOptions,
    Sse,
    Stdio,
    TextAnswer,
    TextDelta,
    Unauthenticated,
)
from anyagentd_claude import control, launch
from anyagentd_claude.connection import ClaudeConnection, user_content
from anyagentd_claude.mapping import FORK_POINT, RAW, FrameMapper
from anyagentd_claude.tools import plan_entries, tool_update

FIXTURES = Path(__file__).parent / "fixtures"


class FakeLink:
    """Collects reports like the engine's AdapterLink would receive them."""

    def __init__(self) -> None:
        self.reports: list[Any] = []
        self.tasks: list[Any] = []

    async def report(self, report: Any) -> None:
        self.reports.append(report)

    async def emit(self, kind: Any, *, parent_tool_id: str | None = None, extensions: dict | None = None) -> None:
        self.reports.append(EventReport(kind, parent_tool_id, extensions))

    async def turn_ack(self) -> None:
        self.reports.append(TurnAck())

    async def turn_ended(self, stop: Any) -> None:
        self.reports.append(TurnEndedReport(stop))

    async def info_changed(self, **changes: Any) -> None:
        self.reports.append(InfoChanged(**changes))

    async def auth_lost(self, login: Any = None) -> None:
        self.reports.append(("auth_lost", login))

    async def exited(self, status: str, stderr: str = "") -> None:
        self.reports.append(("exited", status, stderr))

    def start_soon(self, func: Any, *args: Any) -> None:
        self.tasks.append((func, args))

    # helpers
    def events(self, tag: str | None = None) -> list[EventReport]:
        out = [r for r in self.reports if isinstance(r, EventReport)]
        return [r for r in out if tag is None or _tag(r.kind) == tag]

    def kinds(self) -> list[str]:
        return [_tag(r.kind) if isinstance(r, EventReport) else type(r).__name__ for r in self.reports]


def _tag(kind: Any) -> str:
    if isinstance(kind, str):
        return kind
    if kind.TAG == "Diagnostic":
        return f"Diagnostic:{kind.value.level}"
    return kind.TAG


class FakeProcess:
    """Stands in for AgentProcess: records what the connection writes to stdin."""

    def __init__(self) -> None:
        self.written: list[Any] = []

    async def write_json(self, obj: Any) -> None:
        self.written.append(obj)


def frames(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def make_conn(cwd: str = "$WORK", **configure: Any) -> tuple[ClaudeConnection, FakeLink, FakeProcess]:
    link, proc = FakeLink(), FakeProcess()
    inst = AgentInstallation(id="claude", name="Claude Code", executable_path="/x/claude", source="Path")
    conn = ClaudeConnection(
        proc,
        link,
        installation=inst,  # type: ignore[arg-type]
        options=SessionOptions(dir=cwd, configure=configure),
        session_token="tok",
    )
    return conn, link, proc


async def feed(conn: ClaudeConnection, items: list[dict[str, Any]]) -> None:
    for frame in items:
        await conn._dispatch(frame)


# ------------------------------------------------------------------------------------------------ transcripts


@pytest.mark.anyio
async def test_stream_transcript_permission_hook_and_denial() -> None:
    conn, link, proc = make_conn()
    items = frames("claude-stream-1.stdout.jsonl")
    first_result = next(i for i, f in enumerate(items) if f["type"] == "result")
    conn.state.turn_begins()
    await feed(conn, items[: first_result + 1])

    # the session id from system/init becomes the resume token
    assert InfoChanged(resume_token="7fefd9be-ef73-4633-bf41-7a528a227f88") in link.reports
    # the text (not streamed: this transcript ran without --include-partial-messages) comes from the lines
    texts = [r.kind.text for r in link.events("TextDelta")]
    assert texts == ["Writing note.txt.", "Prompt one finished: note.txt written, the touch was denied."]
    ended = [r.kind.message_id for r in link.events("MessageEnded")]
    assert ended == ["msg_mock_bc8645bb6ae9476aa6e01125", "msg_mock_3fe59aa0bbd74d259cefce4d"]

    # Write: Edit tool with a diff, a permission request offering AllowAlways (the CLI sent suggestions)
    tools = [r.kind.value for r in link.events("ToolUpdated")]
    write = tools[0]
    assert write.kind == "Edit" and write.status == "Running" and write.title == "Write note.txt"
    assert write.diffs[0].path == "$WORK/note.txt" and write.diffs[0].new_text == "allowed write\n"
    requests = [r.kind.value for r in link.events("RequestOpened")]
    assert len(requests) == 2
    perm = requests[0]
    assert isinstance(perm, PermissionRequested)
    assert perm.value.options == ["AllowOnce", "AllowAlways", "DenyOnce"]
    assert perm.value.tool.id == write.id
    assert perm.value.id == "d319cf8c-a339-4ea1-9d3d-8bfa85ba8d3a"
    # Write completed, Bash (Execute, cwd = session dir) failed after the denial in the transcript
    assert [(t.id, t.status) for t in tools] == [
        (write.id, "Running"),
        (write.id, "Completed"),
        (tools[2].id, "Running"),
        (tools[2].id, "Failed"),
    ]
    bash = tools[2]
    assert bash.kind == "Execute" and bash.input == Command(command="touch should-not-exist.txt", cwd="$WORK")
    assert bash.title == "Touch a file"
    assert tools[3].output == "Denied by the driver script (policy: no Bash)."
    # the hook callback was answered with an empty success and noted
    hook = next(w for w in proc.written if w["response"]["request_id"] == "79fb0b4f-1f2a-47d6-bbc2-a0e28de51520")
    assert hook == control.success("79fb0b4f-1f2a-47d6-bbc2-a0e28de51520", {})
    assert any("hook_callback" in r.kind.value.message for r in link.events("Diagnostic:Info"))
    # result: ContextUsage (cumulative tokens when nothing streamed, window, cost) then TurnEnded Completed
    usage = link.events("ContextUsage")[-1].kind
    assert usage == ContextUsage(used_tokens=5419 + 120, window_tokens=1_000_000, cost_usd=0.030094999999999997)
    assert link.reports[-1] == TurnEndedReport(CompletedStop(source="Protocol"))
    assert link.kinds()[-2:] == ["ContextUsage", "TurnEndedReport"]

    # answering: allow the Write, deny the Bash
    await conn.answer(perm.value.id, AnswerPermission(value="AllowAlways"))
    reply = proc.written[-1]["response"]
    assert reply["request_id"] == perm.value.id
    assert reply["response"]["behavior"] == "allow"
    assert reply["response"]["updatedInput"] == {"file_path": "$WORK/note.txt", "content": "allowed write\n"}
    assert reply["response"]["updatedPermissions"][0]["mode"] == "acceptEdits"
    await conn.answer(requests[1].value.id, AnswerPermission(value="DenyOnce"))
    assert proc.written[-1]["response"]["response"]["behavior"] == "deny"

    # after the first turn: set_permission_mode's system/status updates the mode; the set_model echo is silent
    link.reports.clear()
    await feed(conn, items[first_result + 1 :])
    changes = [r for r in link.reports if isinstance(r, InfoChanged)]
    assert changes[0].configuration is not None and changes[0].configuration.options["mode"] == "acceptEdits"
    assert [r.kind.text for r in link.events("TextDelta")] == ["Second prompt answered."]
    usage = link.events("ContextUsage")[-1].kind
    assert usage.window_tokens == 200_000  # the init model of this turn is claude-sonnet-4-5


@pytest.mark.anyio
async def test_streamed_transcript_fork_point_and_interrupt() -> None:
    conn, link, _ = make_conn()
    items = frames("claude-stream-2-resume.stdout.jsonl")
    await feed(conn, items)
    deltas = link.events("TextDelta")
    assert [(r.kind.message_id, r.kind.text) for r in deltas] == [
        ("msg_mock_2b2e94c87ae540a3894c6b39", "Answer after --resume.")
    ]
    ended = link.events("MessageEnded")
    assert len(ended) == 1 and ended[0].kind == MessageEnded(message_id="msg_mock_2b2e94c87ae540a3894c6b39")
    assert ended[0].extensions == {FORK_POINT: "94ece8e6-90cf-404f-abc8-fcb026607cb6"}
    # usage of the last API call: message_start input 2171 + message_delta output 13
    usage = link.events("ContextUsage")[0].kind
    assert usage.used_tokens == 2171 + 13 and usage.window_tokens == 200_000
    stops = [r.stop for r in link.reports if isinstance(r, TurnEndedReport)]
    # the second turn was interrupted: terminal_reason aborted_streaming → Cancelled
    assert stops == [CompletedStop(source="Protocol"), "Cancelled"]
    # nothing unknown in a real transcript
    assert not [r for r in link.events() if _tag(r.kind).startswith("Diagnostic")]


@pytest.mark.anyio
async def test_api_error_transcript_fails_the_turn() -> None:
    conn, link, _ = make_conn()
    await feed(conn, frames("claude-oneshot-error.stdout.jsonl"))
    warnings = link.events("Diagnostic:Warning")
    assert warnings and warnings[0].kind.value.message == "API Error: 400 scripted failure"
    assert not link.events("TextDelta")
    assert link.reports[-1] == TurnEndedReport(FailedStop(message="API Error: 400 scripted failure"))
    assert not link.events("ContextUsage")  # no API call happened


@pytest.mark.anyio
async def test_accept_edits_transcript_tools() -> None:
    conn, link, _ = make_conn()
    await feed(conn, frames("claude-oneshot-acceptedits.stdout.jsonl"))
    tools = [r.kind.value for r in link.events("ToolUpdated")]
    assert [(t.kind, t.status) for t in tools] == [
        ("Edit", "Running"),
        ("Edit", "Completed"),
        ("Execute", "Running"),
        ("Execute", "Completed"),
    ]
    assert tools[0].diffs[0].old_text is None  # $WORK/hello.txt does not exist here
    assert tools[3].output == "hello from mockllm\nbash-ran-ok"
    assert isinstance(link.reports[-1], TurnEndedReport)


# ------------------------------------------------------------------------------------------------ frames


@pytest.mark.anyio
async def test_unknown_and_broken_frames_never_crash() -> None:
    conn, link, _ = make_conn()
    odd = [
        {"type": "brand_new_thing", "x": 1},
        {"type": "system", "subtype": "mystery"},
        {"type": "assistant", "message": None},
        {"type": "assistant", "message": {"id": "m", "content": [{"type": "tool_use"}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "nope", "content": 3}]}},
        {"type": "result"},
        {"type": "stream_event", "event": {"type": "content_block_delta", "delta": None}},
        {"type": "keep_alive"},
    ]
    await feed(conn, odd)
    infos = link.events("Diagnostic:Info")
    assert infos[0].extensions == {RAW: {"type": "brand_new_thing", "x": 1}}
    assert infos[1].extensions[RAW]["subtype"] == "mystery"
    assert isinstance(link.reports[-1], TurnEndedReport)  # the bare result still ends the turn
    await conn.mapper.handle(["not", "an", "object"])
    assert _tag(link.reports[-1].kind) == "Diagnostic:Info"


@pytest.mark.anyio
async def test_subagent_plan_background_and_compaction() -> None:
    link = FakeLink()
    m = FrameMapper(link, cwd="/w")
    await m.handle(
        {
            "type": "assistant",
            "uuid": "u1",
            "message": {
                "id": "m1",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "task1",
                        "name": "Task",
                        "input": {"description": "Explore", "prompt": "look"},
                    },
                    {
                        "type": "tool_use",
                        "id": "todo1",
                        "name": "TodoWrite",
                        "input": {
                            "todos": [
                                {"content": "a", "status": "completed", "activeForm": "A"},
                                {"content": "b", "status": "in_progress", "activeForm": "B"},
                            ]
                        },
                    },
                ],
            },
            "parent_tool_use_id": None,
        }
    )
    # the subagent's prompt, its own (not streamed) text, a tool inside it
    await m.handle(
        {
            "type": "user",
            "uuid": "su",
            "parent_tool_use_id": "task1",
            "message": {"role": "user", "content": [{"type": "text", "text": "look"}]},
        }
    )
    await m.handle(
        {
            "type": "assistant",
            "uuid": "u2",
            "parent_tool_use_id": "task1",
            "message": {"id": "sm1", "content": [{"type": "text", "text": "sub says"}]},
        }
    )
    await m.handle(
        {
            "type": "assistant",
            "uuid": "u3",
            "parent_tool_use_id": "task1",
            "message": {
                "id": "sm2",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "bg1",
                        "name": "Bash",
                        "input": {"command": "sleep 9", "run_in_background": True},
                    }
                ],
            },
        }
    )
    await m.handle(
        {
            "type": "user",
            "parent_tool_use_id": "task1",
            "tool_use_result": {"backgroundTaskId": "b7"},
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "bg1",
                        "content": "Command running in background with ID: b7",
                    }
                ]
            },
        }
    )
    await m.handle(
        {
            "type": "system",
            "subtype": "task_notification",
            "task_id": "b7",
            "status": "completed",
            "summary": "finished",
        }
    )
    await m.handle({"type": "system", "subtype": "status", "status": "compacting"})
    await m.handle(
        {
            "type": "system",
            "subtype": "status",
            "status": None,
            "compact_result": "failed",
            "compact_error": "Not enough messages to compact.",
        }
    )
    await m.handle(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "compact_metadata": {"trigger": "manual", "pre_tokens": 9000, "post_tokens": 566},
        }
    )

    kinds = link.kinds()
    assert kinds[:2] == ["ToolUpdated", "PlanUpdated"]
    task = link.events("ToolUpdated")[0].kind.value
    assert task.kind == "Subagent" and task.title == "Explore"
    plan = link.events("PlanUpdated")[0].kind.entries
    assert [(e.text, e.status) for e in plan] == [("a", "Completed"), ("b", "InProgress")]
    user = link.events("UserMessage")[0]
    assert user.parent_tool_id == "task1" and user.kind.text == "look"
    sub_text = link.events("TextDelta")[0]
    assert sub_text.parent_tool_id == "task1" and sub_text.kind.text == "sub says"
    # a new subagent message ends the previous unstreamed one
    assert link.events("MessageEnded")[0].kind.message_id == "sm1"
    bg = [(r.kind.value.status, r.parent_tool_id) for r in link.events("ToolUpdated") if r.kind.value.id == "bg1"]
    assert bg == [("Running", "task1"), ("Running", "task1"), ("Completed", "task1")]
    assert (
        link.events("Diagnostic:Warning")[0].kind.value.message == "compaction failed: Not enough messages to compact."
    )
    assert kinds[-2:] == ["ContextCompacted", "ContextUsage"]
    assert link.events("ContextUsage")[-1].kind.used_tokens == 566


@pytest.mark.anyio
async def test_auth_failure_and_local_command_output() -> None:
    link = FakeLink()
    m = FrameMapper(link, login=["L"])
    await m.handle(
        {
            "type": "assistant",
            "error": "authentication_failed",
            "message": {
                "id": "x",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": "Not logged in · Please run /login"}],
            },
        }
    )
    assert ("auth_lost", ["L"]) in link.reports
    m.state.turn_begins()
    await m.handle(
        {
            "type": "user",
            "isReplay": True,
            "uuid": "lc",
            "message": {"content": "<local-command-stdout>Set model to x</local-command-stdout>"},
        }
    )
    assert link.events("TextDelta")[-1].kind == TextDelta(message_id="lc", text="Set model to x")
    m.state.turn_ended()
    n = len(link.reports)
    await m.handle(
        {
            "type": "user",
            "isReplay": True,
            "uuid": "lc2",
            "message": {"content": "<local-command-stdout>Set model to y</local-command-stdout>"},
        }
    )
    assert len(link.reports) == n  # idle: a configure echo must not open an agent turn


def test_tool_kinds() -> None:
    cases = {
        "Read": ({"file_path": "/w/a.py"}, "Read", {"Path": "/w/a.py"}),
        "Glob": ({"pattern": "**/*.py"}, "Search", {"Pattern": "**/*.py"}),
        "Grep": ({"pattern": "def x", "path": "/w/src"}, "Search", {"Pattern": "def x"}),
        "WebFetch": ({"url": "https://e.x"}, "Fetch", {"Url": "https://e.x"}),
        "WebSearch": ({"query": "anyio"}, "Search", {"Query": "anyio"}),
        "Agent": ({"prompt": "p", "description": "d"}, "Subagent", {"Text": "p"}),
        "Frobnicate": ({"a": 1}, "Other", "None"),
    }
    for name, (inp, kind, expected) in cases.items():
        update = tool_update("t", name, inp, "/w")
        assert update.kind == kind, name
        assert update.model_dump(mode="json")["input"] == expected, name
    assert tool_update("t", "Frobnicate", {"a": 1}).raw.model_dump() == {"name": "Frobnicate", "input": {"a": 1}}
    mcp = tool_update("t", "mcp__files__read_file", {"p": 1})
    assert mcp.model_dump(mode="json")["kind"] == {"Mcp": {"server": "files", "tool": "read_file"}}
    assert mcp.raw is not None and mcp.raw.name == "mcp__files__read_file"
    edit = tool_update("t", "Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y"}, "/w")
    assert [(d.old_text, d.new_text) for d in edit.diffs] == [("x", "y")]
    multi = tool_update(
        "t",
        "MultiEdit",
        {
            "file_path": "/w/a",
            "edits": [{"old_string": "1", "new_string": "2"}, {"old_string": "3", "new_string": "4"}],
        },
    )
    assert len(multi.diffs) == 2
    assert plan_entries({"todos": [{"content": "c", "status": "weird"}]})[0].status == "Pending"


def test_write_diff_reads_existing_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old\n")
    update = tool_update("t", "Write", {"file_path": str(tmp_path / "f.txt"), "content": "new\n"}, str(tmp_path))
    assert update.diffs[0].old_text == "old\n" and update.diffs[0].new_text == "new\n"
    assert update.title == "Write f.txt"


# ------------------------------------------------------------------------------------------------ control


QUESTION = {
    "subtype": "can_use_tool",
    "tool_name": "AskUserQuestion",
    "tool_use_id": "tq",
    "input": {
        "questions": [
            {
                "question": "Which color?",
                "header": "Color",
                "multiSelect": False,
                "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
            },
            {
                "question": "Which sizes?",
                "header": "Size",
                "multiSelect": True,
                "options": [
                    {"label": "S", "description": ""},
                    {"label": "M", "description": ""},
                    {"label": "L", "description": ""},
                ],
            },
            {
                "question": "Name?",
                "header": "Name",
                "multiSelect": False,
                "options": [{"label": "A", "description": ""}, {"label": "B", "description": ""}],
            },
        ]
    },
}


@pytest.mark.anyio
async def test_question_round_trip() -> None:
    conn, link, proc = make_conn()
    await conn._dispatch({"type": "control_request", "request_id": "rq", "request": QUESTION})
    asked = link.events("RequestOpened")[0].kind.value
    assert isinstance(asked, QuestionAsked)
    qs = asked.value.questions
    assert [(q.id, q.text, q.multi_select, q.allows_free_text) for q in qs] == [
        ("q0", "Which color?", False, True),
        ("q1", "Which sizes?", True, True),
        ("q2", "Name?", False, True),
    ]
    assert [c.id for c in qs[1].choices] == ["q1.0", "q1.1", "q1.2"]
    await conn.answer(
        "rq", AnswerQuestion(value=[Choices(value=["q0.1"]), Choices(value=["q1.0", "q1.2"]), TextAnswer(value="Zed")])
    )
    body = proc.written[-1]["response"]["response"]
    assert body["behavior"] == "allow" and body["toolUseID"] == "tq"
    assert body["updatedInput"]["answers"] == {"Which color?": "Blue", "Which sizes?": "S, L", "Name?": "Zed"}
    assert body["updatedInput"]["questions"] == QUESTION["input"]["questions"]


@pytest.mark.anyio
async def test_cancel_interrupts_and_denies_pending() -> None:
    conn, link, proc = make_conn()
    await conn._dispatch(
        {
            "type": "control_request",
            "request_id": "r1",
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "tool_use_id": "b1",
                "input": {"command": "ls"},
            },
        }
    )
    perm = link.events("RequestOpened")[0].kind.value
    assert perm.value.options == ["AllowOnce", "DenyOnce"]  # no suggestions: no AllowAlways
    assert perm.value.tool.kind == "Execute"
    await conn.cancel()
    assert proc.written[0]["type"] == "control_request" and proc.written[0]["request"] == {"subtype": "interrupt"}
    deny = proc.written[1]["response"]
    assert deny["request_id"] == "r1" and deny["response"]["behavior"] == "deny" and deny["response"]["interrupt"]
    # the interrupted turn's result (error_during_execution) is reported as it is: the engine, which knows it
    # cancelled the turn, reads it as Cancelled (tests/core/test_engine.py)
    await conn._dispatch(
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "terminal_reason": "completed",
            "usage": {},
        }
    )
    assert link.reports[-1].stop.TAG == "Failed"


@pytest.mark.anyio
async def test_close_unanswered_leaves_the_pending_permission_unanswered() -> None:
    # issue 25.6: the drain of a task waiting for input: no interrupt, no denial (the CLI would record it and a
    # resumed one would send it to the model), the CLI killed at once as a kill -9 of the daemon would
    conn, link, proc = make_conn()
    await conn._dispatch(
        {
            "type": "control_request",
            "request_id": "r1",
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "tool_use_id": "b1",
                "input": {"command": "ls"},
            },
        }
    )
    conn.state.turn_begins()
    killed: list[str] = []

    async def kill() -> str:
        killed.append("SIGKILL")
        return "signal: 9 (SIGKILL)"

    proc.kill = kill  # type: ignore[attr-defined]
    await conn.close_unanswered()
    assert proc.written == [] and killed == ["SIGKILL"] and conn.closing


@pytest.mark.anyio
async def test_start_turn_and_configure() -> None:
    conn, link, proc = make_conn()
    await conn.start_turn("t1", PromptInput("hello"))
    frame = proc.written[-1]
    assert frame["type"] == "user" and frame["message"]["content"] == [{"type": "text", "text": "hello"}]
    assert frame["uuid"] and link.reports[-1] == TurnAck()
    await conn.configure("mode", "plan")
    sent = proc.written[-1]
    assert sent["request"] == {"subtype": "set_permission_mode", "mode": "plan"}
    confirm, args = link.tasks[-1]
    conn.channel.resolve(
        {"type": "control_response", "response": {"subtype": "success", "request_id": sent["request_id"]}}
    )
    await confirm(*args)
    change = link.reports[-1]
    assert isinstance(change, InfoChanged) and change.configuration.options["mode"] == "plan"
    await conn.configure("model", "sonnet")
    sent = proc.written[-1]
    confirm, args = link.tasks[-1]
    conn.channel.resolve(
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": sent["request_id"], "error": "no such model"},
        }
    )
    await confirm(*args)
    assert "no such model" in link.reports[-1].kind.value.message
    with pytest.raises(InvalidConfiguration):
        await conn.configure("effort", "low")


def test_user_content_attachments(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    blocks = user_content(PromptInput("look", (str(png), str(tmp_path / "notes.md"), "https://e.x/i.jpg")))
    assert blocks[0] == {"type": "text", "text": "look"}
    assert blocks[1]["type"] == "image" and blocks[1]["source"]["media_type"] == "image/png"
    assert blocks[2] == {"type": "image", "source": {"type": "url", "url": "https://e.x/i.jpg"}}
    assert blocks[3]["text"].endswith("notes.md")


# ------------------------------------------------------------------------------------------------ launch


def test_launch_argv_variants() -> None:
    new = launch.launch_argv("claude", SessionOptions(dir="/w"), session_id="S")
    assert new[0] == "claude" and new[-2:] == ["--session-id", "S"]
    # no print flag: a piped stdout makes the CLI non-interactive, and -p delays its start (launch.BASE_FLAGS)
    assert "-p" not in new and "--print" not in new
    assert new[new.index("--input-format") + 1] == new[new.index("--output-format") + 1] == "stream-json"
    for flag in ("--include-partial-messages", "--replay-user-messages", "--verbose"):
        assert flag in new
    assert new[new.index("--permission-prompt-tool") + 1] == "stdio"
    resume = launch.launch_argv("claude", SessionOptions(dir="/w", resume="T"), session_id="T")
    assert resume[-2:] == ["--resume", "T"] and "--session-id" not in resume
    fork = launch.launch_argv("claude", SessionOptions(dir="/w", fork="T", fork_at="U"), session_id="N")
    assert fork[-7:] == ["--resume", "T", "--fork-session", "--session-id", "N", "--resume-session-at", "U"]
    servers = [
        McpServer(name="a", connection=Stdio(command="srv", args=["-x"], env={"K": "V"})),
        McpServer(name="b", connection=Http(url="http://h", headers={"H": "1"})),
        McpServer(name="c", connection=Sse(url="http://s")),
    ]
    rendered = [(s, launch.MCP_RENDERERS[s.connection.TAG](s)) for s in servers]
    full = launch.launch_argv(
        "claude",
        SessionOptions(dir="/w", mcp_servers=servers, configure={"mode": "plan", "model": "sonnet", "effort": "low"}),
        session_id="S",
        no_tools=True,
        persist=False,
        mcp=rendered,
    )
    config = json.loads(full[full.index("--mcp-config") + 1])
    assert config == {
        "mcpServers": {
            "a": {"type": "stdio", "command": "srv", "args": ["-x"], "env": {"K": "V"}},
            "b": {"type": "http", "url": "http://h", "headers": {"H": "1"}},
            "c": {"type": "sse", "url": "http://s", "headers": {}},
        }
    }
    assert full[full.index("--permission-mode") + 1] == "plan"
    assert full[full.index("--model") + 1] == "sonnet" and full[full.index("--effort") + 1] == "low"
    assert full[full.index("--tools") + 1] == "" and full[-1] == "--no-session-persistence"
    with pytest.raises(InvalidConfiguration, match="render_mcp"):  # servers never bypass the transport plugins
        launch.launch_argv("claude", SessionOptions(dir="/w", mcp_servers=servers), session_id="S")
    with pytest.raises(InvalidConfiguration, match="given twice"):
        launch.launch_argv(
            "claude", SessionOptions(dir="/w", mcp_servers=servers), session_id="S", mcp=rendered + rendered[:1]
        )
    for bad in ({"mode": "yolo"}, {"effort": "huge"}, {"colour": "red"}):
        with pytest.raises(InvalidConfiguration):
            launch.launch_argv("claude", SessionOptions(dir="/w", configure=bad), session_id="S")
    with pytest.raises(InvalidConfiguration):
        launch.launch_argv("claude", SessionOptions(dir="/w", fork_at="U"), session_id="S")


def test_launch_env_keeps_caller_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISABLE_TELEMETRY", "0")
    monkeypatch.delenv("DISABLE_AUTOUPDATER", raising=False)
    inst = AgentInstallation(id="claude", name="Claude Code", executable_path="/opt/x/claude", source="Path")
    env = launch.launch_env(inst)
    assert env["DISABLE_TELEMETRY"] == "0" and env["DISABLE_AUTOUPDATER"] == "1"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] in ("1", env.get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"))
    assert env["PATH"].startswith("/opt/x")


def test_details_from_initialize() -> None:
    init = json.loads((FIXTURES / "claude-stream-1.stdout.jsonl").read_text().splitlines()[0])["response"]["response"]
    details = launch.agent_details(init, version="2.1.197", executable="/x/claude", current={"mode": "default"})
    assert details.auth == Authenticated(kind="ApiKey")
    assert set(details.capabilities.features) >= {"Permissions", "Questions", "Resume", "Fork", "Compact", "Rollback"}
    assert "Steer" not in details.capabilities.features and "PlanUsage" not in details.capabilities.features
    assert details.capabilities.mcp_transports == ["Stdio", "Http", "Sse"]
    model = details.option("model")
    assert model is not None and model.live and model.current == "default"
    assert [c.value for c in model.kind.choices][:3] == ["default", "opus[1m]", "sonnet"]
    assert details.option("mode").live and not details.option("effort").live
    compact = next(c for c in details.commands if c.name == "compact")
    assert compact.input_hint == "<optional custom summarization instructions>"
    none = launch.auth_status({"tokenSource": "none", "apiKeySource": "none"}, "/x/claude")
    assert isinstance(none, Unauthenticated)
    assert none.login[0].command == ["/x/claude", "/login"] and none.login[1].name == "ANTHROPIC_API_KEY"
    sub = launch.auth_status({"tokenSource": "claude.ai", "email": "a@b.c", "subscriptionType": "max"}, "c")
    assert sub.kind == "Subscription" and sub.account.email == "a@b.c" and sub.account.plan == "max"
    assert launch.auth_status({"apiProvider": "bedrock"}, "c").kind == "CloudProvider"


@pytest.mark.anyio
async def test_a_turn_started_before_the_last_result_is_acked_after_it() -> None:
    """The engine ended a cancelled turn the CLI never confirmed and starts the next: the CLI answers its input in
    order, so the old turn's late result comes first; the new turn's TurnAck waits for it (the engine then drops
    the late result as the previous turn's)."""
    conn, link, proc = make_conn()
    await conn.start_turn("t1", PromptInput("one"))
    assert link.reports == [TurnAck()]
    await conn.cancel()  # the interrupt the CLI does not confirm
    await conn.start_turn("t2", PromptInput("two"))
    assert link.reports == [TurnAck()] and len(proc.written) == 3  # sent, not acknowledged yet
    result = {"type": "result", "subtype": "success", "is_error": False, "usage": {}}
    await conn._dispatch(result)  # t1's late end
    assert isinstance(link.reports[-2], TurnEndedReport) and link.reports[-1] == TurnAck()
    await conn._dispatch(result)  # t2's own end
    assert isinstance(link.reports[-1], TurnEndedReport) and link.reports.count(TurnAck()) == 2
    await conn.start_turn("t3", PromptInput("three"))  # nothing owed any more: acknowledged at once
    assert link.reports[-1] == TurnAck()


@pytest.mark.anyio
async def test_one_object_owns_the_open_permission_requests() -> None:
    """Issue 18: the path is CLI control request → ``conn.state.requests`` (issue 30: the toolkit's
    ``PendingRequests``) → engine request; engine answer → the table → CLI reply. It holds request id ↔ the CLI's
    request until answered, withdrawn or denied."""
    from anyagentd.errors import InvalidRequest

    conn, link, proc = make_conn()
    open_requests = conn.state.requests

    def tool_use_of(request_id: str) -> str | None:
        item = open_requests.get(request_id)
        return item.data["tool_use_id"] if item is not None else None

    await conn._dispatch(
        {
            "type": "control_request",
            "request_id": "r1",
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "tool_use_id": "b1",
                "input": {"command": "ls"},
            },
        }
    )
    await conn._dispatch({"type": "control_request", "request_id": "rq", "request": QUESTION})
    await conn._dispatch(
        {
            "type": "control_request",
            "request_id": "r2",
            "request": {
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "tool_use_id": "b2",
                "input": {"command": "pwd"},
            },
        }
    )
    assert len(open_requests) == 3
    assert tool_use_of("r1") == "b1" and tool_use_of("rq") == "tq"
    assert [r.kind.value.value.id for r in link.events("RequestOpened")] == ["r1", "rq", "r2"]
    await conn.answer("r1", AnswerPermission(value="AllowOnce"))
    assert proc.written[-1] == open_requests_reply(
        "r1", {"behavior": "allow", "updatedInput": {"command": "ls"}, "toolUseID": "b1"}
    )
    assert "r1" not in open_requests and tool_use_of("r1") is None
    with pytest.raises(InvalidRequest):
        await conn.answer("r1", AnswerPermission(value="AllowOnce"))
    await conn._dispatch({"type": "control_cancel_request", "request_id": "rq"})
    assert "rq" not in open_requests
    await conn.cancel()
    denies = [w["response"] for w in proc.written if w.get("type") == "control_response"][1:]
    assert [(d["request_id"], d["response"]["toolUseID"], d["response"]["interrupt"]) for d in denies] == [
        ("r2", "b2", True)
    ]
    assert len(open_requests) == 0


def open_requests_reply(request_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "success", "request_id": request_id, "response": body}}


@pytest.mark.anyio
async def test_the_handshake_writes_initialize_and_the_version_request_together() -> None:
    """The version request does not wait for the initialize answer: both are written at once and the CLI answers
    both when it has started (one round trip before the first prompt, not two); the answers may come in any order."""
    import anyio

    conn, _, proc = make_conn()
    init = json.loads((FIXTURES / "claude-stream-1.stdout.jsonl").read_text().splitlines()[0])["response"]["response"]
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn._handshake, 5.0, True)
        await anyio.wait_all_tasks_blocked()
        subtypes = [w["request"]["subtype"] for w in proc.written]
        assert subtypes == ["initialize", "get_binary_version"]  # nothing answered yet
        ids = [w["request_id"] for w in proc.written]
        await conn._dispatch(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": ids[1], "response": {"version": "2.1.197"}},
            }
        )
        await conn._dispatch(
            {"type": "control_response", "response": {"subtype": "success", "request_id": ids[0], "response": init}}
        )
    assert conn.details.version == "2.1.197" and conn.details.auth == Authenticated(kind="ApiKey")
    assert len(proc.written) == 2


@pytest.mark.anyio
async def test_mcp_status_statuses() -> None:
    """What ``mcp_status`` says of each forwarded server (issue 32): ``pending`` keeps it pending, ``connected`` is
    quiet, anything else is a Warning naming it (``failed`` with the CLI's error; never the server's config)."""
    conn, link, _ = make_conn()
    conn.mcp_startup = McpStartup(["ok", "slow", "down", "auth", "off", "missing"], 30, agent="Claude Code")
    config = {"type": "http", "url": "http://h/mcp", "headers": {"Authorization": "Bearer sk-secret"}}
    await conn._note_mcp_status(
        {
            "mcpServers": [
                {"name": "ok", "status": "connected", "config": config},
                {"name": "slow", "status": "pending"},
                {"name": "down", "status": "failed", "error": "Connection closed", "config": config},
                {"name": "auth", "status": "needs-auth", "config": config},
                {"name": "off", "status": "disabled"},
                {"name": "theirs", "status": "failed", "error": "not forwarded by us"},
            ]
        }
    )
    assert conn.mcp_startup.pending == ["slow"]
    warnings = [r.kind.value.message for r in link.events("Diagnostic:Warning")]
    assert warnings == [
        "MCP server 'auth' is not connected: needs-auth",
        "MCP server 'down' failed to connect: Connection closed",
        "MCP server 'missing' is not connected: Claude Code reports nothing for it",
        "MCP server 'off' is not connected: disabled",
    ]
    assert len(link.reports) == 4 and all(
        r.extensions is None for r in link.events()
    )  # no raw frame: the config holds secrets
