"""What an operator of a real ``anyagentd a2a`` hit (issue 26, "Wrong behaviour"), each on a real daemon with the
scripted ``mock`` agent: the drain with ``[subagents]`` on writes only JSON lines; SIGHUP applies ``[[workflows]]``
(new, changed, removed) to the runs started from then on, a running run keeping its definition; the operator
running a workflow that does not exist is told so, with the configured names; two principals' conversations with one
contextId list as two ids, and a bare id matching both is refused naming the qualified ones. Every result is
validated against the seed schema."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import wait_state
from test_a2a_commands import ALICE, BOB, CONFIG, ENV, OPERATOR, command, reason, result_of, task_result
from test_a2a_workflows import run_of, start_run, wait_run

pytestmark = pytest.mark.timeout(120)

INTROSPECTION = CONFIG.replace("[a2a]\n", "[a2a]\nintrospection = true\n")


def test_a_drain_with_subagents_on_writes_only_json_lines(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG + "[subagents]\nenabled = true\n", env=ENV, mock="hello")
    task = daemon.send_text("hello", token=ALICE)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    lines = daemon.all_stderr()
    assert any("subagent" in line or "StreamableHTTP" in line for line in lines), "the MCP server ran"
    for line in lines:
        assert isinstance(json.loads(line), dict), line  # a traceback block (uvicorn's own handler) fails here
    assert json.loads(lines[-1])["msg"] in ("stopped", "StreamableHTTP session manager shutting down")


def flow(name: str, output: str, *, wait: bool = False) -> str:
    gate = '[workflows.steps.go]\nkind = "wait"\non = "signal"\nsignal = "go"\n' if wait else ""
    after = 'depends_on = ["go"]\n' if wait else ""
    return (
        f'[[workflows]]\nname = "{name}"\nroles = ["user"]\n{gate}'
        f'[workflows.steps.done]\nkind = "finish"\n{after}output = "{output}"\n'
    )


def reload(daemon: Any, config: Path, text: str) -> None:
    """Rewrite ``config``, SIGHUP, and wait for the reload's log line."""
    before = sum("configuration reloaded" in line for line in daemon.stderr)
    config.write_text(text)
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while sum("configuration reloaded" in line for line in daemon.stderr) == before:
        assert time.monotonic() < deadline, daemon.stderr[-5:]
        time.sleep(0.05)


def output_of(daemon: Any, task: dict[str, Any]) -> Any:
    done = wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", token=ALICE)
    return done["artifacts"][0]["parts"][0]["data"]


def test_sighup_applies_workflows_to_new_runs_and_the_operator_hears_of_unknown_ones(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    daemon = a2a_daemon(config=INTROSPECTION + flow("first", "one", wait=True), env=ENV, mock="hello")
    path = tmp_path / "config0.toml"
    # the operator may run any workflow: told that none has the name, and which ones there are
    unknown = command(daemon, "workflow.run", token=OPERATOR, workflow="second")
    assert reason(unknown) == (-32001, "NOT_FOUND")
    assert unknown.json()["error"]["message"] == "no workflow named 'second' (configured: first)"
    # a user without a grant on it learns nothing: PERMISSION_DENIED whether or not it exists
    for name in ("first-not", "second"):
        assert reason(command(daemon, "workflow.run", token=BOB, workflow=name)) == (-31403, "PERMISSION_DENIED")
    running = start_run(daemon, ALICE, workflow="first")
    wait_run(daemon, run_of(daemon, running, ALICE), "suspended", ALICE)

    reload(daemon, path, INTROSPECTION + flow("first", "uno", wait=True) + flow("second", "two"))
    assert output_of(daemon, start_run(daemon, ALICE, workflow="second")) == "two"
    assert any("SIGHUP: workflows added second; changed first" in line for line in daemon.stderr)
    later = start_run(daemon, ALICE, workflow="first")
    wait_run(daemon, run_of(daemon, later, ALICE), "suspended", ALICE)
    _, delivered = task_result(command(daemon, "workflow.signal", token=ALICE, name="go"), "workflow.signal")
    assert delivered["delivered"] == 2
    assert output_of(daemon, running) == "one", "a running run keeps the definition it started with"
    assert output_of(daemon, later) == "uno"
    status = result_of(command(daemon, "status", token=ALICE), "status")
    assert status["workflows"] == [{"name": "first"}, {"name": "second"}]

    reload(daemon, path, INTROSPECTION + flow("second", "two"))
    gone = command(daemon, "workflow.run", token=OPERATOR, workflow="first")
    assert reason(gone) == (-32001, "NOT_FOUND")
    assert gone.json()["error"]["message"] == "no workflow named 'first' (configured: second)"
    assert any("SIGHUP: workflows removed first" in line for line in daemon.stderr)


def test_two_principals_one_context_id_are_two_named_conversations(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=INTROSPECTION, env=ENV, mock="hello")
    for token in (ALICE, BOB):
        assert daemon.send_text("hi", token=token, context_id="ctx-1")["status"]["state"] == "TASK_STATE_COMPLETED"
    listed = result_of(command(daemon, "status", token=OPERATOR), "status")["conversations"]
    assert sorted((c["id"], c["contextId"], c["principal"]) for c in listed) == [
        ("user:alice/ctx-1", "ctx-1", "user:alice"),
        ("user:bob/ctx-1", "ctx-1", "user:bob"),
    ]
    [own] = result_of(command(daemon, "status", token=ALICE), "status")["conversations"]
    assert (own["id"], own["principal"]) == ("ctx-1", "user:alice")  # its own: the contextId it sent
    # the operator's bare id matches both: refused, naming the ids to use — never one of them picked
    both = command(daemon, "conversation.get", token=OPERATOR, id="ctx-1")
    assert reason(both) == (-32602, "INVALID_COMMAND_ARGS")
    assert "user:alice/ctx-1, user:bob/ctx-1" in both.json()["error"]["message"]
    assert reason(command(daemon, "plan.get", token=OPERATOR, id="ctx-1")) == (-32602, "INVALID_COMMAND_ARGS")
    bobs = result_of(command(daemon, "conversation.get", token=OPERATOR, id="user:bob/ctx-1"), "conversation.get")
    assert (bobs["conversation"]["id"], bobs["conversation"]["principal"]) == ("user:bob/ctx-1", "user:bob")
    alices = result_of(command(daemon, "conversation.get", token=ALICE, id="ctx-1"), "conversation.get")
    assert (alices["conversation"]["id"], alices["conversation"]["principal"]) == ("ctx-1", "user:alice")
    plan = result_of(command(daemon, "plan.get", token=OPERATOR, id="user:alice/ctx-1"), "plan.get")
    assert plan["conversation"] == "user:alice/ctx-1"
    # plan.get without an id is the root conversation (the schema's word), which an A2A daemon does not have
    rootless = command(daemon, "plan.get", token=ALICE)
    assert reason(rootless) == (-32001, "NOT_FOUND") and "no root conversation" in rootless.json()["error"]["message"]


def test_the_readmes_push_registration_and_a_second_create_without_an_id_replaces_the_first(a2a_daemon: Any) -> None:
    import re
    import subprocess

    readme = (Path(__file__).resolve().parents[2] / "plugins" / "a2a" / "README.md").read_text()
    block = re.search(r"<!-- push: register -->\n```sh\n(.*?)```", readme, re.S)
    assert block, "the README's push block is missing"
    daemon = a2a_daemon(config=CONFIG + "[a2a.push]\nallow_private = true\n", env=ENV, mock="hello")
    task = daemon.send_text("hi", token=ALICE)
    for hook in ("http://127.0.0.1:9/first", "http://127.0.0.1:9/second"):
        env = {"URL": daemon.url, "TOKEN": ALICE, "TASK": task["id"], "HOOK": hook, "PATH": "/usr/bin:/bin"}
        ran = subprocess.run(["bash", "-c", block[1]], env=env, capture_output=True, text=True, timeout=30)
        assert ran.returncode == 0 and json.loads(ran.stdout)["result"]["url"] == hook, ran
    listed = daemon.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}, token=ALICE).json()["result"]
    assert [(c["id"], c["url"]) for c in listed["configs"]] == [(task["id"], "http://127.0.0.1:9/second")]
    kept = {"taskId": task["id"], "id": "audit", "url": "http://127.0.0.1:9/audit"}
    assert "result" in daemon.rpc("CreateTaskPushNotificationConfig", kept, token=ALICE).json()
    listed = daemon.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}, token=ALICE).json()["result"]
    assert sorted(c["id"] for c in listed["configs"]) == sorted([task["id"], "audit"])


def test_admin_set_takes_the_configuration_keys_spelling(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    daemon.send_text("hi", token=ALICE, context_id="c")
    assert reason(command(daemon, "conversation.get", token=ALICE, id="c")) == (-32004, "INTROSPECTION_DISABLED")
    for path, value in (("a2a.introspection", True), ("a2a.introspection.enabled", False), ("a2a.introspection", True)):
        _, set_ = task_result(command(daemon, "admin.set", token=OPERATOR, path=path, value=value), "admin.set")
        assert set_ == {"path": "a2a.introspection.enabled", "value": value}  # the schema's name for it
    assert result_of(command(daemon, "conversation.get", token=ALICE, id="c"), "conversation.get")
    assert reason(command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection", value="yes")) == (
        -32602,
        "INVALID_COMMAND_ARGS",
    )
