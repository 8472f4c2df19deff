"""End to end: the REAL pinned Codex CLI (tests/agents/node_modules/.bin/codex) in ``app-server`` mode against the
scripted model server, through :class:`anyagentd.runtime.Runtime` and over the wire (``anyagentd serve``).

These fail (never skip) when the CLI is missing: ``agent_bin`` raises. The CLI is found through discovery's
environment override ``ANYAGENTD_CODEX_BIN``; the provider flags come from ``ANYAGENTD_CODEX_ARGS``
(``codex_args``) and its key and a fresh HOME from ``codex_env``, all passed through the environment.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from anyagentd.errors import (
    AuthRequired,
    ResumeFailed,
    SpawnFailed,
    UnsupportedFeature,
)
from anyagentd.model import AnswerPermission, McpServer, Stdio
from anyagentd.runtime import Runtime
from anyagentd_testing.agents import agent_bin, clean_environ, codex_args, codex_env
from anyagentd_testing.conformance import Conformance
from anyagentd_testing.events import EventStream, event_tag, marked_processes, process_group_alive

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(45)]

STEP = 25.0
"""Seconds any single wait on the real CLI may take."""


def codex_environment(server_url: str, home: Path) -> dict[str, str]:
    """The whole child environment: no foreign OPENAI_/CODEX_ variables, the provider key, a fresh HOME, the
    provider flags in ``ANYAGENTD_CODEX_ARGS`` and the pinned binary in ``ANYAGENTD_CODEX_BIN``."""
    env = clean_environ(codex_env(home))
    env["ANYAGENTD_CODEX_ARGS"] = shlex.join(codex_args(server_url))
    env["ANYAGENTD_CODEX_BIN"] = str(agent_bin("codex", start=__file__))
    return env


@pytest.fixture
def codex(scripted_agent: Callable[..., Any]) -> Callable[..., Any]:
    """``codex(script)`` starts a model server with ``script`` and points this process's environment at it (what
    the adapter passes through to the CLI). Returns the server."""
    agent_bin("codex", start=__file__)  # AgentNotInstalledError: the test fails, it does not skip
    return scripted_agent(codex_environment)


def request_text(entry: dict[str, Any]) -> str:
    return json.dumps(entry["body"].get("input", []), ensure_ascii=False)


def running_command(mark: str, command: str) -> list[int]:
    """Processes of the agent marked ``mark`` whose command line has ``command`` as one argument (or is it)."""
    found = []
    for pid in marked_processes(mark):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = [a.decode() for a in fh.read().split(b"\0")[:-1]]
        except OSError:
            continue
        if command in argv[1:] or " ".join(argv) == command:
            found.append(pid)
    return found


async def wait_requests(server: Any, count: int) -> None:
    await anyio.to_thread.run_sync(lambda: server.wait_for_requests(count, timeout=STEP))


COMMAND_SCRIPT = {
    "turns": [
        {
            "text": "Running a command.",
            "tool": {
                "name": "exec_command",
                "input": {"cmd": "printf 'made by codex\\n' > made.txt && echo command-output"},
            },
        },
        {"text": "Done."},
    ]
}

PATCH_SCRIPT = {
    "turns": [
        {
            "tool": {
                "name": "apply_patch",
                "custom": True,
                "input": "*** Begin Patch\n*** Add File: patched.txt\n+patched by apply_patch\n*** End Patch\n",
            }
        },
        {"text": "The patch was declined."},
    ]
}


# ------------------------------------------------------------------------------------------------ probe


async def test_probe_reports_version_account_options_skills_and_capabilities(codex: Any) -> None:
    codex({"turns": []})
    async with Runtime() as rt:
        details = await rt.probe("codex")
    assert details.version == "0.171.0"
    assert details.auth.TAG == "Authenticated" and details.auth.kind == "ApiKey"  # a custom provider's key
    model = details.option("model")
    assert model is not None and model.live and model.current == "gpt-5.5" and len(model.kind.choices) >= 2
    effort = details.option("effort")
    assert effort is not None and effort.live and {"low", "medium", "high"} <= {c.value for c in effort.kind.choices}
    assert details.option("sandbox") is not None and not details.option("sandbox").live
    features = set(details.capabilities.features)
    assert {"Steer", "Permissions", "Resume", "Fork", "Compact", "Subagents", "ContextUsage"} <= features
    assert not {"Rollback", "Questions", "Plan"} & features  # not reachable with this version (see launch.py)
    assert details.commands and "SlashCommands" in features  # the bundled system skills
    assert details.capabilities.mcp_transports and "Sse" not in details.capabilities.mcp_transports


# ------------------------------------------------------------------------------------------------ conformance


class TestConformance(Conformance):
    """The adapter contract (anyagentd_testing.conformance) against the real app-server."""

    agent = "codex"
    version = "0.171.0"

    @pytest.fixture
    def scripted(self, codex: Any) -> Any:
        return codex

    def write_tool(self, name: str) -> dict[str, Any]:
        return {"name": "exec_command", "input": {"cmd": f"printf 'hi\\n' > {name} && echo command-output"}}

    def check_permission(self, request: Any) -> None:
        assert request.tool.kind == "Execute" and "out.txt" in request.tool.input.command

    def check_turn(self, stream: Any, server: Any) -> None:
        tools = [e.kind.value for e in stream.of("ToolUpdated")]
        output = "".join(e.kind.text for e in stream.of("ToolOutputDelta")) + (tools[-1].output or "")
        assert "command-output" in output and stream.of("MessageEnded")
        assert "command-output" in request_text(server.main_requests()[-1])  # the output reached the model


# ------------------------------------------------------------------------------------------------ turns


async def test_declined_file_change_leaves_the_file_absent_and_the_turn_continues(codex: Any, work: Path) -> None:
    server = codex(PATCH_SCRIPT)
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        await session.prompt("Patch it")
        request = (await stream.until("RequestOpened")).kind.value.value
        assert request.tool.kind == "Edit" and request.tool.diffs[0].new_text == "patched by apply_patch\n"
        await session.answer(request.id, AnswerPermission(value="DenyOnce"))
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        assert stream.text().endswith("The patch was declined.")
        assert not (work / "patched.txt").exists()
        tools = [e.kind.value for e in stream.seen if event_tag(e) == "ToolUpdated"]
        assert tools[-1].status == "Failed"
    assert [r["turn"] for r in server.main_requests()] == [0, 1]


async def test_steer_mid_turn_is_accepted_into_the_same_turn(codex: Any, work: Path) -> None:
    # Codex 0.171 takes a steer by dropping the model call in flight and sampling again with the steer appended
    # to the same turn's input (so the scripted turn 0 answers twice; only the second reply is streamed).
    server = codex({"turns": [{"text": "Working slowly.", "delay": 2}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        first = await session.prompt("Start something slow")
        await wait_requests(server, 1)
        steer = await session.prompt("Also mention bananas")
        assert steer.kind.TAG == "Steered" and steer.kind.turn_id == first.kind.turn_id
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed" and ended.turn_info.id == first.kind.turn_id
        assert stream.text() == "Working slowly."
        assert len([e for e in stream.seen if event_tag(e) == "TurnStarted"]) == 1
    requests = server.main_requests()
    assert len(requests) == 2 and "Also mention bananas" not in request_text(requests[0])
    last = request_text(requests[-1])
    assert "Start something slow" in last and "Also mention bananas" in last


async def test_cancel_during_a_running_command_stops_the_command(codex: Any, work: Path) -> None:
    """Codex ends an interrupted turn at once but leaves the command running (bash and sleep under its sandbox);
    the adapter kills that command's process tree, so "Cancelled" is the truth: nothing runs on, and the file the
    command would have written after its sleep never appears."""
    command = "sleep 4; echo done > after.txt"
    codex({"turns": [{"tool": {"name": "exec_command", "input": {"cmd": command}}}, {"text": "never"}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work, permission_mode="AutoApprove")
        stream = EventStream(session)
        await session.prompt("Run the slow command")
        while True:
            event = await stream.until("ToolUpdated")
            if event.kind.value.kind == "Execute" and event.kind.value.status == "Running":
                break
        proc = session.connection.process
        with anyio.fail_after(STEP):
            while not running_command(proc.mark, command):
                await anyio.sleep(0.05)
        ran_at = time.monotonic()
        await anyio.sleep(1.0)
        await session.cancel()
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop == "Cancelled"
        tools = [e.kind.value for e in stream.seen if event_tag(e) == "ToolUpdated"]
        assert tools[-1].status == "Cancelled" and not ended.kind.background
        with anyio.fail_after(3):
            while running_command(proc.mark, command) or running_command(proc.mark, "sleep 4"):
                await anyio.sleep(0.05)
        assert process_group_alive(proc.pid)  # the agent itself lives on
        await anyio.sleep(max(0.0, ran_at + 5.0 - time.monotonic()))  # past the moment the file would appear
        assert not (work / "after.txt").exists()
        await session.close()
        await stream.rest()  # the killed command's late "failed" from Codex does not contradict the cancel
        assert [e.kind.value.status for e in stream.seen if event_tag(e) == "ToolUpdated"][-1] == "Cancelled"


async def test_live_model_switch_is_used_by_the_next_request(codex: Any, work: Path) -> None:
    server = codex({"turns": [{"text": "One."}, {"text": "Two."}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        await session.prompt("first")
        await stream.until("TurnEnded")
        before = len(server.requests)
        other = next(c.value for c in session.info().details.option("model").kind.choices if c.value != "gpt-5.5")
        await session.configure("model", other)
        updated = await stream.until("SessionUpdated")
        assert updated.kind.value.configuration.options["model"] == other
        await session.prompt("second")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
    assert server.main_requests()[0]["model"] == "gpt-5.5"
    # Codex may first compact the history with the old model (a switch to a smaller window); the turn's own
    # request uses the new one
    after = [r for r in server.requests[before:] if "compaction" not in (r["reason"] or "")]
    assert after and all(r["model"] == other for r in after)
    assert "second" in request_text(after[-1])


async def test_compact_runs_as_a_turn(codex: Any, work: Path) -> None:
    codex({"turns": [{"text": "One."}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        await session.prompt("first")
        await stream.until("TurnEnded")
        await session.compact()
        compacted = await stream.until("ContextCompacted")
        assert compacted.turn_info is not None
        usage = await stream.until("ContextUsage")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        before = [
            e.kind.used_tokens for e in stream.seen[: stream.seen.index(compacted)] if event_tag(e) == "ContextUsage"
        ]
        assert usage.kind.used_tokens < max(before)


async def test_generate_returns_the_text(codex: Any, work: Path) -> None:
    codex({"turns": [{"text": "Short generated text."}]})
    async with Runtime() as rt:
        text = await rt.generate("codex", work, "Say something short.")
    assert text == "Short generated text."


async def test_stdio_mcp_server_is_forwarded(codex: Any, work: Path, tmp_path: Path) -> None:
    server = codex({"turns": [{"text": "Hello."}]})
    script = tmp_path / "mcp_server.py"
    script.write_text(MCP_SERVER)
    marker = tmp_path / "mcp-started"
    async with Runtime() as rt:
        session = await rt.open(
            "codex",
            dir=work,
            mcp_servers=[
                McpServer(
                    name="files",
                    connection=Stdio(command=sys.executable, args=[str(script)], env={"MARKER": str(marker)}),
                )
            ],
        )
        stream = EventStream(session)
        await session.prompt("hi")
        await stream.until("TurnEnded")
    assert marker.read_text() == "initialize"  # Codex started the server with its env and initialized it
    tools = [t.get("name") for t in server.main_requests()[0]["body"].get("tools", [])]
    assert "list_mcp_resources" in tools  # offered only when an MCP server is configured


async def test_per_session_codex_home_is_fresh_and_removed(codex: Any, work: Path, tmp_path: Path) -> None:
    codex({"turns": [{"text": "Hello."}]})
    async with Runtime(adapter_config={"codex": {"codex_home": "per-session"}}) as rt:
        session = await rt.open("codex", dir=work)
        home = session.connection.codex_home
        assert home and Path(home).is_dir() and not str(home).startswith(str(tmp_path / "home"))
        stream = EventStream(session)
        await session.prompt("hi")
        assert (await stream.until("TurnEnded")).kind.stop.TAG == "Completed"
        assert list(Path(home).glob("sessions/**/rollout-*.jsonl"))  # Codex wrote its session there
        await session.close()
        await stream.rest()
    assert not Path(home).exists()
    assert not (tmp_path / "home" / ".codex" / "sessions").exists()


async def test_logged_out_codex_is_unauthenticated(codex: Any, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex({"turns": []})
    monkeypatch.delenv("ANYAGENTD_CODEX_ARGS")  # the default OpenAI provider, and no login in the fresh HOME
    async with Runtime() as rt:
        details = await rt.probe("codex")
        assert details.auth.TAG == "Unauthenticated"
        assert details.auth.login[0].command == [os.environ["ANYAGENTD_CODEX_BIN"], "login"]
        with pytest.raises(AuthRequired):
            await rt.open("codex", dir=work)


async def test_a_401_mid_session_is_auth_lost(codex: Any, work: Path) -> None:
    codex({"turns": [{"error": {"status": 401, "type": "authentication_error", "message": "bad key"}}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        await session.prompt("hi")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Failed"
        with pytest.raises(AuthRequired):
            await stream.rest()
        errors = [
            e.kind.value.message for e in stream.seen if event_tag(e) == "Diagnostic" and e.kind.value.level == "Error"
        ]
        assert any("401" in m for m in errors)


async def test_a_cli_that_exits_during_the_handshake_is_spawn_failed(
    codex: Any, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex({"turns": []})
    monkeypatch.setenv("ANYAGENTD_CODEX_ARGS", "--no-such-flag")
    async with Runtime() as rt:
        with pytest.raises(SpawnFailed, match="no-such-flag"):
            await rt.open("codex", dir=work)


async def test_resume_of_an_unknown_thread_fails(codex: Any, work: Path) -> None:
    codex({"turns": []})
    async with Runtime() as rt:
        with pytest.raises(ResumeFailed):
            await rt.open("codex", dir=work, resume="01a228bb-0000-7000-8000-000000000000")


async def test_plan_usage_needs_a_chatgpt_login(codex: Any) -> None:
    codex({"turns": []})
    async with Runtime() as rt:
        with pytest.raises(UnsupportedFeature, match="authentication required"):
            await rt.plan_usage("codex")


# ------------------------------------------------------------------------------------------------ wire


@pytest.mark.timeout(60)
def test_over_the_wire_an_approved_command_runs(model_server: Callable[..., Any], wire: Any, tmp_path: Path) -> None:
    server = model_server(COMMAND_SCRIPT)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    client = wire(env={**codex_environment(server.url, home), "ANYAGENTD_NO_LOGIN_SHELL": "1"}, timeout=STEP)
    opened = client.ok("open", agent="codex", dir=str(work))
    sid = opened["id"]
    assert opened["agent"]["id"] == "codex" and opened["resume_token"]
    client.ok("prompt", session=sid, text="Create made.txt")
    events = client.events(sid, until=lambda line: "RequestOpened" in line.get("event", {}).get("kind", ""))
    request = events[-1]["event"]["kind"]["RequestOpened"]["Permission"]
    assert request["tool"]["kind"] == "Execute"
    client.ok("answer", session=sid, request=request["id"], answer={"Permission": "AllowOnce"})
    events = client.events(sid, until=lambda line: "TurnEnded" in line.get("event", {}).get("kind", ""))
    assert events[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    assert (work / "made.txt").read_text() == "made by codex\n"
    client.ok("close", session=sid)


MCP_SERVER = r"""
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        with open(os.environ["MARKER"], "w") as fh:
            fh.write("initialize")
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


async def test_without_node_the_handshake_error_says_what_happened(
    codex: Any, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The npm ``codex`` is a node script: with no ``node`` on PATH it exits at once (127)."""
    codex({"turns": []})
    monkeypatch.setenv("PATH", str(work))  # nothing to run there, node included
    async with Runtime() as rt:
        with pytest.raises(SpawnFailed) as caught:
            await rt.open("codex", dir=work)
    message = caught.value.message
    assert "None" not in message
    assert "exit status: 127" in message and "node" in message


async def test_usage_reports_each_calls_tokens(codex: Any, work: Path) -> None:
    """Each ``thread/tokenUsage/updated`` carries ``anyagentd/tokens`` of its model call: in = the Responses API's
    ``input_tokens`` (cached included), out = ``output_tokens`` (reasoning included) as the model server reported
    them; the engine sums them over the session."""
    calls = [
        {"input_tokens": 900, "cached_tokens": 300, "output_tokens": 50, "reasoning_tokens": 20},
        {"input_tokens": 1400, "cached_tokens": 900, "output_tokens": 9},
    ]
    codex({"turns": [{"thinking": "Hmm.", "text": "One.", "usage": calls[0]}, {"text": "Two.", "usage": calls[1]}]})
    async with Runtime() as rt:
        session = await rt.open("codex", dir=work)
        stream = EventStream(session)
        for word in ("first", "second"):
            await session.prompt(word)
            await stream.until("TurnEnded")
        reported = [
            e.extensions["anyagentd/tokens"]
            for e in stream.seen
            if event_tag(e) == "ContextUsage" and "anyagentd/tokens" in e.extensions
        ]
        assert reported == [{"in": 900, "out": 50}, {"in": 1400, "out": 9}]
        usage = session.projections.usage
        assert (usage.tokens_in, usage.tokens_out) == (2300, 59)
