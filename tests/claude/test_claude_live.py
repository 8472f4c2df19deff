"""End to end: the REAL pinned Claude Code (tests/agents/node_modules/.bin/claude) against the scripted model
server, through the adapter directly and through :class:`anyagentd.runtime.Runtime`.

These fail (never skip) when the CLI is missing: ``agent_bin`` raises. The CLI is found through discovery's
environment override ``ANYAGENTD_CLAUDE_BIN``; its environment comes from ``claude_env`` (a fresh HOME per test),
which the adapter passes through from ``os.environ``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from anyagentd.adapters import lineage
from anyagentd.adapters.interface import AdapterLink, EventReport, PromptInput, TurnEndedReport
from anyagentd.errors import ProcessExited, SpawnFailed
from anyagentd.model import (
    AgentInstallation,
    McpServer,
    SessionOptions,
    Stdio,
)
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime
from anyagentd_claude.adapter import ClaudeAdapter
from anyagentd_testing.conformance import Conformance
from anyagentd_testing.events import EventStream, event_tag, marked_processes, process_group_alive, process_running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 25.0
"""Seconds any single wait on the real CLI may take."""


def request_text(entry: dict[str, Any]) -> str:
    return json.dumps(entry["body"].get("messages", []), ensure_ascii=False)


WRITE_SCRIPT = {
    "turns": [
        {
            "text": "Writing the file.",
            "tool": {"name": "Write", "input": {"file_path": "{{cwd}}/out.txt", "content": "hi\n"}},
        },
        {"text": "Done."},
    ]
}


# ------------------------------------------------------------------------------------------------ adapter


async def test_adapter_turn_and_mcp_server_in_init(claude: Any, work: Path, tmp_path: Path) -> None:
    """The adapter on its own: handshake details, a turn's reports, the MCP server in system/init, clean close."""
    claude({"turns": [{"text": "Hello from the script."}]})
    mcp = tmp_path / "mcp_server.py"
    mcp.write_text(MCP_SERVER)
    inst = AgentInstallation(
        id="claude", name="Claude Code", executable_path=os.environ["ANYAGENTD_CLAUDE_BIN"], source="EnvOverride"
    )
    options = SessionOptions(
        dir=str(work), mcp_servers=[McpServer(name="files", connection=Stdio(command=sys.executable, args=[str(mcp)]))]
    )
    send, recv = anyio.create_memory_object_stream[Any](256)
    async with anyio.create_task_group() as tg:
        adapter = ClaudeAdapter()
        adapter.mcp_transports = Plugins().mcp_transports()  # forwarding Stdio needs anyagentd-mcp-stdio
        assert "Stdio" in adapter.mcp_transports
        conn = await adapter.connect(inst, options, AdapterLink(send, tg.start_soon))
        assert conn.details.version == "2.1.197"
        assert conn.details.auth.kind == "ApiKey"
        assert conn.resume_token and len(conn.resume_token) == 36
        await conn.start_turn("t1", PromptInput("hi"))
        reports = []
        with anyio.fail_after(STEP):
            async for report in recv:
                reports.append(report)
                if isinstance(report, TurnEndedReport):
                    break
        texts = [
            r.kind.text for r in reports if isinstance(r, EventReport) and getattr(r.kind, "TAG", "") == "TextDelta"
        ]
        assert "".join(texts) == "Hello from the script."
        ended = [r for r in reports if isinstance(r, EventReport) and getattr(r.kind, "TAG", "") == "MessageEnded"]
        assert ended and ended[0].extensions and ended[0].extensions.get("claude/fork_point")
        init = conn.state.last_init
        assert init is not None and init["session_id"] == conn.resume_token
        assert {"name": "files", "status": "connected"} in [
            {"name": s.get("name"), "status": s.get("status")} for s in init["mcp_servers"]
        ]
        assert "mcp__files__echo" in init["tools"]
        pid = conn.process.pid
        started = time.monotonic()
        await conn.close()
        assert time.monotonic() - started < 10
        assert not process_group_alive(pid)
        tg.cancel_scope.cancel()


async def test_probe_and_generate(claude: Any, work: Path) -> None:
    # with --tools "" the request offers no tools, which the scripted server answers as a side request
    server = claude({"turns": [], "side_reply": "Short generated text."})
    async with Runtime() as rt:
        details = await rt.probe("claude")
        assert details.version == "2.1.197" and details.auth.kind == "ApiKey"
        assert details.option("model") is not None and details.option("mode").live
        assert any(c.name == "compact" for c in details.commands)
        text = await rt.generate("claude", work, "Say something short.")
    assert text == "Short generated text."
    asked = [r for r in server.requests if r["kind"] in ("main", "side")]
    assert asked and not asked[-1]["body"].get("tools")  # generate launched with --tools ""
    assert "Say something short." in request_text(asked[-1])


# ------------------------------------------------------------------------------------------------ conformance


class TestConformance(Conformance):
    """The adapter contract (anyagentd_testing.conformance) against the real CLI."""

    agent = "claude"
    version = "2.1.197"
    cancel_within = 5.0

    @pytest.fixture
    def scripted(self, claude: Any) -> Any:
        return claude

    def write_tool(self, name: str) -> dict[str, Any]:
        return {"name": "Write", "input": {"file_path": "{{cwd}}/" + name, "content": "hi\n"}}

    def question_tool(self) -> dict[str, Any]:
        return {
            "name": "AskUserQuestion",
            "input": {
                "questions": [
                    {
                        "question": "Which color?",
                        "header": "Color",
                        "multiSelect": False,
                        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
                    }
                ]
            },
        }

    def answer_seen_by_model(self) -> str:
        return '\\"Which color?\\"=\\"Blue\\"'

    def check_permission(self, request: Any) -> None:
        assert request.tool.kind == "Edit" and request.tool.diffs[0].new_text == "hi\n"

    def denial_seen(self) -> str:
        return "The user denied this tool use."


# ------------------------------------------------------------------------------------------------ runtime


async def test_live_mode_switch(claude: Any, work: Path) -> None:
    claude(WRITE_SCRIPT)
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work)
        stream = EventStream(session)
        await session.configure("mode", "acceptEdits")
        updated = await stream.until("SessionUpdated")
        assert updated.kind.value.configuration.options["mode"] == "acceptEdits"
        assert session.info().configuration.options["mode"] == "acceptEdits"
        await session.prompt("Write out.txt")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        assert "RequestOpened" not in [event_tag(e) for e in stream.seen]  # acceptEdits: no question asked
        assert (work / "out.txt").read_text() == "hi\n"


async def test_compact_and_rollback(claude: Any, work: Path) -> None:
    server = claude({"turns": [{"text": "One."}, {"text": "Two."}, {"text": "Three."}, {"text": "Four."}]})
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work)
        stream = EventStream(session)
        for word in ("first", "second", "third"):
            await session.prompt(f"Say the {word} number")
            await stream.until("TurnEnded")
        # rollback the last prompt: the next request no longer carries it
        await session.rollback(1)
        updated = await stream.until("SessionUpdated")
        assert updated.turn_info is None
        await session.compact()
        compacted = await stream.until("ContextCompacted")
        assert compacted.turn_info is not None  # part of the agent-originated compact turn
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        usage = [e.kind for e in stream.seen if event_tag(e) == "ContextUsage"]
        assert usage[-1].used_tokens < max(u.used_tokens for u in usage[:-1])
        await session.prompt("Say the fourth number")
        await stream.until("TurnEnded")
    # the compaction request (Claude Code's summarization prompt) carries the history left by the rollback
    compact_request = next(r for r in server.main_requests() if "Do NOT call any tools" in request_text(r))
    assert "Say the third number" not in request_text(compact_request)
    assert "Say the first number" in request_text(compact_request)


MCP_SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "files", "version": "0.0.1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "Echo text",
                             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": msg["params"]["arguments"].get("text", "")}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


@pytest.mark.anyio
@pytest.mark.parametrize("attempt", range(3))  # the CLI's exit races our initialize write: try it a few times
async def test_a_cli_that_exits_at_once_is_spawn_failed(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int
) -> None:
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ANYAGENTD_CLAUDE_BIN", str(fake))
    async with Runtime() as rt:
        with pytest.raises(SpawnFailed) as info:
            await rt.open("claude", work)
    assert "boom: cannot start" in info.value.message


# ------------------------------------------------------------------------------------------------ lineage


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


async def _wait_gone(mark: str, timeout: float = 3.0) -> list[int]:
    """The processes still carrying ``mark`` once they are gone or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    return left


async def test_a_background_job_of_the_bash_tool_is_gone_after_close(claude: Any, work: Path) -> None:
    """Claude Code runs each Bash command in a session of its own: `sleep 312 &` leaves the CLI's process group
    (and would outlive close and the runtime, re-parented to PID 1)."""
    claude(
        {
            "turns": [
                {"tool": {"name": "Bash", "input": {"command": "sleep 312 &", "description": "Sleep"}}},
                {"text": "Started."},
            ]
        }
    )
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, permission_mode="AutoApprove")
        stream = EventStream(session)
        await session.prompt("Start a sleeper")
        assert (await stream.until("TurnEnded")).kind.stop.TAG == "Completed"
        proc = session.connection.process
        # the shell forks the job and returns at once: on a loaded machine the child may not have exec'd sleep yet
        with anyio.fail_after(STEP):
            while not (jobs := [p for p in marked_processes(proc.mark) if _cmdline(p).startswith("sleep 312")]):
                await anyio.sleep(0.05)
        assert all(os.getpgid(job) != proc.pid for job in jobs)  # outside the CLI's process group
        await session.close()
        await stream.rest()
        assert await _wait_gone(proc.mark, timeout=1.0) == []
        assert not any(process_running(job) for job in jobs)


async def test_the_running_command_of_a_crashed_cli_is_gone(claude: Any, work: Path) -> None:
    server = claude(
        {
            "turns": [
                {"tool": {"name": "Bash", "input": {"command": "sleep 313", "description": "Sleep"}}},
                {"text": "never"},
            ]
        }
    )
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, permission_mode="AutoApprove")
        stream = EventStream(session)
        await session.prompt("Sleep a while")
        await stream.until("ToolUpdated")
        proc = session.connection.process
        with anyio.fail_after(STEP):
            while not (jobs := [p for p in marked_processes(proc.mark) if _cmdline(p).startswith("sleep 313")]):
                await anyio.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the CLI alone dies; its command runs on in a session of its own
        assert (await stream.until("TurnEnded")).kind.stop.TAG == "Failed"
        with pytest.raises(ProcessExited):
            await stream.rest()
        assert await _wait_gone(proc.mark, timeout=1.0) == []
        assert not any(process_running(job) for job in jobs)
    assert len(server.main_requests()) == 1


@pytest.mark.timeout(60)
def test_sigkill_of_serve_takes_the_cli_along(model_server: Any, wire: Any, tmp_path: Path) -> None:
    from anyagentd_testing.agents import agent_bin, claude_env

    server = model_server({"turns": [{"text": "never", "delay": 20}]})
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    client = wire(env={**claude_env(server.url, home), "ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude"))}, timeout=STEP)
    sid = client.ok("open", agent="claude", dir=str(work))["id"]
    client.ok("prompt", session=sid, text="Hang")
    server.wait_for_requests(1, timeout=STEP)  # mid-turn: the CLI waits for the model
    table = lineage.processes()
    agents = [pid for pid, (_, ppid, _) in table.items() if ppid == client.proc.pid]
    assert agents and any("claude" in _cmdline(pid) for pid in agents)
    marks = {m for m in map(_mark_of, agents) if m}
    client.proc.kill()  # SIGKILL: serve runs no cleanup at all
    client.proc.wait(5)
    deadline = time.monotonic() + 2.0
    while any(process_running(pid) for pid in agents) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(process_running(pid) for pid in agents)
    assert marks and all(marked_processes(m) == [] for m in marks)


def _mark_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"ANYAGENTD_AGENT_LINEAGE="):
                    return item.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


@pytest.mark.timeout(60)
def test_sigkill_of_serve_takes_the_bash_tools_job_along(model_server: Any, wire: Any, tmp_path: Path) -> None:
    """The job left outside the CLI's process group (`sleep 312 &`) dies with serve too: the guardian sees serve's
    end and kills every process carrying the agent's lineage mark."""
    from anyagentd_testing.agents import agent_bin, claude_env

    server = model_server(
        {
            "turns": [
                {"tool": {"name": "Bash", "input": {"command": "sleep 312 &", "description": "Sleep"}}},
                {"text": "Started."},
            ]
        }
    )
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    client = wire(env={**claude_env(server.url, home), "ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude"))}, timeout=STEP)
    sid = client.ok("open", agent="claude", dir=str(work), permission_mode="AutoApprove")["id"]
    client.ok("prompt", session=sid, text="Start a sleeper")
    client.events(sid, until=lambda line: "TurnEnded" in line.get("event", {}).get("kind", ""))
    agents = [pid for pid, (_, ppid, _) in lineage.processes().items() if ppid == client.proc.pid]
    marks = {m for m in map(_mark_of, agents) if m}
    jobs = [p for m in marks for p in marked_processes(m) if _cmdline(p).startswith("sleep 312")]
    assert jobs, "the scripted job is not running"
    client.proc.kill()
    client.proc.wait(5)
    deadline = time.monotonic() + 2.0
    while any(marked_processes(m) for m in marks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(marked_processes(m) == [] for m in marks)
    assert not any(process_running(job) for job in jobs)


async def test_turn_reports_its_tokens_once(claude: Any, work: Path) -> None:
    """The result's ``ContextUsage`` carries ``anyagentd/tokens``: the turn's input (+ cache creation + cache read)
    and output tokens as the model server reported them over both of the turn's API calls; the engine sums them."""
    calls = [
        {"input_tokens": 1000, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 30, "output_tokens": 40},
        {"input_tokens": 5, "cache_read_input_tokens": 1230, "output_tokens": 7},
    ]
    claude({"turns": [{**WRITE_SCRIPT["turns"][0], "usage": calls[0]}, {"text": "Done.", "usage": calls[1]}]})
    async with Runtime() as rt:
        session = await rt.open("claude", dir=work, configure={"mode": "acceptEdits"})
        stream = EventStream(session)
        await session.prompt("Write out.txt")
        await stream.until("TurnEnded")
        reported = [
            e.extensions["anyagentd/tokens"]
            for e in stream.seen
            if event_tag(e) == "ContextUsage" and "anyagentd/tokens" in e.extensions
        ]
        assert reported == [{"in": 1000 + 200 + 30 + 5 + 1230, "out": 40 + 7}]
        usage = session.projections.usage
        assert (usage.tokens_in, usage.tokens_out) == (2465, 47)
