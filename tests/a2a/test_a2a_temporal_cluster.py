"""Several daemons on one Temporal server and one PostgreSQL database (issue 29), each a real ``anyagentd a2a``, the
agents the pinned Claude Code and Codex CLIs against scripted model endpoints on loopback.

- Two daemons host Claude Code; runs are started through both; one daemon is killed with -9 (with its agent
  processes: the machine is gone) while its steps run. Every run completes on the survivor, read through it; the
  scripted endpoint's request log proves each step's turn ran once, and the interrupted ones again only as a
  resumed turn (the retried request carries the first attempt's conversation).
- A daemon hosting only Codex never runs a Claude step: its own Claude endpoint sees no request, and the daemon
  hosting Claude runs the Claude step.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import wait_state
from conftest import temporal_engine
from test_a2a_commands import ALICE, CONFIG, ENV, OPERATOR, command, result_of
from test_a2a_workflows import run_of, start_run

from anyagentd_testing.agents import agent_bin, claude_env, codex_args

pytestmark = pytest.mark.timeout(300)

PROMPT = "Write the note for run {{run.id}}."
WRITE = f"""
[[workflows]]
name = "note"
roles = ["user"]

[workflows.steps.write]
kind = "agent"
agent = "claude"
prompt = "{PROMPT}"
approval = "auto"
retry = {{ max = 1 }}

[workflows.steps.done]
kind = "finish"
depends_on = ["write"]
output = "{{{{steps.write.output}}}}"
"""
NOTE = {"turns": [{"text": "Noted."}, {"text": "Noted."}]}
"""The second turn answers a resumed conversation, whose request carries the first attempt's exchange (the scripted
endpoint picks a turn by the replies a request carries)."""
STUCK = {"turns": [{"text": "Noted.", "delay": 240}, {"text": "Noted."}]}
"""The first daemon's endpoint: its first reply never comes before the daemon is killed, however loaded the machine."""


def config(store: str, engine: str, flows: str = WRITE) -> str:
    return CONFIG.replace("[a2a]\n", f'[a2a]\nintrospection = true\nstore = "{store}"\n') + flows + engine


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (its children, theirs…), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_machine(daemon: Any) -> None:
    """SIGKILL the daemon and every process below it (its agents): as if its machine were gone."""
    below = descendants(daemon.process.pid)
    daemon.process.send_signal(signal.SIGKILL)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    daemon.process.wait(timeout=10)


def run_get(daemon: Any, run: str) -> dict[str, Any]:
    return result_of(command(daemon, "run.get", token=OPERATOR, run=run), "run.get")["run"]


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def turns_of(server: Any, run: str) -> list[dict[str, Any]]:
    """The scripted endpoint's main requests made for ``run`` (its working directory names it)."""
    return [r for r in server.main_requests() if r["cwd"] and r["cwd"].endswith(run)]


def transcribed(home: Path, run: str) -> bool:
    """Whether Claude Code has written the run's prompt to its session transcript (``~/.claude/projects/<the working
    directory, slugged>/<session>.jsonl``): from then on the session can be resumed with it."""
    text = PROMPT.replace("{{run.id}}", run)
    return any(text in path.read_text(errors="replace") for path in home.glob(f".claude/projects/*{run}*/*.jsonl"))


def test_a_daemon_killed_mid_step_its_runs_complete_on_the_other(
    claude: Any, model_server: Any, a2a_daemon: Any, temporal: dict[str, str], postgres_url: str, tmp_path: Path
) -> None:
    stuck = claude(STUCK)  # the first daemon's Claude (this process's environment)
    server = model_server(NOTE)  # the second daemon's Claude
    home = tmp_path / "home"
    engine = temporal_engine(temporal, heartbeat=3, hosts=["claude"], work_root=tmp_path / "runs")
    env = {**ENV, "ANYAGENTD_A2A_MEMBER_LEASE": "5"}  # a dead daemon's tasks are taken over this soon
    first = a2a_daemon(config=config(postgres_url, engine), env=env)
    tasks = [start_run(first, ALICE, workflow="note") for _ in range(2)]
    runs = [run_of(first, task, ALICE) for task in tasks]
    # both steps are in flight on the first daemon (the only host so far): their model calls are logged, their
    # prompts in their sessions' transcripts
    wait_until(lambda: all(turns_of(stuck, run) for run in runs), 120, "the first daemon's steps to call the model")
    wait_until(lambda: all(transcribed(home, run) for run in runs), 60, "the transcripts")
    second = a2a_daemon(config=config(postgres_url, engine), env={**env, **claude_env(server.url, home)})
    tasks += [start_run(second, ALICE, workflow="note") for _ in range(2)]
    runs += [run_of(second, task, ALICE) for task in tasks[2:]]
    kill_machine(first)

    for run in runs:
        done = wait_until(lambda run=run: (got := run_get(second, run))["status"] == "completed" and got, 150, run)
        assert done["output"] == "Noted.", done
    for run in runs:
        write = run_get(second, run)["steps"]["write"]
        first_calls, calls = turns_of(stuck, run), turns_of(server, run)
        if run in runs[:2] or first_calls:  # the first daemon ran it: interrupted by the kill
            assert write["attempt"] == 2, write  # the killed attempt, then one on the survivor
            # the retry resumed the first attempt's conversation: its request carries that exchange (a fresh start
            # would be turn 0 again); no other call was made for it
            assert [c["turn"] for c in first_calls] == [0] and [c["turn"] for c in calls] == [1], (first_calls, calls)
        elif write["attempt"] == 1:
            assert [c["turn"] for c in calls] == [0], calls  # ran exactly once
        else:  # the killed daemon had taken it, and died before its model call: started again on the survivor
            assert write["attempt"] == 2 and [c["turn"] for c in calls] == [0], calls
    # one store: every run and task reads the same through the survivor, whichever daemon started it
    listed = result_of(command(second, "workflow.status", token=ALICE), "workflow.status")["runs"]
    assert sorted(r["run"] for r in listed) == sorted(runs) and {r["status"] for r in listed} == {"completed"}
    tasks_listed = second.rpc("ListTasks", {}, token=ALICE).json()["result"]["tasks"]
    assert {t["id"] for t in tasks} <= {t["id"] for t in tasks_listed}
    # the runs' tasks read as their runs, through the survivor: the dead daemon's too (the survivor took them over)
    for task in tasks:
        wait_state(second, task["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)


def test_a_daemon_hosting_only_codex_never_runs_a_claude_step(
    claude: Any,
    model_server: Any,
    a2a_daemon: Any,
    temporal: dict[str, str],
    postgres_url: str,
    tmp_path: Path,
) -> None:
    from test_a2a_workflows_live import CLAUDE_SCRIPT, WORKFLOW, codex_script

    from anyagentd_testing.agents import codex_env, codex_resources_dir

    claude_server = claude(CLAUDE_SCRIPT)  # the Claude host's endpoint (this process's environment)
    codex_server = model_server(codex_script())
    unused_claude = model_server(CLAUDE_SCRIPT)  # the Codex host's Claude: must never be called
    unused_codex = model_server(codex_script())  # the Claude host's Codex: must never be called
    home = tmp_path / "home"
    codex = {
        **codex_env(home),
        "ANYAGENTD_CODEX_BIN": str(agent_bin("codex", start=__file__)),
    }
    resources = codex_resources_dir(start=__file__)
    if resources is not None:  # Codex's bundled bwrap, for its sandbox
        codex["PATH"] = f"{resources}{os.pathsep}{os.environ['PATH']}"
    flows = WORKFLOW
    runs_dir = tmp_path / "runs"
    claude_host = a2a_daemon(
        config=config(postgres_url, temporal_engine(temporal, hosts=["claude"], work_root=runs_dir), flows),
        env={**ENV, **codex, "ANYAGENTD_CODEX_ARGS": shlex.join(codex_args(unused_codex.url))},
    )
    codex_host = a2a_daemon(
        config=config(postgres_url, temporal_engine(temporal, hosts=["codex"], work_root=runs_dir), flows),
        env={
            **ENV,
            **codex,
            **claude_env(unused_claude.url, home),
            "ANYAGENTD_CODEX_ARGS": shlex.join(codex_args(codex_server.url)),
        },
    )
    task = start_run(codex_host, ALICE, workflow="write-and-review")
    run = run_of(codex_host, task, ALICE)
    wait_until(lambda: run_get(codex_host, run)["steps"]["go"]["status"] == "suspended", 150, "the review")
    command(codex_host, "workflow.signal", token=ALICE, name="go")
    done = wait_state(codex_host, task["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)
    assert "It says: fixed" in done["artifacts"][0]["parts"][0]["data"]
    assert (runs_dir / run / "change.txt").read_text() == "fixed\n"
    assert turns_of(claude_server, run), "the Claude host ran the Claude step"
    assert turns_of(codex_server, run), "the Codex host ran the Codex step"
    assert unused_claude.main_requests() == [], "the Codex host never ran a Claude step"
    assert unused_codex.main_requests() == [], "the Claude host never ran a Codex step"
    assert run_get(claude_host, run)["status"] == "completed"  # one store: read through either


def test_a_runs_task_is_answered_cancelled_and_followed_through_any_daemon(
    a2a_daemon: Any, temporal: dict[str, str], postgres_url: str
) -> None:
    """Two daemons on one Temporal and one PostgreSQL; the second alone hosts the agent. A run started through the
    first has its question asked on the second: its task (followed by the first) reads INPUT_REQUIRED whichever
    daemon ran the workflow code (its question reaches the first from the store); an answer sent through the second,
    which does not follow the task, is refused naming the first, and through the first it reaches the agent; CancelTask through it cancels the run itself (the SDK used to record the task CANCELED and leave the run
    going); and once the first stops cleanly, the second follows its run tasks to their end (each was a defect a
    fresh-eyes trial found)."""
    import signal as signals

    from test_a2a_workflows import WORKFLOWS, answer, wait_run

    flows = CONFIG.replace("[a2a]\n", f'[a2a]\nintrospection = true\nstore = "{postgres_url}"\n') + WORKFLOWS
    env = {**ENV, "ANYAGENTD_A2A_MEMBER_LEASE": "5"}
    first = a2a_daemon(config=flows + temporal_engine(temporal, hosts=[]), env=env, mock="permission")
    second = a2a_daemon(config=flows + temporal_engine(temporal, hosts=["mock"]), env=env, mock="permission")

    asking = start_run(first, ALICE, workflow="asking")
    waiting = wait_state(first, asking["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE, timeout=60)
    assert waiting["status"]["message"]["parts"][0]["text"].startswith("step a waits for an answer")
    # through the daemon that does not follow the task: refused, naming the one that does (its reply and the task's
    # history would lose the answer to the follower's next write); nothing changes
    refused = answer(second, asking["id"], "allow")
    assert refused["error"]["code"] == -32004 and first.url in refused["error"]["message"], refused
    assert wait_state(first, asking["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE)["status"] == waiting["status"]
    answered = answer(first, asking["id"], "allow")
    done = wait_state(first, asking["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)
    assert "allow" in [p.get("text") for m in done["history"] for p in m["parts"]], answered  # kept in its history

    cancelled = start_run(first, ALICE, workflow="asking")
    run = wait_state(first, cancelled["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE, timeout=60)["metadata"]["run"]
    assert "result" in second.rpc("CancelTask", {"id": cancelled["id"]}, token=ALICE).json()
    assert wait_run(second, run, "cancelled")["status"] == "cancelled"  # the run itself, not only its task
    wait_state(first, cancelled["id"], "TASK_STATE_CANCELED", token=ALICE, timeout=60)

    piped = start_run(first, ALICE, workflow="pipe", issue="#5")
    run = run_of(first, piped, ALICE)
    wait_run(second, run, "suspended")
    first.signal(signals.SIGTERM)
    assert first.wait(timeout=60) == 0
    wait_until(lambda: any("stopped (it left the database): took over" in line for line in second.stderr), 60, "it")
    assert command(second, "workflow.signal", token=ALICE, name="go").json()["result"]
    wait_state(second, piped["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)
