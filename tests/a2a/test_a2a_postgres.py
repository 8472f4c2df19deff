"""The A2A daemon's stores on a real PostgreSQL (issue 29): a server on loopback started by the tests
(``postgres_url``, :mod:`anyagentd_testing.postgres`), a fresh database per test. The task store keeps owners apart,
takes client-chosen contextIds of any length (the SDK's column is VARCHAR(36), which PostgreSQL enforces), widens a
table an older daemon created, and recovers at restart; a daemon serves on it, and a second daemon on the same
database reads what the first stored."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus
from sqlalchemy import text

from anyagentd_a2a.calls import call_context
from anyagentd_a2a.principals import OPERATOR, Principal
from anyagentd_a2a.store import ConversationTable, PrincipalTaskStore, engine_for, fail_interrupted

pytestmark = pytest.mark.timeout(120)

LONG = "ctx-" + "x" * 296  # a client-chosen contextId of 300 characters
ALICE, BOB = call_context(Principal("alice", "user")), call_context(Principal("bob", "user"))


def task(task_id: str, state: int, context_id: str = LONG) -> Task:
    return Task(id=task_id, context_id=context_id, status=TaskStatus(state=state))


@pytest.mark.anyio
async def test_the_task_store_keeps_owners_apart_and_contextids_of_any_length(postgres_url: str) -> None:
    engine = engine_for(postgres_url)
    try:
        store = PrincipalTaskStore(engine)
        await store.initialize()
        done = "7d0c6a5e-0000-4000-8000-000000000001"
        running = "7d0c6a5e-0000-4000-8000-000000000002"
        await store.save(task(done, TaskState.TASK_STATE_COMPLETED), ALICE)
        await store.save(task(running, TaskState.TASK_STATE_WORKING), ALICE)
        await store.flush()
        got = await store.get(done, ALICE)
        assert got is not None and got.context_id == LONG
        assert await store.get(done, BOB) is None  # another principal's task does not exist for bob
        listed = await store.list(ListTasksRequest(context_id=LONG), call_context(OPERATOR))
        assert sorted(t.id for t in listed.tasks) == [done, running]  # the operator sees everyone's
        assert sorted(t.id for t in await store.tasks_of("alice", LONG)) == [done, running]

        # a restart: the running task died with the process, the completed one is kept
        again = PrincipalTaskStore(engine)
        await again.initialize()
        failed, parked = await fail_interrupted(again)
        assert [e.task_id for e in failed] == [running] and parked == {}
        read = await again.get(running, ALICE)
        assert read is not None and read.status.state == TaskState.TASK_STATE_FAILED

        conversations = ConversationTable(engine)
        await conversations.initialize()
        await conversations.remember("alice", LONG, "claude", "resume-token-1")
        assert await conversations.resume_token("alice", LONG, "claude") == "resume-token-1"
        assert await conversations.resumable("claude") == {("alice", LONG)}
    finally:
        await engine.dispose()


@pytest.mark.anyio
async def test_a_table_an_older_daemon_created_is_widened(postgres_url: str) -> None:
    """A database an older daemon made holds the SDK's own ``tasks`` table (``context_id VARCHAR(36)``): the store
    widens it at start, and a long contextId is stored."""
    engine = engine_for(postgres_url)
    try:
        older = DatabaseTaskStore(engine, create_table=True)
        await older.initialize()

        async def context_id_length() -> Any:
            async with engine.connect() as conn:
                return (
                    await conn.execute(
                        text(
                            "SELECT character_maximum_length FROM information_schema.columns "
                            "WHERE table_name = 'tasks' AND column_name = 'context_id'"
                        )
                    )
                ).scalar()

        assert await context_id_length() == 36
        store = PrincipalTaskStore(engine)
        await store.initialize()
        assert await context_id_length() is None  # TEXT
        await store.save(task("7d0c6a5e-0000-4000-8000-000000000003", TaskState.TASK_STATE_COMPLETED), ALICE)
        await store.flush()
        assert (await store.get("7d0c6a5e-0000-4000-8000-000000000003", ALICE)) is not None
    finally:
        await engine.dispose()


def test_two_daemons_on_one_postgresql_read_the_same_tasks(a2a_daemon: Any, postgres_url: str, tmp_path: Path) -> None:
    """A daemon on PostgreSQL serves a conversation in a long client-chosen context; a second daemon (its own state
    dir) on the same database reads the task through GetTask and ListTasks."""
    config = f'[a2a]\nstore = "{postgres_url}"\n'
    first = a2a_daemon(config=config, mock="hello", state_dir=tmp_path / "first")
    done = first.send_text("hi", context_id=LONG)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED" and done["contextId"] == LONG, done
    first.signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0
    second = a2a_daemon(config=config, mock="hello", state_dir=tmp_path / "second")
    read = second.rpc("GetTask", {"id": done["id"]}).json()["result"]
    assert read["status"]["state"] == "TASK_STATE_COMPLETED" and read["contextId"] == LONG, read
    listed = second.rpc("ListTasks", {"contextId": LONG}).json()["result"]["tasks"]
    assert [t["id"] for t in listed] == [done["id"]]
    again = second.send_text("and again", context_id=LONG)
    assert again["status"]["state"] == "TASK_STATE_COMPLETED" and again["contextId"] == LONG, again
