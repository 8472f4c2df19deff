"""The ACP adapter against ``tiny_agent.py`` (a small ACP agent on the official library), opened through the
``{"acp": {...}}`` AgentRef: what the real agents do not show — agent-originated turns, malformed updates,
non-JSON and oversized lines, a crash mid-turn, refusals, all four permission kinds, modes and config options,
session/load, auth errors, MCP shapes, attachments.

Questions are not covered: ACP has no stable question request (its elicitation is still unstable), so the
adapter does not advertise the Questions capability.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_support import tiny_ref

from anyagentd.engine.settings import EngineSettings
from anyagentd.errors import AuthRequired, ProcessExited, ResumeFailed, SessionClosed, UnsupportedFeature
from anyagentd.model import AnswerPermission, Http, McpServer, Sse, Stdio
from anyagentd.runtime import Runtime
from anyagentd_acp.connection import RAW_LINE
from anyagentd_acp.mapping import CLOSED_AT_TURN_END, RAW_UPDATE
from anyagentd_testing.events import EventStream, event_tag, wait_process_group_gone

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def run_turn(session: Any, stream: EventStream, text: str) -> Any:
    await session.prompt(text)
    return await stream.until("TurnEnded")


async def test_turn_contract_without_discovery(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        assert rt._last_report is None
        info = session.info()
        assert info.agent.source == "Pinned" and info.details.version == "0.0.1"
        assert info.resume_token and info.resume_token.startswith("tiny-")
        assert {"Permissions", "Images", "Resume"} <= set(info.details.capabilities.features)
        assert info.details.capabilities.mcp_transports == ["Stdio", "Http"]
        assert info.configuration.options == {"mode": "ask", "model": "tiny-small", "fast": False}
        stream = EventStream(session)
        delivery = await session.prompt("hello")
        started = await stream.until("TurnStarted")
        assert started.kind.origin.value == delivery.prompt_id
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed" and ended.kind.stop.source == "Protocol"
        assert stream.text() == "Hello world."
        assert [e.kind.text for e in stream.of("ReasoningDelta")] == ["hmm"]
        usage = stream.of("ContextUsage")[0].kind
        assert (usage.used_tokens, usage.window_tokens, usage.cost_usd) == (1200, 200000, 0.25)
        assert session.info().title == "Tiny chat"
        assert any(c.name == "joke" for c in session.info().details.commands)
        ended_messages = {e.kind.message_id for e in stream.of("MessageEnded")}
        assert {e.kind.message_id for e in stream.of("TextDelta")} <= ended_messages
        pid = session.connection.process.pid
        await session.close()
        await stream.rest()
        await wait_process_group_gone(pid)


async def test_tools_and_plan(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await run_turn(session, stream, "tools")
        plan = stream.of("PlanUpdated")[0].kind
        assert [(e.text, e.status) for e in plan.entries] == [("edit the file", "InProgress"), ("check", "Pending")]
        tools = [e.kind.value for e in stream.of("ToolUpdated")]
        assert [t.status for t in tools] == ["Pending", "Running", "Completed"]
        last = tools[-1]
        assert last.kind == "Edit" and last.title == "Edit a.txt" and last.output == "edited"
        assert last.diffs[0].new_text == "b" and last.locations == ["/w/a.txt:3"]
        assert last.raw is not None and last.raw.input == {"path": "/w/a.txt"}


async def test_a_tool_the_agent_leaves_running_ends_with_the_turn(work: Path) -> None:
    """codex-acp 0.16.0 under load sometimes answers end_turn without the exec's completed update; the prompt's
    answer means no tool call is pending (ACP prompt turn), so the tool ends Completed before TurnEnded."""
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        ended = await run_turn(session, stream, "unfinished")
        assert ended.kind.stop.TAG == "Completed" and ended.kind.background == []
        tools = stream.of("ToolUpdated")
        assert [e.kind.value.status for e in tools] == ["Running", "Completed"]
        assert tools[-1].turn_info.id == ended.turn_info.id and tools[-1].extensions == {CLOSED_AT_TURN_END: True}
        assert session.status == "Idle"


@pytest.mark.parametrize("choice", ["AllowOnce", "AllowAlways", "DenyOnce", "DenyAlways"])
async def test_permission_answers_pick_the_exact_option(work: Path, choice: str) -> None:
    option = {
        "AllowOnce": "allow_once",
        "AllowAlways": "allow_always",
        "DenyOnce": "reject_once",
        "DenyAlways": "reject_always",
    }[choice]
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("permission")
        request = (await stream.until("RequestOpened")).kind.value.value
        assert request.options == ["AllowOnce", "AllowAlways", "DenyOnce", "DenyAlways"]
        assert request.tool.kind == "Execute" and request.tool.input.command == "rm -rf /tmp/x"
        assert session.status == "NeedsInput"
        await session.answer(request.id, AnswerPermission(value=choice))
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        assert stream.text() == f"selected opt-{option}"
        tool = [e.kind.value for e in stream.of("ToolUpdated")][-1]
        assert tool.status == ("Completed" if choice.startswith("Allow") else "Failed")


async def test_cancel_answers_pending_permission_cancelled(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("permission")
        await stream.until("RequestOpened")
        await session.cancel()
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop == "Cancelled"
        assert "RequestClosed" in [event_tag(e) for e in stream.seen]
        assert (await run_turn(session, stream, "hello")).kind.stop.TAG == "Completed"


async def test_cancel_mid_turn_within_a_second(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("slow")
        await stream.until("TextDelta")
        started = time.monotonic()
        await session.cancel()
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop == "Cancelled" and time.monotonic() - started < 1.0
        assert (await run_turn(session, stream, "hello")).kind.stop.TAG == "Completed"


async def test_cancel_ignored_by_the_agent_ends_after_the_grace(work: Path) -> None:
    settings = EngineSettings(quiet_agent=0.3, cancel_grace=0.5)
    async with Runtime(settings=settings) as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("deaf 2")
        await stream.until("TextDelta")
        started = time.monotonic()
        await session.cancel()
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop == "Cancelled" and time.monotonic() - started < 1.5
        assert any("of the cancel" in e.kind.value.message for e in stream.of("Diagnostic"))
        seen = len(stream.seen)
        hello = await run_turn(session, stream, "hello")
        assert hello.kind.stop.TAG == "Completed"
        # the next prompt waited for the deaf prompt's answer: its late words (the cancelled turn's) are dropped,
        # its late end_turn is not reported, and "hello" gets only its own answer
        assert "".join(e.kind.text for e in stream.seen[seen:] if event_tag(e) == "TextDelta") == "Hello world."
        await anyio.sleep(0.5)
        await session.close()
        await stream.rest()
        assert "late words" not in stream.text()
        assert sum(event_tag(e) == "TurnStarted" for e in stream.seen) == 2  # no agent turn for the leftovers
        assert not [e for e in stream.of("Diagnostic") if "idle" in e.kind.value.message]


async def test_agent_originated_turn_ends_by_inferred_completion(work: Path) -> None:
    async with Runtime(settings=EngineSettings(quiet_agent=0.5, quiet_prompted=5.0)) as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        first = await run_turn(session, stream, "later")
        assert first.kind.stop.TAG == "Completed" and first.kind.stop.source == "Protocol"
        started = await stream.until("TurnStarted")
        assert started.kind.origin == "Agent"
        text = await stream.until("TextDelta")
        assert text.kind.text == "unprompted news" and text.turn_info.id == started.turn_info.id
        ended = await stream.until("TurnEnded", timeout=5)
        assert ended.kind.stop.TAG == "Completed" and ended.kind.stop.source == "Inferred"


async def test_malformed_updates_and_non_json_lines_are_diagnostics(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        ended = await run_turn(session, stream, "malformed")
        assert ended.kind.stop.TAG == "Completed" and stream.text() == "after"
        diagnostics = stream.of("Diagnostic")
        raw_updates = [e.extensions[RAW_UPDATE] for e in diagnostics if RAW_UPDATE in e.extensions]
        assert [u["update"]["sessionUpdate"] for u in raw_updates] == ["bogus_kind", "agent_message_chunk"]
        assert all(e.kind.value.level == "Info" for e in diagnostics)
        assert any(e.extensions.get(RAW_LINE) == "this is not json" for e in diagnostics)


async def test_oversized_line_is_a_diagnostic_and_the_session_lives(work: Path) -> None:
    async with Runtime(adapter_config={"acp": {"max_line_bytes": 65536}}) as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        ended = await run_turn(session, stream, "oversized 300000")
        assert ended.kind.stop.TAG == "Completed" and stream.text() == "survived"
        (warning,) = [e.kind.value for e in stream.of("Diagnostic") if e.kind.value.level == "Warning"]
        assert "300" in warning.message and "65536" in warning.message
        assert (await run_turn(session, stream, "hello")).kind.stop.TAG == "Completed"


async def test_default_line_limit_is_generous(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        ended = await run_turn(session, stream, "oversized 3000000")  # 3 MB: far past asyncio's 64 KiB default
        assert ended.kind.stop.TAG == "Completed" and stream.text() == "survived"
        assert [e.kind.value.level for e in stream.of("Diagnostic")] == ["Info"]  # parsed: an unparseable update


async def test_crash_mid_turn_fails_then_process_exited(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("crash")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Failed"
        with pytest.raises(ProcessExited) as caught:
            await stream.rest()
        assert caught.value.status == "exit status: 3" and "crashing on purpose" in caught.value.stderr
        with pytest.raises(SessionClosed):
            await session.prompt("still there?")


async def test_refusal_and_other_stop_reasons(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        assert (await run_turn(session, stream, "refuse")).kind.stop == "Refused"
        failed = (await run_turn(session, stream, "limit")).kind.stop
        assert failed.TAG == "Failed" and "max_tokens" in failed.message


async def test_modes_and_config_options_switch_live(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work, configure={"model": "tiny-large"})
        assert session.info().configuration.options["model"] == "tiny-large"
        stream = EventStream(session)
        await session.configure("mode", "code")
        updated = await stream.until("SessionUpdated")
        while updated.kind.value.configuration.options["mode"] != "code":
            updated = await stream.until("SessionUpdated")
        await session.configure("fast", True)
        updated = await stream.until("SessionUpdated")
        while not updated.kind.value.configuration.options["fast"]:
            updated = await stream.until("SessionUpdated")
        assert session.info().configuration.options == {"mode": "code", "model": "tiny-large", "fast": True}


async def test_resume_through_session_load_without_replay(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runtime() as rt:
        first = await rt.open(tiny_ref(), dir=work)
        token = first.info().resume_token
        await first.close()
        second = await rt.open(tiny_ref(), dir=work, resume=token)
        assert second.info().resume_token == token
        stream = EventStream(second)
        ended = await run_turn(second, stream, "hello")
        assert ended.kind.stop.TAG == "Completed" and stream.text() == "Hello world."  # "old answer" not replayed
        assert not stream.of("UserMessage")
        with pytest.raises(UnsupportedFeature):
            await rt.open(tiny_ref(), dir=work, fork=token)
        with pytest.raises(ResumeFailed):
            await rt.open(tiny_ref(), dir=work, resume="unknown-session")
        monkeypatch.setenv("TINY_NO_LOAD", "1")
        with pytest.raises(ResumeFailed):
            await rt.open(tiny_ref(), dir=work, resume=token)


async def test_auth_error_gives_auth_required_with_terminal_login(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_AUTH", "1")
    async with Runtime() as rt:
        with pytest.raises(AuthRequired) as caught:
            await rt.open(tiny_ref(), dir=work)
    (login,) = caught.value.login
    assert login.command == [sys.executable, "--login"] and login.description == "Log in to tiny"


async def test_mcp_servers_in_acp_shape(work: Path) -> None:
    servers = [
        McpServer(name="files", connection=Stdio(command=sys.executable, args=["-c", "pass"])),
        McpServer(name="web", connection=Http(url="http://127.0.0.1:9/mcp", headers={"A": "b"})),
    ]
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work, mcp_servers=servers)
        stream = EventStream(session)
        await run_turn(session, stream, "mcp")
        assert stream.text() == "McpServerStdio:files,HttpMcpServer:web"
        with pytest.raises(UnsupportedFeature):
            await rt.open(
                tiny_ref(), dir=work, mcp_servers=[McpServer(name="s", connection=Sse(url="http://127.0.0.1:9/sse"))]
            )


async def test_attachments_images_inline_others_as_links(work: Path) -> None:
    image = work / "shot.png"
    image.write_bytes(b"\x89PNG\r\n")
    notes = work / "notes.md"
    notes.write_text("n")
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("echo", [str(image), str(notes)])
        await stream.until("TurnEnded")
        assert stream.text() == f"text: image:{image.as_uri()} resource_link:{notes.as_uri()}"


async def test_probe(work: Path) -> None:
    async with Runtime() as rt:
        details = await rt.probe(tiny_ref())
    assert details.version == "0.0.1" and "Resume" in details.capabilities.features


async def test_close_during_a_turn_is_quick(work: Path) -> None:
    async with Runtime() as rt:
        session = await rt.open(tiny_ref(), dir=work)
        stream = EventStream(session)
        await session.prompt("slow")
        await stream.until("TextDelta")
        pid = session.connection.process.pid
        started = time.monotonic()
        await session.close()
        events = await stream.rest()
        assert time.monotonic() - started < 5
        assert [event_tag(e) for e in events if event_tag(e) == "TurnEnded"] == ["TurnEnded"]
        await wait_process_group_gone(pid)


def test_wire_open_with_acp_ref(wire: Any, work: Path) -> None:
    """The wire's ``{"acp": {...}}`` AgentRef opens the tiny agent through ``anyagentd serve``."""
    from wire_client import kind_tag

    client = wire()
    opened = client.ok("open", agent=tiny_ref(), dir=str(work))
    session_id = opened["id"]
    assert opened["agent"]["source"] == "Pinned" and opened["details"]["version"] == "0.0.1"
    client.ok("prompt", session=session_id, text="hello")
    lines = client.events(session_id, until=lambda l: "event" in l and kind_tag(l) == "TurnEnded")
    assert lines[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    client.ok("close", session=session_id)
