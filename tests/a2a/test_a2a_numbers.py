"""Issue 26: a number no double holds — ``1e400``, an integer past ``sys.float_info.max``, ``NaN`` — loses nothing.

A2A carries a data part's data and every ``metadata`` as a protobuf ``Struct``, whose numbers are doubles: ``1e400``
becomes ``inf``, which proto3 JSON cannot write again. Once in a task it used to stop the task store writing
(``ListTasks`` failed for every user, ``/metrics`` answered 500, other tasks' updates stayed unwritten, a SIGTERM
exited 1). Now the front refuses such a request before anything is created, naming the field; the store keeps a
task that got one some other way (an agent's event) with the number as null; the task store's prune takes any
number of tasks to keep. A real daemon for the front, a real SQLite file for the store."""

from __future__ import annotations

import json
import signal
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from anyagentd_a2a.calls import PrincipalUser as _Principal
from anyagentd_a2a.principals import Principal
from anyagentd_a2a.store import PRUNE_BATCH, PrincipalTaskStore, engine_for
from anyagentd_a2a.structjson import beyond_double, finite, loads

pytestmark = pytest.mark.timeout(120)

OP = "op-token-numbers"
CONFIG = '[a2a]\nbearer = "{{secret:OP}}"\n'
ALICE = ServerCallContext(user=_Principal(Principal("alice", "user")), state={})


def raw_send(daemon: Any, body: str) -> httpx.Response:
    """``body`` (JSON-RPC text, sent as written: Python's json would not write 1e400) posted as the operator."""
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0", "Authorization": f"Bearer {OP}"}
    return httpx.post(daemon.url + "/", content=body.encode(), headers=headers, timeout=60)


def send_body(data: str, *, metadata: str = "{}") -> str:
    message_id = str(uuid.uuid4())
    return (
        '{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {"messageId": "'
        + message_id
        + '", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": '
        + data
        + "}], "
        '"metadata": ' + metadata + "}}}"
    )


def stored_count(daemon: Any) -> int:
    with sqlite3.connect(daemon.state_dir / "a2a.db") as conn:
        return conn.execute("select count(*) from tasks").fetchone()[0]


# -- the front: refused before anything is created ----------------------------------------------------------------


def test_a_number_no_double_holds_is_refused_naming_its_field_and_nothing_is_created(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CONFIG, env={"OP": OP}, mock="hello")
    cases = {
        '{"x": 1e400}': "message.parts[1].data.x",
        '{"deep": [1, {"a b": -1e999}]}': 'message.parts[1].data.deep[1]["a b"]',
        '{"big": 1' + "0" * 400 + "}": "message.parts[1].data.big",
    }
    for data, field in cases.items():
        answer = raw_send(daemon, send_body(data)).json()
        assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
        violation = answer["error"]["data"][0]["fieldViolations"][0]
        assert violation["field"] == field and "double" in violation["description"], answer
    answer = raw_send(daemon, send_body('{"x": 1}', metadata='{"m": 2e308}')).json()
    assert answer["error"]["data"][0]["fieldViolations"][0]["field"] == "message.metadata.m", answer
    for literal in ("NaN", "Infinity", "-Infinity"):  # not JSON at all (RFC 8259 section 6)
        answer = raw_send(daemon, send_body('{"x": ' + literal + "}")).json()
        assert answer["error"]["code"] == -32700 and literal in answer["error"]["message"], answer
    assert stored_count(daemon) == 0, "a refused send creates no task"
    refused = [json.loads(line) for line in list(daemon.stderr) if '"rpc_error": -32602' in line]
    assert refused and all(line["rpc_method"] == "SendMessage" for line in refused), refused  # its method is named
    # the daemon still serves: a send with numbers that fit completes, and every listing answers
    answer = raw_send(daemon, send_body('{"x": 1e300, "n": ' + "9" * 300 + "}")).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
    listed = daemon.rpc("ListTasks", {}, token=OP).json()
    assert len(listed["result"]["tasks"]) == 1, listed
    scrape = httpx.get(daemon.url + "/metrics", headers={"Authorization": f"Bearer {OP}"}, timeout=60)
    assert scrape.status_code == 200 and 'anyagentd_a2a_tasks{state="completed"} 1.0' in scrape.text, scrape.text
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    assert any('"stopped"' in line for line in daemon.all_stderr())


def test_the_parser_notes_only_what_overflows() -> None:
    assert not loads(b'{"a": [1.5, -1e308, 123456789012345678901234567890]}').overflows
    loaded = loads('{"a": {"b": [0, 1e309]}}')
    assert loaded.overflows and beyond_double(loaded.value) == "a.b[1]"
    assert beyond_double({"ok": 1.0}) is None
    with pytest.raises(ValueError, match="NaN"):
        loads('{"a": NaN}')


# -- the store: a task holding one is kept, and the others are written ---------------------------------------------


def holding_infinity(task_id: str, state: int) -> Task:
    out = Task(
        id=task_id,
        context_id="c1",
        status=TaskStatus(state=state),
        history=[Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hi")])],
    )
    part = out.artifacts.add(artifact_id="tool").parts.add()
    part.data.struct_value.fields["x"].number_value = float("inf")  # what an agent's NaN/Infinity parses to
    part.data.struct_value.fields["kept"].string_value = "yes"
    out.metadata.fields["n"].number_value = float("nan")
    return out


def row(path: Path, task_id: str) -> dict[str, Any]:
    with sqlite3.connect(path) as conn:
        status, artifacts, metadata = conn.execute(
            "select status, artifacts, metadata from tasks where id = ?", (task_id,)
        ).fetchone()
    return {
        "state": json.loads(status)["state"],
        "data": json.loads(artifacts)[0]["parts"][0]["data"],
        "metadata": json.loads(metadata),
    }


@pytest.mark.anyio
async def test_a_task_holding_a_number_json_cannot_write_is_stored_with_null_and_the_others_still_are(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a2a.db"
    engine = engine_for(f"sqlite+aiosqlite:///{path}")
    try:
        store = PrincipalTaskStore(engine, flush_delay=60)  # flush_behind never runs: flush() and reads write
        await store.initialize()
        plain = Task(id="plain", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        await store.save(plain, ALICE)
        await store.save(holding_infinity("bad", TaskState.TASK_STATE_SUBMITTED), ALICE)  # written at once
        await store.save(holding_infinity("bad", TaskState.TASK_STATE_WORKING), ALICE)  # written behind
        plain.status.state = TaskState.TASK_STATE_WORKING
        await store.save(plain, ALICE)  # behind too, after the bad one
        await store.flush()
        assert row(path, "bad") == {
            "state": "TASK_STATE_WORKING",
            "data": {"x": None, "kept": "yes"},
            "metadata": {"n": None},
        }
        with sqlite3.connect(path) as conn:
            assert conn.execute("select status from tasks where id = 'plain'").fetchone()[0].count("WORKING") == 1
        listed = await store.list(ListTasksRequest(), ALICE)
        assert sorted(t.id for t in listed.tasks) == ["bad", "plain"]
        assert await store.count_by_state() == {TaskState.TASK_STATE_WORKING: 2}
        warned = [r.getMessage() for r in caplog.records if "JSON cannot write" in r.getMessage()]
        assert warned and warned[0].startswith("task bad holds 2 number(s)"), warned
    finally:
        await engine.dispose()


def test_finite_leaves_finite_numbers_and_nulls_the_others() -> None:
    task = holding_infinity("t", TaskState.TASK_STATE_WORKING)
    task.artifacts[0].parts[0].data.struct_value.fields["list"].list_value.values.add().number_value = 2.5
    assert finite(task) == 2 and finite(task) == 0
    data = MessageToDict(task)["artifacts"][0]["parts"][0]["data"]
    assert data == {"x": None, "kept": "yes", "list": [2.5]}


# -- the prune: any number of tasks kept ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prune_keeps_any_number_of_tasks_and_deletes_the_rest_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "a2a.db"
    engine = engine_for(f"sqlite+aiosqlite:///{path}")
    try:
        store = PrincipalTaskStore(engine)
        await store.initialize()
        total = PRUNE_BATCH * 2 + 7  # more than one batch, and a last one that is not full
        for n in range(total):
            await store.save(
                Task(id=f"t{n:05d}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)), ALICE
            )
        await store.save(Task(id="open", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)), ALICE)
        await store.flush()
        with sqlite3.connect(path) as conn:
            conn.execute("update tasks set last_updated = '2000-01-01 00:00:00'")
        keep = {f"t{n:05d}" for n in range(0, total, 3)} | {str(uuid.uuid4()) for _ in range(260_000)}
        # more ids than SQLite binds in one statement (32,766 by default, 250,000 as Debian builds it): a NOT IN
        # list of them could not run
        assert await store.prune(86400, keep) == total - len(range(0, total, 3))
        with sqlite3.connect(path) as conn:
            left = {r[0] for r in conn.execute("select id from tasks")}
        assert left == {f"t{n:05d}" for n in range(0, total, 3)} | {"open"}
    finally:
        await engine.dispose()
