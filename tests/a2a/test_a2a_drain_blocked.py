"""A drain answers every request blocked on a task op at once: SIGTERM while ``anyagentd a2a op … workflow.run`` (a
unary SendMessage that answers when its task stops or waits), a raw SendMessage and a SendStreamingMessage wait
on a run that waits for a signal. Each gets a JSON-RPC result, the task as it stands (WORKING: the run is
checkpointed), never HTTP 500; the daemon exits 0 at once (no uvicorn graceful timeout, no error line); after a
restart on the same state dir the run still waits and completes on ``workflow.signal go``
(``docs/a2a-tasks.md#drain``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import ANYAGENTD, COMMAND_URI, command_message, read_stream, wait_for, wait_state

pytestmark = pytest.mark.timeout(180)

OPERATOR, ALICE = "op-secret-d4a1", "alice-secret-d4a2"
ENV = {"OP_T": OPERATOR, "ALICE_T": ALICE}
CONFIG = """
[a2a]
bearer = "{{secret:OP_T}}"
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_T}}"

[[workflows]]
name = "pipe"
roles = ["user"]
[workflows.steps.go]
kind = "wait"
on = "signal"
signal = "go"
[workflows.steps.done]
kind = "finish"
depends_on = ["go"]
output = "{{steps.go.output}}"
"""


def command(daemon: Any, op: str, token: str = ALICE, **args: Any) -> dict[str, Any]:
    """The JSON-RPC reply body to a unary SendMessage of the command ``op``."""
    return daemon.rpc(
        "SendMessage", {"message": command_message(op, **args)}, token=token, headers={"A2A-Extensions": COMMAND_URI}
    ).json()


def runs_of(daemon: Any) -> list[dict[str, Any]]:
    return command(daemon, "workflow.status")["result"]["message"]["parts"][0]["data"]["runs"]


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "A2A-Extensions": COMMAND_URI}


def blocked_unary(url: str, into: dict[str, Any]) -> None:
    """SendMessage ``workflow.run`` (no returnImmediately: blocks until the task stops or waits)."""
    body = {
        "jsonrpc": "2.0",
        "id": "unary",
        "method": "SendMessage",
        "params": {"message": command_message("workflow.run", workflow="pipe")},
    }
    try:
        response = httpx.post(url + "/", json=body, headers=headers(ALICE), timeout=60)
        into["status"], into["body"] = response.status_code, response.text
    except httpx.HTTPError as err:
        into["error"] = repr(err)


def blocked_stream(url: str, into: dict[str, Any]) -> None:
    """SendStreamingMessage ``workflow.run``: every frame's JSON-RPC body, until the stream ends."""
    body = {
        "jsonrpc": "2.0",
        "id": "stream",
        "method": "SendStreamingMessage",
        "params": {"message": command_message("workflow.run", workflow="pipe")},
    }
    read_stream(url + "/", body, headers(ALICE), into)


def test_sigterm_answers_blocked_task_ops_with_the_task_as_it_stands(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    cli = subprocess.Popen(
        [ANYAGENTD, "a2a", "op", daemon.url, "workflow.run", "--arg", "workflow=pipe", "--token", ALICE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("ANYAGENTD_A2A_")},
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        },
    )
    unary: dict[str, Any] = {}
    stream: dict[str, Any] = {}
    clients = [
        threading.Thread(target=blocked_unary, args=(daemon.url, unary), daemon=True),
        threading.Thread(target=blocked_stream, args=(daemon.url, stream), daemon=True),
    ]
    try:
        # one client at a time, each blocked once its run waits for the signal: the first sends of a fresh daemon
        # at the same instant race on creating the push-config table (an error line that is not the drain's)
        suspended = lambda: [r for r in runs_of(daemon) if r["status"] == "suspended"]  # noqa: E731
        wait_for(lambda: len(suspended()) == 1, "the CLI's run waits")
        for count, client in enumerate(clients, start=2):
            client.start()
            wait_for(lambda count=count: len(suspended()) == count, f"{count} runs wait")
        runs = suspended()
        assert len(runs) == 3 and len(runs_of(daemon)) == 3, runs
        wait_for(lambda: len(stream.get("frames", [])) >= 2, "the stream's first frames")
        assert cli.poll() is None and "status" not in unary and "ended" not in stream

        daemon.signal(signal.SIGTERM)
        drained_at = time.monotonic()
        assert daemon.wait(timeout=30) == 0
        took = time.monotonic() - drained_at
        out, err = cli.communicate(timeout=30)
        for client in clients:
            client.join(timeout=30)
    finally:
        cli.kill()
    logged = daemon.all_stderr()
    errors = [line for line in logged if '"level":"error"' in line.replace(" ", "")]
    assert not errors, "\n".join(errors)
    assert took < 5, f"the drain took {took:.1f} s (uvicorn's graceful timeout is 5 s)"

    # the raw unary send: a JSON-RPC result, the run's task as it stands (WORKING, the run's DataPart)
    assert unary.get("status") == 200, unary
    task = json.loads(unary["body"])["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING", task
    assert task["metadata"]["op"] == "workflow.run:pipe"
    # the stream ended after its frames, each a JSON-RPC result; the last is the drain's status: still WORKING,
    # saying the daemon stops and keeps the work (the SDK serves the task's stream, so the drain ends it with a
    # status update of the task, no longer with a Task of its own)
    assert stream.get("status") == 200 and stream.get("ended"), stream
    assert all("result" in frame for frame in stream["frames"]), stream["frames"]
    last = stream["frames"][-1]["result"]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_WORKING", last
    assert "daemon is stopping" in last["status"]["message"]["parts"][0]["text"], last
    [data] = [p["data"] for p in task["status"]["message"]["parts"] if "data" in p]
    assert data["run"] in {r["run"] for r in runs} and data["status"] == "suspended", data
    assert "daemon is stopping" in task["status"]["message"]["parts"][0]["text"], task
    # the CLI got that answer, not an HTTP 500 (nor any refusal): one line, exit 1. It follows a task that has
    # not stopped with GetTask (client.py); once the drained daemon is gone it says the task was still working
    # and that the daemon keeps it
    lines = err.strip().splitlines()
    assert cli.returncode == 1 and out == "" and len(lines) == 1, (cli.returncode, out, err)
    assert "HTTP 500" not in err and "refused" not in err and "Traceback" not in err, err
    assert "was still working when" in lines[0] and "the daemon keeps it" in lines[0], lines

    # after a restart on the same state dir every run still waits, and completes on the signal
    again = a2a_daemon(config=CONFIG, env=ENV, mock="hello", state_dir=daemon.state_dir)
    waiting = wait_for(lambda: [r for r in runs_of(again) if r["status"] == "suspended"], "the resumed runs")
    assert sorted(r["run"] for r in waiting) == sorted(r["run"] for r in runs)
    signalled = command(again, "workflow.signal", OPERATOR, name="go", payload={"n": 1})
    assert signalled["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", signalled
    for run in runs:
        done = wait_for(
            lambda run=run: [r for r in runs_of(again) if r["run"] == run["run"] and r["status"] == "completed"],
            f"run {run['run']} completed",
        )
        assert done[0]["output"]["payload"] == {"n": 1}, done
    wait_state(again, task["id"], "TASK_STATE_COMPLETED", token=ALICE)


def test_the_drain_answers_a_request_serving_a_task_ops_task() -> None:
    """A request serving a long-running op's task (its start, an answer's, a CancelTask's) returns once the drain
    is requested, whatever the op does, after one status saying the daemon stops (the task still WORKING, the last
    progress's data kept); the op's writer goes on until the daemon stops."""
    import anyio
    from a2a.types import Task, TaskStatusUpdateEvent

    from anyagentd.ops import Progress
    from anyagentd_a2a.lifecycle import Lifecycle
    from anyagentd_a2a.principals import OPERATOR as OPERATOR_PRINCIPAL
    from anyagentd_a2a.tasks.optasks import DRAIN_NOTE, OpTasks, PreparedOp
    from anyagentd_a2a.tasks.state import WORKING

    class Events:
        """An SDK event queue's one method this writer uses: what was put, in order."""

        def __init__(self) -> None:
            self.put: list[object] = []

        async def enqueue_event(self, event: object) -> None:
            self.put.append(event)

    async def forever():  # type: ignore[no-untyped-def]
        yield Progress("working", text="started", data={"run": "r1", "status": "suspended"})
        await anyio.sleep_forever()

    async def main() -> None:
        lifecycle = Lifecycle()
        events = Events()
        async with anyio.create_task_group() as tg:
            ops = OpTasks(None, tg.start_soon, lifecycle.drain_requested)
            prepared = PreparedOp("t1", "c1", OPERATOR_PRINCIPAL, {"op": "x"}, progress=forever())
            with anyio.fail_after(5):
                served = anyio.Event()

                async def serve() -> None:
                    await ops.start(prepared, None, events)  # type: ignore[arg-type]
                    served.set()

                tg.start_soon(serve)
                while len(events.put) < 2:  # the task, then the op's first progress
                    await anyio.sleep(0.01)
                await anyio.wait_all_tasks_blocked()
                assert not served.is_set()
                lifecycle.request_drain("test")
                await served.wait()
            task, first, note = events.put
            assert isinstance(task, Task) and task.status.state == WORKING
            assert isinstance(note, TaskStatusUpdateEvent) and note.status.state == WORKING
            assert note.status.message.parts[0].text == DRAIN_NOTE
            assert note.status.message.parts[1].data.struct_value["run"] == "r1"
            assert ops.get("t1") is not None  # the writer goes on
            tg.cancel_scope.cancel()

    anyio.run(main)
