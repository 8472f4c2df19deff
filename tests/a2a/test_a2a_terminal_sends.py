"""A message naming a task that has ended is refused exactly as the a2a-sdk's handler refused it (-32004 "Task … is
in terminal state: TASK_STATE_…"), but by the daemon's send checks before the SDK runs: the SDK's refusal left a
background task behind per send (its ``ActiveTask`` event queues' dispatch loops), each destroyed while pending at
shutdown with an ``asyncio`` and an ``opentelemetry.context`` error line. Another principal's ended task stays
"Task … not found" (-32001), and the SDK's own earlier refusals (a contextId of another context, a negative
historyLength) keep their precedence."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD

pytestmark = [pytest.mark.timeout(120)]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def message(task_id: str, text: str = "again", **fields: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task_id, "parts": [{"text": text}], **fields}


def ended(task_id: str, state: str) -> dict[str, Any]:
    """The error the SDK's handler answered (a2a-sdk 1.3.0, ``ActiveTask.start``) for a message to the caller's own
    ended task, as observed on the wire before the fix (SendMessage and SendStreamingMessage alike):
    ``{"code": -32004, "message": "Task <id> is in terminal state: TASK_STATE_COMPLETED", "data": [{"@type":
    "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org",
    "metadata": {}}]}`` in an HTTP 200 ``application/json`` response (no SSE stream)."""
    return {
        "code": -32004,
        "message": f"Task {task_id} is in terminal state: {state}",
        "data": [
            {"@type": ERROR_INFO, "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org", "metadata": {}}
        ],
    }


def refused(daemon: Any, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """The error of a raw ``method`` call, checked to be a plain JSON-RPC error in an HTTP 200 JSON response."""
    response = daemon.rpc(method, params, token=token)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"} and body["id"] == 1, body
    return body["error"]


def stop_cleanly(daemon: Any) -> list[str]:
    """SIGTERM the daemon, wait for it, and return its stderr lines at level error (none is expected)."""
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    lines = [json.loads(line) for line in daemon.all_stderr() if line.startswith("{")]
    assert any(line.get("msg") == "stopped" for line in lines), lines[-5:]
    return [line for line in lines if line.get("level") == "error"]


def test_a_message_to_an_ended_task_is_refused_as_before_and_leaks_nothing(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello")
    task = daemon.send_text("hi")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id, context_id = task["id"], task["contextId"]
    expected = ended(task_id, "TASK_STATE_COMPLETED")
    assert refused(daemon, "SendMessage", {"message": message(task_id)}) == expected
    assert refused(daemon, "SendMessage", {"message": message(task_id, contextId=context_id)}) == expected
    assert refused(daemon, "SendStreamingMessage", {"message": message(task_id)}) == expected
    # the real CLI: refused, exit 1, naming the code and the SDK's message
    cli = subprocess.run(
        [ANYAGENTD, "a2a", "send", daemon.url, "again", "--task-id", task_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 1, (cli.stdout, cli.stderr)
    assert f"refused the message: {expected['code']}: {expected['message']}" in cli.stderr, cli.stderr
    # the SDK's own earlier refusals still come first (observed before the fix, both -32602)
    other = refused(daemon, "SendMessage", {"message": message(task_id, contextId="another")})
    assert other["code"] == -32602 and other["data"][0]["reason"] == "INVALID_PARAMS", other
    assert other["message"] == f"Context another does not match context {context_id} of task {task_id}"
    negative = refused(daemon, "SendMessage", {"message": message(task_id), "configuration": {"historyLength": -1}})
    assert negative["code"] == -32602 and negative["message"] == "history length must be non-negative", negative
    # nothing was touched: the task is as it ended, no other task was made
    got = daemon.rpc("GetTask", {"id": task_id}).json()["result"]
    assert got["status"] == task["status"] and len(got["history"]) == len(task["history"])
    assert [t["id"] for t in daemon.rpc("ListTasks").json()["result"]["tasks"]] == [task_id]
    assert stop_cleanly(daemon) == []


def test_another_principals_ended_task_stays_not_found(a2a_daemon: Any) -> None:
    config = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
[[a2a.principals]]
id = "bob"
bearer = "{{secret:BOB_TOKEN}}"
"""
    env = {"OP_TOKEN": "op-secret-1", "ALICE_TOKEN": "alice-secret-1", "BOB_TOKEN": "bob-secret-1"}
    daemon = a2a_daemon(config=config, env=env, mock="permission")
    alice = daemon.send_text("hi", token="alice-secret-1")
    assert alice["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = daemon.send_text("allow", token="alice-secret-1", task_id=alice["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    bob = daemon.send_text("hi", token="bob-secret-1")
    cancelled = daemon.rpc("CancelTask", {"id": bob["id"]}, token="bob-secret-1").json()["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    # the owner (and the operator) hear the SDK's terminal-state refusal, naming the state it ended in
    for token in ("alice-secret-1", "op-secret-1"):
        error = refused(daemon, "SendMessage", {"message": message(alice["id"])}, token=token)
        assert error == ended(alice["id"], "TASK_STATE_COMPLETED"), token
    error = refused(daemon, "SendStreamingMessage", {"message": message(bob["id"])}, token="bob-secret-1")
    assert error == ended(bob["id"], "TASK_STATE_CANCELED")
    # another principal learns nothing of it: the SDK's -32001, as observed before the fix
    for mine, theirs, token in ((alice, bob, "alice-secret-1"), (bob, alice, "bob-secret-1")):
        assert mine["id"] != theirs["id"]
        error = refused(daemon, "SendMessage", {"message": message(theirs["id"])}, token=token)
        assert error == {
            "code": -32001,
            "message": f"Task {theirs['id']} not found",
            "data": [{"@type": ERROR_INFO, "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org", "metadata": {}}],
        }
    assert stop_cleanly(daemon) == []
