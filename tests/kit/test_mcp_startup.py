"""``anyagentd.adapters.mcp_startup.McpStartup`` alone (issue 32): statuses in, Warning texts and the held prompts
out. The real CLIs' use of it is tested in tests/mcp/test_mcp_claude.py and tests/mcp/test_mcp_codex.py."""

from __future__ import annotations

import anyio
import pytest

from anyagentd.adapters.mcp_startup import McpStartup
from anyagentd.errors import ProtocolFailed

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def test_without_servers_nothing_is_held() -> None:
    startup: McpStartup[str] = McpStartup()
    assert not startup.holding and startup.pending == []
    assert await startup.settled() is None
    assert startup.settle("x", "failed", "boom") is None  # not forwarded


async def test_statuses_in_warnings_out_then_the_held_prompts_in_order() -> None:
    startup: McpStartup[str] = McpStartup(
        ["web", "db", "auth"], 30, agent="Codex", waiting="starting", failure="did not start"
    )
    assert startup.holding and startup.pending == ["auth", "db", "web"]
    # the first prompt held says why it waits (an Info for the client: nothing else comes until they settle)
    said = startup.hold("first")
    assert said is not None and said.startswith("The prompt waits for MCP servers 'auth', 'db', 'web' (still starting")
    assert startup.hold("second") is None  # said once
    assert startup.settle("web", "pending") is None
    assert startup.settle("theirs", "failed", "not ours") is None  # a server not forwarded is not ours to report
    assert startup.settle("web", "connected") is None
    assert startup.settle("db", "failed", "Connection closed") == "MCP server 'db' did not start: Connection closed"
    assert (
        startup.settle("auth", "failed", "needs-auth", failure="is not connected")
        == "MCP server 'auth' is not connected: needs-auth"
    )
    assert startup.pending == [] and startup.status == {"web": "connected", "db": "failed", "auth": "failed"}
    assert startup.holding  # settled, but the held prompts have not gone yet: a new one goes behind them
    with anyio.fail_after(5):
        assert await startup.settled() is None

    sent: list[str] = []

    async def send(prompt: str) -> None:
        sent.append(prompt)
        if prompt == "first":
            assert startup.holding  # "second" is still held: "third" goes behind it
            startup.hold("third")

    await startup.release(send)
    assert sent == ["first", "second", "third"] and not startup.holding
    assert startup.settle("web", "pending") is None and not startup.holding  # a later report holds nothing again
    assert startup.settle("db", "failed") == "MCP server 'db' did not start: no reason given"


async def test_the_last_report_wakes_the_waiter() -> None:
    startup: McpStartup[str] = McpStartup(["a"], 30, agent="Claude Code")
    results: list[str | None] = []

    async def wait() -> None:
        results.append(await startup.settled())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.lowlevel.checkpoint()
            assert results == []
            startup.settle("a", "connected")
    assert results == [None]


async def test_the_deadline_names_the_servers_still_pending_once() -> None:
    startup: McpStartup[str] = McpStartup(["slow", "ok"], 0.2, agent="Claude Code")
    startup.settle("ok", "connected")
    assert 0 < startup.remaining() <= 0.2
    with anyio.fail_after(5):
        late = await startup.settled()
    assert late == "MCP server 'slow' still connecting 0.2 s after Claude Code started; prompts no longer wait for it"
    assert await startup.settled() is None and startup.remaining() == 0
    assert startup.pending == ["slow"]  # still not reported: only the waiting is over

    both: McpStartup[str] = McpStartup(
        ["b", "a"], 0.1, since=anyio.current_time() - 1, agent="Codex", waiting="starting"
    )
    assert both.remaining() == 0  # the deadline counts from ``since`` (the spawn)
    assert await both.settled() == (
        "MCP servers 'a', 'b' still starting 0.1 s after Codex started; prompts no longer wait for them"
    )


async def test_stop_settles_without_a_warning() -> None:
    startup: McpStartup[str] = McpStartup(["a"], 30)
    startup.stop()
    with anyio.fail_after(5):
        assert await startup.settled() is None
    assert startup.holding  # until release


async def test_a_cancelled_held_prompt_is_dropped() -> None:
    startup: McpStartup[str] = McpStartup(["a"], 30)
    assert not startup.drop()
    startup.hold("cancelled")
    assert startup.drop() and not startup.drop()
    startup.settle("a", "connected")
    sent: list[str] = []

    async def send(prompt: str) -> None:
        sent.append(prompt)

    await startup.release(send)
    assert sent == [] and not startup.holding


async def test_release_stops_when_the_agent_is_gone() -> None:
    startup: McpStartup[str] = McpStartup(["a"], 30)
    startup.hold("one")
    startup.hold("two")
    startup.stop()
    tried: list[str] = []

    async def send(prompt: str) -> None:
        tried.append(prompt)
        raise ProtocolFailed("input closed")

    await startup.release(send)
    assert tried == ["one"] and not startup.holding
    assert startup.drop()  # "two" is still there for a cancel to end


async def test_a_status_is_one_of_three() -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        McpStartup(["a"], 30).settle("a", "ready")  # type: ignore[arg-type]
