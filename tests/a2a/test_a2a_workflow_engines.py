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
