"""The Codex adapter's mapping, fed with a real app-server transcript (``fixtures/``, see
``docs/testing.md#recorded-transcripts``) and hand-written frames, through a fake process and link that collect what the adapter writes
and reports. No process runs here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anyagentd.adapters.interface import (
    AuthLost,
    EventReport,
    InfoChanged,
    PromptInput,
    SteeredReport,
    TurnAck,
    TurnEndedReport,
)
from anyagentd.adapters.jsonrpc import RpcChannel, RpcError, classify
from anyagentd.errors import InvalidConfiguration, InvalidRequest, UnsupportedFeature
from anyagentd.model import (
    AgentInstallation,
    AnswerPermission,
    AnswerQuestion,
    Choices,
    CompletedStop,
    ContextUsage,
    FailedStop,
    Http,
    McpServer,
    PermissionRequested,
    QuestionAsked,
    SessionOptions,
    Sse,
    Stdio,
    TextAnswer,
)
from anyagentd_codex import launch
from anyagentd_codex.adapter import PROFILE, CodexAdapter
from anyagentd_codex.connection import CodexConnection, permission_decision
from anyagentd_codex.mapping import FORK_POINT, RAW, split_unified_diff, tool_update

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
THREAD = "01a2287e-f7df-7dc1-80fb-7dd0ad28e0d8"
INSTALL = AgentInstallation(id="codex", name="Codex", executable_path="/usr/bin/codex", source="Path")


class FakeLink:
    """Collects reports like an ``AdapterLink``; ``start_soon`` is never needed here."""

    def __init__(self) -> None:
        self.reports: list[Any] = []

    async def emit(self, kind: Any, *, parent_tool_id: str | None = None, extensions: Any = None) -> None:
        self.reports.append(EventReport(kind, parent_tool_id, extensions))

    async def turn_ack(self) -> None:
        self.reports.append(TurnAck())

    async def turn_ended(self, stop: Any) -> None:
        self.reports.append(TurnEndedReport(stop))

    async def steered(self, accepted: bool) -> None:
        self.reports.append(SteeredReport(accepted))

    async def info_changed(self, **changes: Any) -> None:
        self.reports.append(InfoChanged(**changes))

    async def auth_lost(self, login: Any = None) -> None:
        self.reports.append(AuthLost(list(login or [])))

    async def exited(self, *args: Any) -> None:
        self.reports.append(("exited", args))

    def events(self, tag: str | None = None) -> list[EventReport]:
        out = [r for r in self.reports if isinstance(r, EventReport)]
        return [r for r in out if _tag(r.kind) == tag] if tag else out


class FakeProcess:
    pid = 4194305  # above any pid_max: no command of this "agent" is ever found running

    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def write_json(self, obj: Any) -> None:
        self.written.append(obj)


def _tag(kind: Any) -> str:
    return kind if isinstance(kind, str) else kind.TAG


def connection(**configure: Any) -> tuple[CodexConnection, FakeLink, FakeProcess]:
    link, proc = FakeLink(), FakeProcess()
    options = SessionOptions(dir="/work", configure=configure)
    conn = CodexConnection(
        proc,
        link,
        installation=INSTALL,
        options=options,  # type: ignore[arg-type]
        settings=launch.creation_settings(options),
    )
    conn.state.thread_id = THREAD
    return conn, link, proc


def transcript() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / "codex-appserver.stdout.jsonl").read_text().splitlines() if line]


async def replay(conn: CodexConnection, frames: list[dict[str, Any]], answers: dict[int, Any] | None = None) -> None:
    """Feed the transcript's notifications and server requests (not the responses to the recording driver's own
    requests), answering server requests from ``answers`` as they open."""
    for frame in frames:
        if classify(frame) == "response":
            continue
        await conn._dispatch(frame)
        if classify(frame) == "request" and answers and frame["id"] in answers:
            await conn.answer(str(frame["id"]), answers[frame["id"]])


# ------------------------------------------------------------------------------------------------ transcript


async def test_transcript_maps_text_tools_approvals_usage_and_turn_ends() -> None:
    conn, link, proc = connection()
    await replay(conn, transcript(), {0: AnswerPermission(value="AllowOnce"), 1: AnswerPermission(value="DenyOnce")})
    ends = [r.stop for r in link.reports if isinstance(r, TurnEndedReport)]
    assert ends == [CompletedStop(source="Protocol"), "Cancelled"]  # the second turn was interrupted
    text = "".join(r.kind.text for r in link.events("TextDelta"))
    assert text == "I will run a command.Turn one done (command approved, patch declined)."
    ended = link.events("MessageEnded")
    assert len(ended) == 2 and ended[0].extensions[FORK_POINT] == "01a2287e-f7f6-7882-8e93-7db391bddaee"
    # the command approval: Execute with the unwrapped command, AllowAlways through the exec-policy amendment
    opened = [r.kind.value for r in link.events("RequestOpened")]
    assert [type(o) for o in opened] == [PermissionRequested, PermissionRequested]
    command = opened[0].value
    assert command.id == "0" and command.tool.kind == "Execute" and command.tool.status == "Pending"
    assert command.tool.input.command == "echo approved > approved.txt"
    assert command.options == ["AllowOnce", "AllowAlways", "DenyOnce"]
    patch = opened[1].value
    assert patch.tool.kind == "Edit" and patch.tool.diffs[0].new_text == "patched by apply_patch\n"
    assert patch.tool.diffs[0].old_text is None
    # our replies, by the server's ids
    replies = [w for w in proc.written if "result" in w]
    assert replies == [
        {"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}},
        {"jsonrpc": "2.0", "id": 1, "result": {"decision": "decline"}},
    ]
    tools = {r.kind.value.id: r.kind.value for r in link.events("ToolUpdated")}
    assert tools["call_mock_cb58754d2f854dd5a0cfec8e"].status == "Completed"
    assert tools["call_mock_fcb8d1a5b2504dd58c8bc7da"].status == "Failed"  # declined
    usage = [r.kind for r in link.events("ContextUsage")]
    assert usage[0] == ContextUsage(used_tokens=7238, window_tokens=258400)
    assert not link.events("PlanUsageUpdated")  # the mock's rate limits report no window
    # the bubblewrap configWarning is a Warning; nothing was unknown
    levels = [(r.kind.value.level, r.kind.value.message[:20]) for r in link.events("Diagnostic")]
    assert levels == [("Warning", "Codex could not find")]


async def test_each_calls_tokens_are_reported_once() -> None:
    # the recorded pinned codex: each tokenUsage/updated's last call, in = inputTokens, out = outputTokens (its
    # totalTokens is their sum); the same notification again (total unchanged) reports no tokens
    conn, link, _ = connection()
    frames = [f for f in transcript() if f.get("method") == "thread/tokenUsage/updated"]
    for frame in [*frames, frames[-1]]:
        await conn._dispatch(frame)
    reported = [r.extensions.get("anyagentd/tokens") if r.extensions else None for r in link.events("ContextUsage")]
    assert reported == [{"in": 7133, "out": 105}, {"in": 7303, "out": 66}, {"in": 7412, "out": 56}, None]


async def test_active_items_are_cancelled_at_an_interrupt() -> None:
    conn, link, _ = connection()
    item = {
        "type": "commandExecution",
        "id": "c1",
        "command": "/bin/bash -lc 'sleep 10'",
        "cwd": "/work",
        "commandActions": [],
        "status": "inProgress",
    }
    await conn._dispatch({"method": "item/started", "params": {"threadId": THREAD, "turnId": "T", "item": item}})
    await conn._dispatch(
        {
            "method": "item/agentMessage/delta",
            "params": {"threadId": THREAD, "turnId": "T", "itemId": "m1", "delta": "par"},
        }
    )
    await conn._dispatch(
        {
            "method": "turn/completed",
            "params": {"threadId": THREAD, "turn": {"id": "T", "items": [], "status": "interrupted", "error": None}},
        }
    )
    tools = [r.kind.value for r in link.events("ToolUpdated")]
    assert [t.status for t in tools] == ["Running", "Cancelled"] and tools[0].input.command == "sleep 10"
    # the interrupted command's own end, reported afterwards (failed: it was killed), changes nothing
    await conn._dispatch(
        {
            "method": "item/completed",
            "params": {"threadId": THREAD, "turnId": "T", "item": {**item, "status": "failed", "exitCode": -1}},
        }
    )
    assert len(link.events("ToolUpdated")) == 2
    assert [r.kind.message_id for r in link.events("MessageEnded")] == ["m1"]
    assert isinstance(link.reports[-1], TurnEndedReport) and link.reports[-1].stop == "Cancelled"


async def test_a_command_that_could_not_be_stopped_stays_running_at_an_interrupt() -> None:
    conn, link, _ = connection()
    item = {
        "type": "commandExecution",
        "id": "c1",
        "command": "/bin/bash -lc 'sleep 10'",
        "cwd": "/work",
        "commandActions": [],
        "status": "inProgress",
    }
    await conn._dispatch({"method": "item/started", "params": {"threadId": THREAD, "turnId": "T", "item": item}})
    conn.state.survivors = {"c1"}  # what the connection's stop found running but could not signal
    await conn.mapper.handle(
        "turn/completed", {"threadId": THREAD, "turn": {"id": "T", "items": [], "status": "interrupted", "error": None}}
    )
    assert [r.kind.value.status for r in link.events("ToolUpdated")] == ["Running"]  # TurnEnded.background
    assert link.reports[-1].stop == "Cancelled" and not conn.state.survivors


async def test_failed_turn_error_and_401_auth_lost() -> None:
    conn, link, _ = connection()
    await conn._dispatch(
        {
            "method": "error",
            "params": {
                "threadId": THREAD,
                "turnId": "T",
                "willRetry": True,
                "error": {"message": "Reconnecting... 1/5"},
            },
        }
    )
    await conn._dispatch(
        {
            "method": "error",
            "params": {
                "threadId": THREAD,
                "turnId": "T",
                "willRetry": False,
                "error": {"message": "unexpected status 401", "codexErrorInfo": "unauthorized"},
            },
        }
    )
    await conn._dispatch(
        {
            "method": "turn/completed",
            "params": {
                "threadId": THREAD,
                "turn": {"id": "T", "items": [], "status": "failed", "error": {"message": "unexpected status 401"}},
            },
        }
    )
    levels = [r.kind.value.level for r in link.events("Diagnostic")]
    assert levels == ["Warning", "Error"]
    assert any(isinstance(r, AuthLost) and r.login[0].command[-1] == "login" for r in link.reports)
    assert link.reports[-1].stop == FailedStop(message="unexpected status 401")
    # an HTTP 401 reported as a connection failure is auth loss too
    conn2, link2, _ = connection()
    await conn2._dispatch(
        {
            "method": "error",
            "params": {
                "threadId": THREAD,
                "turnId": "T",
                "willRetry": False,
                "error": {
                    "message": "401",
                    "codexErrorInfo": {"responseStreamConnectionFailed": {"httpStatusCode": 401}},
                },
            },
        }
    )
    assert any(isinstance(r, AuthLost) for r in link2.reports)


async def test_unknown_and_broken_frames_never_crash() -> None:
    conn, link, proc = connection()
    await conn._dispatch({"method": "thread/brandNew", "params": {"x": 1}})
    await conn._dispatch({"method": "item/agentMessage/delta", "params": {"nope": True}})
    await conn._dispatch(
        {"method": "item/started", "params": {"threadId": THREAD, "item": {"type": "futureThing", "id": "f"}}}
    )
    await conn._dispatch({"weird": True})
    await conn._dispatch({"method": "some/serverRequest", "id": 7, "params": {}})
    infos = link.events("Diagnostic")
    assert len(infos) == 5 and all(r.kind.value.level == "Info" for r in infos)
    assert infos[0].extensions[RAW]["method"] == "thread/brandNew"
    assert proc.written[-1]["id"] == 7 and proc.written[-1]["error"]["code"] == -32601


async def test_reasoning_plan_mcp_search_rate_limits_and_title() -> None:
    conn, link, _ = connection()
    base = {"threadId": THREAD, "turnId": "T"}
    await conn._dispatch(
        {
            "method": "item/reasoning/summaryTextDelta",
            "params": {**base, "itemId": "r1", "delta": "thinking", "summaryIndex": 0},
        }
    )
    await conn._dispatch(
        {
            "method": "item/completed",
            "params": {**base, "item": {"type": "reasoning", "id": "r1", "summary": ["thinking"]}},
        }
    )
    await conn._dispatch(
        {
            "method": "turn/plan/updated",
            "params": {
                **base,
                "plan": [{"step": "read", "status": "completed"}, {"step": "write", "status": "inProgress"}],
            },
        }
    )
    mcp = {
        "type": "mcpToolCall",
        "id": "m",
        "server": "files",
        "tool": "echo",
        "arguments": {"text": "x"},
        "status": "completed",
        "result": {"content": [{"type": "text", "text": "x"}]},
    }
    await conn._dispatch({"method": "item/completed", "params": {**base, "item": mcp}})
    await conn._dispatch(
        {
            "method": "item/completed",
            "params": {
                **base,
                "item": {
                    "type": "webSearch",
                    "id": "w",
                    "query": "anyio docs",
                    "action": {"type": "search", "query": "anyio docs"},
                },
            },
        }
    )
    await conn._dispatch(
        {
            "method": "account/rateLimits/updated",
            "params": {
                "rateLimits": {
                    "planType": "plus",
                    "primary": {"usedPercent": 42, "windowDurationMins": 300, "resetsAt": 1800000000},
                    "secondary": {"usedPercent": 7, "windowDurationMins": 10080},
                }
            },
        }
    )
    await conn._dispatch({"method": "thread/name/updated", "params": {"threadId": THREAD, "threadName": "Fix bug"}})
    assert [r.kind.text for r in link.events("ReasoningDelta")] == ["thinking"]
    assert [e.status for e in link.events("PlanUpdated")[0].kind.entries] == ["Completed", "InProgress"]
    tools = {r.kind.value.id: r.kind.value for r in link.events("ToolUpdated")}
    assert tools["m"].kind.server == "files" and tools["m"].output == "x" and tools["m"].status == "Completed"
    assert tools["w"].kind == "Search" and tools["w"].input.value == "anyio docs" and tools["w"].status == "Completed"
    usage = link.events("PlanUsageUpdated")[0].kind.value
    assert usage.plan == "plus" and [(w.label, w.used_percent) for w in usage.windows] == [("5h", 42), ("weekly", 7)]
    assert usage.windows[0].resets_at.secs_since_epoch == 1800000000
    assert any(isinstance(r, InfoChanged) and r.title == "Fix bug" for r in link.reports)


async def test_subagent_frames_carry_the_parent_tool_and_never_end_the_turn() -> None:
    conn, link, _ = connection()
    base = {"threadId": THREAD, "turnId": "T"}
    child = "child-thread"
    spawn = {
        "type": "collabAgentToolCall",
        "id": "spawn1",
        "tool": "spawnAgent",
        "status": "inProgress",
        "senderThreadId": THREAD,
        "receiverThreadIds": [child],
        "agentsStates": {},
        "prompt": "look around",
    }
    await conn._dispatch({"method": "item/started", "params": {**base, "item": spawn}})
    cbase = {"threadId": child, "turnId": "CT"}
    await conn._dispatch(
        {
            "method": "turn/started",
            "params": {"threadId": child, "turn": {"id": "CT", "items": [], "status": "inProgress"}},
        }
    )
    await conn._dispatch(
        {
            "method": "item/completed",
            "params": {
                **cbase,
                "item": {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": "look around"}]},
            },
        }
    )
    await conn._dispatch({"method": "item/agentMessage/delta", "params": {**cbase, "itemId": "cm", "delta": "found"}})
    await conn._dispatch(
        {
            "method": "turn/completed",
            "params": {"threadId": child, "turn": {"id": "CT", "items": [], "status": "completed"}},
        }
    )
    assert not any(isinstance(r, TurnEndedReport) for r in link.reports)
    assert conn.state.turn_id is None or conn.state.turn_id != "CT"
    user = link.events("UserMessage")[0]
    assert user.parent_tool_id == "spawn1" and user.kind.text == "look around"
    assert link.events("TextDelta")[0].parent_tool_id == "spawn1"
    assert link.events("ToolUpdated")[0].kind.value.kind == "Subagent"


async def test_user_input_request_is_a_question() -> None:
    conn, link, proc = connection()
    params = {
        "threadId": THREAD,
        "turnId": "T",
        "itemId": "q",
        "isBlocking": True,
        "questions": [
            {
                "id": "color",
                "header": "Color",
                "question": "Which color?",
                "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
            },
            {"id": "name", "header": "Name", "question": "Your name?", "options": None},
        ],
    }
    await conn._dispatch({"method": "item/tool/requestUserInput", "id": 3, "params": params})
    request = link.events("RequestOpened")[0].kind.value
    assert isinstance(request, QuestionAsked)
    q1, q2 = request.value.questions
    assert [c.id for c in q1.choices] == ["Red", "Blue"] and not q1.allows_free_text and q2.allows_free_text
    # an answer of the wrong kind never gets here: the engine alone validates answers (tests/core/test_engine.py)
    await conn.answer("3", AnswerQuestion(value=[Choices(value=["Blue"]), TextAnswer(value="Ada")]))
    assert proc.written[-1] == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"answers": {"color": {"answers": ["Blue"]}, "name": {"answers": ["Ada"]}}},
    }
    with pytest.raises(InvalidRequest):
        await conn.answer("3", AnswerQuestion(value=[]))


async def test_legacy_approvals_and_elicitations() -> None:
    conn, link, proc = connection()
    await conn._dispatch(
        {
            "method": "execCommandApproval",
            "id": 4,
            "params": {
                "conversationId": THREAD,
                "callId": "c9",
                "command": ["ls", "-la"],
                "cwd": "/work",
                "parsedCmd": [],
            },
        }
    )
    request = link.events("RequestOpened")[0].kind.value.value
    assert request.tool.kind == "Execute" and request.tool.input.command == "ls -la"
    await conn.answer("4", AnswerPermission(value="AllowAlways"))
    assert proc.written[-1] == {"jsonrpc": "2.0", "id": 4, "result": {"decision": "approved_for_session"}}
    await conn._dispatch({"method": "mcpServer/elicitation/request", "id": 5, "params": {"threadId": THREAD}})
    assert proc.written[-1]["id"] == 5 and proc.written[-1]["result"]["action"] == "decline"
    assert link.events("Diagnostic")[-1].kind.value.level == "Info"


async def test_cancel_answers_open_approvals_then_interrupts() -> None:
    conn, link, proc = connection()
    conn.state.turn_id = "T"
    await conn._dispatch(
        {
            "method": "item/fileChange/requestApproval",
            "id": 0,
            "params": {"threadId": THREAD, "turnId": "T", "itemId": "f", "startedAtMs": 1},
        }
    )
    await conn.cancel()
    assert proc.written[0] == {"jsonrpc": "2.0", "id": 0, "result": {"decision": "cancel"}}
    assert proc.written[1]["method"] == "turn/interrupt"
    with pytest.raises(InvalidRequest):
        await conn.answer("0", AnswerPermission(value="AllowOnce"))


# ------------------------------------------------------------------------------------------------ commands


async def test_turn_start_ack_steer_hold_and_interrupt() -> None:
    conn, link, proc = connection(model="gpt-5.5", effort="low")
    await conn.start_turn("t1", PromptInput("hello"))
    start = proc.written[-1]
    assert start["method"] == "turn/start"
    assert start["params"] == {
        "threadId": THREAD,
        "input": [{"type": "text", "text": "hello"}],
        "model": "gpt-5.5",
        "effort": "low",
        "approvalPolicy": "untrusted",
    }
    await conn.steer(PromptInput("also this"))  # before turn/started: held
    assert proc.written[-1] is start
    await conn._dispatch({"id": start["id"], "result": {"turn": {"id": "T", "items": [], "status": "inProgress"}}})
    assert isinstance(link.reports[-1], TurnAck)
    await conn._dispatch(
        {
            "method": "turn/started",
            "params": {"threadId": THREAD, "turn": {"id": "T", "items": [], "status": "inProgress"}},
        }
    )
    steer = proc.written[-1]
    assert steer["method"] == "turn/steer" and steer["params"]["expectedTurnId"] == "T"
    assert steer["params"]["input"] == [{"type": "text", "text": "also this"}]
    await conn._dispatch({"id": steer["id"], "result": {"turnId": "T"}})
    assert link.reports[-1] == SteeredReport(True)
    await conn.cancel()
    assert proc.written[-1]["method"] == "turn/interrupt"
    assert proc.written[-1]["params"] == {"threadId": THREAD, "turnId": "T"}


async def test_refused_turn_start_fails_the_turn_and_held_steer_is_rejected() -> None:
    conn, link, proc = connection()
    await conn.start_turn("t1", PromptInput("hello"))
    await conn.steer(PromptInput("more"))
    await conn._dispatch({"id": proc.written[-1]["id"], "error": {"code": -32600, "message": "bad input"}})
    assert isinstance(link.reports[0], TurnAck)
    assert SteeredReport(False) in link.reports
    assert link.reports[-1].stop == FailedStop(message="Codex refused the turn: bad input")


async def test_configure_applies_to_the_next_turn() -> None:
    conn, link, proc = connection()
    await conn.configure("model", "gpt-5.4")
    await conn.configure("effort", "high")
    assert link.reports[-1].configuration.options["effort"] == "high"
    with pytest.raises(InvalidConfiguration):
        await conn.configure("sandbox", "read-only")
    await conn.start_turn("t1", PromptInput("x"))
    assert proc.written[-1]["params"]["model"] == "gpt-5.4" and proc.written[-1]["params"]["effort"] == "high"


async def test_skill_prompts_and_attachments(tmp_path: Path) -> None:
    conn, _, _ = connection()
    conn._skills = {"imagegen": "/h/skills/imagegen/SKILL.md"}
    image = tmp_path / "a.png"
    image.write_bytes(b"\x89PNG")
    items = conn.turn_input(PromptInput("/imagegen a cat", (str(image), "notes.txt")))
    assert items[0] == {"type": "skill", "name": "imagegen", "path": "/h/skills/imagegen/SKILL.md"}
    assert items[1] == {"type": "text", "text": "$imagegen a cat\n\nAttached: notes.txt"}
    assert items[2] == {"type": "localImage", "path": str(image)}
    assert conn.turn_input(PromptInput("/unknown x"))[0] == {"type": "text", "text": "/unknown x"}


def test_permission_decisions() -> None:
    offered = {
        "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}, "cancel"]
    }
    assert permission_decision("command", "AllowAlways", offered) == {
        "acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}
    }
    assert permission_decision("command", "AllowAlways", {}) == "acceptForSession"
    assert permission_decision("file", "AllowAlways", {}) == "acceptForSession"
    assert permission_decision("file", "DenyOnce", {}) == "decline"
    assert permission_decision("command", "Cancel", {}) == "cancel"
    assert permission_decision("legacy", "AllowAlways", {}) == "approved_for_session"
    assert permission_decision("legacy", "DenyOnce", {}) == "denied"


async def test_rpc_ids_are_tracked_per_direction() -> None:
    sent: list[Any] = []

    async def write(obj: Any) -> None:
        sent.append(obj)

    channel = RpcChannel(write)
    got: list[Any] = []

    async def callback(result: Any, error: Any) -> None:
        got.append((result, error))

    first = await channel.send("a", {}, callback=callback)
    assert first == 1
    # a server *request* with the same id is not a response to ours
    assert classify({"id": 1, "method": "item/fileChange/requestApproval", "params": {}}) == "request"
    assert await channel.resolve({"id": 1, "result": {"ok": True}})
    assert got == [({"ok": True}, None)]
    assert not await channel.resolve({"id": 1, "result": {}})  # already answered


async def test_rpc_requests_in_flight_together_and_an_answer_before_the_output_ended() -> None:
    sent: list[Any] = []

    async def write(obj: Any) -> None:
        sent.append(obj)

    channel = RpcChannel(write)
    first, second = await channel.send("a"), await channel.send("b")
    assert [f["id"] for f in sent] == [first, second]  # both written, neither answered
    assert await channel.resolve({"id": first, "result": {"ok": 1}})
    assert not await channel.resolve({"id": first, "result": {"ok": 2}})  # a duplicate answer changes nothing
    await channel.close("the output ended")
    assert await channel.wait(first) == {"ok": 1}  # answered before the end: still readable
    with pytest.raises(RpcError, match="the output ended"):
        await channel.wait(second)


# ------------------------------------------------------------------------------------------------ launch


def test_launch_argv_extra_args_and_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(launch.ARGS_ENV, "-c model_provider=mock -c 'model=gpt 5'")
    extra = launch.extra_args({"args": ["-c", "a=1"]})
    assert extra == ["-c", "a=1", "-c", "model_provider=mock", "-c", "model=gpt 5"]
    servers = [
        McpServer(name="files", connection=Stdio(command="python3", args=["srv.py", "--x"], env={"K": 'v"q'})),
        McpServer(name="web", connection=Http(url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer t"})),
    ]
    mcp = launch.mcp_args(servers)
    assert mcp == [
        "-c",
        'mcp_servers.files.command="python3"',
        "-c",
        'mcp_servers.files.args=["srv.py", "--x"]',
        "-c",
        'mcp_servers.files.env={"K" = "v\\"q"}',
        "-c",
        'mcp_servers.web.url="http://127.0.0.1:9/mcp"',
        "-c",
        'mcp_servers.web.http_headers={"Authorization" = "Bearer t"}',
    ]
    argv = launch.launch_argv("/bin/codex", extra=extra, mcp=mcp)
    assert argv[:2] == ["/bin/codex", "app-server"]
    assert argv[2:10] == [
        "-c",
        "analytics.enabled=false",
        "-c",
        "feedback.enabled=false",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        "features.plugins=false",
    ]
    with pytest.raises(UnsupportedFeature):
        launch.mcp_args([McpServer(name="s", connection=Sse(url="http://x/sse"))])
    with pytest.raises(InvalidConfiguration):
        launch.mcp_args([McpServer(name="bad name", connection=Stdio(command="x"))])


class _Transport:
    """A stand-in MCP transport plugin: accepts every server."""

    def validate(self, server: McpServer) -> None:
        pass


def test_mcp_forwarding_through_the_core_transport_plugins() -> None:
    adapter = CodexAdapter()
    adapter.mcp_transports = {"Stdio": _Transport(), "Sse": _Transport()}  # Http not installed
    server = McpServer(name="files", connection=Stdio(command="python3", args=["s.py"]))
    assert launch.mcp_args([server], adapter)[:2] == ["-c", 'mcp_servers.files.command="python3"']
    with pytest.raises(UnsupportedFeature, match="cannot use MCP transport Sse"):
        launch.mcp_args([McpServer(name="s", connection=Sse(url="http://x/sse"))], adapter)
    with pytest.raises(UnsupportedFeature, match="not installed"):
        launch.mcp_args([McpServer(name="h", connection=Http(url="http://x/mcp"))], adapter)
    assert adapter._transports() == ["Stdio"]


def test_creation_settings_and_profile() -> None:
    assert launch.creation_settings(SessionOptions(dir="/", configure={"mode": "never", "sandbox": "read-only"})) == {
        "mode": "never",
        "sandbox": "read-only",
    }
    with pytest.raises(InvalidConfiguration):
        launch.creation_settings(SessionOptions(dir="/", configure={"mode": "sometimes"}))
    with pytest.raises(InvalidConfiguration):
        launch.creation_settings(SessionOptions(dir="/", configure={"colour": "red"}))
    assert (PROFILE.id, PROFILE.name, PROFILE.executable, PROFILE.install_hint) == (
        "codex",
        "Codex",
        "codex",
        "npm install -g @openai/codex",
    )
    assert PROFILE.env_override == "ANYAGENTD_CODEX_BIN"


def test_auth_status() -> None:
    from anyagentd_codex.protocol import GetAccountResponse

    assert launch.auth_status(GetAccountResponse(account=None, requiresOpenaiAuth=False), "codex").kind == "ApiKey"
    logged_out = launch.auth_status(GetAccountResponse(account=None, requiresOpenaiAuth=True), "/bin/codex")
    assert logged_out.TAG == "Unauthenticated" and logged_out.login[0].command == ["/bin/codex", "login"]
    sub = launch.auth_status(GetAccountResponse(account={"type": "chatgpt", "email": "a@b", "planType": "pro"}), "c")
    assert sub.kind == "Subscription" and sub.account.email == "a@b" and sub.account.plan == "pro"
    assert launch.auth_status(None, "c") == "Unknown"


def test_tool_update_shapes() -> None:
    update = tool_update(
        {
            "type": "fileChange",
            "id": "f",
            "status": "completed",
            "changes": [
                {
                    "path": "/w/a.txt",
                    "kind": {"type": "update", "move_path": None},
                    "diff": "@@ -1,2 +1,2 @@\n keep\n-old\n+new\n",
                }
            ],
        }
    )
    assert update is not None and update.kind == "Edit" and update.status == "Completed"
    assert (update.diffs[0].old_text, update.diffs[0].new_text) == ("keep\nold\n", "keep\nnew\n")
    assert split_unified_diff("-a\n+b\n") == ("a\n", "b\n")
    deleted = tool_update(
        {
            "type": "fileChange",
            "id": "d",
            "status": "inProgress",
            "changes": [{"path": "/w/x", "kind": {"type": "delete"}, "diff": "gone\n"}],
        }
    )
    assert deleted is not None and deleted.kind == "Delete"
    assert tool_update({"type": "agentMessage", "id": "m", "text": ""}) is None


async def test_one_protocol_state_object_owned_by_the_connection() -> None:
    """Issue 18: the turn's and thread's protocol state live in one object (``conn.state``) that the mapper
    records into and the connection decides with; the turn's end resets it."""
    conn, link, proc = connection()
    state = conn.state
    assert conn.mapper.state is state and conn.options is state.options and conn.thread_id == state.thread_id
    assert not [name for name in vars(conn.mapper) if name not in ("link", "state", "cwd", "login")]
    await conn.start_turn("t1", PromptInput("hello"))
    assert state.requested
    await conn.steer(PromptInput("more"))
    assert state.held_steer == PromptInput("more")
    await conn._dispatch(
        {
            "method": "turn/started",
            "params": {"threadId": THREAD, "turn": {"id": "T", "items": [], "status": "inProgress"}},
        }
    )
    assert state.turn_id == "T" and state.turn_started and state.held_steer is None
    assert proc.written[-1]["method"] == "turn/steer"
    item = {"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/work", "status": "inProgress"}
    await conn._dispatch({"method": "item/started", "params": {"threadId": THREAD, "turnId": "T", "item": item}})
    await conn._dispatch(
        {
            "method": "item/commandExecution/requestApproval",
            "id": 7,
            "params": {"threadId": THREAD, "turnId": "T", "itemId": "c1", "command": "ls"},
        }
    )
    assert set(state.tools) == {"c1"} and set(state.requests) == {"7"} and state.requests["7"].kind == "command"
    await conn._dispatch(
        {
            "method": "turn/completed",
            "params": {"threadId": THREAD, "turn": {"id": "T", "items": [], "status": "completed", "error": None}},
        }
    )
    assert (state.turn_id, state.turn_started, state.requested, state.last_turn_id) == (None, False, False, "T")
    assert not state.requests
    with pytest.raises(InvalidRequest):
        await conn.answer("7", AnswerPermission(value="AllowOnce"))


# ------------------------------------------------------------------------------------------------ handshake


async def test_the_handshake_asks_for_the_reads_and_the_thread_at_once() -> None:
    """Once ``initialize`` is answered, account/read, model/list, config/read, skills/list and thread/start are all
    written before any of them is answered (one round trip before the first prompt, not five); their answers then
    fill the details and the options in order, whatever order they come in."""
    import anyio

    conn, _, proc = connection()
    recorded = transcript()
    init, started = recorded[0]["result"], next(f["result"] for f in recorded if f.get("id") == 2)
    answers = {
        "account/read": {"account": None, "requiresOpenaiAuth": False},
        "model/list": {"data": []},
        "config/read": {"config": {"model": "gpt-5.5", "model_reasoning_effort": "high"}},
        "skills/list": {"data": []},
        "thread/start": started,
    }
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn._handshake, False, True)
        await anyio.wait_all_tasks_blocked()
        assert [w["method"] for w in proc.written] == ["initialize"]
        await conn._dispatch({"id": proc.written[0]["id"], "result": init})
        await anyio.wait_all_tasks_blocked()
        sent = [w for w in proc.written if "id" in w and w["method"] != "initialize"]
        assert [w["method"] for w in sent] == list(answers)  # all of them, none answered yet
        assert "model" not in sent[-1]["params"]  # the caller configured none: Codex's config picks it
        for frame in reversed(sent):
            await conn._dispatch({"id": frame["id"], "result": answers[frame["method"]]})
    assert conn.thread_id == THREAD and conn.resume_token == THREAD
    assert conn.options["effort"] == "high" and conn.options["model"]  # from config/read, then the thread
    assert conn.details.version == "0.171.0"
