"""MCP servers forwarded at ``open`` to the REAL pinned ACP agents (claude-agent-acp, codex-acp) against the scripted
model: the first prompt, sent right after ``open``, can use a slow server (issue 32). These fail (never skip) when
the CLIs are missing."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import stdio_marker
from marker_server import marker_value

from anyagentd.model import AnswerPermission, Event
from anyagentd.runtime import Runtime
from anyagentd_testing.agents import agent_bin, claude_env, clean_environ, codex_args, codex_env, codex_resources_dir
from anyagentd_testing.events import event_tag

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

STEP = 60.0
"""Seconds any single wait on a real agent may take (it starts the MCP server, which imports the SDK)."""


@pytest.fixture
def claude_acp(scripted_agent: Any) -> Any:
    """``claude_acp(script)``: a model server playing ``script`` and the Claude environment (fresh HOME) plus
    ``ANYAGENTD_CLAUDE_ACP_BIN``. Returns the server."""
    extra = {"ANYAGENTD_CLAUDE_ACP_BIN": str(agent_bin("claude-agent-acp")), "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    return scripted_agent(lambda url, home: clean_environ({**claude_env(url, home), **extra}))


@pytest.fixture
def codex_acp(scripted_agent: Any) -> Any:
    """``codex_acp(script)``: a model server playing ``script`` and the ``codex-acp`` environment (provider flags,
    ``approval_policy=untrusted``, Codex's bundled ``bwrap`` on PATH, fresh HOME). Returns the server."""
    binary = str(agent_bin("codex-acp"))
    resources = codex_resources_dir()
    assert resources is not None, "Codex's bundled bwrap (codex-resources) is missing: npm install in tests/agents"

    def environment(url: str, home: Path) -> dict[str, str]:
        env = clean_environ(codex_env(home))
        env["PATH"] = f"{resources}{os.pathsep}{env.get('PATH', '')}"
        env["ANYAGENTD_CODEX_ACP_BIN"] = binary
        env["ANYAGENTD_CODEX_ACP_ARGS"] = shlex.join(
            [*codex_args(url), "-c", "approval_policy=untrusted", "-c", "sandbox_mode=workspace-write"]
        )
        env["ANYAGENTD_NO_LOGIN_SHELL"] = "1"
        return env

    return scripted_agent(environment)


async def run_turn(session: Any, prompt: str) -> list[Event]:
    """Prompt, allow every permission request once, and collect the events up to TurnEnded."""
    seen: list[Event] = []
    await session.prompt(prompt)
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
        await events.aclose()


async def test_claude_agent_acp_first_prompt_uses_a_slow_stdio_server(claude_acp: Any, work: Path) -> None:
    """A forwarded stdio server that answers ``initialize`` 2 s late, prompted right after ``open``: the model's
    first call reaches it. claude-agent-acp answers ``session/new`` only once the Claude Code it runs (its SDK's
    2.1.83) has answered ``initialize``, which that CLI does after connecting the MCP servers."""
    text = "hello from a slow server"
    model = claude_acp(
        {
            "turns": [
                {
                    "text": "Calling the marker tool.",
                    "tool": {"name": "mcp__slow__write_marker", "input": {"path": "{{cwd}}/marker.txt", "text": text}},
                },
                {"text": "The marker is written."},
            ]
        }
    )
    async with Runtime() as rt:
        session = await rt.open("claude-acp", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        events = await run_turn(session, "Write the marker through MCP")
        await session.close()
    tools = [e.kind.value for e in events if event_tag(e) == "ToolUpdated"]
    calls = [t for t in tools if getattr(t.kind, "TAG", None) == "Mcp"]
    assert calls and calls[-1].status == "Completed", [(t.kind, t.status, t.output) for t in tools]
    assert marker_value(text) in (calls[-1].output or "")
    assert (work / "marker.txt").read_text() == text
    assert marker_value(text) in str(model.main_requests()[-1]["body"]["messages"])


async def test_codex_acp_first_prompt_offers_a_slow_stdio_server(codex_acp: Any, work: Path) -> None:
    """The same server with codex-acp, which answers ``session/new`` at once: its first turn waits for the server,
    so the first model request already offers the server's tools (the ``mcp__slow`` namespace tool with
    ``write_marker``)."""
    model = codex_acp({"turns": [{"text": "Hello."}]})
    async with Runtime() as rt:
        session = await rt.open("codex-acp", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        events = await run_turn(session, "hi")
        await session.close()
    assert events[-1].kind.stop.TAG == "Completed"
    tools = model.main_requests()[0]["body"].get("tools", [])
    namespaces = {t.get("name"): t for t in tools if t.get("type") == "namespace"}
    assert "mcp__slow" in namespaces, [t.get("name") or t.get("type") for t in tools]
    assert [t.get("name") for t in namespaces["mcp__slow"].get("tools", [])] == ["write_marker"]
