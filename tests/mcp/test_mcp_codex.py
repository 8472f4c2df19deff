"""MCP servers forwarded at ``open`` to the REAL Codex app-server (pinned in tests/agents) against the scripted model:
the first prompt waits for a slow server (issue 32). Codex 0.171 offers an MCP server's tools behind its
``tool_search`` tool, naming each ready server under "Deferred tool namespaces" in the request (``- mcp__<server>``);
a server still starting when the turn's request is built is not there. These fail (never skip) when the CLI is
missing."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import stdio_marker

from anyagentd.model import Event, McpServer
from anyagentd.runtime import Runtime
from anyagentd_testing.agents import agent_bin, clean_environ, codex_args, codex_env
from anyagentd_testing.events import event_tag

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

STEP = 60.0
"""Seconds any single wait on the real CLI may take (it starts the MCP server, which imports the SDK)."""


def codex_environment(server_url: str, home: Path) -> dict[str, str]:
    """The child environment: no foreign OPENAI_/CODEX_ variables, the provider key, a fresh HOME, the provider flags
    in ``ANYAGENTD_CODEX_ARGS`` and the pinned binary in ``ANYAGENTD_CODEX_BIN``."""
    env = clean_environ(codex_env(home))
    env["ANYAGENTD_CODEX_ARGS"] = shlex.join(codex_args(server_url))
    env["ANYAGENTD_CODEX_BIN"] = str(agent_bin("codex", start=__file__))
    return env


@pytest.fixture
def codex(scripted_agent: Any) -> Any:
    """``codex(script)`` starts a model server with ``script`` and points the environment at it; returns it."""
    agent_bin("codex", start=__file__)  # AgentNotInstalledError: the test fails, it does not skip
    return scripted_agent(codex_environment)


async def until_turn_ended(session: Any) -> list[Event]:
    """The session's events up to the next TurnEnded."""
    seen: list[Event] = []
    events: Any = session.events().__aiter__()
    try:
        with anyio.fail_after(STEP):
            while not (seen and event_tag(seen[-1]) == "TurnEnded"):
                seen.append(await events.__anext__())
    finally:
        await events.aclose()
    return seen


def offered(request: dict[str, Any], server: str) -> bool:
    """Whether a model request names ``server``'s tools among Codex's deferred tool namespaces."""
    return f"- mcp__{server}" in json.dumps(request["body"].get("input", []))


async def test_the_first_prompt_waits_for_a_slow_stdio_server(codex: Any, work: Path) -> None:
    """A forwarded stdio server that answers ``initialize`` 2 s late: the first prompt, sent right after ``open``,
    is held until Codex reports the server ``ready`` (``mcpServer/startupStatus/updated``), so the model's first
    request already offers its tools (without the hold Codex builds that request while the server is starting)."""
    model = codex({"turns": [{"text": "Hello."}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        await session.prompt("hi")
        events = await until_turn_ended(session)
        await session.close()
    assert events[-1].kind.stop.TAG == "Completed"
    first = model.main_requests()[0]
    assert offered(first, "slow"), json.dumps(first["body"].get("input", []))[:3000]


def diagnostics(events: list[Event], level: str = "Warning") -> list[str]:
    return [e.kind.value.message for e in events if event_tag(e) == "Diagnostic" and e.kind.value.level == level]


def stdio(name: str, code: str) -> McpServer:
    """A stdio "server" running ``python -c code``."""
    return McpServer.model_validate(
        {"name": name, "connection": {"Stdio": {"command": sys.executable, "args": ["-c", code]}}}
    )


async def test_the_first_prompt_waits_no_longer_than_the_handshake_timeout(codex: Any, work: Path) -> None:
    """A server that never answers (Codex would give up on it only after its own 30 s ``startup_timeout_sec``) holds
    the first prompt until the handshake timeout after the spawn (here 8 s), then a Warning names it and the prompt
    goes; a server that exits at once is a Warning with Codex's error and holds nothing."""
    model = codex({"turns": [{"text": "Answered without MCP."}]})
    servers = [stdio("silent", "import sys; sys.stdin.read()"), stdio("broken", "raise SystemExit(3)")]
    async with Runtime(adapter_config={"codex": {"handshake_timeout": 8}}) as rt:
        session = await rt.open("codex", dir=work, mcp_servers=servers)
        await session.prompt("Answer without MCP")
        events = await until_turn_ended(session)
        await session.close()
    warnings = diagnostics(events)
    assert any(w.startswith("MCP server 'broken' did not start: ") for w in warnings), warnings
    late = [
        e
        for e in events
        if event_tag(e) == "Diagnostic" and "server 'silent' still starting 8 s after" in e.kind.value.message
    ]
    assert len(late) == 1, warnings
    assert late[0].turn_info is None  # before the turn was acknowledged: Codex did not have the prompt yet
    assert events[-1].kind.stop.TAG == "Completed"
    assert "Answer without MCP" in json.dumps(model.main_requests()[-1]["body"].get("input", []))


async def test_a_prompt_held_for_a_slow_server_can_be_cancelled(codex: Any, work: Path) -> None:
    """Cancelling the held first prompt ends its turn Cancelled at once (Codex never gets it); the next prompt is
    the first the model sees, once the server is ready, and it offers the server's tools."""
    model = codex({"turns": [{"text": "Second prompt answered."}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        await session.prompt("first, cancelled")
        await session.cancel()
        cancelled = await until_turn_ended(session)
        assert cancelled[-1].kind.stop == "Cancelled"
        assert not [w for w in diagnostics(cancelled) if "did not end the turn" in w]  # no engine deadline
        await session.prompt("second, answered")
        second = await until_turn_ended(session)
        await session.close()
    assert second[-1].kind.stop.TAG == "Completed"
    asked = [json.dumps(r["body"].get("input", [])) for r in model.main_requests()]
    assert len(asked) == 1 and "second, answered" in asked[0] and "first, cancelled" not in asked[0]
    assert offered(model.main_requests()[0], "slow")


async def test_a_resumed_thread_waits_for_its_servers_too(codex: Any, work: Path) -> None:
    """``thread/resume`` starts the forwarded servers again, and Codex reports their startup for the resumed thread:
    the resumed session's first prompt also waits for the slow server (and only for it: no deadline Warning)."""
    model = codex({"turns": [{"text": "First."}, {"text": "Second."}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        await session.prompt("first")
        assert (await until_turn_ended(session))[-1].kind.stop.TAG == "Completed"
        token = session.info().resume_token
        await session.close()
        resumed = await rt.open("codex", dir=work, resume=token, mcp_servers=[stdio_marker("slow", initialize_delay=2)])
        await resumed.prompt("second")
        events = await until_turn_ended(resumed)
        await resumed.close()
    assert events[-1].kind.stop.TAG == "Completed"
    assert not [w for w in diagnostics(events) if "MCP" in w], diagnostics(events)
    assert offered(model.main_requests()[-1], "slow")
