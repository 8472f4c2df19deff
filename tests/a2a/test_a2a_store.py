"""The daemon's task and push-config stores on a real SQLite file, read back through a second, plain sqlite3
connection (what a restart finds): a task's durable points (accepted, waiting for input, terminal) are on disk when
``save`` returns; the updates between them are written behind (by ``flush_behind``, or first by any read); ids the
store handed out, and tasks without push configs, are answered without a query; a conversation's resume token is one
row per (owner, contextId), updated in place; a restart does to each open task what the task rules decide. The
latency these save is measured by bench/bench_a2a.py, never here."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import (
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from sqlalchemy import event

from anyagentd_a2a.calls import PrincipalUser as _Principal
from anyagentd_a2a.principals import OPERATOR, Principal
from anyagentd_a2a.sqlite_writes import _twins, writer_of
from anyagentd_a2a.store import ConversationTable, PrincipalTaskStore, PushConfigStore, engine_for, fail_interrupted
from anyagentd_a2a.tasks.state import INTERRUPTED_MESSAGE, UNRESUMABLE_MESSAGE

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ALICE = ServerCallContext(user=_Principal(Principal("alice", "user")), state={})
OPERATOR_CONTEXT = ServerCallContext(user=_Principal(OPERATOR), state={})


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[tuple[Any, Path, list[str]]]:
    """(engine, database file, every SQL statement the engine runs, in order)."""
    path = tmp_path / "a2a.db"
    engine = engine_for(f"sqlite+aiosqlite:///{path}")
    statements: list[str] = []
    twin = writer_of(engine)
    assert twin is not None  # a SQLite file: row writes go through its twin, in one hop
    for sync in (engine.sync_engine, twin.engine):
        event.listen(sync, "before_cursor_execute", lambda _c, _cur, sql, *_: statements.append(sql))
    yield engine, path, statements
    await engine.dispose()


def on_disk(path: Path, task_id: str) -> dict[str, Any] | None:
    """The task's row as a restart would read it: state, artifact texts, owner."""
    with sqlite3.connect(path) as conn:
        row = conn.execute("select status, artifacts, owner from tasks where id = ?", (task_id,)).fetchone()
    if row is None:
        return None
    texts = [p.get("text") for a in json.loads(row[1] or "[]") for p in a.get("parts", [])]
    return {"state": json.loads(row[0])["state"], "texts": texts, "owner": row[2]}


def task(task_id: str, state: int, *texts: str) -> Task:
    out = Task(
        id=task_id,
        context_id="c1",
        status=TaskStatus(state=state),
        history=[Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hi")])],
    )
    if texts:
        out.artifacts.add(artifact_id="response", parts=[Part(text=t) for t in texts])
    return out


async def test_durable_points_are_on_disk_when_save_returns_and_updates_between_them_are_written_behind(
    db: tuple[Any, Path, list[str]],
) -> None:
    engine, path, _ = db
    store = PrincipalTaskStore(engine, flush_delay=0.05)
    await store.initialize()
    task_id = store.new_task_id()
    await store.save(task(task_id, TaskState.TASK_STATE_SUBMITTED), ALICE)
    assert on_disk(path, task_id) == {"state": "TASK_STATE_SUBMITTED", "texts": [], "owner": "alice"}  # accepted
    await store.save(task(task_id, TaskState.TASK_STATE_WORKING, "wor"), ALICE)
    await store.save(task(task_id, TaskState.TASK_STATE_WORKING, "wor", "king"), ALICE)
    assert on_disk(path, task_id)["state"] == "TASK_STATE_SUBMITTED"  # not yet: behind
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.flush_behind)
        with anyio.fail_after(5):
            while on_disk(path, task_id)["state"] != "TASK_STATE_WORKING":
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert on_disk(path, task_id)["texts"] == ["wor", "king"]  # the latest version, once
    await store.save(task(task_id, TaskState.TASK_STATE_WORKING, "wor", "king", "!"), ALICE)
    await store.save(task(task_id, TaskState.TASK_STATE_COMPLETED, "wor", "king", "!"), ALICE)
    assert on_disk(path, task_id) == {"state": "TASK_STATE_COMPLETED", "texts": ["wor", "king", "!"], "owner": "alice"}


@pytest.mark.parametrize(
    "state", [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED]
)
async def test_waiting_for_input_and_every_end_are_written_at_once(db: tuple[Any, Path, list[str]], state: int) -> None:
    engine, path, _ = db
    store = PrincipalTaskStore(engine, flush_delay=60)
    await store.initialize()
    await store.save(task("t1", TaskState.TASK_STATE_SUBMITTED), ALICE)
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "a"), ALICE)
    await store.save(task("t1", state, "a", "b"), ALICE)
    assert on_disk(path, "t1")["state"] == TaskState.Name(state) and on_disk(path, "t1")["texts"] == ["a", "b"]


async def test_every_read_writes_what_is_pending_first(db: tuple[Any, Path, list[str]]) -> None:
    engine, path, _ = db
    store = PrincipalTaskStore(engine, flush_delay=60)  # flush_behind never runs here
    await store.initialize()
    await store.save(task("t1", TaskState.TASK_STATE_SUBMITTED), ALICE)
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "seen"), ALICE)
    got = await store.get("t1", ALICE)
    assert got is not None and got.status.state == TaskState.TASK_STATE_WORKING
    assert on_disk(path, "t1")["texts"] == ["seen"]  # what GetTask showed is what a restart finds
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "seen", "listed"), ALICE)
    listed = await store.list(ListTasksRequest(), OPERATOR_CONTEXT)
    assert [t.artifacts[0].parts[-1].text for t in listed.tasks] == ["listed"]
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "seen", "listed", "left"), ALICE)
    await store.flush()  # what the daemon does before it disposes of the engine
    assert on_disk(path, "t1")["texts"] == ["seen", "listed", "left"]


async def test_the_operator_writing_behind_keeps_the_owner_and_other_owners_still_read_none(
    db: tuple[Any, Path, list[str]],
) -> None:
    engine, path, _ = db
    store = PrincipalTaskStore(engine, flush_delay=60)
    await store.initialize()
    await store.save(task("t1", TaskState.TASK_STATE_SUBMITTED), ALICE)
    await store.save(task("t1", TaskState.TASK_STATE_WORKING, "x"), OPERATOR_CONTEXT)
    await store.save(task("t1", TaskState.TASK_STATE_COMPLETED, "x"), OPERATOR_CONTEXT)
    assert on_disk(path, "t1") == {"state": "TASK_STATE_COMPLETED", "texts": ["x"], "owner": "alice"}
    bob = ServerCallContext(user=_Principal(Principal("bob", "user")), state={})
    assert await store.get("t1", bob) is None
    assert (await store.get("t1", OPERATOR_CONTEXT)).status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_restart_does_to_each_open_task_what_the_task_rules_decide(db: tuple[Any, Path, list[str]]) -> None:
    engine, path, _ = db
    store = PrincipalTaskStore(engine, flush_delay=60)
    await store.initialize()
    asked = Message(message_id="q1", role=Role.ROLE_AGENT, parts=[Part(text="may I?")])
    left = {
        "running": TaskState.TASK_STATE_WORKING,
        "queued": TaskState.TASK_STATE_SUBMITTED,
        "asked-resumable": TaskState.TASK_STATE_INPUT_REQUIRED,
        "asked-lost": TaskState.TASK_STATE_INPUT_REQUIRED,
        "a-runs": TaskState.TASK_STATE_WORKING,
        "named-like-a-run": TaskState.TASK_STATE_WORKING,
        "done": TaskState.TASK_STATE_COMPLETED,
    }
    for n, (task_id, state) in enumerate(left.items()):
        stored = task(task_id, state, "partial")
        stored.context_id = f"c{n}"
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            stored.status.message.CopyFrom(asked)
        if task_id == "named-like-a-run":  # its op names a run, but no run says it is its task
            stored.metadata.update({"op": "workflow.run:pipe"})
        await store.save(stored, ALICE)
    failed, parked = await fail_interrupted(store, resumable={("alice", "c2"), ("alice", "c6")}, run_tasks={"a-runs"})
    assert parked == {"asked-resumable": ("alice", "c2")}
    assert {
        e.task_id: (e.context_id, TaskState.Name(e.status.state), e.status.message.parts[0].text) for e in failed
    } == {
        "running": ("c0", "TASK_STATE_FAILED", INTERRUPTED_MESSAGE),
        "queued": ("c1", "TASK_STATE_FAILED", INTERRUPTED_MESSAGE),
        "asked-lost": ("c3", "TASK_STATE_FAILED", UNRESUMABLE_MESSAGE),
        "named-like-a-run": ("c5", "TASK_STATE_FAILED", INTERRUPTED_MESSAGE),
    }
    kept = {
        "asked-resumable": "TASK_STATE_INPUT_REQUIRED",
        "a-runs": "TASK_STATE_WORKING",
        "done": "TASK_STATE_COMPLETED",
    }
    for task_id in left:
        assert on_disk(path, task_id) == {
            "state": kept.get(task_id, "TASK_STATE_FAILED"),
            "texts": ["partial"],
            "owner": "alice",
        }
    lost = await store.get("asked-lost", ALICE)
    assert lost.history[-1].parts[0].text == "may I?"  # the question moved to the history, the reason took its place
    assert lost.status.message.parts[0].text == UNRESUMABLE_MESSAGE and lost.status.message.task_id == "asked-lost"


async def test_an_id_the_store_handed_out_reads_absent_without_a_query_until_saved(
    db: tuple[Any, Path, list[str]],
) -> None:
    engine, _, statements = db
    store = PrincipalTaskStore(engine)
    await store.initialize()
    task_id = store.task_ids.generate(None)  # type: ignore[arg-type]  # what the SDK's context builder calls
    before = len(statements)
    assert await store.get(task_id, ALICE) is None and await store.get(task_id, OPERATOR_CONTEXT) is None
    assert statements[before:] == []
    assert await store.get("not-handed-out", ALICE) is None
    assert any("FROM tasks" in s for s in statements[before:])  # an id from elsewhere is looked up
    await store.save(task(task_id, TaskState.TASK_STATE_SUBMITTED), OPERATOR_CONTEXT)
    assert (await store.get(task_id, OPERATOR_CONTEXT)).status.state == TaskState.TASK_STATE_SUBMITTED


async def test_push_configs_are_looked_up_only_for_tasks_that_have_some(db: tuple[Any, Path, list[str]]) -> None:
    engine, _, statements = db
    store = PushConfigStore(engine)
    assert await store.get_info_for_dispatch("t1") == []  # the first look-up reads which tasks have configs
    before = len(statements)
    assert await store.get_info_for_dispatch("t1") == [] and statements[before:] == []  # every later one: none
    config = TaskPushNotificationConfig(task_id="t1", id="c1", url="https://hooks.example/a2a", token="tok")
    await store.set_info("t1", config, ALICE)
    assert [c.url for c in await store.get_info_for_dispatch("t1")] == ["https://hooks.example/a2a"]
    again = PushConfigStore(engine)  # a restarted daemon reads them from the table
    assert [c.id for c in await again.get_info_for_dispatch("t1")] == ["c1"]
    await store.delete_info("t1", ALICE, "c1")
    assert await store.get_info_for_dispatch("t1") == []
    before = len(statements)
    assert await store.get_info_for_dispatch("t1") == [] and statements[before:] == []


async def test_concurrent_first_push_look_ups_on_a_fresh_database_all_answer(tmp_path: Path) -> None:
    """A fresh daemon's first task ops at once: each first look-up used to create the SDK's table, and all but
    one failed ("table push_notification_configs already exists"), skipping those tasks' push delivery."""
    engine = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'a2a.db'}")
    store = PushConfigStore(engine)
    answers: list[Any] = []
    creations = []  # the SDK's table creation, as each first look-up started it (whether it raced or not)
    create = store._ensure_initialized

    async def counted() -> None:
        creations.append(1)
        await create()

    store._ensure_initialized = counted  # type: ignore[method-assign]

    async def look_up(task_id: str) -> None:
        try:
            answers.append(await store.get_info_for_dispatch(task_id))
        except Exception as err:  # noqa: BLE001 - the failure is what this test reports
            answers.append(repr(err))

    try:
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(look_up, f"t{n}")
    finally:
        await engine.dispose()
    assert answers == [[], [], []]
    assert len(creations) == 1  # one first read; the others wait for it


async def test_a_write_is_one_upsert_and_reads_back_as_the_sdk_store_reads_it(db: tuple[Any, Path, list[str]]) -> None:
    from a2a.server.tasks import DatabaseTaskStore
    from google.protobuf.struct_pb2 import Struct

    engine, _, statements = db
    store = PrincipalTaskStore(engine)
    await store.initialize()
    full = task("t1", TaskState.TASK_STATE_COMPLETED, "done")
    full.status.timestamp.GetCurrentTime()
    full.status.message.CopyFrom(Message(message_id="m2", role=Role.ROLE_AGENT, parts=[Part(text="bye")]))
    metadata = Struct()
    metadata.update({"stopReason": "Completed", "usage": {"usedTokens": 3}})
    full.metadata.CopyFrom(metadata)
    for state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_COMPLETED):  # an insert, then an update
        written = Task()
        written.CopyFrom(full)
        written.status.state = state
        before = len(statements)
        await store.save(written, ALICE)
        sql = [s for s in statements[before:] if "tasks" in s]
        assert len(sql) == 1 and sql[0].startswith("INSERT INTO tasks") and "ON CONFLICT (id) DO UPDATE" in sql[0]
    _twins.pop(engine.sync_engine)  # through the async engine (another database's path): the same one statement
    written.status.state = TaskState.TASK_STATE_FAILED
    before = len(statements)
    await store.save(written, ALICE)
    sql = [s for s in statements[before:] if "tasks" in s]
    assert len(sql) == 1 and sql[0].startswith("INSERT INTO tasks") and "ON CONFLICT (id) DO UPDATE" in sql[0]
    written.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(written, ALICE)
    plain = DatabaseTaskStore(engine, create_table=False)  # the SDK's own reading of the row
    assert await plain.get("t1", ALICE) == full


@pytest.mark.parametrize(("synchronous", "pragma"), [("normal", 1), ("full", 2)])
async def test_every_connection_commits_as_store_synchronous_says(
    tmp_path: Path, synchronous: Any, pragma: int
) -> None:
    """``[a2a] store_synchronous``: the async engine's connections and its twin's (the row writes) alike."""
    from sqlalchemy import text

    engine = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'a2a.db'}", synchronous)
    twin = writer_of(engine)
    assert twin is not None
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA synchronous"))).scalar() == pragma
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        with twin.engine.connect() as conn:
            assert conn.execute(text("PRAGMA synchronous")).scalar() == pragma
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    finally:
        await engine.dispose()


async def test_a_twin_write_names_only_the_columns_given_and_rolls_back_whole(db: tuple[Any, Path, list[str]]) -> None:
    """An upsert of some columns leaves the others as they were; a failing row undoes the rows before it in the
    same write."""
    from sqlalchemy import CheckConstraint, Column, Integer, MetaData, String, Table
    from sqlalchemy.exc import IntegrityError

    from anyagentd_a2a.upsert import upsert, upsert_rows

    engine, path, _ = db
    table = Table(
        "t",
        MetaData(),
        Column("k", String, primary_key=True),
        Column("a", String),
        Column("b", Integer),
        CheckConstraint("b >= 0"),
    )
    async with engine.begin() as conn:
        await conn.run_sync(table.metadata.create_all)
    await upsert(engine, table, ("k",), {"k": "x", "a": "first", "b": 1})
    await upsert(engine, table, ("k",), {"k": "x", "a": "second"})
    with pytest.raises(IntegrityError, match="CHECK constraint failed"):
        await upsert_rows(engine, [(table, ("k",), {"k": "y", "a": "new"}), (table, ("k",), {"k": "z", "b": -1})])
    with sqlite3.connect(path) as conn:
        assert conn.execute("select k, a, b from t order by k").fetchall() == [("x", "second", 1)]


async def test_writes_waiting_for_another_process_lock_hold_one_worker_thread(
    db: tuple[Any, Path, list[str]],
) -> None:
    """Another process holds SQLite's write lock: the daemon's 50 waiting writes hold one thread between them, not
    one each from anyio's shared pool (40 threads), which every other thread hop (``/readyz``'s check) needs; when
    the lock is released every write lands."""
    from sqlalchemy import Column, MetaData, String, Table

    from anyagentd_a2a.upsert import upsert

    engine, path, _ = db
    table = Table("t", MetaData(), Column("k", String, primary_key=True), Column("a", String))
    async with engine.begin() as conn:
        await conn.run_sync(table.metadata.create_all)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    borrowed = -1
    try:
        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(upsert, engine, table, ("k",), {"k": f"k{n}", "a": "x"})
            await anyio.wait_all_tasks_blocked()
            borrowed = anyio.to_thread.current_default_thread_limiter().borrowed_tokens
            other.execute("COMMIT")  # before anything can fail: the writes never wait out their busy timeout
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert borrowed == 0  # a thread of the shared pool stays free for /readyz's check
    with sqlite3.connect(path) as conn:
        assert conn.execute("select count(*) from t").fetchone() == (50,)


async def test_a_failed_write_names_the_databases_reason_not_its_sql(db: tuple[Any, Path, list[str]]) -> None:
    """The SDK answers a failed save with the exception's text: a SQLAlchemy error's holds the statement (and, but
    for ``hide_parameters``, the task's contents). The store raises the SDK's ``InternalError`` with the database's
    reason; nothing of the task is written."""
    from a2a.utils.errors import InternalError

    engine, path, _ = db
    store = PrincipalTaskStore(engine)
    await store.initialize()
    with sqlite3.connect(path) as conn:  # a real SQLite failure at the write
        conn.execute("CREATE TRIGGER full BEFORE INSERT ON tasks BEGIN SELECT RAISE(ABORT, 'disk is full'); END")
    with pytest.raises(InternalError) as raised:
        await store.save(task("t1", TaskState.TASK_STATE_SUBMITTED, "secret prompt"), ALICE)
    assert raised.value.message == "the task store did not write task t1: disk is full"
    assert on_disk(path, "t1") is None


def conversation_rows(path: Path) -> list[tuple[str, str, str, str | None]]:
    """Every stored conversation as a restart would read it: (owner, contextId, agent, resume token)."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "select owner, context_id, agent, resume_token from anyagentd_conversations order by owner, context_id"
        ).fetchall()


def log_deletes(path: Path) -> None:
    """Make the database file itself record every conversation row deleted (in table ``deleted``)."""
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            create table deleted (owner text, context_id text);
            create trigger log_delete after delete on anyagentd_conversations
            begin insert into deleted values (old.owner, old.context_id); end;""")


def deleted(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("select owner, context_id from deleted").fetchall()


async def test_remembering_a_conversation_twice_keeps_one_row_with_the_second_values(
    db: tuple[Any, Path, list[str]],
) -> None:
    engine, path, _ = db
    table = ConversationTable(engine)
    await table.initialize()
    await table.remember("alice", "c1", "codex", "first")
    await table.remember("bob", "c1", "codex", "bob's")  # the same contextId, another owner: its own row
    await table.remember("alice", "c1", "claude", "second")
    assert conversation_rows(path) == [("alice", "c1", "claude", "second"), ("bob", "c1", "codex", "bob's")]
    assert await table.resume_token("alice", "c1", "claude") == "second"
    assert await table.resume_token("alice", "c1", "codex") is None  # the agent is part of the row it replaced
    assert await table.resumable("codex") == {("bob", "c1")} and await table.resumable("claude") == {("alice", "c1")}


async def test_a_remembered_conversation_is_updated_in_place_by_one_upsert_never_deleted(
    db: tuple[Any, Path, list[str]],
) -> None:
    engine, path, statements = db
    table = ConversationTable(engine)
    await table.initialize()
    log_deletes(path)
    for token in ("first", "second"):  # an insert, then an update
        before = len(statements)
        await table.remember("alice", "c1", "codex", token)
        sql = [s for s in statements[before:] if "anyagentd_conversations" in s]
        assert len(sql) == 1 and sql[0].startswith("INSERT INTO anyagentd_conversations")
        assert "ON CONFLICT (owner, context_id) DO UPDATE" in sql[0]
    assert deleted(path) == []  # a reader between two statements never finds the conversation gone
    assert conversation_rows(path) == [("alice", "c1", "codex", "second")]


async def test_the_upsert_of_a_database_without_on_conflict_updates_in_place_too(
    db: tuple[Any, Path, list[str]],
) -> None:
    from anyagentd_a2a.store import conversations_table
    from anyagentd_a2a.upsert import _update_or_insert

    engine, path, _ = db
    table = ConversationTable(engine)
    await table.initialize()
    log_deletes(path)
    for token in ("first", "second"):
        values = {
            "owner": "alice",
            "context_id": "c1",
            "agent": "codex",
            "resume_token": token,
            "updated": datetime(2025, 1, 1),
        }
        async with engine.begin() as conn:
            await _update_or_insert(conn, conversations_table, ("owner", "context_id"), values)
    assert conversation_rows(path) == [("alice", "c1", "codex", "second")] and deleted(path) == []
