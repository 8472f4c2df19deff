"""MCP servers forwarded at ``open`` to the REAL Claude Code (pinned in tests/agents) against the scripted model:
the model calls ``mcp__<server>__write_marker``, Claude Code calls the real marker server (over stdio, streamable
HTTP or SSE), the session reports the call as an ``Mcp`` tool with the server's own result, and the file lands.
Also: a transport without its plugin is refused before Claude Code starts, and the probe's
``capabilities.mcp_transports`` is what is installed. These fail (never skip) when the CLI is missing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import stdio_marker, url_server
from marker_server import marker_value

from anyagentd.errors import UnsupportedFeature
from anyagentd.mcp.forwarding import install_hint
from anyagentd.model import AnswerPermission, Event, McpServer
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime
from anyagentd_testing.events import event_tag

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

STEP = 60.0
"""Seconds any single wait on the real CLI may take (it starts the MCP server, which imports the SDK)."""


async def run_turn(session: Any, prompt: str) -> list[Event]:
    """Prompt, allow every permission request once, and collect the events up to TurnEnded."""
    await session.prompt(prompt)
    return await until_turn_ended(session)


async def until_turn_ended(session: Any) -> list[Event]:
    """The session's events up to the next TurnEnded, every permission request allowed once on the way."""
    seen: list[Event] = []
    events: Any = session.events().__aiter__()
    try:
        with anyio.fail_after(STEP):
            while True:
                event = await events.__anext__()
                seen.append(event)
                if event_tag(event) == "RequestOpened":
                    await session.answer(event.kind.value.value.id, AnswerPermission(value="AllowOnce"))
                elif event_tag(event) == "TurnEnded":
                    return seen
    finally:
        await events.aclose()  # frees the session's primary reader for the next call


def launch_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point ``ANYAGENTD_CLAUDE_BIN`` at a wrapper that appends one line per launch to the returned file, then
    runs the real CLI (call after ``claude(...)``)."""
    import os

    log = tmp_path / "launches.log"
    log.write_text("")
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {os.environ["ANYAGENTD_CLAUDE_BIN"]} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("ANYAGENTD_CLAUDE_BIN", str(wrapper))
    return log


def launches(log: Path) -> int:
    return len([line for line in log.read_text().splitlines() if "--session-id" in line or "--resume" in line])


def marker_script(server: str, path: str, text: str) -> dict[str, Any]:
    return {
        "turns": [
            {
                "text": "Calling the marker tool.",
                "tool": {"name": f"mcp__{server}__write_marker", "input": {"path": path, "text": text}},
            },
            {"text": "The marker is written."},
        ]
    }


@pytest.mark.parametrize("transport", ["Stdio", "Http", "Sse"])
async def test_forwarded_mcp_server_is_called_by_claude(
    claude: Any, work: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "Stdio":
        server = stdio_marker("marker")
    else:
        served = request.getfixturevalue("http_marker" if transport == "Http" else "sse_marker")
        server = url_server("marker", transport, served.url)
    text = f"hello over {transport}"
    model = claude(marker_script("marker", "{{cwd}}/marker.txt", text))
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, mcp_servers=[server])
        events = await run_turn(session, "Write the marker through MCP")
        await session.close()
    ended = events[-1]
    assert ended.kind.stop.TAG == "Completed"
    tools = [e.kind.value for e in events if event_tag(e) == "ToolUpdated"]
    mcp_updates = [t for t in tools if getattr(t.kind, "TAG", None) == "Mcp"]
    assert mcp_updates, [t.kind for t in tools]
    assert mcp_updates[0].kind.model_dump() == {"Mcp": {"server": "marker", "tool": "write_marker"}}
    final = mcp_updates[-1]
    assert final.status == "Completed", final
    assert marker_value(text) in (final.output or "")  # the real server's return value reached the session
    assert (work / "marker.txt").read_text() == text
    # and the model was given that same result in the next request
    assert marker_value(text) in str(model.main_requests()[-1]["body"]["messages"])


async def test_a_transport_without_plugin_is_refused_before_claude_starts(
    claude: Any, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude({"turns": []})
    log = launch_log(monkeypatch, tmp_path)
    from anyagentd.mock import plugin as mock_plugin
    from anyagentd_claude import plugin as claude_plugin
    from anyagentd_mcp_stdio import plugin as stdio_plugin

    plugins = Plugins(load_entry_points=False, extra=[mock_plugin, claude_plugin, stdio_plugin])
    async with Runtime(plugins=plugins) as rt:
        details = await rt.probe("claude")
        assert details.capabilities.mcp_transports == ["Stdio"]
        before = launches(log)
        assert before == 1  # the probe went through the wrapper
        with pytest.raises(UnsupportedFeature) as caught:
            await rt.open(
                "claude", dir=work, mcp_servers=[stdio_marker("ok"), url_server("web", "Sse", "http://h/sse")]
            )
        assert f"MCP transport Sse is not installed ({install_hint('Sse')})" in caught.value.message
        assert "anyagentd-mcp-sse" in install_hint("Sse")
        with pytest.raises(UnsupportedFeature, match="MCP transport Http is not installed"):
            await rt.open("claude", dir=work, mcp_servers=[url_server("web", "Http", "http://h/mcp")])
        assert launches(log) == before  # Claude Code was never started for these
        session = await rt.open("claude", dir=work, mcp_servers=[stdio_marker("ok")])  # Stdio is installed
        assert launches(log) == before + 1 and "--mcp-config" in log.read_text().splitlines()[-1]
        await session.close()


async def test_probe_reports_the_installed_transports(claude: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    claude({"turns": []})
    async with Runtime() as rt:
        assert (await rt.probe("claude")).capabilities.mcp_transports == ["Stdio", "Http", "Sse"]
    monkeypatch.setenv("ANYAGENTD_DISABLE_PLUGINS", "mcp-http")
    async with Runtime() as rt:
        assert (await rt.probe("claude")).capabilities.mcp_transports == ["Stdio", "Sse"]


async def test_an_invalid_server_is_refused_before_claude_starts(
    claude: Any, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anyagentd.errors import InvalidConfiguration
    from anyagentd.model import Http, McpServer

    claude({"turns": []})
    log = launch_log(monkeypatch, tmp_path)
    bad = McpServer.model_construct(name="web", connection=Http(url="ftp://nowhere/mcp"))
    async with Runtime() as rt:
        with pytest.raises(InvalidConfiguration, match="'web': url"):
            await rt.open("claude", dir=work, mcp_servers=[bad])
        assert launches(log) == 0
        session = await rt.open("claude", dir=work, mcp_servers=[url_server("web", "Http", "http://127.0.0.1:9/mcp")])
        assert launches(log) == 1
        await session.close()


def mcp_result(events: list[Event]) -> Any:
    """The last ``Mcp`` ToolUpdated of ``events`` (``None`` when the model's call never became one)."""
    tools = [e.kind.value for e in events if event_tag(e) == "ToolUpdated"]
    calls = [t for t in tools if getattr(t.kind, "TAG", None) == "Mcp"]
    return calls[-1] if calls else None


def diagnostics(events: list[Event], level: str = "Warning") -> list[str]:
    return [e.kind.value.message for e in events if event_tag(e) == "Diagnostic" and e.kind.value.level == level]


async def test_the_first_prompt_waits_for_a_slow_stdio_server(claude: Any, work: Path) -> None:
    """Issue 32: a forwarded stdio server that answers ``initialize`` 2 s late. The first prompt, sent right after
    ``open``, is held until Claude Code's ``mcp_status`` reports the server connected, so the model's first call
    reaches it (without the hold the CLI answers "No such tool available ... still connecting")."""
    text = "hello from a slow server"
    model = claude(marker_script("slow", "{{cwd}}/marker.txt", text))
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        events = await run_turn(session, "Write the marker through MCP")
        await session.close()
    final = mcp_result(events)
    assert final is not None and final.status == "Completed", [e.kind for e in events]
    assert marker_value(text) in (final.output or "")
    assert (work / "marker.txt").read_text() == text
    assert marker_value(text) in str(model.main_requests()[-1]["body"]["messages"])
    assert not diagnostics(events)


def silent_server(name: str) -> McpServer:
    """A stdio "server" that reads its input and never answers: it stays ``pending`` in Claude Code (until the
    CLI's own 30 s connect timeout) and exits when the CLI closes its stdin."""
    return McpServer.model_validate(
        {
            "name": name,
            "connection": {"Stdio": {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}},
        }
    )


def broken_server(name: str) -> McpServer:
    """A stdio "server" that exits at once: Claude Code reports it ``failed``."""
    return McpServer.model_validate(
        {"name": name, "connection": {"Stdio": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}}}
    )


async def test_the_first_prompt_waits_no_longer_than_the_handshake_timeout(claude: Any, work: Path) -> None:
    """A server that never answers holds the first prompt only until the handshake timeout after the spawn (here
    8 s), then a Warning names it and the prompt goes; a server that failed is a Warning with the CLI's error and
    holds nothing."""
    model = claude({"turns": [{"text": "Answered without MCP."}]})
    async with Runtime(adapter_config={"claude": {"handshake_timeout": 8}}) as rt:
        session = await rt.open("claude", dir=work, mcp_servers=[silent_server("silent"), broken_server("broken")])
        events = await run_turn(session, "Answer without MCP")
        await session.close()
    warnings = diagnostics(events)
    assert any(w.startswith("MCP server 'broken' failed to connect: ") for w in warnings), warnings
    late = [
        e
        for e in events
        if event_tag(e) == "Diagnostic" and "server 'silent' still connecting 8 s after" in e.kind.value.message
    ]
    assert len(late) == 1, warnings
    assert late[0].turn_info is None  # before the turn was acknowledged: the CLI did not have the prompt yet
    assert events[-1].kind.stop.TAG == "Completed"
    assert "Answer without MCP" in str(model.main_requests()[-1]["body"]["messages"])  # and then it had it


async def test_a_prompt_held_for_a_slow_server_can_be_cancelled(claude: Any, work: Path) -> None:
    """Cancelling the held first prompt ends its turn Cancelled at once (the CLI never gets it, the engine's cancel
    deadline is not needed); the next prompt is the first the model sees, once the server is connected."""
    model = claude({"turns": [{"text": "Second prompt answered."}]})
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        await session.prompt("first, cancelled")
        await session.cancel()
        seen = await until_turn_ended(session)
        assert seen[-1].kind.stop == "Cancelled"
        assert not [w for w in diagnostics(seen) if "did not end the turn" in w]  # no engine deadline
        second = await run_turn(session, "second, answered")
        await session.close()
    assert second[-1].kind.stop.TAG == "Completed"
    asked = [str(r["body"]["messages"]) for r in model.main_requests()]
    assert len(asked) == 1 and "second, answered" in asked[0] and "first, cancelled" not in asked[0]
