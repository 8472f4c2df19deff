"""Issue 27: per-agent storage on one database. Each served agent has its own task table, its own conversation
(resume-token) table and its own files directory, which the registry (:class:`anyagentd_a2a.scopes.AgentScopes`)
hands out: the default agent keeps the one-agent daemon's tables, an id keeps its tables whatever the default later
is, and an agent taken out of the configuration finds its tables again when it comes back. Two agents' stores on
one engine never see each other's tasks or conversations; the push configs (one table) are kept for every agent's
tasks; retention prunes each agent's tasks, rows and files and nobody else's. On SQLite and PostgreSQL alike
(``database_url``) where the database is what is tested."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, Task, TaskPushNotificationConfig, TaskState, TaskStatus
from sqlalchemy import inspect, text

from anyagentd_a2a.config import RetentionSection
from anyagentd_a2a.conversations import conversation_dir
from anyagentd_a2a.principals import OPERATOR
from anyagentd_a2a.retention import RetainedAgent, Retention
from anyagentd_a2a.scopes import AgentScopes, Scope
from anyagentd_a2a.store import (
    ConversationTable,
    PrincipalTaskStore,
    PushConfigStore,
    _Owner,
    engine_for,
    prune_push_configs,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

ALICE = ServerCallContext(user=_Owner("alice"), state={})
BOB = ServerCallContext(user=_Owner("bob"), state={})
OPERATOR_CONTEXT = ServerCallContext(user=_Owner(OPERATOR.id), state={})
LONG_AGO = 1_000_000_000  # 2001-09-09, in seconds: older than any age
LONG = "z" * 32  # the longest agent id: its tables' and indexes' names must still fit PostgreSQL's 63


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[Any]:
    engine = engine_for(database_url)
    yield engine
    await engine.dispose()


def task(task_id: str, state: int = TaskState.TASK_STATE_COMPLETED, context_id: str = "c1", old: bool = False) -> Task:
    out = Task(id=task_id, context_id=context_id, status=TaskStatus(state=state))
    if old:
        out.status.timestamp.FromSeconds(LONG_AGO)
    return out


async def open_store(engine: Any, scope: Scope) -> tuple[PrincipalTaskStore, ConversationTable]:
    store = PrincipalTaskStore(engine, table=scope.tasks_table)
    await store.initialize()
    table = ConversationTable(engine, scope.conversations_table)
    await table.initialize()
    return store, table


async def test_a_fresh_database_gives_the_default_the_one_agent_tables_and_the_others_their_own(
    engine: Any, tmp_path: Path
) -> None:
    scopes = AgentScopes(engine, tmp_path / "state")
    claimed = await scopes.claim(["codex-cli", "claude"], default="claude")
    assert list(claimed) == ["codex-cli", "claude"]
    assert claimed["claude"] == Scope("claude", "tasks", "anyagentd_conversations", tmp_path / "state")
    assert claimed["claude"].legacy and not claimed["codex-cli"].legacy
    assert claimed["codex-cli"] == Scope(
        "codex-cli",
        "anyagentd_tasks_codex_cli",
        "anyagentd_conversations_codex_cli",
        tmp_path / "state" / "agents" / "codex-cli",
    )
    assert await scopes.claim(["codex-cli", "claude"], default="claude") == claimed  # every start: the same
    assert sorted(await scopes.task_tables()) == ["anyagentd_tasks_codex_cli", "tasks"]
    for bad, default in ((["Claude"], "Claude"), (["a_b"], "a_b"), (["a", "a"], "a"), (["a"], "b")):
        with pytest.raises(ValueError):
            await scopes.claim(bad, default=default)


async def test_an_id_keeps_its_tables_whatever_the_default_and_gets_them_back_when_added_again(
    engine: Any, tmp_path: Path
) -> None:
    scopes = AgentScopes(engine, tmp_path)
    first = await scopes.claim(["claude", "codex"], default="claude")
    swapped = await scopes.claim(["codex", "claude"], default="codex")  # the default changed: nobody's tables move
    assert swapped == first
    alone = await scopes.claim(["codex"], default="codex")  # claude left the configuration
    assert alone == {"codex": first["codex"]}
    assert sorted(await scopes.task_tables()) == ["anyagentd_tasks_codex", "tasks"], "claude's row is kept"
    newcomer = await scopes.claim(["mock", "codex"], default="mock")  # the one-agent tables are claude's still
    assert newcomer["mock"].tasks_table == "anyagentd_tasks_mock" and not newcomer["mock"].legacy
    back = await scopes.claim(["claude", "codex", "mock"], default="mock")
    assert back["claude"] == first["claude"] and back["claude"].legacy


async def test_a_database_the_one_agent_daemon_wrote_opens_with_its_rows_under_the_default(
    engine: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = PrincipalTaskStore(engine)  # the one-agent daemon's stores, as it made them
    await old.initialize()
    await old.save(task("before", context_id="ctx"), ALICE)
    table = ConversationTable(engine)
    await table.initialize()
    await table.remember("alice", "ctx", "claude", "token-1")

    caplog.set_level(logging.INFO, "anyagentd.a2a")
    scopes = AgentScopes(engine, tmp_path)
    claimed = await scopes.claim(["codex", "claude"], default="claude")
    taken = [r for r in caplog.records if "stored before agents had ids" in r.getMessage()]
    assert len(taken) == 1 and "'claude'" in taken[0].getMessage() and taken[0].levelno == logging.WARNING
    claude, claude_rows = await open_store(engine, claimed["claude"])
    codex, codex_rows = await open_store(engine, claimed["codex"])
    assert (await claude.get("before", ALICE)).id == "before"
    assert await claude_rows.resume_token("alice", "ctx", "claude") == "token-1"
    assert await codex.get("before", ALICE) is None and await codex.get("before", OPERATOR_CONTEXT) is None
    assert await codex_rows.resume_token("alice", "ctx", "claude") is None
    caplog.clear()
    await scopes.claim(["codex", "claude"], default="codex")
    assert not [r for r in caplog.records if "stored before agents had ids" in r.getMessage()], (
        "said once, when it happened"
    )


async def test_two_agents_stores_on_one_engine_never_see_each_others_tasks(engine: Any, tmp_path: Path) -> None:
    claimed = await AgentScopes(engine, tmp_path).claim(["claude", "codex"], default="claude")
    claude, _ = await open_store(engine, claimed["claude"])
    codex, _ = await open_store(engine, claimed["codex"])
    await claude.save(task("t-claude", context_id="shared"), ALICE)
    await codex.save(task("t-codex", TaskState.TASK_STATE_WORKING, context_id="shared"), ALICE)
    await codex.save(task("t-bob", context_id="other"), BOB)
    every = ListTasksRequest()
    for store, mine, theirs in ((claude, {"t-claude"}, "t-codex"), (codex, {"t-codex", "t-bob"}, "t-claude")):
        assert await store.get(theirs, ALICE) is None
        assert await store.get(theirs, OPERATOR_CONTEXT) is None
        assert not await store.has(theirs)
        assert {t.id for t in (await store.list(every, OPERATOR_CONTEXT)).tasks} == mine
        assert {t.id for t in await store.tasks_of("alice", "shared")} == mine - {"t-bob"}
    assert {t.id for t in (await claude.list(every, ALICE)).tasks} == {"t-claude"}
    assert {t.id for t in (await codex.list(every, ALICE)).tasks} == {"t-codex"}
    assert (await codex.list(every, BOB)).tasks[0].id == "t-bob"
    assert await claude.has("t-claude") and await codex.has("t-bob")
    assert await claude.count_by_state() == {TaskState.TASK_STATE_COMPLETED: 1}


async def test_stores_of_new_tables_raise_no_warning_and_each_table_has_its_own_indexes(
    engine: Any, tmp_path: Path
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the SDK's create_task_model on its shared base warns (SAWarning)
        claimed = await AgentScopes(engine, tmp_path).claim(["legacy", "a", "a-b", LONG], default="legacy")
        stores = {agent: (await open_store(engine, scope))[0] for agent, scope in claimed.items()}
        again = PrincipalTaskStore(engine, table=claimed["a"].tasks_table)  # a second store on a table: no error
        await again.initialize()
        for agent, store in stores.items():
            await store.save(task(f"done-{agent}"[:36], old=True), ALICE)
            assert await store.prune(86400) == 1  # each creates its own last_updated index first

    def indexes(sync: Any) -> dict[str, set[str]]:
        found = inspect(sync)
        return {name: {i["name"] for i in found.get_indexes(name)} for name in found.get_table_names()}

    async with engine.connect() as conn:
        by_table = await conn.run_sync(indexes)
    assert {"anyagentd_tasks_last_updated", "idx_tasks_owner_last_updated"} <= by_table["tasks"]
    assert "idx_anyagentd_tasks_a_b_updated" in by_table["anyagentd_tasks_a_b"]
    names = [name for scope in claimed.values() for name in by_table[scope.tasks_table]]
    assert len(names) == len(set(names)), "no index name is two tables'"
    assert all(len(name) <= 63 for name in names), names


async def test_the_push_configs_of_every_agents_tasks_are_kept(engine: Any, tmp_path: Path) -> None:
    scopes = AgentScopes(engine, tmp_path)
    claimed = await scopes.claim(["claude", "codex", "gone"], default="claude")
    stores = {agent: (await open_store(engine, scope))[0] for agent, scope in claimed.items()}
    await scopes.claim(["claude", "codex"], default="claude")  # "gone" is no longer served: its tasks stay
    push = PushConfigStore(engine)
    for agent, store in stores.items():
        await store.save(task(f"t-{agent}", old=True), ALICE)
        await push.set_info(f"t-{agent}", TaskPushNotificationConfig(id="c", url="https://hooks.example/x"), ALICE)
    await push.set_info("t-nowhere", TaskPushNotificationConfig(id="c", url="https://hooks.example/x"), ALICE)
    assert await stores["claude"].prune(86400) == 1  # a task prune no longer deletes the other agents' configs

    async def with_configs() -> set[str]:
        async with engine.connect() as conn:
            return {r[0] for r in await conn.execute(text("SELECT task_id FROM push_notification_configs"))}

    assert await with_configs() == {"t-claude", "t-codex", "t-gone", "t-nowhere"}
    assert await prune_push_configs(engine, await scopes.task_tables()) == 2
    assert await with_configs() == {"t-codex", "t-gone"}
    assert await prune_push_configs(engine, []) == 0 and await with_configs() == {"t-codex", "t-gone"}


async def test_two_agents_conversation_tables_are_apart(engine: Any, tmp_path: Path) -> None:
    claimed = await AgentScopes(engine, tmp_path).claim(["claude", "codex"], default="claude")
    _, claude = await open_store(engine, claimed["claude"])
    claude_tasks, _ = await open_store(engine, claimed["claude"])
    _, codex = await open_store(engine, claimed["codex"])
    await claude.remember("alice", "ctx", "claude", "claude-token")
    await codex.remember("alice", "ctx", "codex", "codex-token")
    assert await claude.resume_token("alice", "ctx", "claude") == "claude-token"
    assert await codex.resume_token("alice", "ctx", "codex") == "codex-token"
    assert await codex.resume_token("alice", "ctx", "claude") is None
    assert await claude.resumable("claude") == {("alice", "ctx")} and await claude.resumable("codex") == set()
    assert await codex.prune(-60, claude_tasks.task_table) == [("alice", "ctx")]
    assert await codex.resume_token("alice", "ctx", "codex") is None
    assert await claude.resume_token("alice", "ctx", "claude") == "claude-token", "one agent's prune only"


async def test_retention_prunes_each_agents_tasks_rows_and_files_and_nobody_elses(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    engine = engine_for(f"sqlite+aiosqlite:///{state / 'a2a.db'}")
    try:
        scopes = AgentScopes(engine, state)
        claimed = await scopes.claim(["a", "b", "c"], default="a")
        opened = {agent: await open_store(engine, scope) for agent, scope in claimed.items()}
        push = PushConfigStore(engine)
        for agent, (store, table) in opened.items():
            await store.save(task(f"{agent}-old", context_id="old", old=True), ALICE)
            await table.remember("alice", "old", agent, "token")
            async with engine.begin() as conn:
                await conn.execute(text(f"UPDATE {table.table.name} SET updated = '2001-01-01 00:00:00.000000'"))
            await push.set_info(f"{agent}-old", TaskPushNotificationConfig(id="c", url="https://h.example/"), ALICE)
        b_store, b_table = opened["b"]
        await b_store.save(task("b-new", context_id="new"), ALICE)  # a recent task keeps its conversation's files
        await b_table.remember("alice", "new", "b", "token")
        await push.set_info("b-new", TaskPushNotificationConfig(id="c", url="https://h.example/"), ALICE)
        files = {}
        for key in (("a", "old"), ("b", "old"), ("b", "new"), ("c", "old")):
            directory = conversation_dir(claimed[key[0]].files_root, "alice", key[1])
            (directory / "files").mkdir(parents=True)
            (directory / "files" / "f.txt").write_text(str(key))
            for path in (directory, directory / "files", directory / "files" / "f.txt"):
                os.utime(path, (LONG_AGO, LONG_AGO))
            files[key] = directory
        assert files[("a", "old")].parent == state / "conversations"  # the default's are where they always were
        assert files[("b", "old")].parent == state / "agents" / "b" / "conversations"

        retention = Retention(
            lambda: RetentionSection(tasks="1d"),
            state,
            [
                RetainedAgent(store, table, claimed[agent].files_root, agent=agent)
                for agent, (store, table) in opened.items()
                if agent != "c"
            ],
            task_tables=scopes.task_tables,
        )
        counts = await retention.prune()
        assert counts == {"tasks": 2, "conversations": 2, "files": 2, "runs": 0, "sessions": 0, "subagents": 0}
        for agent, (store, table) in opened.items():
            kept = agent == "c"  # not served now: left as it is
            assert await store.has(f"{agent}-old") is kept
            assert (await table.resume_token("alice", "old", agent) is not None) is kept
            assert files[(agent, "old")].exists() is kept
        assert await b_store.has("b-new") and files[("b", "new")].exists()
        async with engine.connect() as conn:
            configs = {r[0] for r in await conn.execute(text("SELECT task_id FROM push_notification_configs"))}
        assert configs == {"b-new", "c-old"}
    finally:
        await engine.dispose()
