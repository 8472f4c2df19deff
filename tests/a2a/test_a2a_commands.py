"""The command extension over a real ``anyagentd a2a`` (uvicorn on 127.0.0.1): activation, the refusals in order
(each proved to change nothing), the role × op matrix, message and task replies (validated against the seed
schema), streamed reads as one frame, the ops of this issue (status, config, plan.get, conversation.get,
debug.events, admin.*), the card's ops, and a third-party op family (tests/plugins/acme_ops)."""

from __future__ import annotations

import json
import signal
import uuid
from functools import cache
from importlib import resources
from typing import Any

import httpx
import jsonschema
import pytest
from a2a_helpers import wait_state, wait_task

pytestmark = pytest.mark.timeout(120)

URI = "https://agentd.dev/a2a/ext/command"
OPERATOR, ALICE, BOB, BOT = "op-secret-7f3a", "alice-secret-91c2", "bob-secret-44d0", "bot-secret-0b1e"
CONFIG = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
grants = ["*"]
[[a2a.principals]]
id = "bob"
bearer = "{{secret:BOB_TOKEN}}"
[[a2a.principals]]
id = "bot"
role = "agent"
bearer = "{{secret:BOT_TOKEN}}"
grants = ["acme.touch"]
"""
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB, "BOT_TOKEN": BOT}


@cache
def schema() -> dict[str, Any]:
    return json.loads((resources.files("anyagentd") / "schema" / "agentd-command.schema.json").read_text())


def validate_result(op: str, value: Any) -> None:
    """``value`` against the seed schema's result of ``op``."""
    defs = schema()["$defs"]
    entry = defs["ops"].get(op) or defs["reserved"][op]
    jsonschema.validate(value, {**entry["result"], "$defs": defs}) if entry["result"] is not False else None


def validate_envelope(envelope: dict[str, Any]) -> None:
    jsonschema.validate({"agentd": envelope}, schema())


def command(
    daemon: Any,
    op: str,
    *,
    token: str | None,
    header: bool = True,
    mark: bool = True,
    stream: bool = False,
    modes: list[str] | None = None,
    task_id: str | None = None,
    extra_parts: list[dict[str, Any]] | None = None,
    **args: Any,
) -> httpx.Response:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"agentd": {"op": op, **args}}, "mediaType": "application/json"}, *(extra_parts or [])],
    }
    if mark:
        message["extensions"] = [URI]
    if task_id:
        message["taskId"] = task_id
    params: dict[str, Any] = {"message": message}
    if modes is not None:
        params["configuration"] = {"acceptedOutputModes": modes}
    headers = {"A2A-Extensions": URI} if header else {}
    return daemon.rpc("SendStreamingMessage" if stream else "SendMessage", params, token=token, headers=headers)


def result_of(response: httpx.Response, op: str) -> Any:
    """A message op's result document (checked: a Message, ROLE_AGENT, one JSON DataPart, the URI marked)."""
    body = response.json()
    assert "result" in body, body
    message = body["result"]["message"]
    assert message["role"] == "ROLE_AGENT" and message["extensions"] == [URI]
    [part] = message["parts"]
    assert part["mediaType"] == "application/json"
    validate_result(op, part["data"])
    return part["data"]


def task_result(response: httpx.Response, op: str) -> tuple[dict[str, Any], Any]:
    """A task op's Task and its result artifact's data (``None`` when the op has no result)."""
    body = response.json()
    assert "result" in body, body
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    artifacts = task.get("artifacts", [])
    if not artifacts:
        return task, None
    [artifact] = artifacts
    assert artifact["name"] == f"{task['id']}.result" and artifact["extensions"] == [URI]
    data = artifact["parts"][0]["data"]
    validate_result(op, data)
    return task, data


def reason(response: httpx.Response) -> tuple[int, str]:
    error = response.json()["error"]
    info = next(d for d in error["data"] if d["@type"].endswith("ErrorInfo"))
    return error["code"], info["reason"]


def tasks(daemon: Any) -> list[str]:
    return [t["id"] for t in daemon.rpc("ListTasks", {}, token=OPERATOR).json()["result"].get("tasks", [])]


@pytest.fixture
def daemon(a2a_daemon: Any) -> Any:
    return a2a_daemon(config=CONFIG, env=ENV, mock="permission")


def test_refusals_in_order_and_nothing_changes(daemon: Any) -> None:
    before = tasks(daemon)
    paused = lambda: result_of(command(daemon, "status", token=OPERATOR), "status")["paused"]  # noqa: E731
    cases = [
        (dict(header=False), (-32602, "EXTENSION_NOT_ACTIVATED")),
        (dict(mark=False), (-32602, "EXTENSION_NOT_MARKED")),
        (dict(extra_parts=[{"data": {"agentd": {"op": "status"}}}]), (-32602, "COMMAND_ENVELOPE_AMBIGUOUS")),
        (dict(task_id="t-1"), (-32602, "COMMAND_TASK_ID")),
        (dict(modes=["text/plain"]), (-32005, "CONTENT_TYPE_NOT_SUPPORTED")),
    ]
    for kwargs, expected in cases:
        response = command(daemon, "admin.pause", token=OPERATOR, **kwargs)
        assert reason(response) == expected, response.json()
    assert reason(command(daemon, "no.such.op", token=OPERATOR)) == (-32602, "UNKNOWN_OP")
    assert reason(command(daemon, "", token=OPERATOR)) == (-32602, "UNKNOWN_OP")
    bad = command(daemon, "admin.pause", token=OPERATOR, color="red", reason=5)
    assert reason(bad) == (-32602, "INVALID_COMMAND_ARGS")
    violations = {
        v["field"] for d in bad.json()["error"]["data"] if "fieldViolations" in d for v in d["fieldViolations"]
    }
    assert violations == {"color", "reason"}
    denied = command(daemon, "admin.pause", token=ALICE)
    assert denied.status_code == 403 and reason(denied) == (-31403, "PERMISSION_DENIED")
    assert reason(command(daemon, "debug.events", token=OPERATOR)) == (-32004, "INTROSPECTION_DISABLED")
    assert tasks(daemon) == before, "no refused command created a task"
    assert paused() is False, "no refused admin.pause paused the instance"


def test_role_by_op_matrix(daemon: Any) -> None:
    # (op, args): operator, user with ["*"], user with no grants, agent with a grant, unknown bearer, anonymous
    allowed = {
        "status": ("ok", "ok", "ok", "ok"),
        "config": ("ok", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED"),
        "plan.get": ("NOT_FOUND", "NOT_FOUND", "NOT_FOUND", "PERMISSION_DENIED"),
        "admin.resume": ("ok", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED"),
        "_instance.result": ("NOT_FOUND", "UNKNOWN_OP", "UNKNOWN_OP", "UNKNOWN_OP"),
        "acme.touch": ("ok", "ok", "PERMISSION_DENIED", "ok"),
    }
    args = {"_instance.result": {"handle": "sa-x"}, "acme.touch": {"label": "abc"}}
    for op, row in allowed.items():
        for token, expected in zip((OPERATOR, ALICE, BOB, BOT), row, strict=True):
            response = command(daemon, op, token=token, **args.get(op, {}))
            body = response.json()
            got = (
                "ok"
                if "result" in body
                else next(d["reason"] for d in body["error"]["data"] if d["@type"].endswith("ErrorInfo"))
            )
            assert got == expected, (op, token, body)
        assert command(daemon, op, token="not-a-token").status_code == 401
    # anonymous: credentials are configured, so nobody is the implicit operator
    assert command(daemon, "status", token=None).status_code == 401


def test_message_ops_answer_a_message_and_create_no_task(daemon: Any) -> None:
    before = tasks(daemon)
    status = result_of(command(daemon, "status", token=ALICE), "status")
    assert status["model"] == "mock" and status["draining"] is False and status["conversations"] == []
    config = result_of(command(daemon, "config", token=OPERATOR), "config")["config"]
    assert config["a2a"]["bearer"] == "{{secret:OP_TOKEN}}"
    assert config["agent"]["mock_script"] == "permission"  # the effective one: --mock on the command line
    assert [p["bearer"] for p in config["a2a"]["principals"]] == [
        "{{secret:ALICE_TOKEN}}",
        "{{secret:BOB_TOKEN}}",
        "{{secret:BOT_TOKEN}}",
    ]
    streamed = command(daemon, "status", token=ALICE, stream=True)
    frames = [line for line in streamed.text.splitlines() if line.startswith("data:")]
    assert len(frames) == 1, "a streamed read is exactly one frame"
    assert json.loads(frames[0][5:])["result"]["message"]["extensions"] == [URI]
    assert streamed.headers["A2A-Extensions"] == URI
    assert tasks(daemon) == before


def test_conversations_in_status_plan_and_transcript(daemon: Any) -> None:
    task = daemon.send_text("write hello.txt", token=ALICE, context_id="ctx-a")
    wait_state(daemon, task["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE)
    status = result_of(command(daemon, "status", token=ALICE), "status")
    [conversation] = status["conversations"]
    assert conversation["contextId"] == "ctx-a" and conversation["principal"] == "user:alice"
    assert conversation["plan"] == "0/2 done" and conversation["turns"] == 1
    [activity] = status["activity"]
    assert activity["task"] == task["id"] and activity["phase"] == "needs_input" and activity["tool"]
    assert result_of(command(daemon, "status", token=BOB), "status")["conversations"] == []  # not his
    assert len(result_of(command(daemon, "status", token=OPERATOR), "status")["conversations"]) == 1
    plan = result_of(command(daemon, "plan.get", token=ALICE, id="ctx-a"), "plan.get")
    assert plan["progress"] == "0/2 done" and plan["plan"]["entries"][0]["text"] == "Write hello.txt"
    assert reason(command(daemon, "plan.get", token=BOB, id="ctx-a")) == (-32001, "NOT_FOUND")
    # introspection follows admin.set: -32004 -> works -> -32004
    assert reason(command(daemon, "conversation.get", token=ALICE, id="ctx-a")) == (-32004, "INTROSPECTION_DISABLED")
    _, value = task_result(
        command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection.enabled", value=True), "admin.set"
    )
    assert value == {"path": "a2a.introspection.enabled", "value": True}
    got = result_of(command(daemon, "conversation.get", token=ALICE, id="ctx-a", limit=2), "conversation.get")
    assert got["conversation"]["total_messages"] >= 3 and len(got["conversation"]["messages"]) == 2
    assert got["conversation"]["messages"][0]  # the newest two
    # the a2a-sdk's client sends an envelope through a protobuf Struct, so 2 arrives as 2.0: the same argument
    as_sent = result_of(command(daemon, "conversation.get", token=ALICE, id="ctx-a", limit=2.0), "conversation.get")
    assert as_sent["conversation"]["messages"] == got["conversation"]["messages"]
    assert reason(command(daemon, "conversation.get", token=ALICE, id="ctx-a", limit=2.5)) == (
        -32602,
        "INVALID_COMMAND_ARGS",
    )
    events = result_of(command(daemon, "debug.events", token=OPERATOR, limit=500), "debug.events")
    assert events["events"] and events["newest_seq"] >= events["oldest_seq"] >= 1
    assert reason(command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection.enabled", value="true")) == (
        -32602,
        "INVALID_COMMAND_ARGS",
    )
    task_result(
        command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection.enabled", value=False), "admin.set"
    )
    assert reason(command(daemon, "conversation.get", token=ALICE, id="ctx-a")) == (-32004, "INTROSPECTION_DISABLED")


def test_pause_holds_new_turns_and_resume_releases_them(daemon: Any) -> None:
    task, value = task_result(command(daemon, "admin.pause", token=OPERATOR, reason="maintenance"), "admin.pause")
    assert value == {"ok": True, "state": "paused", "reason": "maintenance"}
    assert task["id"] in tasks(daemon), "a task op's task is stored"
    got = daemon.rpc("GetTask", {"id": task["id"]}, token=OPERATOR).json()["result"]
    assert got["artifacts"][0]["name"] == f"{task['id']}.result" and got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result_of(command(daemon, "status", token=OPERATOR), "status")["paused"] is True
    held = daemon.send_text(
        "write hello.txt", token=ALICE, context_id="held", configuration={"returnImmediately": True}
    )
    said = wait_task(daemon, held["id"], lambda t: t["status"].get("message"), "the held task says why", token=ALICE)
    assert said["status"]["state"] == "TASK_STATE_SUBMITTED"  # queued: nothing new starts
    # it names the pause, not a queue of the conversation's prompts (issue 25)
    assert said["status"]["message"]["parts"][0]["text"] == (
        "The instance is paused by the operator (maintenance); this prompt runs when it is resumed."
    )
    _, resumed = task_result(command(daemon, "admin.resume", token=OPERATOR), "admin.resume")
    assert resumed == {"ok": True, "state": "running"}
    assert result_of(command(daemon, "status", token=OPERATOR), "status")["paused"] is False
    wait_state(daemon, held["id"], "TASK_STATE_INPUT_REQUIRED", token=ALICE)  # it ran once resumed
    assert reason(command(daemon, "admin.pause", token=OPERATOR, run="nope-01")) == (-32001, "NOT_FOUND")


def test_third_party_ops_on_the_card_and_validated(daemon: Any) -> None:
    card = httpx.get(daemon.url + "/.well-known/agent-card.json").json()
    params = card["capabilities"]["extensions"][0]["params"]
    ops = {o["op"]: o["reply"] for o in params["ops"]}
    assert ops["acme.echo"] == "message" and ops["acme.touch"] == "task" and ops["status"] == "message"
    assert not any(op.startswith("_instance") for op in ops), "reserved ops are never listed"
    assert httpx.get(params["schema"]).json()["$id"] == schema()["$id"]
    extended = daemon.rpc("GetExtendedAgentCard", {}, token=BOB).json()["result"]
    mine = {o["op"] for o in extended["capabilities"]["extensions"][0]["params"]["ops"]}
    assert "status" in mine and "acme.echo" in mine and "config" not in mine and "acme.touch" not in mine
    operator = daemon.rpc("GetExtendedAgentCard", {}, token=OPERATOR).json()["result"]
    assert operator["capabilities"]["extensions"][0]["params"]["settable"] == [
        "agent.approval",
        "a2a.introspection.enabled",
    ]
    echo = command(daemon, "acme.echo", token=BOB, text="hi", times=2).json()["result"]["message"]
    assert echo["parts"][0]["data"] == {"text": "hi hi", "principal": "user:bob"}
    assert reason(command(daemon, "acme.echo", token=BOB, text="hi", times="2")) == (-32602, "INVALID_COMMAND_ARGS")
    assert reason(command(daemon, "acme.echo", token=BOB, text="hi", loud=True)) == (-32602, "INVALID_COMMAND_ARGS")
    touched = command(daemon, "acme.touch", token=BOT, label="abc").json()["result"]["task"]
    assert touched["artifacts"][0]["parts"][0]["data"] == {"touched": "abc"}


def test_an_uninstalled_family_answers_unknown_op(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env={**ENV, "ANYAGENTD_DISABLE_PLUGINS": "a2a-admin,acme_ops"}, mock="hello")
    assert reason(command(daemon, "admin.pause", token=OPERATOR)) == (-32602, "UNKNOWN_OP")
    assert reason(command(daemon, "acme.echo", token=OPERATOR, text="x")) == (-32602, "UNKNOWN_OP")
    ops = {
        o["op"]
        for o in httpx.get(daemon.url + "/.well-known/agent-card.json").json()["capabilities"]["extensions"][0][
            "params"
        ]["ops"]
    }
    assert "admin.pause" not in ops and "acme.echo" not in ops and "status" in ops


def test_secrets_reach_no_reply_log_or_debug_events(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG + "\n", env=ENV, mock="hello")
    command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection.enabled", value=True)
    daemon.rpc(
        "SendMessage",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
        token="wrong-" + ALICE,
    )  # a bad credential is logged
    replies = [
        command(daemon, "config", token=OPERATOR).text,
        command(daemon, "debug.events", token=OPERATOR, limit=500).text,
        command(daemon, "status", token=OPERATOR).text,
    ]
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    logs = "".join(daemon.stderr)
    for secret in ENV.values():
        for text in [*replies, logs]:
            assert secret not in text


def test_drain_under_a_running_turn_exits_0_and_loses_nothing(a2a_daemon: Any, tmp_path: Any) -> None:
    from a2a_helpers import SLOW

    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock=str(script))
    task = daemon.send_text("go", token=ALICE, context_id="c", configuration={"returnImmediately": True})
    wait_state(daemon, task["id"], "TASK_STATE_WORKING", token=ALICE)
    _, value = task_result(command(daemon, "admin.drain", token=OPERATOR, reason="upgrade"), "admin.drain")
    assert value == {"ok": True, "state": "draining", "reason": "upgrade"}
    assert daemon.wait(timeout=60) == 0
    restarted = a2a_daemon(config=CONFIG, env=ENV, mock="hello", state_dir=daemon.state_dir)
    got = restarted.rpc("GetTask", {"id": task["id"]}, token=ALICE).json()["result"]
    assert got["status"]["state"] in ("TASK_STATE_CANCELED", "TASK_STATE_COMPLETED")
