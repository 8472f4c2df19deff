"""Workflow engines as a plugin kind (issue 29): ``[workflow_engine] kind`` picks an installed engine; a kind not
installed and an unreachable Temporal are each one line at the CLI, naming the key; a run's Temporal history replays deterministically under the workflow's sandbox (Temporal's own
``Replayer``), and the interpreter's pure rules hold for both engines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a_helpers import ANYAGENTD, wait_state
from conftest import temporal_engine
from test_a2a_commands import ALICE, ENV
from test_a2a_workflows import config, run_of, start_run

from anyagentd_a2a.workflows.definition import load_workflows
from anyagentd_a2a.workflows.engines import installed
from anyagentd_a2a.workflows.interpreter import settle
from anyagentd_a2a.workflows.state import RunFlags, StepState

pytestmark = pytest.mark.timeout(120)

FINISH = '[[workflows]]\nname = "x"\n[workflows.steps.a]\nkind = "finish"\noutput = "x"\n'


def start_fails(tmp_path: Path, toml: str) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.toml"
    path.write_text(toml)
    argv = [ANYAGENTD, "a2a", "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state"), "--config", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env={**os.environ, **ENV})


def people_lines(stderr: str) -> list[str]:
    """The lines for a person (the JSON log lines left out)."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]


def test_both_engines_are_installed_plugins() -> None:
    assert {"local", "temporal"} <= set(installed())


def test_an_engine_not_installed_is_one_line(tmp_path: Path) -> None:
    done = start_fails(tmp_path, FINISH + '[workflow_engine]\nkind = "nope"\n')
    assert done.returncode == 2  # a configuration error's code
    assert people_lines(done.stderr) == [
        "anyagentd a2a: configuration error: workflow_engine.kind: no workflow engine 'nope' is installed; "
        "installed: local, temporal"
    ], done.stderr


def test_an_unreachable_temporal_is_one_line(tmp_path: Path) -> None:
    done = start_fails(tmp_path, FINISH + '[workflow_engine]\nkind = "temporal"\naddress = "127.0.0.1:1"\n')
    assert done.returncode == 1
    [line] = people_lines(done.stderr)
    assert line.startswith("anyagentd a2a: EngineUnavailable: Temporal at 127.0.0.1:1 (namespace default)"), line
    assert "Traceback" not in done.stderr


def test_a_runs_history_replays_deterministically(a2a_daemon: Any, temporal: dict[str, str]) -> None:
    """A run driven through a daemon (an agent step, a wait resolved by a signal, a finish) replays from its Temporal
    history with no non-determinism: the workflow code is the pure interpreter and Temporal accepts it."""
    from test_a2a_commands import command

    daemon = a2a_daemon(config=config(temporal_engine(temporal, hosts=["mock"])), env=ENV, mock="hello")
    task = start_run(daemon, ALICE, issue="#1")
    run = run_of(daemon, task, ALICE)
    from test_a2a_workflows import wait_run

    wait_run(daemon, run, "suspended")
    command(daemon, "workflow.signal", token=ALICE, name="go")
    wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", token=ALICE)

    async def replay() -> Any:
        from anyagentd_temporal.workflow import RunWorkflow
        from temporalio.client import Client
        from temporalio.worker import Replayer

        client = await Client.connect(temporal["address"], namespace=temporal["namespace"])
        history = await client.get_workflow_handle(run).fetch_history()
        return await Replayer(workflows=[RunWorkflow]).replay_workflow(history)

    result = anyio.run(replay)
    assert result.replay_failure is None, result.replay_failure
    assert len(list(anyio.run(_events, temporal, run))) > 10  # a real history, not an empty one


async def _events(temporal: dict[str, str], run: str) -> list[Any]:
    from temporalio.client import Client

    client = await Client.connect(temporal["address"], namespace=temporal["namespace"])
    return list((await client.get_workflow_handle(run).fetch_history()).events)


def test_settle_skips_down_the_graph() -> None:
    """Behind a failed step, every step downstream is skipped in one settle (a chain, not only the next one), and a
    cancelled run's pending steps are cancelled."""
    [chain] = load_workflows(
        [
            {
                "name": "chain",
                "steps": {
                    "a": {"kind": "finish", "output": "x"},
                    "b": {"kind": "finish", "output": "x", "depends_on": ["a"]},
                    "c": {"kind": "finish", "output": "x", "depends_on": ["b"]},
                },
            }
        ]
    ).values()
    steps = {"a": StepState(status="failed", attempt=1), "b": StepState(), "c": StepState()}
    assert {s: v.status for s, v in settle(chain, steps, RunFlags(), 5).items()} == {"b": "skipped", "c": "skipped"}
    fresh = {"a": StepState(), "b": StepState(), "c": StepState()}
    cancelled = settle(chain, fresh, RunFlags(cancelled=True), 5)
    assert {s: v.status for s, v in cancelled.items()} == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}


def test_a_sighup_names_a_changed_engine_for_the_next_start(
    a2a_daemon: Any, temporal: dict[str, str], tmp_path: Path
) -> None:
    """The engine's connection and workers are made at the start: a reload that changes ``[workflow_engine]`` says
    so and keeps the engine it runs (its runs go on)."""
    import signal as signals
    import time

    daemon = a2a_daemon(config=config(temporal_engine(temporal, hosts=["mock"])), env=ENV, mock="hello")
    [path] = sorted(tmp_path.glob("config*.toml"))
    path.write_text(config(temporal_engine(temporal, heartbeat=7, hosts=["mock"])))
    daemon.process.send_signal(signals.SIGHUP)
    deadline = time.monotonic() + 30
    said: list[str] = []
    while not said and time.monotonic() < deadline:
        said = [line for line in list(daemon.stderr) if "SIGHUP: changes to" in line]
        time.sleep(0.05)
    assert said and "workflow_engine take effect at the next start" in said[0], said
    task = start_run(daemon, ALICE, issue="#2")  # the engine it started with still runs its runs
    run = run_of(daemon, task, ALICE)
    from test_a2a_workflows import wait_run

    wait_run(daemon, run, "suspended")


SLOW = {
    "turns": [
        [
            {"Emit": {"TextDelta": {"message_id": "m", "text": "slowly"}}},
            {"Sleep": 60000},
            {"End": {"Completed": {"source": "Protocol"}}},
        ]
    ]
}


def task_text(daemon: Any, task_id: str) -> str:
    got = daemon.rpc("GetTask", {"id": task_id}, token=ALICE).json()["result"]
    return " ".join(p.get("text", "") for p in got["status"].get("message", {}).get("parts", []))


def test_a_drain_mid_step_hands_the_step_back(a2a_daemon: Any, workflow_engine: str, tmp_path: Path) -> None:
    """SIGTERM while an agent step's turn is under way: the step is handed back, its attempt not counted, and the
    run completes after the restart with the step run once more (attempt 1) — on both engines. (On Temporal the
    hand-back was an exception group the workflow did not know: the step failed "unhandled errors in a TaskGroup",
    found by a fresh-eyes trial.)"""
    import json
    import signal as signals
    import time

    from test_a2a_workflows import HELLO, wait_run

    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(config=config(workflow_engine), env=ENV, mock=str(slow))
    task = start_run(daemon, ALICE, issue="#3")
    run = run_of(daemon, task, ALICE)
    deadline = time.monotonic() + 60
    while "slowly" not in task_text(daemon, task["id"]):  # the agent's turn is under way
        assert time.monotonic() < deadline, "the step's turn never started"
        time.sleep(0.05)
    daemon.signal(signals.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    again = a2a_daemon(config=config(workflow_engine), env=ENV, mock="hello", state_dir=daemon.state_dir)
    done = wait_run(again, run, "suspended")
    assert done["steps"]["write"]["attempt"] == 1 and done["steps"]["write"]["output"] == HELLO, done


def test_a_temporal_that_does_not_answer_refuses_workflow_run_leaving_nothing(a2a_daemon: Any) -> None:
    """Temporal stops answering: ``workflow.run`` fails saying so (naming the server), creates no task and leaves no
    run behind, and CancelTask of a run's task is refused leaving the task as it was — a refused run used to stay ``pending`` and run, taskless, once Temporal was back (found by a
    fresh-eyes trial)."""
    from test_a2a_commands import OPERATOR, command, result_of

    from anyagentd_testing.temporal import start

    server = start()
    try:
        engine = temporal_engine({"address": server.address, "namespace": "default"}, hosts=["mock"])
        daemon = a2a_daemon(config=config(engine), env=ENV, mock="hello")
        waiting = start_run(daemon, ALICE, issue="#6")
        from test_a2a_workflows import wait_run

        run = run_of(daemon, waiting, ALICE)
        wait_run(daemon, run, "suspended")
        server.process.terminate()
        server.process.wait(timeout=30)
        # CancelTask of the waiting run's task is refused, and its task is left as it was (it used to read FAILED)
        refused_cancel = daemon.rpc("CancelTask", {"id": waiting["id"]}, token=ALICE).json()
        assert "the run was not cancelled: the workflow engine (Temporal at" in refused_cancel["error"]["message"]
        assert daemon.rpc("GetTask", {"id": waiting["id"]}, token=ALICE).json()["result"]["status"]["state"] == (
            "TASK_STATE_WORKING"
        )
        refused = command(daemon, "workflow.run", token=ALICE, workflow="pipe", inputs={"issue": "#4"}).json()
        message = refused["error"]["message"]
        assert message.startswith(f"the workflow engine (Temporal at {server.address}) does not answer"), refused
        listed = daemon.rpc("ListTasks", {}, token=OPERATOR).json()["result"].get("tasks", [])
        assert [t["id"] for t in listed] == [waiting["id"]]  # the refused run made none
        assert [
            r["run"] for r in result_of(command(daemon, "workflow.status", token=OPERATOR), "workflow.status")["runs"]
        ] == [run]
    finally:
        server.stop()


def test_a_bad_address_or_namespace_is_one_line(tmp_path: Path, temporal: dict[str, str]) -> None:
    done = start_fails(tmp_path, FINISH + '[workflow_engine]\nkind = "temporal"\naddress = "127.0.0.1:1"\n')
    [line] = people_lines(done.stderr)
    assert done.returncode == 1 and line.startswith("anyagentd a2a: EngineUnavailable: Temporal at 127.0.0.1:1"), line
    missing = FINISH + temporal_engine({"address": temporal["address"], "namespace": "nosuchns"})
    done = start_fails(tmp_path / "2", missing)
    assert done.returncode == 1 and people_lines(done.stderr) == [
        f"anyagentd a2a: EngineUnavailable: Temporal at {temporal['address']} (namespace nosuchns): the namespace "
        "does not exist (temporal operator namespace create nosuchns)"
    ], done.stderr


def test_check_config_checks_the_engine_as_the_start_does(tmp_path: Path) -> None:
    """``--check-config`` refuses an engine not installed (it said ok, found by a fresh-eyes trial), warns of hosts
    no installed adapter drives and of Temporal keys the local engine ignores, and takes durations."""
    path = tmp_path / "engine.toml"

    def check(table: str) -> subprocess.CompletedProcess[str]:
        path.write_text(FINISH + table)
        argv = [ANYAGENTD, "a2a", "--check-config", str(path)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    done = check('[workflow_engine]\nkind = "temporl"\n')
    assert done.returncode == 2 and "workflow_engine.kind: no workflow engine 'temporl' is installed" in done.stderr
    done = check('[workflow_engine]\nkind = "temporal"\nhosts = ["nosuchagent"]\nheartbeat = "10s"\n')
    assert done.returncode == 0, done.stderr
    assert "workflow_engine.hosts: 'nosuchagent' is no agent this machine drives" in done.stderr, done.stderr
    done = check('[workflow_engine]\nkind = "temporal"\naddress = "nohost:notaport"\n')
    assert done.returncode == 2 and "workflow_engine.address" in done.stderr, done.stderr
    done = check('[workflow_engine]\naddress = "10.0.0.1:7233"\n')
    assert done.returncode == 0 and 'workflow_engine.address: only kind = "temporal" reads it' in done.stderr


def test_a_paused_daemon_leaves_its_agents_steps_to_the_others(
    a2a_daemon: Any, temporal: dict[str, str], postgres_url: str
) -> None:
    """Two daemons on one Temporal and one PostgreSQL, the first paused: runs started through the second complete
    (the paused one hands each step it is offered back instead of sitting on it, found by a fresh-eyes trial), a run
    started through the paused one waits ``pending`` and starts when it is resumed."""
    from test_a2a_commands import CONFIG, OPERATOR, command
    from test_a2a_workflows import WORKFLOWS, wait_run

    flows = CONFIG.replace("[a2a]\n", f'[a2a]\nintrospection = true\nstore = "{postgres_url}"\n') + WORKFLOWS
    engine = temporal_engine(temporal, hosts=["mock"])
    env = {**ENV, "ANYAGENTD_A2A_MEMBER_LEASE": "5"}
    paused = a2a_daemon(config=flows + engine, env=env, mock="hello")
    assert "result" in command(paused, "admin.pause", token=OPERATOR, reason="maintenance").json()
    other = a2a_daemon(config=flows + engine, env=env, mock="hello")
    runs = [run_of(other, start_run(other, ALICE, issue=f"#{n}"), ALICE) for n in range(3)]
    for run in runs:  # a step the paused daemon is offered comes back 5 s later, to either: give it a few rounds
        assert wait_run(other, run, "suspended", timeout=180)["steps"]["write"]["status"] == "done"
    held = run_of(paused, start_run(paused, ALICE, issue="#9"), ALICE)
    assert wait_run(other, held, "pending")["steps"]["write"]["attempt"] == 0
    assert "result" in command(paused, "admin.resume", token=OPERATOR).json()
    assert wait_run(other, held, "suspended")["steps"]["write"]["status"] == "done"


def test_a_cancel_through_a_daemon_whose_local_engine_does_not_drive_the_run_is_refused(
    a2a_daemon: Any, postgres_url: str
) -> None:
    """Two daemons on one PostgreSQL with the local engine: a run is driven by the daemon it started on. CancelTask of
    its task through the other is refused naming the run (the SDK used to record the task CANCELED while the run went
    on), and changes nothing; through its own daemon it cancels the run."""
    from test_a2a_commands import CONFIG
    from test_a2a_workflows import WORKFLOWS, wait_run

    flows = CONFIG.replace("[a2a]\n", f'[a2a]\nintrospection = true\nstore = "{postgres_url}"\n') + WORKFLOWS
    first = a2a_daemon(config=flows, env=ENV, mock="hello")
    other = a2a_daemon(config=flows, env=ENV, mock="hello")
    task = start_run(first, ALICE, issue="#7")
    run = run_of(first, task, ALICE)
    wait_run(first, run, "suspended")
    refused = other.rpc("CancelTask", {"id": task["id"]}, token=ALICE).json()
    assert (
        refused["error"]["code"] == -32002 and f"run {run} is driven by another daemon" in refused["error"]["message"]
    )
    assert wait_run(first, run, "suspended")["status"] == "suspended"
    assert other.rpc("GetTask", {"id": task["id"]}, token=ALICE).json()["result"]["status"]["state"] == (
        "TASK_STATE_WORKING"
    )
    assert "result" in first.rpc("CancelTask", {"id": task["id"]}, token=ALICE).json()
    assert wait_run(first, run, "cancelled")["status"] == "cancelled"


def test_an_answer_while_temporal_does_not_answer_keeps_the_question(a2a_daemon: Any) -> None:
    """An answer to a run's question while Temporal does not answer did not reach the agent: the task keeps
    waiting, its status saying so (the task used to read FAILED, its run still waiting)."""
    from test_a2a_workflows import answer

    from anyagentd_testing.temporal import start

    server = start()
    try:
        engine = temporal_engine({"address": server.address, "namespace": "default"}, hosts=["mock"])
        daemon = a2a_daemon(config=config(engine), env=ENV, mock="permission")
        task = start_run(daemon, ALICE, workflow="asking")
        wait_state(daemon, task["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE, timeout=60)
        server.process.terminate()
        server.process.wait(timeout=30)
        kept = answer(daemon, task["id"], "allow")["result"]["task"]
        assert kept["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", kept
        text = kept["status"]["message"]["parts"][0]["text"]
        assert text.startswith("The answer did not reach the agent: the workflow engine (Temporal at"), text
        stored = daemon.rpc("GetTask", {"id": task["id"]}, token=ALICE).json()["result"]
        assert stored["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    finally:
        server.stop()
