"""A workflow whose steps drive REAL agents through A2A: Claude Code writes a file, the Codex app-server reads it
back, a wait step is resumed by ``workflow.signal``; the daemon is killed with -9 while Codex's step runs and
again while the wait step waits, and after each restart the run goes on — the model endpoints' request logs prove
Claude's step was not run again. A cancelled run leaves no agent process. Both CLIs are the pinned ones, each
against its own scripted model endpoint on 127.0.0.1 (fails, never skips, when a CLI is missing)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import wait_state
from test_a2a_commands import ALICE, CONFIG, ENV, OPERATOR, command, task_result
from test_a2a_workflows import run_of, start_run, wait_run

from anyagentd_testing.agents import agent_bin, codex_args, codex_env, codex_resources_dir

pytestmark = pytest.mark.timeout(300)

WORKFLOW = """
[[workflows]]
name = "write-and-review"
roles = ["user"]

[workflows.steps.write]
kind = "agent"
agent = "claude"
prompt = "Create change.txt saying fixed."
approval = "auto"

[workflows.steps.review]
kind = "agent"
agent = "codex"
depends_on = ["write"]
prompt = "Read change.txt and say what it says. The writer said: {{steps.write.output}}"
approval = "auto"
retry = { max = 2 }

[workflows.steps.go]
kind = "wait"
on = "signal"
signal = "go"
depends_on = ["review"]

[workflows.steps.done]
kind = "finish"
depends_on = ["go"]
output = "{{steps.review.output}}"
"""

CLAUDE_SCRIPT = {
    "turns": [
        {
            "text": "Writing it. ",
            "tool": {"name": "Write", "input": {"file_path": "{{cwd}}/change.txt", "content": "fixed\n"}},
        },
        {"text": "Wrote change.txt."},
    ]
}


def codex_script(delay: float = 0) -> dict[str, Any]:
    return {
        "turns": [
            {"text": "Reading it.", "tool": {"name": "exec_command", "input": {"cmd": "cat change.txt"}}},
            {"text": "It says: fixed", "delay": delay},
        ]
    }


@pytest.fixture
def agents(claude: Any, model_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Claude Code and Codex both pointed at scripted endpoints (one each), in this process's environment, which
    the daemon inherits."""

    def start(codex_delay: float = 0) -> tuple[Any, Any]:
        claude_server = claude(CLAUDE_SCRIPT)
        codex_server = model_server(codex_script(codex_delay))
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        for key, value in codex_env(home).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ANYAGENTD_CODEX_ARGS", shlex.join(codex_args(codex_server.url)))
        monkeypatch.setenv("ANYAGENTD_CODEX_BIN", str(agent_bin("codex", start=__file__)))
        resources = codex_resources_dir(start=__file__)
        if resources is not None:  # Codex's bundled bwrap, for its sandbox
            monkeypatch.setenv("PATH", f"{resources}{os.pathsep}{os.environ['PATH']}")
        return claude_server, codex_server

    return start


def agent_processes(directory: str) -> list[int]:
    """Live processes working in ``directory`` (a run's working directory): the step's agent and its children."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cwd.startswith(directory) and state != "Z":
            found.append(int(entry))
    return found


def test_claude_writes_codex_reviews_and_kill_9_twice(
    agents: Any, a2a_daemon: Any, tmp_path: Path, workflow_engine: str
) -> None:
    claude_server, codex_server = agents(codex_delay=4)
    config = CONFIG.replace("[a2a]\n", "[a2a]\nintrospection = true\n") + WORKFLOW + workflow_engine
    state = tmp_path / "state"
    daemon = a2a_daemon(config=config, env=ENV, state_dir=state)
    task = start_run(daemon, ALICE, workflow="write-and-review")
    run = run_of(daemon, task, ALICE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # Claude done, Codex's reply (4 s late) in flight
        got = command(daemon, "run.get", token=OPERATOR, run=run).json()["result"]["message"]["parts"][0]["data"]
        if got["run"]["steps"]["review"]["status"] == "running" and len(codex_server.requests) >= 2:
            break
        time.sleep(0.1)
    assert got["run"]["steps"]["write"]["status"] == "done", got
    assert (state / "runs" / run / "change.txt").read_text() == "fixed\n"
    claude_requests = len(claude_server.requests)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait(timeout=10)

    again = a2a_daemon(config=config, env=ENV, state_dir=state)
    waiting = wait_run(again, run, "suspended")
    assert waiting["steps"]["review"]["attempt"] == 2, "the interrupted step ran again under its retry policy"
    assert "fixed" in waiting["steps"]["review"]["output"]
    assert len(claude_server.requests) == claude_requests, "Claude's done step was not run again"
    again.process.send_signal(signal.SIGKILL)
    again.process.wait(timeout=10)

    third = a2a_daemon(config=config, env=ENV, state_dir=state)
    assert wait_run(third, run, "suspended")["steps"]["go"]["status"] == "suspended"
    _, delivered = task_result(command(third, "workflow.signal", token=ALICE, name="go"), "workflow.signal")
    assert delivered == {"signal": "go", "delivered": 1}
    done = wait_state(third, task["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)
    assert "It says: fixed" in done["artifacts"][0]["parts"][0]["data"]
    assert len(claude_server.requests) == claude_requests


def test_cancel_mid_step_leaves_no_agent_process(
    agents: Any, a2a_daemon: Any, tmp_path: Path, workflow_engine: str
) -> None:
    agents(codex_delay=30)
    config = CONFIG + WORKFLOW + workflow_engine
    state = tmp_path / "state"
    daemon = a2a_daemon(config=config, env=ENV, state_dir=state)
    task = start_run(daemon, ALICE, workflow="write-and-review")
    run = run_of(daemon, task, ALICE)
    marker = str(state / "runs" / run)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not agent_processes(marker):
        time.sleep(0.1)
    assert agent_processes(marker), "an agent runs in the run's directory"
    _, cancelled = task_result(
        command(daemon, "admin.cancel", token=OPERATOR, run=run, reason="enough"), "admin.cancel"
    )
    assert cancelled == {"ok": True, "cancelled": run}
    wait_state(daemon, task["id"], "TASK_STATE_CANCELED", token=ALICE, timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and agent_processes(marker):
        time.sleep(0.1)
    assert agent_processes(marker) == [], "the cancelled step's agent process is gone"


def test_an_ask_step_on_claude_is_answered_over_a2a(
    claude: Any, a2a_daemon: Any, tmp_path: Path, workflow_engine: str
) -> None:
    claude(CLAUDE_SCRIPT)
    config = (
        CONFIG
        + WORKFLOW.replace(
            'prompt = "Create change.txt saying fixed."\napproval = "auto"',
            'prompt = "Create change.txt saying fixed."\napproval = "ask"',
        )
        + workflow_engine
    )
    state = tmp_path / "state"
    daemon = a2a_daemon(config=config, env=ENV, state_dir=state)
    task = start_run(daemon, ALICE, workflow="write-and-review")
    run = run_of(daemon, task, ALICE)
    waiting = wait_state(daemon, task["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE, timeout=120)
    parts = waiting["status"]["message"]["parts"]  # as a conversation's: a line, the event part, then the run's data
    request = parts[2]["data"]["request"]
    assert json.loads(parts[1]["text"])["kind"]["RequestOpened"] == request
    assert request["Permission"]["tool"]["kind"] == "Edit"
    assert not (state / "runs" / run / "change.txt").exists()
    answered = daemon.rpc(
        "SendMessage",
        {"message": {"messageId": "a1", "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "allow"}]}},
        token=ALICE,
    ).json()
    assert "result" in answered, answered
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (state / "runs" / run / "change.txt").exists():
        time.sleep(0.1)
    assert (state / "runs" / run / "change.txt").read_text() == "fixed\n"
    # what is left of the run is not this test's: cancelled, or refused as ended if it got there first (a loaded
    # machine), either way it is over
    ended = command(daemon, "admin.cancel", token=OPERATOR, run=run).json()
    assert "result" in ended or ended["error"]["data"][0]["reason"] == "INVALID_STATE", ended
