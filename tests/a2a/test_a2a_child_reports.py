"""A child instance that reports: two real daemons on loopback (uvicorn on 127.0.0.1), the scripted ``mock`` agent
on both. The parent's workflow delegates to the child (``[[subagents.instances]] reports = true``); the parent
sends without waiting for the child's task, so only the child's ``_instance.result`` (sent with the official
a2a-sdk client and the parent's operator credential, ``[[subagents.parents]]``) completes the handle, and its
``_instance.emit`` events land in the parent's ``subagent.get``, beside a local subagent's own. A non-operator
calling the reserved ops is refused before any task exists; a warm child's later answers come back the same way;
without a report the handle never takes the child's reply, and of a report and a reply the first is kept; an
unreachable parent costs the child one log line per task and nothing else, and SIGHUP changes whom the child reports
to. Every reply is validated against the seed schema."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import listed_tasks, wait_state
from test_a2a_commands import ALICE, BOB, OPERATOR, command, reason, result_of, task_result, tasks, validate_envelope
from test_a2a_subagents_live import ENV as PARENT_ENV
from test_a2a_subagents_live import config, emit
from test_a2a_workflows import start_run

pytestmark = pytest.mark.timeout(180)

CHILD = "child-secret-5d21"
TOOL = {"id": "t1", "kind": "Read", "title": "Read notes.txt", "status": "Running"}
ANSWER = "The notes say: ship it."


def turn(text: str, *, sleep_ms: int = 0) -> list[dict[str, Any]]:
    """A mock turn: a tool that runs (for ``sleep_ms``) and completes, ``text`` in two deltas, then the end."""
    half = len(text) // 2
    return [
        {"Emit": {"ToolUpdated": TOOL}},
        *([{"Sleep": sleep_ms}] if sleep_ms else []),
        {"Emit": {"ToolUpdated": {**TOOL, "status": "Completed"}}},
        {"Emit": {"TextDelta": {"message_id": "m1", "text": text[:half]}}},
        {"Emit": {"TextDelta": {"message_id": "m1", "text": text[half:]}}},
        {"Emit": {"MessageEnded": {"message_id": "m1"}}},
        {"End": {"Completed": {"source": "Protocol"}}},
    ]


def free_port() -> int:
    """A loopback port free now (the parent's: the child's configuration names the parent's URL before it
    starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def parent_config(work: Path, child_url: str, limits: str = "", *, reports: bool = True) -> str:
    """The live subagent tests' parent (operator, alice, bob; subagents on, the mock agent) with the reporting
    child and a workflow that delegates to it (sync, then warm), then starts a local subagent."""
    return config(
        work,
        f"""{limits}
[[subagents.instances]]
name = "child"
url = "{child_url}"
bearer = "{{{{secret:CHILD_TOKEN}}}}"
reports = {"true" if reports else "false"}
[[workflows]]
name = "delegate"
roles = ["user"]
[workflows.steps.ask]
kind = "subagent"
agent = "child"
instruction = "Read the notes."
[workflows.steps.keep]
kind = "subagent"
agent = "child"
instruction = "Stay around."
mode = "warm"
depends_on = ["ask"]
[workflows.steps.mine]
kind = "subagent"
agent = "mock"
instruction = "Read them here too."
mode = "async"
depends_on = ["keep"]
[workflows.steps.done]
kind = "finish"
depends_on = ["mine"]
output = "{{{{steps.ask.output.result}}}}"
""",
        agent="mock",
    )


def integral_floats(value: Any) -> list[float]:
    """The floats holding whole numbers anywhere in ``value`` (what a protobuf Struct makes of an int)."""
    if isinstance(value, float):
        return [value] if value.is_integer() else []
    if isinstance(value, dict):
        return [f for v in value.values() for f in integral_floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in integral_floats(v)]
    return []


def child_config(parent_url: str) -> str:
    return f"""
[a2a]
bearer = "{{{{secret:CHILD_TOKEN}}}}"
[[subagents.parents]]
url = "{parent_url}"
bearer = "{{{{secret:PARENT_TOKEN}}}}"
"""


def script(tmp_path: Path, name: str, *turns: list[dict[str, Any]]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"turns": list(turns)}))
    return str(path)


def get(daemon: Any, handle: str, token: str = ALICE) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``subagent.get``: the record (validated) and the events its reply carries beside it."""
    response = command(daemon, "subagent.get", token=token, handle=handle)
    record = result_of(response, "subagent.get")["subagent"]
    return record, response.json()["result"]["message"]["metadata"]["agentd"]["events"]


def child_handle(child: Any) -> tuple[str, str]:
    """The child's one task (its id) and its contextId: the parent's handle."""
    [task] = listed_tasks(child, CHILD)
    return task["id"], task["contextId"]


def test_the_childs_reports_complete_the_parents_handle(a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    port = free_port()
    parent_url = f"http://127.0.0.1:{port}"
    child = a2a_daemon(
        config=child_config(parent_url),
        env={"CHILD_TOKEN": CHILD, "PARENT_TOKEN": OPERATOR},
        mock=script(tmp_path, "child", turn(ANSWER, sleep_ms=2500), turn("Second answer.")),
    )
    parent = a2a_daemon(
        config=parent_config(work, child.url),
        env={**PARENT_ENV, "CHILD_TOKEN": CHILD},
        listen=f"127.0.0.1:{port}",
        mock=script(tmp_path, "parent", turn("Here too.")),
    )
    assert parent.url == parent_url
    task = start_run(parent, ALICE, workflow="delegate")
    child_task, handle = child_handle(child)
    # while the child works, the handle runs: an activity row of its owner, showing the tool its events say runs
    deadline, row = time.monotonic() + 10, {}
    while row.get("tool") is None and time.monotonic() < deadline:
        row = next(
            r for r in result_of(command(parent, "status", token=ALICE), "status")["activity"] if r["id"] == handle
        )
    assert (row["phase"], row["round"], row["tool"]) == ("working", 1, "Read notes.txt"), row
    assert result_of(command(parent, "status", token=BOB), "status")["activity"] == []
    done = wait_state(parent, task["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=60)
    assert done["artifacts"][0]["parts"][0]["data"] == ANSWER  # the sync step's output: the reported result
    wait_state(child, child_task, "TASK_STATE_COMPLETED", token=CHILD)

    record, events = get(parent, handle)
    assert (record["status"], record["result"], record["attempt"], record["error"]) == ("completed", ANSWER, 1, None)
    assert record["requested_by"].startswith("delegate-")  # the run asked
    subjects = [(e["stream"], e["event"]["subject"]) for e in events]
    assert subjects == [
        ("events", "ToolUpdated"),
        ("events", "ToolUpdated"),
        ("events", "TextDelta"),
        ("events", "TurnEnded"),
    ], subjects
    assert events[2]["event"]["data"]["kind"]["TextDelta"]["text"] == ANSWER  # the deltas, gathered
    for entry in events:
        validate_envelope({"op": "_instance.emit", "handle": handle, **entry})  # as the child sent them
    # the numbers the wire types integer are ints again, as a local subagent's (the Struct made them doubles)
    assert integral_floats(events) == [] and isinstance(events[0]["event"]["data"]["sequence"], int), events[0]

    # the handle was completed by _instance.result: the parent did not wait for the child's task
    ran = result_of(command(parent, "debug.events", token=OPERATOR, prefix="command.ran", limit=500), "debug.events")
    reported = [e for e in ran["events"] if "_instance.result" in json.dumps(e)]
    assert len(reported) == 2 and all("operator" in json.dumps(e) for e in reported), ran["events"]  # ask, keep
    assert sum("_instance.emit" in json.dumps(e) for e in ran["events"]) == 2 * len(events)

    steps = result_of(command(parent, "run.get", token=ALICE, run=done["metadata"]["run"]), "run.get")["run"]["steps"]
    # a warm child: its first report left it idle; subagent.send's answer comes back by report too
    assert steps["ask"]["output"] == {"handle": handle, "result": ANSWER}  # a sync step names its subagent too
    warm = steps["keep"]["output"]
    assert warm["result"] == ANSWER
    _, ack = task_result(
        command(parent, "subagent.send", token=ALICE, handle=warm["handle"], message="More?"), "subagent.send"
    )
    assert ack == {"ok": True, "handle": warm["handle"]}
    deadline = time.monotonic() + 30
    while get(parent, warm["handle"])[0]["attempt"] < 2 or get(parent, warm["handle"])[0]["status"] != "idle":
        assert time.monotonic() < deadline, get(parent, warm["handle"])
        time.sleep(0.05)
    kept, warm_events = get(parent, warm["handle"])
    assert (kept["status"], kept["result"], kept["mode"]) == ("idle", "Second answer.", "warm")
    assert [e["event"]["subject"] for e in warm_events].count("TurnEnded") == 2

    # a local subagent's events: the same stream, the same reply
    local = steps["mine"]["output"]["handle"]
    deadline = time.monotonic() + 30
    while get(parent, local)[0]["status"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.05)
    mine, local_events = get(parent, local)
    assert mine["result"] == "Here too."
    assert [e["event"]["subject"] for e in local_events] == ["ToolUpdated", "ToolUpdated", "TextDelta", "TurnEnded"]
    assert {e["stream"] for e in local_events} == {"events"}

    # the owner only; the reserved ops refused to anyone else before any task exists, and they change nothing
    before = tasks(parent)
    for token in (ALICE, BOB):
        assert reason(command(parent, "_instance.result", token=token, handle=handle, output="forged")) == (
            -32602,
            "UNKNOWN_OP",
        )
        assert reason(emit(parent, token, handle, "events", {"subject": "forged"})) == (-32602, "UNKNOWN_OP")
    for handle_of in (handle, local):
        assert reason(command(parent, "subagent.get", token=BOB, handle=handle_of)) == (-32001, "NOT_FOUND")
    # a late report (the handle has its result) is refused and changes nothing
    late = command(parent, "_instance.result", token=OPERATOR, handle=handle, status="completed", output="late")
    assert reason(late) == (-32602, "INVALID_STATE") and "no turn of it waits" in late.json()["error"]["message"]
    # an oversized event is an argument refusal: before any task, nothing kept
    huge = emit(parent, OPERATOR, handle, "events", {"id": 1, "subject": "Custom", "data": {"text": "x" * 300_000}})
    assert reason(huge) == (-32602, "INVALID_COMMAND_ARGS") and "262144 bytes at most" in huge.text
    assert tasks(parent) == before
    assert get(parent, handle)[0]["result"] == ANSWER
    # a mirrored event's strings are cut at 2048 bytes, as a local one's
    emit(parent, OPERATOR, handle, "events", {"id": 2, "subject": "Custom", "data": {"text": "é" * 5000}})
    kept = get(parent, handle)[1][-1]["event"]["data"]["text"]
    assert len(kept.encode()) <= 2048 and kept.endswith("…") and len(kept) > 1000
    assert not any(secret in line for line in parent.stderr + child.stderr for secret in (CHILD, OPERATOR))


def report_lines(child: Any, expected: int) -> list[str]:
    """The child's "did not land" log lines, once there are ``expected`` (30 s at most), and a second later (the
    result is tried after the events: still one line per task)."""
    deadline = time.monotonic() + 30
    while len([line for line in child.stderr if "did not land" in line]) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    return [line for line in child.stderr if "did not land" in line]


def send_naming(child: Any, parent: str, handle: str) -> dict[str, Any]:
    """A message from the child's operator in the context ``handle`` whose metadata names ``parent``."""
    message = {
        "messageId": f"m-{handle}",
        "role": "ROLE_USER",
        "parts": [{"text": "Read the notes."}],
        "contextId": handle,
        "metadata": {"agentd": {"handle": handle, "parent": parent}},
    }
    task = child.rpc("SendMessage", {"message": message}, token=CHILD).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and ANSWER in json.dumps(task)
    return task


def test_an_unreachable_parent_costs_the_child_one_log_line(a2a_daemon: Any, tmp_path: Path) -> None:
    # the child names a parent nobody listens on; a message from its operator naming that parent runs as ever
    nobody, other = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    child = a2a_daemon(
        config=child_config(nobody),
        env={"CHILD_TOKEN": CHILD, "PARENT_TOKEN": OPERATOR},
        mock=script(tmp_path, "child", turn(ANSWER), turn(ANSWER), turn(ANSWER)),
    )
    shown = command(child, "config", token=CHILD)
    assert result_of(shown, "config")["config"]["subagents"]["parents"] == [
        {"url": nobody, "bearer": "{{secret:PARENT_TOKEN}}", "principal": "operator"}
    ]
    assert OPERATOR not in shown.text  # the parent's credential: its reference only
    send_naming(child, nobody + "/", "sa-01FIRST")  # a trailing slash names the same parent
    [said] = report_lines(child, 1)
    assert "sa-01FIRST" in said and nobody in said, said
    # SIGHUP: the parents configured now are the ones reported to
    (tmp_path / "config0.toml").write_text(child_config(other))
    child.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not any("configuration reloaded" in line for line in child.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    send_naming(child, nobody, "sa-02GONE")  # no longer a parent: no report
    send_naming(child, other, "sa-03OTHER")
    lines = report_lines(child, 2)
    assert len(lines) == 2 and "sa-03OTHER" in lines[1] and other in lines[1], lines
    assert not any(OPERATOR in line or CHILD in line for line in child.stderr)


def test_without_a_report_the_handle_never_takes_the_reply(a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    # the child does not know the parent: it answers, but reports nothing; the parent, told to expect reports,
    # does not take the child's reply for the result, and the turn times out saying what it waited for
    child = a2a_daemon(
        config='[a2a]\nbearer = "{{secret:CHILD_TOKEN}}"\n',
        env={"CHILD_TOKEN": CHILD},
        mock=script(tmp_path, "child", turn(ANSWER)),
    )
    parent = a2a_daemon(config=parent_config(work, child.url, "timeout = 3"), env={**PARENT_ENV, "CHILD_TOKEN": CHILD})
    task = start_run(parent, ALICE, workflow="delegate")
    child_task, handle = child_handle(child)
    wait_state(child, child_task, "TASK_STATE_COMPLETED", token=CHILD)
    wait_state(parent, task["id"], "TASK_STATE_FAILED", token=ALICE, timeout=30)
    record, events = get(parent, handle)
    assert (record["status"], record["result"], events) == ("failed", None, [])
    assert record["error"] == "timed out after 3 s waiting for the child's _instance.result"


def test_the_first_end_of_a_turn_is_kept(a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    # a child that does not report (reports = false): the parent waits for its reply, but an operator's
    # _instance.result while the turn runs ends it first; the sync step wakes on it, the reply changes nothing
    child = a2a_daemon(
        config='[a2a]\nbearer = "{{secret:CHILD_TOKEN}}"\n',
        env={"CHILD_TOKEN": CHILD},
        mock=script(tmp_path, "child", turn(ANSWER, sleep_ms=6000)),
    )
    parent = a2a_daemon(config=parent_config(work, child.url, reports=False), env={**PARENT_ENV, "CHILD_TOKEN": CHILD})
    task = start_run(parent, ALICE, workflow="delegate")
    child_task, handle = child_handle(child)
    _, none = task_result(
        command(parent, "_instance.result", token=OPERATOR, handle=handle, output="early"), "_instance.result"
    )
    assert none is None
    assert get(parent, handle)[0]["status"] == "completed"
    # a kill of a subagent that has ended leaves its record as it is, but cancels what still runs on the child
    _, ack = task_result(command(parent, "subagent.kill", token=ALICE, handle=handle, reason="enough"), "subagent.kill")
    assert ack == {"ok": True, "handle": handle}
    wait_state(child, child_task, "TASK_STATE_CANCELED", token=CHILD)
    deadline, done = time.monotonic() + 60, {}
    while done.get("status", {}).get("state") != "TASK_STATE_COMPLETED":  # the warm step's child takes 6 s
        assert time.monotonic() < deadline, done
        time.sleep(0.5)
        done = parent.rpc("GetTask", {"id": task["id"]}, token=ALICE).json()["result"]
    assert done["artifacts"][0]["parts"][0]["data"] == "early"  # the sync step woke on the report
    record, _ = get(parent, handle)
    assert (record["status"], record["result"], record["attempt"], record["error"]) == ("completed", "early", 1, None)


WAITS = [{"Emit": {"ToolUpdated": TOOL}}, {"Sleep": 60000}, {"End": {"Completed": {"source": "Protocol"}}}]
"""A child turn that outlasts any parent timeout here."""


def test_a_timed_out_child_is_cancelled_on_the_child(a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    # the child works on past the parent's timeout: the parent's turn fails, and the child's task is cancelled
    port = free_port()
    child = a2a_daemon(
        config=child_config(f"http://127.0.0.1:{port}"),
        env={"CHILD_TOKEN": CHILD, "PARENT_TOKEN": OPERATOR},
        mock=script(tmp_path, "child", WAITS),
    )
    parent = a2a_daemon(
        config=parent_config(work, child.url, "timeout = 3"),
        env={**PARENT_ENV, "CHILD_TOKEN": CHILD},
        listen=f"127.0.0.1:{port}",
    )
    task = start_run(parent, ALICE, workflow="delegate")
    child_task, handle = child_handle(child)
    failed = wait_state(parent, task["id"], "TASK_STATE_FAILED", token=ALICE, timeout=30)
    wait_state(child, child_task, "TASK_STATE_CANCELED", token=CHILD, timeout=30)
    record, _ = get(parent, handle)
    assert (record["status"], record["error"]) == (
        "failed",
        "timed out after 3 s waiting for the child's _instance.result",
    )
    # the failed step names its subagent in its output, not only in its error
    steps = result_of(command(parent, "run.get", token=ALICE, run=failed["metadata"]["run"]), "run.get")["run"]["steps"]
    assert steps["ask"]["output"] == {"handle": handle} and steps["ask"]["status"] == "failed"


@pytest.mark.parametrize("reports", [True, False])
def test_a_child_that_needs_input_fails_at_once_and_is_cancelled(
    a2a_daemon: Any, work: Path, tmp_path: Path, reports: bool
) -> None:
    # nobody at the parent can answer the child's question: a reporting child reports it failed at once (the
    # parent's timeout is far off), a child without reports ends its reply INPUT_REQUIRED; either way the parent's
    # turn fails and the task waiting on the child is cancelled
    port = free_port()
    child = a2a_daemon(
        config=child_config(f"http://127.0.0.1:{port}"),
        env={"CHILD_TOKEN": CHILD, "PARENT_TOKEN": OPERATOR},
        mock="permission",
    )
    parent = a2a_daemon(
        config=parent_config(work, child.url, "timeout = 120", reports=reports),
        env={**PARENT_ENV, "CHILD_TOKEN": CHILD},
        listen=f"127.0.0.1:{port}",
    )
    task = start_run(parent, ALICE, workflow="delegate")
    child_task, handle = child_handle(child)
    wait_state(parent, task["id"], "TASK_STATE_FAILED", token=ALICE, timeout=30)
    wait_state(child, child_task, "TASK_STATE_CANCELED", token=CHILD, timeout=30)
    record, _ = get(parent, handle)
    assert record["status"] == "failed"
    if reports:
        assert record["error"].startswith("the child instance reported failed: the child needs input: "), record
        assert "hello.txt" in record["error"]
    else:
        assert f"the child's task {child_task} ended INPUT_REQUIRED" in record["error"], record


def test_a_kill_whose_cancel_fails_says_so(a2a_daemon: Any, work: Path, tmp_path: Path) -> None:
    # the child dies while the parent's subagent runs: the kill still ends the record, its error says the cancel
    # on the child failed, and the parent logs one line (no credential in it)
    port = free_port()
    child = a2a_daemon(
        config=child_config(f"http://127.0.0.1:{port}"),
        env={"CHILD_TOKEN": CHILD, "PARENT_TOKEN": OPERATOR},
        mock=script(tmp_path, "child", WAITS),
    )
    parent = a2a_daemon(
        config=parent_config(work, child.url), env={**PARENT_ENV, "CHILD_TOKEN": CHILD}, listen=f"127.0.0.1:{port}"
    )
    start_run(parent, ALICE, workflow="delegate")
    _, handle = child_handle(child)
    child.signal(signal.SIGKILL)
    child.wait()
    task_result(command(parent, "subagent.kill", token=ALICE, handle=handle, reason="stop"), "subagent.kill")
    record, _ = get(parent, handle)
    assert record["status"] == "cancelled"
    assert record["error"].startswith("stop; cancel on the child failed: cannot "), record
    lines = [line for line in parent.stderr if "were not cancelled" in line]
    assert len(lines) == 1 and handle in lines[0], lines
    # a second kill changes nothing: the record keeps its first ending
    task_result(command(parent, "subagent.kill", token=ALICE, handle=handle, reason="again"), "subagent.kill")
    assert get(parent, handle)[0]["error"] == record["error"]
    assert not any(secret in line for line in parent.stderr for secret in (CHILD, OPERATOR))
