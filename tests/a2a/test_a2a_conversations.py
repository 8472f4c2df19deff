"""Conversations over A2A with the official a2a-sdk client (strict parsing) against a real daemon on mock scripts:
unary and streaming turns, permission and question answered by DataPart and by text, cancel, queued prompts,
file parts, and principals kept apart."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a_helpers import ANYAGENTD, SLOW, wait_state

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

EVENT_MEDIA_TYPE = "application/vnd.anyagent.event+json"


async def client_for(url: str, *, streaming: bool = False, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    return await ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create_from_url(url)


def user_message(*parts: Part, context_id: str = "", task_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=list(parts), context_id=context_id, task_id=task_id
    )


def data(value: Any) -> Part:
    part = Part(media_type="application/json")
    part.data.struct_value.update(value)
    return part


async def send(client: Any, message: Message) -> Any:
    """The final Task of a unary send."""
    responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


def event_kinds(task: Any) -> list[str]:
    """The wire event kinds carried by the DataParts of the task's history and status."""
    kinds = []
    for message in [*task.history, task.status.message]:
        for part in message.parts:
            if part.media_type == EVENT_MEDIA_TYPE:
                kinds.append(next(iter(json.loads(part.text)["kind"])))
    return kinds


async def test_unary_turn_completes_with_the_response_artifact(a2a_daemon: Any, wire_schema: Any) -> None:
    daemon = a2a_daemon(mock="hello")
    client = await client_for(daemon.url)
    assert client._card.name == "anyagentd mock" and client._card.capabilities.streaming
    task = await send(client, user_message(Part(text="hi")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    text = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
    assert [a.artifact_id for a in task.artifacts] == ["response"]
    assert "".join(p.text for p in task.artifacts[0].parts) == text
    assert task.status.message.role == Role.ROLE_AGENT and task.status.message.parts[0].text == text
    # usage streamed as a status update carrying the wire's own event JSON, exactly: valid against the wire schema,
    # its integers integers (a protobuf Struct would have made them doubles)
    sequences = []
    for message in [*task.history, task.status.message]:
        for part in message.parts:
            if part.media_type == EVENT_MEDIA_TYPE:
                event = json.loads(part.text)
                wire_schema.validate_def("Event", event)
                sequences.append(event["sequence"])
    assert sequences and all(type(n) is int for n in sequences) and sequences == sorted(sequences)
    assert "ContextUsage" in event_kinds(task) and event_kinds(task)[-1] == "TurnEnded"
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED and fetched.context_id == task.context_id
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [task.id]


async def test_streaming_turn_streams_working_chunks_and_the_end(a2a_daemon: Any, wire_schema: Any) -> None:
    daemon = a2a_daemon(mock="permission")
    client = await client_for(daemon.url, streaming=True)
    events = [r async for r in client.send_message(SendMessageRequest(message=user_message(Part(text="go"))))]
    kinds = [r.WhichOneof("payload") for r in events]
    assert kinds[0] == "task" and "artifact_update" in kinds
    states = [r.status_update.status.state for r in events if r.HasField("status_update")]
    assert TaskState.TASK_STATE_WORKING in states and states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
    chunks = [r.artifact_update for r in events if r.HasField("artifact_update")]
    assert chunks[0].artifact.parts[0].text == "I'll create hello.txt for you." and not chunks[0].append
    data_kinds = [
        next(iter(json.loads(p.text)["kind"]))
        for r in events
        if r.HasField("status_update")
        for p in r.status_update.status.message.parts
        if p.media_type == EVENT_MEDIA_TYPE
    ]
    assert {"PlanUpdated", "ToolUpdated", "RequestOpened"} <= set(data_kinds)
    for response in events:  # every event DataPart is the wire's own Event, valid against the wire schema
        for part in response.status_update.status.message.parts if response.HasField("status_update") else []:
            if part.media_type == EVENT_MEDIA_TYPE:
                wire_schema.validate_def("Event", json.loads(part.text))
    reasoning = [
        p
        for r in events
        if r.HasField("status_update")
        for p in r.status_update.status.message.parts
        if "reasoning" in p.media_type
    ]
    assert json.loads(reasoning[0].text)["ReasoningDelta"]["text"].startswith("I am the scripted agent")
    task_id = events[0].task.id
    # answer with the wire's Answer JSON in a DataPart, streamed: the rest of the turn arrives, then COMPLETED
    answer = user_message(data({"Permission": "AllowOnce"}), task_id=task_id)
    rest = [r async for r in client.send_message(SendMessageRequest(message=answer))]
    final = [r.status_update.status for r in rest if r.HasField("status_update")][-1]
    assert final.state == TaskState.TASK_STATE_COMPLETED
    assert final.message.parts[0].text == (
        "I'll create hello.txt for you.You allowed it. A real agent would now "
        "have written hello.txt; I am scripted, so your directory is unchanged."
    )
    appended = [r.artifact_update for r in rest if r.HasField("artifact_update")]
    assert appended and appended[0].append


@pytest.mark.parametrize(
    "answer, state", [("allow", TaskState.TASK_STATE_COMPLETED), ("deny", TaskState.TASK_STATE_COMPLETED)]
)
async def test_permission_answered_by_text(a2a_daemon: Any, answer: str, state: int) -> None:
    daemon = a2a_daemon(mock="permission")
    client = await client_for(daemon.url)
    task = await send(client, user_message(Part(text="write hello.txt")))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text.startswith("Permission requested: Write hello.txt")
    request = json.loads(task.status.message.parts[1].text)["kind"]["RequestOpened"]["Permission"]
    assert request["id"] == "req1" and request["options"] == ["AllowOnce", "AllowAlways", "DenyOnce"]
    refused = await send(client, user_message(Part(text="perhaps"), task_id=task.id))
    assert refused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "not an answer" in refused.status.message.parts[0].text
    done = await send(client, user_message(Part(text=answer), task_id=task.id))
    assert done.status.state == state and done.context_id == task.context_id
    answers = [p.text for m in done.history for p in m.parts if p.text in (answer, "perhaps")]
    assert answers == ["perhaps", answer]  # both follow-ups are in the task's history


async def test_question_answered_by_choice_label(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="question")
    client = await client_for(daemon.url)
    task = await send(client, user_message(Part(text="greet")))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "Which language" in task.status.message.parts[0].text and "English" in task.status.message.parts[0].text
    done = await send(client, user_message(Part(text="French"), task_id=task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.status.message.parts[0].text == "Before I start, one question.Thanks, noted."


def permission_twice(tmp_path: Path) -> str:
    """The shipped permission script with its turn played twice (a played-out mock script hangs)."""
    import anyagentd.mock

    shipped = json.loads((Path(anyagentd.mock.__file__).parent / "scripts" / "permission.json").read_text())
    path = tmp_path / "permission-twice.json"
    path.write_text(json.dumps({"turns": shipped["turns"] * 2}))
    return str(path)


async def test_cancel_while_waiting_for_input(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(mock=permission_twice(tmp_path))
    client = await client_for(daemon.url)
    task = await send(client, user_message(Part(text="write")))
    cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    # the conversation goes on: the next message in the same context runs the next turn
    again = await send(client, user_message(Part(text="again"), context_id=task.context_id))
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and again.id != task.id


async def test_cancel_a_running_turn_and_a_queued_prompt_runs_after_it(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(mock=str(script))
    first = daemon.send_text("one", configuration={"returnImmediately": True})
    ctx = first["contextId"]
    wait_state(daemon, first["id"], "TASK_STATE_WORKING")  # its turn runs (the session may take a while to open)
    second = daemon.send_text("two", context_id=ctx, configuration={"returnImmediately": True})
    assert second["status"]["state"] == "TASK_STATE_SUBMITTED"  # queued behind the running turn
    cancelled = daemon.rpc("CancelTask", {"id": first["id"]}).json()["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    got = wait_state(daemon, second["id"], "TASK_STATE_COMPLETED")
    assert got["status"]["message"]["parts"][0]["text"] == "second"


async def test_file_parts_by_bytes_and_url_are_saved(a2a_daemon: Any, tmp_path: Path) -> None:
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    served = tmp_path / "served"
    served.mkdir()
    (served / "spec.md").write_bytes(b"FROM A URL")
    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: SimpleHTTPRequestHandler(*a, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    echo = {
        "turns": [
            [
                {"Emit": {"TextDelta": {"message_id": "m1", "text": "ok"}}},
                {"End": {"Completed": {"source": "Protocol"}}},
            ]
        ]
        * 2
    }
    script = tmp_path / "echo.json"
    script.write_text(json.dumps(echo))
    try:
        daemon = a2a_daemon(mock=str(script), config="[a2a.push]\nallow_private = true\n")
        client = await client_for(daemon.url)
        url = f"http://127.0.0.1:{server.server_address[1]}/spec.md"
        task = await send(
            client,
            user_message(
                Part(text="see files"), Part(raw=b"PAYLOAD", filename="../notes.txt"), Part(url=url), data({"k": 1})
            ),
        )
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        files = daemon.state_dir / "conversations"
        saved = list(files.glob("*/files/*notes.txt"))
        assert len(saved) == 1 and saved[0].read_bytes() == b"PAYLOAD"  # the name cannot escape the directory
        assert [p.read_bytes() for p in files.glob("*/files/*spec.md")] == [b"FROM A URL"]
        missing = await send(client, user_message(Part(text="x"), Part(url=url + ".gone"), context_id=task.context_id))
        assert missing.status.state == TaskState.TASK_STATE_FAILED
        assert "could not be fetched" in missing.status.message.parts[0].text
    finally:
        server.shutdown()


async def test_send_checks_refuse_before_any_task(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello")
    for url, why in (("http://127.0.0.1:9/f", "loopback or private"), ("file:///etc/passwd", "http or https")):
        message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}, {"url": url}]}
        error = daemon.rpc("SendMessage", {"message": message}).json()["error"]
        assert error["code"] == -32602 and why in error["message"]
        assert error["data"][0]["fieldViolations"][0]["field"] == "message.parts[1].url"
    refused = daemon.rpc(
        "SendMessage",
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"acceptedOutputModes": ["image/png"]},
        },
    ).json()["error"]
    assert refused["code"] == -32005 and refused["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert daemon.rpc("ListTasks").json()["result"]["tasks"] == []  # nothing was created
    served = daemon.send_text("x", configuration={"acceptedOutputModes": ["text/*"]})
    assert served["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_two_principals_with_one_context_id_stay_apart(a2a_daemon: Any) -> None:
    config = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
[[a2a.principals]]
id = "bob"
role = "agent"
bearer = "{{secret:BOB_TOKEN}}"
"""
    env = {"OP_TOKEN": "op-secret-1", "ALICE_TOKEN": "alice-secret-1", "BOB_TOKEN": "bob-secret-1"}
    daemon = a2a_daemon(config=config, env=env, mock="permission")
    alice = daemon.send_text("hi", token="alice-secret-1", context_id="shared")
    bob = daemon.send_text("hi", token="bob-secret-1", context_id="shared")
    assert alice["status"]["state"] == bob["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # separate conversations: each has its own engine session (the mock restarts its script per session)
    sessions = {json.loads(t["status"]["message"]["parts"][1]["text"])["session_id"] for t in (alice, bob)}
    assert len(sessions) == 2
    # another principal's task is -32001 for GetTask, CancelTask and a follow-up message alike
    for method, params in [
        ("GetTask", {"id": alice["id"]}),
        ("CancelTask", {"id": alice["id"]}),
        ("SubscribeToTask", {"id": alice["id"]}),
        ("ListTaskPushNotificationConfigs", {"taskId": alice["id"]}),
        (
            "SendMessage",
            {"message": {"messageId": "x", "role": "ROLE_USER", "taskId": alice["id"], "parts": [{"text": "allow"}]}},
        ),
    ]:
        error = daemon.rpc(method, params, token="bob-secret-1").json()["error"]
        assert error["code"] == -32001, (method, error)
    listed = daemon.rpc("ListTasks", {"contextId": "shared"}, token="alice-secret-1").json()["result"]
    assert [t["id"] for t in listed["tasks"]] == [alice["id"]]
    # the operator sees all, and may act on a user's task without taking it over
    everything = daemon.rpc("ListTasks", {}, token="op-secret-1").json()["result"]
    assert {t["id"] for t in everything["tasks"]} == {alice["id"], bob["id"]} and everything["totalSize"] == 2
    page = daemon.rpc("ListTasks", {"pageSize": 1}, token="op-secret-1").json()["result"]
    rest = daemon.rpc("ListTasks", {"pageSize": 1, "pageToken": page["nextPageToken"]}, token="op-secret-1").json()[
        "result"
    ]
    assert {page["tasks"][0]["id"], rest["tasks"][0]["id"]} == {alice["id"], bob["id"]} and not rest["nextPageToken"]
    waiting = daemon.rpc(
        "ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED", "contextId": "shared"}, token="op-secret-1"
    ).json()["result"]
    assert len(waiting["tasks"]) == 2
    assert daemon.rpc("GetTask", {"id": bob["id"]}, token="op-secret-1").json()["result"]["id"] == bob["id"]
    done = daemon.send_text("allow", token="op-secret-1", task_id=alice["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    mine = daemon.rpc("GetTask", {"id": alice["id"]}, token="alice-secret-1").json()["result"]
    assert mine["status"]["state"] == "TASK_STATE_COMPLETED"
    log = "".join(daemon.stderr)
    assert not any(secret in log for secret in env.values())


async def test_a_message_steered_into_the_running_turn_completes_at_once(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "steer.json"
    script.write_text(json.dumps({**SLOW, "steer": True}))
    daemon = a2a_daemon(mock=str(script))
    first = daemon.send_text("one", configuration={"returnImmediately": True})
    wait_state(daemon, first["id"], "TASK_STATE_WORKING")
    steered = daemon.send_text("also this", context_id=first["contextId"])
    assert steered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert steered["status"]["message"]["parts"][0]["text"].startswith("Delivered: steered into the running turn t1")
    delivery = steered["status"]["message"]["parts"][1]  # the engine's delivery, as the wire writes it
    assert delivery["mediaType"] == "application/vnd.anyagent.delivery+json"
    assert json.loads(delivery["text"]) == {"Steered": {"turn_id": "t1"}}
    assert daemon.rpc("GetTask", {"id": first["id"]}).json()["result"]["status"]["state"] == "TASK_STATE_WORKING"


async def test_subscribe_to_a_waiting_task_follows_it_to_the_end(a2a_daemon: Any) -> None:
    from a2a.types import SubscribeToTaskRequest

    daemon = a2a_daemon(mock="permission")
    client = await client_for(daemon.url, streaming=True)
    task = await send(await client_for(daemon.url), user_message(Part(text="write")))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    seen: list[Any] = []

    async def follow() -> None:
        async for response in client.subscribe(SubscribeToTaskRequest(id=task.id)):
            seen.append(response)

    import anyio

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow)
        await anyio.sleep(0.5)
        done = await send(await client_for(daemon.url), user_message(Part(text="allow"), task_id=task.id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        with anyio.fail_after(20):
            while not any(
                r.HasField("status_update") and r.status_update.status.state == TaskState.TASK_STATE_COMPLETED
                for r in seen
            ):
                await anyio.sleep(0.05)
    assert seen[0].HasField("task") and seen[0].task.id == task.id  # the snapshot first, then the live events
    assert any(r.HasField("artifact_update") for r in seen)


async def test_context_mismatch_and_unknown_task_are_refused(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="permission")
    task = daemon.send_text("write")
    message = {
        "messageId": "x",
        "role": "ROLE_USER",
        "taskId": task["id"],
        "contextId": "other",
        "parts": [{"text": "allow"}],
    }
    assert daemon.rpc("SendMessage", {"message": message}).json()["error"]["code"] == -32602
    unknown = dict(message, taskId="no-such-task", contextId=task["contextId"])
    assert daemon.rpc("SendMessage", {"message": unknown}).json()["error"]["code"] == -32001
    assert daemon.rpc("GetTask", {"id": task["id"]}).json()["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_an_agent_that_dies_fails_its_task_and_the_next_message_reopens(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="dies")
    client = await client_for(daemon.url)
    task = await send(client, user_message(Part(text="go")))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "agent exited during the turn" in task.status.message.parts[0].text
    again = await send(client, user_message(Part(text="again"), context_id=task.context_id))
    assert again.status.state == TaskState.TASK_STATE_FAILED  # a fresh session (which dies again: same script)
    sessions = {
        json.loads(p.text)["session_id"]
        for t in (task, again)
        for p in t.status.message.parts
        if p.media_type == EVENT_MEDIA_TYPE
    }
    assert len(sessions) == 2


async def test_conversations_run_concurrently(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(mock=str(script))
    first = daemon.send_text("one", context_id="a", configuration={"returnImmediately": True})
    second = daemon.send_text("two", context_id="b", configuration={"returnImmediately": True})
    for task in (first, second):  # both 60 s turns run at once, each in its own session
        wait_state(daemon, task["id"], "TASK_STATE_WORKING")


async def test_auto_approval_never_asks(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config='[agent]\nname = "mock"\napproval = "auto"\n', mock="permission")
    task = daemon.send_text("write hello.txt")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    states = {m["parts"][-1].get("data", {}).get("kind", {}).get("RequestOpened") for m in task["history"]}
    assert states == {None}  # no request was ever opened to the caller


def test_the_idle_close_is_set_by_the_environment(a2a_daemon: Any) -> None:
    """``ANYAGENTD_A2A_IDLE_CLOSE`` sets the idle timeout: once it passed, the mock's idle session is considered,
    and kept open because the mock cannot resume (said in the log)."""
    daemon = a2a_daemon(mock="hello", env={"ANYAGENTD_A2A_IDLE_CLOSE": "0.4"})
    first = daemon.send_text("hi", context_id="idle")
    deadline = time.monotonic() + 10
    kept = "conversation idle is idle, but its agent cannot resume: its session stays open"
    while not any(kept in line for line in daemon.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(kept in line for line in daemon.stderr)
    assert not any("closing the idle session" in line for line in daemon.stderr)
    assert first["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_message_to_a_running_task_is_refused_not_dropped(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(
        config="""
[[a2a.principals]]
id = "alice"
bearer = "{{secret:A_T}}"
[[a2a.principals]]
id = "bob"
bearer = "{{secret:B_T}}"
""",
        env={"A_T": "a-token", "B_T": "b-token"},
        mock=str(script),
    )
    running = daemon.send_text("one", token="a-token", configuration={"returnImmediately": True})
    wait_state(daemon, running["id"], "TASK_STATE_WORKING", token="a-token")
    message = {"messageId": "m", "role": "ROLE_USER", "taskId": running["id"], "parts": [{"text": "more"}]}
    error = daemon.rpc("SendMessage", {"message": message}, token="a-token").json()["error"]
    assert error["code"] == -32004 and "without taskId" in error["message"]
    other = daemon.rpc("SendMessage", {"message": message}, token="b-token").json()["error"]
    assert other["code"] == -32001  # another principal learns nothing about the task


def test_a_person_answers_a_permission_from_the_command_line(a2a_daemon: Any) -> None:
    """``anyagentd a2a send`` shows the question of a task that waits for input, exits 2 with the line that
    answers it, and ``--task-id`` answers it into the same task and conversation."""
    import subprocess

    daemon = a2a_daemon(mock="permission")
    anyagentd = ANYAGENTD
    asked = subprocess.run(
        [anyagentd, "a2a", "send", daemon.url, "write hello.txt"], capture_output=True, text=True, timeout=60
    )
    assert asked.returncode == 2, asked.stderr
    assert asked.stdout.startswith("Permission requested: Write hello.txt"), asked.stdout
    task_id = asked.stderr.split("task ")[1].split(":")[0]
    # the hint is a command to paste: the request's own answer words, then the line itself
    hint = f"answer (allow, always or deny): anyagentd a2a send {daemon.url} allow --task-id {task_id}"
    assert ": input_required (contextId " in asked.stderr and hint in asked.stderr, asked.stderr
    answered = subprocess.run(
        [anyagentd, "a2a", "send", daemon.url, "allow", "--task-id", task_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answered.returncode == 0, answered.stderr
    assert "You allowed it." in answered.stdout and f"task {task_id}: completed" in answered.stderr
    task = daemon.rpc("GetTask", {"id": task_id}).json()["result"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [p["text"] for m in task["history"] for p in m["parts"] if p.get("text") == "allow"] == ["allow"]


def test_a_daemon_that_dies_mid_send_is_a_lost_connection_not_a_refusal(a2a_daemon: Any, tmp_path: Path) -> None:
    """``anyagentd a2a send`` to a daemon killed while the turn runs: one line saying the connection was lost
    (the daemon refused nothing), exit 1, no traceback."""
    import signal
    import subprocess

    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(mock=str(script))
    sending = subprocess.Popen(
        [ANYAGENTD, "a2a", "send", daemon.url, "go"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while not daemon.rpc("ListTasks", {}).json()["result"].get("tasks") and time.monotonic() < deadline:
        time.sleep(0.1)
    daemon.process.send_signal(signal.SIGKILL)
    out, err = sending.communicate(timeout=60)
    assert sending.returncode == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"anyagentd a2a: lost the connection to {daemon.url} before its answer: "), err
