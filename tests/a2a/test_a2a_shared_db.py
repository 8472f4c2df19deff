"""Several daemons on one PostgreSQL (issue 29): a daemon's start never fails the tasks another live daemon serves;
a daemon killed with -9 has its open tasks and workflow runs taken over by a survivor once its lease runs out; the
membership rules (:mod:`anyagentd_a2a.members`); the push-config store on PostgreSQL. Real PostgreSQL
(``postgres_url``), real daemons."""

from __future__ import annotations

import json
import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskPushNotificationConfig
from a2a_helpers import SLOW, wait_for, wait_state
from test_a2a_commands import ALICE, ENV, OPERATOR, command, result_of, task_result
from test_a2a_workflows import config as workflow_config
from test_a2a_workflows import run_of, start_run, wait_run

from anyagentd_a2a.calls import call_context
from anyagentd_a2a.members import RUN, TASK, Member, Membership, dead_members, heartbeat, may_recover
from anyagentd_a2a.principals import Principal
from anyagentd_a2a.store import PushConfigStore, engine_for

pytestmark = pytest.mark.timeout(180)

LEASE = "5"
"""The members' lease in these tests (seconds, env ``ANYAGENTD_A2A_MEMBER_LEASE``): short, so a killed daemon is known
soon, yet long enough that a live daemon on a loaded CI machine (4 test workers on 2 cores) never misses a renewal
(at 1.5 s, one CI run saw no takeover within 30 s)."""
T0 = datetime(2026, 1, 1, 12, 0, 0)


def member(instance: str, seen: float, home: str = "h:/a") -> Member:
    return Member(instance, f"http://{instance}", home, T0, T0 - timedelta(seconds=seen))


# ------------------------------------------------------------------------------------------------ the rules


def test_a_member_is_dead_once_its_lease_ran_out_or_its_home_is_mine() -> None:
    rows = [member("me", 100), member("fresh", 1), member("stale", 16), member("edge", 15), member("here", 1, "h:/b")]
    dead = dead_members(rows, T0, 15.0, me="me", home="h:/b")
    assert [m.instance for m in dead] == ["stale", "here"]  # never me; a member in my state dir died before me
    assert [m.instance for m in dead_members(rows, T0, 15.0, me="me", home="h:/b", exclusive=True)] == [
        "fresh",
        "stale",
        "edge",
        "here",
    ]  # a SQLite file one daemon holds at a time: every other member is dead
    assert heartbeat(15.0) == 5.0


def test_work_may_be_recovered_when_its_holder_is_unknown_dead_or_gone() -> None:
    live = {"me", "other"}
    assert may_recover(None, live)  # written before holders existed
    assert may_recover("dead", live) and not may_recover("other", live) and not may_recover("me", live)


@pytest.mark.anyio
async def test_two_survivors_never_take_the_same_item(postgres_url: str, tmp_path: Path) -> None:
    """Work held by a dead member, by nobody (NULL) and not at all (no row) is taken by exactly one of two members
    claiming at once; a live member's work by neither."""
    import anyio

    engine = engine_for(postgres_url)
    try:
        dead = Membership(engine, home="h:/dead", lease=60)
        live = Membership(engine, home="h:/live", lease=60)
        first, second = Membership(engine, home="h:/1", lease=60), Membership(engine, home="h:/2", lease=60)
        for one in (dead, live, first, second):
            await one.join(f"http://{one.home}")
        await dead.hold(TASK, "t-dead")
        await live.hold(TASK, "t-live")
        await dead.hold(RUN, "r-dead")
        async with engine.begin() as conn:
            from sqlalchemy import update

            from anyagentd_a2a.members import holders_table, members_table

            await conn.execute(holders_table.insert().values(kind=TASK, item="t-null", instance=None))
            await conn.execute(
                update(members_table)
                .where(members_table.c.instance == dead.instance)
                .values(last_seen=datetime(2000, 1, 1))
            )
        assert [m.instance for m in await first.dead()] == [dead.instance]
        items = ["t-dead", "t-live", "t-null", "t-absent"]
        got: dict[str, set[str]] = {}

        async def claim(who: Membership) -> None:
            got[who.instance] = await who.claim(TASK, items)

        async with anyio.create_task_group() as tg:
            tg.start_soon(claim, first)
            tg.start_soon(claim, second)
        a, b = got[first.instance], got[second.instance]
        assert not a & b and a | b == {"t-dead", "t-null", "t-absent"}, got
        assert await first.take_over(RUN, ["r-dead"], dead.instance) == {"r-dead"}
        assert await second.take_over(RUN, ["r-dead"], dead.instance) == set()  # taken: the second finds none
        assert await first.forget((await first.dead())[0]) and await first.dead() == []
    finally:
        await engine.dispose()


# ------------------------------------------------------------------------------------------------ push configs


@pytest.mark.anyio
async def test_the_push_config_store_on_postgresql(postgres_url: str) -> None:
    """Set, get, list and delete push configs on PostgreSQL: a task id longer than the SDK's VARCHAR(36), configs
    of two owners on one task kept apart, a second store (another daemon) reading what the first wrote."""
    engine = engine_for(postgres_url)
    alice, bob = call_context(Principal("alice", "user")), call_context(Principal("bob", "user"))
    long_id = "workflow.run:pipe-" + "x" * 100
    try:
        store = PushConfigStore(engine)
        for task_id, owner, config_id in ((long_id, alice, "a1"), (long_id, alice, "a2"), (long_id, bob, "b1")):
            config = TaskPushNotificationConfig(
                task_id=task_id, id=config_id, url=f"https://example.com/{config_id}", token=f"tok-{config_id}"
            )
            await store.set_info(task_id, config, owner)
        assert sorted(c.id for c in await store.get_info(long_id, alice)) == ["a1", "a2"]
        assert [c.id for c in await store.get_info(long_id, bob)] == ["b1"]
        other = PushConfigStore(engine)  # another daemon on the database
        assert sorted(c.id for c in await other.get_info_for_dispatch(long_id)) == ["a1", "a2", "b1"]
        await store.delete_info(long_id, alice, "a1")
        assert [c.id for c in await store.get_info(long_id, alice)] == ["a2"]
        await store.delete_info(long_id, bob)
        assert await store.get_info(long_id, bob) == []
        assert [c.url for c in await store.get_info_for_dispatch(long_id)] == ["https://example.com/a2"]
    finally:
        await engine.dispose()


# ------------------------------------------------------------------------------------------------ real daemons


def shared(postgres_url: str, extra: str = "") -> str:
    return f'[a2a]\nstore = "{postgres_url}"\n' + extra


def instance_of(daemon: Any) -> str:
    """The member id ``daemon`` logged when it joined."""
    line = wait_for(lambda: next((s for s in daemon.stderr if "joined the database" in s), None), "joined")
    return str(json.loads(line)["msg"].split()[1])


def test_a_second_daemons_start_leaves_the_first_ones_running_task_alone(
    a2a_daemon: Any, postgres_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "slow.json"
    script.write_text(
        json.dumps(
            {"turns": [[*SLOW["turns"][0][:1], {"Sleep": 15000}, {"End": {"Completed": {"source": "Protocol"}}}]]}
        )
    )
    env = {"ANYAGENTD_A2A_MEMBER_LEASE": LEASE}
    first = a2a_daemon(config=shared(postgres_url), env=env, mock=str(script), state_dir=tmp_path / "first")
    running = first.send_text("long", configuration={"returnImmediately": True})
    wait_state(first, running["id"], "TASK_STATE_WORKING")
    second = a2a_daemon(config=shared(postgres_url), env=env, mock=str(script), state_dir=tmp_path / "second")
    seen = second.rpc("GetTask", {"id": running["id"]}).json()["result"]
    assert seen["status"]["state"] == "TASK_STATE_WORKING", seen  # the second's start did not fail it
    done = wait_state(first, running["id"], "TASK_STATE_COMPLETED", timeout=60)
    assert done["artifacts"][0]["parts"][0]["text"] == "working"
    assert not any("marked" in line and "FAILED" in line for line in second.stderr)


def test_a_killed_daemons_running_task_is_failed_by_the_survivor(
    a2a_daemon: Any, postgres_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    env = {"ANYAGENTD_A2A_MEMBER_LEASE": LEASE}
    first = a2a_daemon(config=shared(postgres_url), env=env, mock=str(script), state_dir=tmp_path / "first")
    second = a2a_daemon(config=shared(postgres_url), env=env, mock=str(script), state_dir=tmp_path / "second")
    dead = instance_of(first)
    running = first.send_text("long", configuration={"returnImmediately": True})
    wait_state(first, running["id"], "TASK_STATE_WORKING")
    first.signal(signal.SIGKILL)
    first.wait()
    failed = wait_state(second, running["id"], "TASK_STATE_FAILED", timeout=90)
    assert "stopped while this task was running" in failed["status"]["message"]["parts"][0]["text"]
    line = wait_for(lambda: next((s for s in second.stderr if "is dead" in s), None), "the takeover's log line")
    message = json.loads(line)["msg"]
    assert dead in message and first.url in message and "took over 1 task(s) (1 failed" in message, message


def test_a_killed_daemons_workflow_run_is_taken_over_and_completed_by_a_signal(
    a2a_daemon: Any, postgres_url: str, tmp_path: Path
) -> None:
    env = {**ENV, "ANYAGENTD_A2A_MEMBER_LEASE": LEASE}
    config = workflow_config().replace("[a2a]\n", f'[a2a]\nstore = "{postgres_url}"\n', 1)
    first = a2a_daemon(config=config, env=env, mock="hello", state_dir=tmp_path / "first")
    second = a2a_daemon(config=config, env=env, mock="hello", state_dir=tmp_path / "second")
    task = start_run(first, ALICE, issue="#29")
    run = run_of(first, task, ALICE)
    before = wait_run(first, run, "suspended")
    # the second daemon does not drive another live daemon's run: a signal through it reaches nothing
    _, none = task_result(command(second, "workflow.signal", token=ALICE, name="go", run=run), "workflow.signal")
    assert none["delivered"] == 0
    first.signal(signal.SIGKILL)
    first.wait()
    wait_for(lambda: any("is dead" in s and "1 run(s)" in s for s in second.stderr), "the run's takeover")
    _, delivered = task_result(command(second, "workflow.signal", token=ALICE, name="go", run=run), "workflow.signal")
    assert delivered["delivered"] == 1
    done = wait_state(second, task["id"], "TASK_STATE_COMPLETED", token=ALICE, timeout=90)
    assert done["metadata"]["run"] == run
    final = result_of(command(second, "run.get", token=OPERATOR, run=run), "run.get")["run"]
    assert final["status"] == "completed", final
    assert final["steps"]["write"]["started"] == before["steps"]["write"]["started"], "the done step never ran again"
    assert all(step["attempt"] <= 1 for step in final["steps"].values()), final["steps"]
    assert final["steps"]["go"]["output"]["signal"] == "go"


@pytest.mark.anyio
async def test_a_saved_task_has_its_holder_and_a_gone_tasks_holder_is_pruned(postgres_url: str) -> None:
    from a2a.types import Task, TaskState, TaskStatus
    from sqlalchemy import select

    from anyagentd_a2a.members import holders_table, prune_holders
    from anyagentd_a2a.store import PrincipalTaskStore

    engine = engine_for(postgres_url)
    alice = call_context(Principal("alice", "user"))
    try:
        members = Membership(engine, home="h:/x", lease=60)
        await members.join()
        store = PrincipalTaskStore(engine)
        store.members = members
        await store.initialize()
        task_id = "7d0c6a5e-0000-4000-8000-000000000009"
        await store.save(Task(id=task_id, context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)), alice)
        assert await members.held_by(TASK, members.instance) == [task_id]
        assert await prune_holders(engine, ["tasks"]) == 0  # its task is stored
        await store.delete(task_id, alice)
        assert await prune_holders(engine, ["tasks"]) == 1
        async with engine.connect() as conn:
            assert (await conn.execute(select(holders_table))).all() == []
    finally:
        await engine.dispose()
