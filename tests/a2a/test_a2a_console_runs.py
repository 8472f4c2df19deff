"""The console's workflow runs and subagents pages (issue 28) in a real headless Chromium against a real daemon with
the scripted ``mock`` agent:

- a run is listed on ``#/runs`` and its page (``#/run/{id}``) follows it live: the steps change on the page as the
  run's task streams them (SubscribeToTask) — a signal sent from the page (with its payload) advances the run, as
  ``run.get`` read by the test shows, and a signal sent by someone else shows on the page without any click,
  sooner than the page's slow backstop poll could;
- Pause, Resume and Cancel from the page take effect (``run.get``, and the run's task ends CANCELED);
- the subagents page lists a subagent a workflow run spawned (a warm one: it stays alive), with the run and step
  that spawned it, and Kill ends it (``subagent.status`` reads cancelled).

Screenshots of the runs list and one run go to ``tests/.artifacts/console/``. Every wait is for a condition.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import test_a2a_console
from a2a_helpers import wait_state
from test_a2a_console import screenshot

browser, page = test_a2a_console.browser, test_a2a_console.page  # the fixtures, shared

pytestmark = pytest.mark.timeout(120)

HELLO = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
COMMAND = "https://agentd.dev/a2a/ext/command"
LIVE_MS = 60_000
"""How long the page may take to show a change of the run (from its task's stream, or at worst its backstop poll):
a bound for a loaded machine, not a measure (bench/bench_console.py measures)."""
CONFIG = """
[a2a]
introspection = true
[subagents]
enabled = true

[[workflows]]
name = "pipe"
inputs = { issue = { type = "string" } }
[workflows.steps.write]
kind = "agent"
agent = "mock"
prompt = "Fix {{inputs.issue}}"
[workflows.steps.go]
kind = "wait"
on = "signal"
signal = "go"
depends_on = ["write"]
[workflows.steps.later]
kind = "wait"
on = "signal"
signal = "later"
depends_on = ["go"]
[workflows.steps.done]
kind = "finish"
depends_on = ["later"]
output = "{{steps.write.output}}"

[[workflows]]
name = "delegate"
[workflows.steps.keep]
kind = "subagent"
agent = "mock"
instruction = "Stay around for {{run.id}}"
mode = "warm"
[workflows.steps.done]
kind = "finish"
depends_on = ["keep"]
output = "{{steps.keep.output.result}}"
"""


def op(daemon: Any, which: str, /, **args: Any) -> Any:
    """Command op ``which`` as the loopback operator (no credentials configured): a message op's document, or the
    Task of a task op."""
    message = {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "extensions": [COMMAND],
        "parts": [{"data": {"agentd": {"op": which, **args}}, "mediaType": "application/json"}],
    }
    params: dict[str, Any] = {"message": message}
    if which == "workflow.run":
        params["configuration"] = {"returnImmediately": True}
    body = daemon.rpc("SendMessage", params, headers={"A2A-Extensions": COMMAND}).json()
    assert "result" in body, body
    result = body["result"]
    return result["message"]["parts"][0]["data"] if "message" in result else result["task"]


def run_get(daemon: Any, run: str) -> dict[str, Any]:
    return op(daemon, "run.get", run=run)["run"]


def wait_run(daemon: Any, run: str, holds: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    """Poll ``run.get`` until ``holds(run)``; returns the run (fails naming ``what`` and the last run seen)."""
    deadline = time.monotonic() + 20
    while True:
        got = run_get(daemon, run)
        if holds(got):
            return got
        assert time.monotonic() < deadline, f"{what}: {json.dumps(got)[:2000]}"
        time.sleep(0.05)


def start(daemon: Any, workflow: str, **inputs: Any) -> tuple[str, str]:
    """Start ``workflow``; returns (run id, task id) once the run's task names its run."""
    task = op(daemon, "workflow.run", workflow=workflow, inputs=inputs)
    deadline = time.monotonic() + 20
    while True:
        got = daemon.rpc("GetTask", {"id": task["id"]}).json()["result"]
        if got.get("metadata", {}).get("run"):
            return got["metadata"]["run"], task["id"]
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


def step(page: Any, name: str, status: str) -> Any:
    return page.locator(f'.step[data-step="{name}"][data-status="{status}"]')


def suspended_on(signal: str) -> Callable[[dict[str, Any]], bool]:
    return lambda run: any(
        s["status"] == "suspended" and (s["wait"] or {}).get("signal") == signal for s in run["steps"].values()
    )


# ------------------------------------------------------------------------------------ one run, live


def test_a_runs_steps_update_live_and_a_signal_from_the_page_advances_it(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, mock="hello")
    run, task_id = start(daemon, "pipe", issue="#28")
    page.goto(daemon.url + "/console/#/runs")
    row = page.locator(f'.run-row[data-run="{run}"]')
    row.wait_for()
    assert "pipe" in row.inner_text()
    screenshot(page, "runs")
    row.locator("a").click()
    # the run as it stands: the agent step done with its output, the wait step with its signal
    step(page, "go", "suspended").wait_for()
    page.locator('.run-live[data-live="yes"]').wait_for()  # following the run's task
    assert HELLO in step(page, "write", "done").inner_text()
    assert step(page, "go", "suspended").locator(".signal-name").inner_text() == "go"
    assert step(page, "later", "pending").count() == 1 and step(page, "done", "pending").count() == 1
    screenshot(page, "run")
    # a signal sent from the page, with a JSON payload, advances the run
    control = page.locator('.signal-control[data-signal="go"]')
    control.locator(".signal-payload").fill('{"ok": 1}')
    control.locator(".send-signal").click()
    got = wait_run(daemon, run, suspended_on("later"), "the page's signal advanced the run to 'later'")
    assert got["steps"]["go"]["status"] == "done"
    assert got["steps"]["go"]["output"] == {"signal": "go", "payload": {"ok": 1}, "from": "operator"}
    step(page, "go", "done").wait_for(timeout=LIVE_MS)
    step(page, "later", "suspended").wait_for(timeout=LIVE_MS)
    # a signal from elsewhere: the page shows its effect with no click, from the run's task stream
    assert op(daemon, "workflow.signal", name="later", run=run)["status"]["state"] == "TASK_STATE_COMPLETED"
    step(page, "done", "done").wait_for(timeout=LIVE_MS)
    page.locator('.run-status[data-status="completed"]').wait_for(timeout=LIVE_MS)
    assert HELLO in page.locator(".run-output").inner_text()
    assert page.locator(".send-signal").count() == 0 and page.locator("#run-cancel").count() == 0
    # the steps keep the workflow's order once the run has ended (read back from the store), on the page and in
    # run.get, and a page opened afresh on the ended run shows them so too
    order = ["write", "go", "later", "done"]
    assert list(run_get(daemon, run)["steps"]) == order
    assert page.locator(".step").evaluate_all("rows => rows.map((r) => r.dataset.step)") == order
    page.reload()
    step(page, "done", "done").wait_for()
    assert page.locator(".step").evaluate_all("rows => rows.map((r) => r.dataset.step)") == order
    wait_state(daemon, task_id, "TASK_STATE_COMPLETED")
    screenshot(page, "run-completed")


def test_pause_resume_and_cancel_from_the_page_take_effect(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, mock="hello")
    run, task_id = start(daemon, "pipe", issue="#29")
    wait_run(daemon, run, suspended_on("go"), "the run waits for 'go'")
    page.goto(f"{daemon.url}/console/#/run/{run}")
    page.locator('.run-status[data-status="suspended"]').wait_for()
    page.locator("#run-pause").click()
    wait_run(daemon, run, lambda r: r["status"] == "paused", "Pause paused the run")
    page.locator('.run-status[data-status="paused"]').wait_for()
    assert page.locator("#run-pause").count() == 0
    page.locator("#run-resume").click()
    wait_run(daemon, run, lambda r: r["status"] == "suspended", "Resume resumed the run")
    page.locator('.run-status[data-status="suspended"]').wait_for()
    page.locator("#run-cancel").click()
    cancelled = wait_run(daemon, run, lambda r: r["status"] == "cancelled", "Cancel cancelled the run")
    assert cancelled["error"] == "cancelled from the console" and cancelled["steps"]["done"]["status"] != "done"
    wait_state(daemon, task_id, "TASK_STATE_CANCELED")
    page.locator('.run-status[data-status="cancelled"]').wait_for()
    assert page.locator("#run-pause, #run-resume, #run-cancel, .send-signal").count() == 0


# ------------------------------------------------------------------------------------ subagents


def test_the_subagents_page_lists_a_spawned_subagent_and_kill_ends_it(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, mock="hello")
    run, _ = start(daemon, "delegate")
    done = wait_run(daemon, run, lambda r: r["status"] == "completed", "the delegate run completed")
    handle = done["steps"]["keep"]["output"]["handle"]
    assert op(daemon, "subagent.status", handle=handle)["status"] == "idle"  # warm: alive after its step
    page.goto(daemon.url + "/console/#/subagents")
    row = page.locator(f'.subagent[data-handle="{handle}"][data-status="idle"]')
    row.wait_for()
    # who spawned it (the run and its step), what it was told, what it answered
    assert run in row.locator(".spawned-by").inner_text() and "keep" in row.locator(".spawned-by").inner_text()
    assert f"Stay around for {run}" in row.inner_text() and HELLO in row.inner_text()
    screenshot(page, "subagents")
    row.locator("button.kill").click()
    page.locator(f'.subagent[data-handle="{handle}"][data-status="cancelled"]').wait_for()
    status = op(daemon, "subagent.status", handle=handle)
    assert status["status"] == "cancelled" and status["error"] == "killed from the console"
    assert page.locator(f'.subagent[data-handle="{handle}"] button.kill').count() == 0
