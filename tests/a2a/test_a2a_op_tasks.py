"""A task op's task is served by the SDK's request handler like a conversation's (``docs/a2a-tasks.md``, "One way
in"): SubscribeToTask on a workflow run's task streams the run's progress to its end, and so it does for a run a
restart resumed; a message to a run's task that waits for no answer is refused before anything is stored."""

from __future__ import annotations

import signal
import threading
import uuid
from typing import Any

import httpx
import pytest
from a2a_helpers import COMMAND_URI, command_message, read_stream, wait_for

pytestmark = pytest.mark.timeout(120)

ALICE = "alice-secret-7c1e"
ENV = {"ALICE_T": ALICE}
CONFIG = """
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_T}}"
grants = ["workflow.signal"]

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


def headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ALICE}", "A2A-Version": "1.0", "A2A-Extensions": COMMAND_URI}


def rpc(daemon: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(daemon.url + "/", json=body, headers=headers(), timeout=60).json()


def start_run(daemon: Any) -> dict[str, Any]:
    """``workflow.run`` of ``pipe`` with returnImmediately: its task, WORKING (the run waits for ``go``)."""
    reply = rpc(
        daemon,
        "SendMessage",
        {"message": command_message("workflow.run", workflow="pipe"), "configuration": {"returnImmediately": True}},
    )
    return reply["result"]["task"]


def suspended(daemon: Any) -> list[dict[str, Any]]:
    reply = rpc(daemon, "SendMessage", {"message": command_message("workflow.status")})
    return [r for r in reply["result"]["message"]["parts"][0]["data"]["runs"] if r["status"] == "suspended"]


def subscribe(daemon: Any, task_id: str, into: dict[str, Any]) -> None:
    """SubscribeToTask: every frame's JSON-RPC body into ``into["frames"]`` until the stream ends."""
    body = {"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": {"id": task_id}}
    read_stream(daemon.url + "/", body, headers(), into)


def signal_and_follow(daemon: Any, task_id: str) -> list[dict[str, Any]]:
    """Subscribe to the run's task, signal ``go`` once the subscription has its first frame, and return the frames
    the subscription got until it ended."""
    got: dict[str, Any] = {}
    reader = threading.Thread(target=subscribe, args=(daemon, task_id, got), daemon=True)
    reader.start()
    wait_for(lambda: got.get("frames") or got.get("error"), "the subscription's first frame")
    assert "error" not in got, got
    signalled = rpc(daemon, "SendMessage", {"message": command_message("workflow.signal", name="go", payload={"n": 1})})
    assert "result" in signalled, signalled
    reader.join(timeout=60)
    assert got.get("ended") and "error" not in got, got
    return [frame["result"] for frame in got["frames"]]


def test_subscribe_to_a_run_task_streams_the_run_to_its_end(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    task = start_run(daemon)
    wait_for(lambda: suspended(daemon), "the run waits for its signal")
    frames = signal_and_follow(daemon, task["id"])
    assert frames[0]["task"]["id"] == task["id"], frames[0]  # the task as it stands, first
    states = [f["statusUpdate"]["status"]["state"] for f in frames if "statusUpdate" in f]
    assert states[-1] == "TASK_STATE_COMPLETED", frames
    [artifact] = [f["artifactUpdate"]["artifact"] for f in frames if "artifactUpdate" in f]
    assert artifact["artifactId"] == f"{task['id']}.result"
    assert artifact["parts"][0]["data"]["payload"] == {"n": 1}, artifact  # the run's output: what `go` got


def test_subscribe_to_a_resumed_run_task_after_a_restart(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    task = start_run(daemon)
    wait_for(lambda: suspended(daemon), "the run waits for its signal")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    again = a2a_daemon(config=CONFIG, env=ENV, mock="hello", state_dir=daemon.state_dir)
    wait_for(lambda: suspended(again), "the resumed run waits for its signal")
    frames = signal_and_follow(again, task["id"])
    states = [f["statusUpdate"]["status"]["state"] for f in frames if "statusUpdate" in f]
    assert states[-1] == "TASK_STATE_COMPLETED", frames
    stored = rpc(again, "GetTask", {"id": task["id"]})["result"]
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED", stored


def test_a_message_to_a_run_task_that_waits_for_no_answer_is_refused(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    task = start_run(daemon)
    wait_for(lambda: suspended(daemon), "the run waits for its signal")
    before = rpc(daemon, "GetTask", {"id": task["id"]})["result"]
    sent = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "allow"}]}
    refused = rpc(daemon, "SendMessage", {"message": sent})
    assert refused["error"]["code"] == -32004 and "waits for no answer" in refused["error"]["message"], refused
    after = rpc(daemon, "GetTask", {"id": task["id"]})["result"]
    assert after == before  # nothing stored: the message is not in its history
