"""Issue 26: ``[a2a.retention]`` — what ended long ago is pruned from the daemon's database and state dir, and the
database file shrinks. Real daemons on one state dir: the first ones write tasks (and their files), the rows are
then dated back in the SQLite file (standing for the weeks that pass), and the next daemon's start-up prune takes
them; every wait is for a log line or a state, never for time."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD, wait_state

pytestmark = pytest.mark.timeout(180)

OP = "op-token-retention"
ENV = {"OP": OP}
BASE = """
[a2a]
bearer = "{{secret:OP}}"
[a2a.device_grant]
enabled = true
[[workflows]]
name = "done"
[workflows.steps.a]
kind = "finish"
output = "x"
"""
RETAIN = (
    BASE
    + """
[a2a.retention]
tasks = "1d"
runs = "1d"
sessions = "1d"
interval = "1s"
"""
)
LONG_AGO_MS = 1_000_000_000_000  # 2001-09-09: older than any age


def send(daemon: Any, *parts: dict[str, Any], context_id: str | None = None) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": list(parts)}
    if context_id:
        message["contextId"] = context_id
    body = daemon.rpc("SendMessage", {"message": message}, token=OP).json()
    assert "result" in body, body
    return body["result"]["task"]


def stop(daemon: Any) -> None:
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def wait_log(daemon: Any, text: str, timeout: float = 30.0, after: int = 0) -> str:
    """The first stderr line containing ``text`` after the first ``after`` such lines (fails with the tail of
    stderr when none comes in time)."""
    deadline = time.monotonic() + timeout
    while True:
        hits = [line for line in list(daemon.stderr) if text in line]
        hit = hits[after] if len(hits) > after else None
        if hit is not None:
            return hit
        assert time.monotonic() < deadline, f"no log line with {text!r}: {''.join(daemon.stderr)[-2000:]}"
        time.sleep(0.05)


def pruned_counts(line: str) -> dict[str, int]:
    msg = json.loads(line)["msg"]
    return {key: int(n) for key, n in (pair.split("=") for pair in msg.split("retention pruned ", 1)[1].split())}


def date_back(db: Path) -> None:
    """Every task, conversation row and stored run as if written long ago (the file closed: the daemons stopped)."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tasks SET last_updated = '2001-01-01 00:00:00.000000'")
        conn.execute("UPDATE anyagentd_conversations SET updated = '2001-01-01 00:00:00.000000'")
        conn.execute(
            "INSERT INTO anyagentd_conversations VALUES ('operator', 'ended', 'mock', 'tok', "
            "'2001-01-01 00:00:00.000000')"
        )  # a conversation whose tasks are all gone
    for path in (db.parent / "conversations").rglob("*"):
        os.utime(path, (LONG_AGO_MS / 1000, LONG_AGO_MS / 1000))


def test_a_start_prunes_what_ended_long_ago_and_the_file_shrinks(a2a_daemon: Any, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = a2a_daemon(config=BASE, env=ENV, state_dir=state, mock="hello")
    big = "x" * (1536 * 1024)  # 1.5 MiB of text per task: the prune must show in the file's size
    done = [send(first, {"text": big}) for _ in range(3)]
    filed = send(
        first,
        {"raw": base64.b64encode(b"notes").decode(), "filename": "notes.txt", "mediaType": "text/plain"},
        context_id="with-a-file",
    )
    for task in [*done, filed]:
        wait_state(first, task["id"], "TASK_STATE_COMPLETED", token=OP)
    files = list((state / "conversations").glob("*/files"))
    assert files, "the file part was saved under the conversation's directory"
    stop(first)
    second = a2a_daemon(config=BASE, env=ENV, state_dir=state, mock="permission")
    waiting = send(second, {"text": "write hello.txt"})
    waiting = wait_state(second, waiting["id"], "TASK_STATE_INPUT_REQUIRED", token=OP)
    second.signal(signal.SIGKILL)  # a SIGTERM's drain would cancel it: killed, it is parked at the next start
    second.wait()

    db = state / "a2a.db"
    date_back(db)
    with sqlite3.connect(db) as conn:  # an ended run (its work dir), a live one's row stays; device sessions
        conn.execute(
            "INSERT INTO agentd_runs (id, workflow, principal, task_id, status, inputs, cancelled, paused, "
            "refused, tokens, created, updated, finished) VALUES ('run-old', 'done', 'operator', NULL, "
            f"'completed', '{{}}', 0, 0, 0, 0, {LONG_AGO_MS}, {LONG_AGO_MS}, {LONG_AGO_MS})"
        )
        conn.execute(
            "INSERT INTO agentd_steps (run_id, step_id, status, attempt) VALUES ('run-old', 'a', 'completed', 1)"
        )
        for sid, expires, revoked in (("expired", LONG_AGO_MS, 0), ("revoked", None, 1), ("live", None, 0)):
            conn.execute(
                "INSERT INTO agentd_auth_sessions (sid, token_hash, kind, name, principal, role, "
                "client_id, scope, created_at, expires_at, approved_by, revoked) VALUES (?, ?, 'device', "
                "NULL, 'user:bob', 'user', 'cli', 'user', ?, ?, 'operator', ?)",
                (sid, sid * 8, LONG_AGO_MS, expires, revoked),
            )
        auto_vacuum = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    assert auto_vacuum == 2, "a new database is made with auto_vacuum=INCREMENTAL"
    (state / "runs" / "run-old").mkdir(parents=True)
    (state / "runs" / "run-old" / "out.txt").write_text("left by the run")
    leftover = state / "conversations" / ".pruned-0123456789abcdef01234567"  # set aside by a round cut short
    (leftover / "files").mkdir(parents=True)
    (leftover / "files" / "half.txt").write_text("not yet deleted")
    before = db.stat().st_size

    third = a2a_daemon(config=RETAIN, env=ENV, state_dir=state, mock="permission")
    counts = pruned_counts(wait_log(third, "retention pruned"))
    assert counts["tasks"] == 4 and counts["runs"] == 1 and counts["sessions"] == 2, counts
    assert counts["conversations"] == 1 and counts["files"] == 1, counts  # 'ended', and the file's conversation

    listed = third.rpc("ListTasks", {}, token=OP).json()["result"].get("tasks", [])
    assert [t["id"] for t in listed] == [waiting["id"]], "only the task the restart failed just now is kept"
    assert listed[0]["status"]["state"] == "TASK_STATE_FAILED"
    gone = third.rpc("GetTask", {"id": done[0]["id"]}, token=OP).json()
    assert "error" in gone, gone
    assert not any(path.exists() for path in files), "the pruned conversation's files went with it"
    assert not list((state / "conversations").glob(".pruned-*")), "what was set aside, then and now, is deleted"
    assert not (state / "runs" / "run-old").exists()
    after = db.stat().st_size
    assert after < before / 2, (before, after)

    # a task waiting for an answer, however old, stays through the next rounds (interval 1 s)
    asking = send(third, {"text": "write hello.txt"}, context_id="asking")
    wait_state(third, asking["id"], "TASK_STATE_INPUT_REQUIRED", token=OP)
    with sqlite3.connect(db) as conn:  # the daemon's own file, WAL: this write goes beside its connections
        conn.execute("UPDATE tasks SET last_updated = '2001-01-01 00:00:00.000000'")
    rounds = sum("retention pruned" in line for line in list(third.stderr))
    wait_log(third, "retention pruned", after=rounds)
    kept = wait_state(third, asking["id"], "TASK_STATE_INPUT_REQUIRED", token=OP)
    assert kept["id"] == asking["id"]
    stop(third)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id FROM agentd_runs").fetchall() == []
        assert conn.execute("SELECT count(*) FROM agentd_steps").fetchone()[0] == 0
        assert conn.execute("SELECT sid FROM agentd_auth_sessions").fetchall() == [("live",)]
        assert ("operator", "ended") not in conn.execute("SELECT owner, context_id FROM anyagentd_conversations")


@pytest.mark.parametrize("value", ['"1w"', '"1.5h"', "5", '"30 d"', "true", '""'])
def test_a_bad_retention_age_is_refused_naming_its_key(tmp_path: Path, value: str) -> None:
    config = tmp_path / "retention.toml"
    config.write_text(f"[a2a.retention]\ntasks = {value}\n")
    checked = subprocess.run(
        [ANYAGENTD, "a2a", "--check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 2, checked
    assert "a2a.retention.tasks" in checked.stderr and "Traceback" not in checked.stderr, checked.stderr
    started = subprocess.run(
        [ANYAGENTD, "a2a", "--config", str(config), "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and "a2a.retention.tasks" in started.stderr, started
    assert "Traceback" not in started.stderr


def test_retention_ages_that_keep_forever_or_name_units_pass_the_check(tmp_path: Path) -> None:
    config = tmp_path / "retention.toml"
    config.write_text(
        '[a2a.retention]\ntasks = 0\nruns = "12h"\nsessions = "90m"\nsubagents = "30s"\ninterval = "1m"\n'
    )
    checked = subprocess.run(
        [ANYAGENTD, "a2a", "--check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked


@pytest.mark.anyio
async def test_the_stores_prune_only_what_ended(tmp_path: Path) -> None:
    """On a real SQLite file (the daemon's engine): a run, a subagent and a task that have not ended stay however
    old they are; the ended ones older than the age go, with a run's steps."""
    from a2a.server.context import ServerCallContext
    from a2a.types import Task, TaskState, TaskStatus

    from anyagentd_a2a.store import PrincipalTaskStore, _Owner, engine_for
    from anyagentd_a2a.subagents.manager import Subagent
    from anyagentd_a2a.subagents.store import SubagentStore
    from anyagentd_a2a.workflows.state import RunFlags, StepState
    from anyagentd_a2a.workflows.store import RunRecord, RunStore

    engine = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'a2a.db'}")
    try:
        runs = await RunStore(engine).open()
        for run_id, status in (("ended", "completed"), ("running", "running"), ("waiting", "waiting")):
            await runs.create(
                RunRecord(
                    id=run_id,
                    workflow="w",
                    principal="alice",
                    task_id=f"task-{run_id}",
                    status=status,
                    inputs={},
                    output=None,
                    error=None,
                    flags=RunFlags(),
                    tokens=0,
                    created=LONG_AGO_MS,
                    updated=LONG_AGO_MS,
                    finished=LONG_AGO_MS if status == "completed" else None,
                    steps={"a": StepState()},
                )
            )
        assert await runs.prune(86400) == ["ended"]
        assert sorted(r.id for r in await runs.list()) == ["running", "waiting"]
        assert (await runs.get("running")).steps, "a live run keeps its steps"

        subagents = await SubagentStore(engine).open()
        for handle, status in (("done", "completed"), ("warm", "idle"), ("busy", "running")):
            await subagents.save(
                Subagent(
                    handle=handle,
                    mode="warm",
                    owner="alice",
                    agent="mock",
                    instruction="x",
                    status=status,
                    created=LONG_AGO_MS,
                    updated=LONG_AGO_MS,
                )
            )
        assert await subagents.prune(86400) == ["done"]
        assert sorted(r.handle for r in await subagents.load()) == ["busy", "warm"]

        store = PrincipalTaskStore(engine)
        await store.initialize()
        context = ServerCallContext(user=_Owner("alice"))
        for task_id, state in (
            ("old-done", TaskState.TASK_STATE_COMPLETED),
            ("old-asking", TaskState.TASK_STATE_INPUT_REQUIRED),
            ("run-task", TaskState.TASK_STATE_CANCELED),
        ):
            task = Task(id=task_id, context_id="c", status=TaskStatus(state=state))
            task.status.timestamp.FromSeconds(LONG_AGO_MS // 1000)
            await store.save(task, context)
        assert await store.prune(86400, keep={"run-task"}) == 1  # a run that has not ended still follows its task
        assert await store.get("old-done", context) is None
        assert await store.get("old-asking", context) is not None and await store.get("run-task", context)
    finally:
        await engine.dispose()


def test_a_start_prunes_the_subagent_records_that_ended_long_ago_and_their_work_dirs(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    """``[a2a.retention] subagents``: an ended record (completed, failed, cancelled) older than the age goes with
    its ``subagents/<handle>/`` work dir; a recent one and one that has not ended stay, dir and all."""
    state = tmp_path / "state"
    subagents = BASE + "[subagents]\nenabled = true\n"
    stop(a2a_daemon(config=subagents, env=ENV, state_dir=state, mock="hello"))  # creates the subagents' table
    rows = {
        "old-done": ("completed", LONG_AGO_MS),
        "old-failed": ("failed", LONG_AGO_MS),
        "old-idle": ("idle", LONG_AGO_MS),
        "new-done": ("completed", int(time.time() * 1000)),
    }
    with sqlite3.connect(state / "a2a.db") as conn:
        for handle, (status, updated) in rows.items():
            conn.execute(
                "INSERT INTO agentd_subagents (handle, mode, owner, agent, instruction, depth, status, "
                "attempts, tokens, created, updated) VALUES (?, 'task', 'operator', '\"mock\"', 'hi', 0, "
                "?, 1, 0, ?, ?)",
                (handle, status, updated, updated),
            )
            (state / "subagents" / handle).mkdir(parents=True)
            (state / "subagents" / handle / "out.txt").write_text("left by the subagent")
    config = subagents + '[a2a.retention]\nsubagents = "1d"\ninterval = "1s"\n'
    daemon = a2a_daemon(config=config, env=ENV, state_dir=state, mock="hello")
    counts = pruned_counts(wait_log(daemon, "retention pruned"))
    assert counts["subagents"] == 2, counts
    stop(daemon)
    with sqlite3.connect(state / "a2a.db") as conn:
        kept = {r[0] for r in conn.execute("SELECT handle FROM agentd_subagents")}
    assert kept == {"old-idle", "new-done"}
    assert {p.name for p in (state / "subagents").iterdir()} == {"old-idle", "new-done"}
