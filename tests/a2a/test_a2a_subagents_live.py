"""Subagents started from inside an agent: the REAL pinned Claude Code behind ``anyagentd a2a`` with
``[subagents] enabled = true`` gets anyagentd's MCP server at open; the scripted model makes it call
``mcp__anyagentd__spawn_subagent`` and the subagent (the scripted ``mock``, the real Codex on its own scripted
endpoint, another Claude, a child daemon over A2A) answers as the tool's output, which Claude's next model request
carries. The subagent ops over A2A (send to a warm one, kill, status, get, ownership) are checked on the same
daemon, every reply against the seed schema. Fails (never skips) when a CLI is missing."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
from test_a2a_commands import ALICE, BOB, OPERATOR, command, reason, result_of, task_result, tasks

pytestmark = pytest.mark.timeout(240)

HELLO = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}


def config(work: Path, subagents: str = "", *, agent: str = "claude") -> str:
    return f"""
[agent]
name = "{agent}"
dir = "{work}"
approval = "auto"
[a2a]
bearer = "{{{{secret:OP_TOKEN}}}}"
introspection = true
[[a2a.principals]]
id = "alice"
bearer = "{{{{secret:ALICE_TOKEN}}}}"
grants = ["*"]
[[a2a.principals]]
id = "bob"
bearer = "{{{{secret:BOB_TOKEN}}}}"
grants = ["*"]
[subagents]
enabled = true
{subagents}
"""


def spawn(agent: str, instruction: str, mode: str = "sync") -> dict[str, Any]:
    return {
        "name": "mcp__anyagentd__spawn_subagent",
        "input": {"agent": agent, "instruction": instruction, "mode": mode},
    }


def requests_text(server: Any) -> list[str]:
    return [json.dumps(r["body"].get("messages", []), ensure_ascii=False) for r in server.main_requests()]


def tool_results(server: Any) -> list[dict[str, Any]]:
    """Every tool_result block Claude sent to the model (the last request carries them all)."""
    found = []
    for message in server.main_requests()[-1]["body"].get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                found.append(block)
    return found


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def codex_env(model_server: Any, script: dict[str, Any], home: Path) -> dict[str, str]:
    """What the daemon passes to a Codex subagent: the pinned binary, its provider flags at its own scripted
    endpoint (Codex speaks the Responses API; Claude has the Anthropic one) and its key."""
    from anyagentd_testing.agents import agent_bin, codex_args
    from anyagentd_testing.agents import codex_env as codex_vars

    server = model_server(script)
    env = {
        **codex_vars(),
        "ANYAGENTD_CODEX_ARGS": shlex.join(codex_args(server.url)),
        "ANYAGENTD_CODEX_BIN": str(agent_bin("codex", start=__file__)),
    }
    env.pop("HOME", None)
    return {**env, "_server": server}  # type: ignore[dict-item]


def processes_in(directory: Path) -> list[int]:
    """Running processes whose working directory is ``directory`` or below it (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).is_relative_to(directory.resolve()):
                    status = (entry / "status").read_text()
                    if "\nState:\tZ" not in status:
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_claude_spawns_a_mock_then_a_codex_subagent_in_sync_mode(
    claude: Any, model_server: Any, a2a_daemon: Any, work: Path, tmp_path: Path
) -> None:
    server = claude(
        {
            "turns": [
                {"text": "Asking the mock.", "tool": spawn("mock", "Say hello.")},
                {"text": "Asking Codex.", "tool": spawn("codex", "Name a fruit.")},
                {"text": "Both subagents answered."},
            ]
        }
    )
    extra = codex_env(model_server, {"turns": [{"text": "Codex says PINEAPPLE."}]}, tmp_path)
    codex_server = extra.pop("_server")
    daemon = a2a_daemon(config=config(work), env={**ENV, **extra})
    task = daemon.send_text("Delegate, please.", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    texts = requests_text(server)
    assert len(texts) == 3, texts
    assert HELLO in texts[1] and "PINEAPPLE" not in texts[1]  # the mock's answer, in the next request
    assert "Codex says PINEAPPLE." in texts[2]  # Codex's answer, in the one after
    [mock_result, codex_result] = tool_results(server)
    assert result_text(mock_result) == HELLO and not mock_result.get("is_error")
    assert result_text(codex_result) == "Codex says PINEAPPLE."
    assert "Name a fruit." in json.dumps(codex_server.main_requests()[0]["body"].get("input", []))
    # the MCP tool output is the agent's answer; the subagent processes are gone (sync: closed after the answer)
    assert processes_in(daemon.state_dir / "subagents") == []


def test_a_warm_codex_subagent_takes_two_sends_over_a2a_then_kill_leaves_no_process(
    claude: Any, model_server: Any, a2a_daemon: Any, work: Path, tmp_path: Path
) -> None:
    server = claude(
        {
            "turns": [
                {"text": "A warm Codex.", "tool": spawn("codex", "Stay with me.", "warm")},
                {"text": "An async mock.", "tool": spawn("mock", "Say hello.", "async")},
                {"text": "Both started."},
            ]
        }
    )
    extra = codex_env(
        model_server,
        {"turns": [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}]},
        tmp_path,
    )
    extra.pop("_server")
    daemon = a2a_daemon(config=config(work), env={**ENV, **extra})
    task = daemon.send_text("Start two subagents.", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    [warm_block, async_block] = tool_results(server)
    warm = json.loads(result_text(warm_block))
    assert warm["status"] == "idle" and warm["mode"] == "warm" and warm["result"] == "first answer", warm
    handle, other = warm["handle"], json.loads(result_text(async_block))["handle"]

    def status(token: str = ALICE, of: str = handle) -> dict[str, Any]:
        return result_of(command(daemon, "subagent.status", token=token, handle=of), "subagent.status")

    for answer in ("second answer", "third answer"):
        _, ack = task_result(
            command(daemon, "subagent.send", token=ALICE, handle=handle, message="More?"), "subagent.send"
        )
        assert ack == {"ok": True, "handle": handle}
        deadline = time.monotonic() + 60
        while status()["status"] != "idle" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status() == {"handle": handle, "status": "idle", "mode": "warm", "result": answer}
    got = result_of(command(daemon, "subagent.get", token=ALICE, handle=handle), "subagent.get")["subagent"]
    assert got["attempt"] == 3 and got["requested_by"] == "user:alice" and got["instruction"] == "Stay with me."
    directory = daemon.state_dir / "subagents" / handle
    assert processes_in(directory), "the warm Codex is alive between messages"

    # another mode -> -32602 saying so; another principal's handle -> -32001; nothing created a task
    before = tasks(daemon)
    refused = command(daemon, "subagent.send", token=ALICE, handle=other, message="x")
    assert reason(refused) == (-32602, "INVALID_STATE") and "only a warm subagent" in refused.json()["error"]["message"]
    for op, args in (
        ("subagent.status", {}),
        ("subagent.get", {}),
        ("subagent.send", {"message": "x"}),
        ("subagent.kill", {}),
    ):
        assert reason(command(daemon, op, token=BOB, handle=handle, **args)) == (-32001, "NOT_FOUND"), op
    assert tasks(daemon) == before

    _, ack = task_result(command(daemon, "subagent.kill", token=ALICE, handle=handle, reason="enough"), "subagent.kill")
    assert ack == {"ok": True, "handle": handle}
    assert status() == {
        "handle": handle,
        "status": "cancelled",
        "mode": "warm",
        "result": "third answer",
        "error": "enough",
    }
    assert processes_in(directory) == [], "kill ended the Codex process"
    refused = command(daemon, "subagent.send", token=ALICE, handle=handle, message="x")
    assert reason(refused) == (-32602, "INVALID_STATE")


def test_depth_and_count_limits_are_clear_tool_errors(claude: Any, a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    # One script for the parent Claude and the Claude it spawns (the endpoint picks turns by conversation length):
    # both call spawn_subagent first; the parent's call starts the nested Claude, whose own call is one too deep.
    # The parent then starts a slow async mock and, while it runs, a second one: over the count.
    server = claude(
        {
            "turns": [
                {"tool": spawn("claude", "Nest once.")},
                {"text": "Starting a slow one.", "tool": spawn("mock", "Take your time.", "async")},
                {"text": "And another.", "tool": spawn("mock", "Me too.")},
                {"text": "Done with limits."},
            ]
        }
    )
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"turns": [[{"Sleep": 60000}, {"End": {"Completed": {"source": "Protocol"}}}]]}))
    daemon = a2a_daemon(config=config(work, "depth = 1\nper_owner = 1"), env=ENV, mock=str(slow))
    task = daemon.send_text("Test the limits.", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    errors = [
        result_text(b)
        for r in server.main_requests()
        for m in r["body"].get("messages", [])
        for b in (m["content"] if isinstance(m.get("content"), list) else [])
        if b.get("type") == "tool_result" and b.get("is_error")
    ]
    assert any("refused: subagents may nest 1 deep at most" in e for e in errors), errors  # the nested Claude's
    assert any("refused: user:alice already has 1 subagents running (limit 1)" in e for e in errors), errors
    [nested, slow_one, over] = tool_results(server)  # the parent's own three calls
    assert not nested.get("is_error") and not slow_one.get("is_error") and over.get("is_error")
    assert json.loads(result_text(slow_one))["status"] in ("pending", "running")


def test_a_running_subagent_is_an_activity_row_of_its_owner(
    claude: Any, a2a_daemon: Any, work: Path, tmp_path: Path
) -> None:
    claude({"turns": [{"text": "Started.", "tool": spawn("mock", "Take your time.", "async")}, {"text": "Ok."}]})
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"turns": [[{"Sleep": 60000}, {"End": {"Completed": {"source": "Protocol"}}}]]}))
    daemon = a2a_daemon(config=config(work), env=ENV, mock=str(slow))
    task = daemon.send_text("Start one.", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    [row] = result_of(command(daemon, "status", token=ALICE), "status")["activity"]
    assert row["id"].startswith("sa-") and row["round"] == 1 and row["phase"]
    assert result_of(command(daemon, "status", token=BOB), "status")["activity"] == []
    assert [r["id"] for r in result_of(command(daemon, "status", token=OPERATOR), "status")["activity"]] == [row["id"]]
    _, ack = task_result(command(daemon, "subagent.kill", token=OPERATOR, handle=row["id"]), "subagent.kill")
    assert ack["ok"] and result_of(command(daemon, "status", token=ALICE), "status")["activity"] == []


CHILD = "child-secret-2b8e"


def emit(daemon: Any, token: str, handle: str, stream: str, event: dict[str, Any]) -> Any:
    """``_instance.emit`` (its ``stream`` argument would collide with ``command``'s own keyword)."""
    import uuid

    from test_a2a_commands import URI

    envelope = {"op": "_instance.emit", "handle": handle, "stream": stream, "event": event}
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "extensions": [URI],
        "parts": [{"data": {"agentd": envelope}, "mediaType": "application/json"}],
    }
    return daemon.rpc("SendMessage", {"message": message}, token=token, headers={"A2A-Extensions": URI})


def test_two_daemons_the_parent_delegates_to_a_child_instance(claude: Any, a2a_daemon: Any, work: Path) -> None:
    child = a2a_daemon(config='[a2a]\nbearer = "{{secret:CHILD_TOKEN}}"\n', env={"CHILD_TOKEN": CHILD})
    server = claude(
        {"turns": [{"text": "Asking the child.", "tool": spawn("child", "Greet me.")}, {"text": "The child answered."}]}
    )
    instances = f'[[subagents.instances]]\nname = "child"\nurl = "{child.url}"\nbearer = "{{{{secret:CHILD_TOKEN}}}}"'
    parent = a2a_daemon(config=config(work, instances), env={**ENV, "CHILD_TOKEN": CHILD})
    task = parent.send_text("Delegate to the child.", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    [block] = tool_results(server)
    assert result_text(block) == HELLO and not block.get("is_error")  # the child's mock answered, over A2A
    # the child ran it as one task whose contextId is the parent's handle
    [child_task] = child.rpc("ListTasks", {}, token=CHILD).json()["result"]["tasks"]
    handle = child_task["contextId"]
    assert handle.startswith("sa-") and child_task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = result_of(command(parent, "subagent.get", token=ALICE, handle=handle), "subagent.get")["subagent"]
    assert (got["status"], got["result"], got["instruction"]) == ("completed", HELLO, "Greet me.")
    assert not any(CHILD in line for line in parent.stderr + child.stderr), "the child's bearer is never logged"

    # the reserved ops: a non-operator is refused before any task exists; the operator's report lands on the handle
    before = tasks(parent)
    for token in (ALICE, BOB):
        assert reason(command(parent, "_instance.result", token=token, handle=handle, output="forged")) == (
            -32602,
            "UNKNOWN_OP",
        )
        assert reason(emit(parent, token, handle, "s", {"data": 1})) == (-32602, "UNKNOWN_OP")
    assert tasks(parent) == before
    status = result_of(command(parent, "subagent.status", token=ALICE, handle=handle), "subagent.status")
    assert status["result"] == HELLO
    # the reply ended the turn: a report after it is refused and changes nothing; an emit is kept with its events
    late = command(parent, "_instance.result", token=OPERATOR, handle=handle, status="completed", output="late")
    assert reason(late) == (-32602, "INVALID_STATE")
    _, none = task_result(
        emit(parent, OPERATOR, handle, "progress", {"subject": "step", "data": {"n": 1}}), "_instance.emit"
    )
    assert none is None
    assert result_of(command(parent, "subagent.status", token=ALICE, handle=handle), "subagent.status") == {
        "handle": handle,
        "status": "completed",
        "mode": "sync",
        "result": HELLO,
    }
    got = command(parent, "subagent.get", token=ALICE, handle=handle).json()["result"]["message"]
    assert got["metadata"]["agentd"]["events"] == [
        {"stream": "progress", "event": {"subject": "step", "data": {"n": 1}}}
    ]
    assert reason(command(parent, "_instance.result", token=OPERATOR, handle="sa-nobody")) == (-32001, "NOT_FOUND")


def test_records_survive_a_restart_and_a_warm_codex_resumes(
    claude: Any, model_server: Any, a2a_daemon: Any, work: Path, tmp_path: Path
) -> None:
    import signal

    server = claude(
        {
            "turns": [
                {"text": "A warm Codex.", "tool": spawn("codex", "Remember the word MANGO.", "warm")},
                {"text": "A slow mock.", "tool": spawn("mock", "Take your time.", "async")},
                {"text": "Both started."},
            ]
        }
    )
    extra = codex_env(model_server, {"turns": [{"text": "Noted."}, {"text": "The word was MANGO."}]}, tmp_path)
    codex_server = extra.pop("_server")
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"turns": [[{"Sleep": 60000}, {"End": {"Completed": {"source": "Protocol"}}}]]}))
    state = tmp_path / "state"
    daemon = a2a_daemon(config=config(work), env={**ENV, **extra}, state_dir=state, mock=str(slow))
    assert daemon.send_text("Start two.", token=ALICE)["status"]["state"] == "TASK_STATE_COMPLETED"
    [warm_block, slow_block] = tool_results(server)
    warm, running = json.loads(result_text(warm_block))["handle"], json.loads(result_text(slow_block))["handle"]
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    again = a2a_daemon(config=config(work), env={**ENV, **extra}, state_dir=state, mock=str(slow))

    def status(handle: str) -> dict[str, Any]:
        return result_of(command(again, "subagent.status", token=ALICE, handle=handle), "subagent.status")

    assert status(running) == {"handle": running, "status": "failed", "mode": "async", "error": "interrupted"}
    assert status(warm) == {"handle": warm, "status": "idle", "mode": "warm", "result": "Noted."}
    task_result(command(again, "subagent.send", token=ALICE, handle=warm, message="Which word?"), "subagent.send")
    deadline = time.monotonic() + 60
    while status(warm)["status"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status(warm)["result"] == "The word was MANGO."
    history = json.dumps(codex_server.main_requests()[-1]["body"].get("input", []))
    assert "Remember the word MANGO." in history and "Noted." in history  # re-opened with its resume token
    assert reason(command(again, "subagent.get", token=BOB, handle=warm)) == (-32001, "NOT_FOUND")


def test_killing_a_child_subagent_cancels_its_task_on_the_child(
    claude: Any, a2a_daemon: Any, work: Path, tmp_path: Path
) -> None:
    from a2a_helpers import listed_tasks, wait_state

    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"turns": [[{"Sleep": 60000}, {"End": {"Completed": {"source": "Protocol"}}}]]}))
    child = a2a_daemon(config='[a2a]\nbearer = "{{secret:CHILD_TOKEN}}"\n', env={"CHILD_TOKEN": CHILD}, mock=str(slow))
    claude({"turns": [{"text": "Started.", "tool": spawn("child", "Take your time.", "async")}, {"text": "Ok."}]})
    instances = f'[[subagents.instances]]\nname = "child"\nurl = "{child.url}"\nbearer = "{{{{secret:CHILD_TOKEN}}}}"'
    parent = a2a_daemon(config=config(work, instances), env={**ENV, "CHILD_TOKEN": CHILD})
    assert parent.send_text("Start the child.", token=ALICE)["status"]["state"] == "TASK_STATE_COMPLETED"
    [running] = listed_tasks(child, CHILD)
    handle = running["contextId"]
    [row] = result_of(command(parent, "status", token=ALICE), "status")["activity"]
    assert row["id"] == handle and row["phase"] == "working"
    _, ack = task_result(
        command(parent, "subagent.kill", token=ALICE, handle=handle, reason="no longer needed"), "subagent.kill"
    )
    assert ack == {"ok": True, "handle": handle}
    wait_state(child, running["id"], "TASK_STATE_CANCELED", token=CHILD)
    assert result_of(command(parent, "subagent.status", token=ALICE, handle=handle), "subagent.status") == {
        "handle": handle,
        "status": "cancelled",
        "mode": "async",
        "error": "no longer needed",
    }
