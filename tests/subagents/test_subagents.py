"""Subagents on real engine sessions (the scripted ``mock`` agent), driven through the real MCP server with the
official MCP client over streamable HTTP on 127.0.0.1: sync answers as tool results, async handles, warm
subagents taking more messages, kill, limits refused as tool errors, ownership."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from anyagentd.runtime import Runtime
from anyagentd_a2a.subagents.manager import SubagentLimits, SubagentManager, SubagentNotFound, SubagentRefused
from anyagentd_a2a.subagents.mcp_server import Caller, SubagentMcpServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

HELLO = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
TURN = [
    {"Emit": {"TextDelta": {"message_id": "m1", "text": HELLO}}},
    {"Emit": {"MessageEnded": {"message_id": "m1"}}},
    {"End": {"Completed": {"source": "Protocol"}}},
]
THREE_TURNS = {"turns": [TURN, TURN, TURN]}


@asynccontextmanager
async def served(
    tmp: Path, limits: SubagentLimits | None = None
) -> AsyncIterator[tuple[SubagentManager, SubagentMcpServer]]:
    limits = limits or SubagentLimits()
    async with Runtime(mock_script=THREE_TURNS) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, limits, work_root=tmp / "subagents")
        await tg.start(manager.serve)
        server = SubagentMcpServer(manager)
        await tg.start(server.serve)
        yield manager, server
        tg.cancel_scope.cancel()


@asynccontextmanager
async def client(entry: dict[str, Any]) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = entry["connection"]["Http"]
    async with (
        create_mcp_http_client(headers=http["headers"], timeout=httpx2.Timeout(30)) as transport_client,
        streamable_http_client(http["url"], http_client=transport_client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_tools_are_listed_and_sync_returns_the_answer(tmp_path: Path) -> None:
    async with served(tmp_path) as (manager, server):
        async with client(server.server_for(Caller("user:alice"))) as mcp:
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            assert tools == {"spawn_subagent", "subagent_send", "subagent_status", "subagent_result", "subagent_kill"}
            result = await mcp.call_tool("spawn_subagent", {"agent": "mock", "instruction": "say hello"})
            assert not result.is_error and text_of(result) == HELLO
        [record] = manager.owned("user:alice")
        assert record.status == "completed" and record.result == HELLO and record.session is None
        assert record.to_json()["requested_by"] == "user:alice" and record.attempts == 1


async def test_async_warm_send_and_kill(tmp_path: Path) -> None:
    async with served(tmp_path) as (manager, server), client(server.server_for(Caller("user:alice"))) as mcp:
        handle = json.loads(
            text_of(await mcp.call_tool("spawn_subagent", {"agent": "mock", "instruction": "first", "mode": "async"}))
        )["handle"]
        status = json.loads(text_of(await mcp.call_tool("subagent_result", {"handle": handle, "wait": True})))
        assert status == {"handle": handle, "status": "completed", "mode": "async", "result": HELLO}
        refused = await mcp.call_tool("subagent_send", {"handle": handle, "message": "more"})
        assert refused.is_error and "only a warm subagent takes messages" in text_of(refused)

        warm = await mcp.call_tool("spawn_subagent", {"agent": "mock", "instruction": "one", "mode": "warm"})
        assert json.loads(text_of(warm))["result"] == HELLO
        [live] = [s for s in manager.owned("user:alice") if s.mode == "warm"]
        assert live.status == "idle" and live.session is not None
        for _ in range(2):
            answer = await mcp.call_tool("subagent_send", {"handle": live.handle, "message": "again"})
            assert not answer.is_error
        assert live.attempts == 3
        session = live.session
        killed = json.loads(text_of(await mcp.call_tool("subagent_kill", {"handle": live.handle, "reason": "done"})))
        assert killed["status"] == "cancelled" and killed["error"] == "done"
        assert session.closed and live.session is None


async def test_limits_and_ownership_are_tool_errors(tmp_path: Path) -> None:
    limits = SubagentLimits(agents=("mock",), per_owner=1, depth=1)
    async with served(tmp_path, limits) as (manager, server):
        async with client(server.server_for(Caller("user:alice"))) as alice:
            denied = await alice.call_tool("spawn_subagent", {"agent": "codex", "instruction": "x"})
            assert denied.is_error and "agent 'codex' may not be spawned here" in text_of(denied)
            bad_mode = await alice.call_tool("spawn_subagent", {"agent": "mock", "instruction": "x", "mode": "now"})
            assert bad_mode.is_error and "mode must be one of" in text_of(bad_mode)
            handle = json.loads(
                text_of(await alice.call_tool("spawn_subagent", {"agent": "mock", "instruction": "x", "mode": "warm"}))
            )
        async with client(server.server_for(Caller("user:bob"))) as bob:
            [record] = manager.owned("user:alice")
            foreign = await bob.call_tool("subagent_status", {"handle": record.handle})
            assert foreign.is_error and "no such subagent" in text_of(foreign)
        async with client(server.server_for(Caller("user:carol", depth=1, handle="sa-parent"))) as deep:
            too_deep = await deep.call_tool("spawn_subagent", {"agent": "mock", "instruction": "x"})
            assert too_deep.is_error and "nest 1 deep at most" in text_of(too_deep)
        assert handle  # the warm one's first answer
        with pytest.raises(SubagentNotFound):
            manager.get(record.handle, "user:bob")
        record.status = "running"  # a running subagent counts against the owner's limit
        with pytest.raises(SubagentRefused, match="already has 1 subagents running"):
            await manager.spawn("user:alice", "mock", "y")


async def test_a_bearer_is_needed(tmp_path: Path) -> None:
    async with served(tmp_path) as (manager, server):
        entry = server.server_for(Caller("user:alice"))
        server.forget(entry)
        async with client(entry) as mcp:
            result = await mcp.call_tool("subagent_status", {"handle": "sa-x"})
            assert result.is_error and "needs the bearer" in text_of(result)


async def test_records_survive_a_restart(tmp_path: Path, database_url: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    from anyagentd_a2a.subagents.store import SubagentStore

    url = database_url  # SQLite, then PostgreSQL
    slow = {"turns": [[{"Sleep": 10000}]]}
    engine = create_async_engine(url)
    store = await SubagentStore(engine).open()
    async with Runtime(mock_script=THREE_TURNS) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s", save=store.save)
        await tg.start(manager.serve)
        warm = await manager.spawn("user:alice", "mock", "one", "warm")
        done = await manager.spawn("user:alice", "mock", "two", "sync")
        tg.cancel_scope.cancel()
    async with Runtime(mock_script=slow) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s", save=store.save)
        await tg.start(manager.serve)
        running = await manager.spawn("user:alice", "mock", "three", "async")
        with anyio.fail_after(5):
            while running.status != "running":
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    await engine.dispose()
    loaded = {r.handle: r for r in await SubagentStore(create_async_engine(url)).load()}
    assert loaded[done.handle].status == "completed", loaded[done.handle]
    assert loaded[warm.handle].status == "idle" and loaded[warm.handle].session is None
    assert (loaded[running.handle].status, loaded[running.handle].error) == ("failed", "interrupted")


async def test_open_with_tools_offers_the_server_and_withdraws_its_bearer(tmp_path: Path, claude: Any) -> None:
    claude({"turns": [{"text": "hi"}]})
    work = tmp_path / "w"
    work.mkdir()
    async with served(tmp_path) as (manager, server), anyio.create_task_group() as tg:
        session = await server.open_with_tools(
            manager.runtime, "claude", work, Caller("user:alice"), spawn=tg.start_soon
        )
        assert server.live_bearers == 1
        await session.close()
        with anyio.fail_after(10):
            while server.live_bearers:
                await anyio.sleep(0.01)
        # the scripted mock takes no MCP server: opened without it, no bearer left behind
        mock = await server.open_with_tools(manager.runtime, "mock", work, Caller("user:alice"), spawn=tg.start_soon)
        assert not mock.closed and server.live_bearers == 0
        await mock.close()


def test_child_instances_in_the_configuration() -> None:
    from anyagentd_a2a.config import ConfigError, parse

    section = {"enabled": True, "instances": [{"name": "child", "url": "http://127.0.0.1:9", "bearer": "{{secret:C}}"}]}
    loaded = parse({"subagents": section}, env={"C": "s3cret"})
    assert loaded.secrets.instances["child"].get_secret_value() == "s3cret"
    assert "s3cret" not in repr(loaded) and loaded.config.subagents.instances[0].bearer == "{{secret:C}}"
    for bad, key in (({"bearer": "s3cret"}, "bearer"), ({"url": "ftp://x"}, "url"), ({"name": "a b"}, "name")):
        with pytest.raises(ConfigError) as caught:
            parse({"subagents": {"instances": [{**section["instances"][0], **bad}]}}, env={"C": "s3cret"})
        assert caught.value.key.endswith(key) and "s3cret" not in str(caught.value)
    with pytest.raises(ConfigError, match="configured twice"):
        parse({"subagents": {"instances": section["instances"] * 2}}, env={"C": "s3cret"})
    with pytest.raises(ConfigError, match="'C' is not set"):
        parse({"subagents": section}, env={})


def test_parents_in_the_configuration() -> None:
    from anyagentd_a2a.config import ConfigError, parse

    parent = {"url": "http://127.0.0.1:9/", "bearer": "{{secret:P}}"}
    loaded = parse({"subagents": {"parents": [parent]}}, env={"P": "p4rent"})
    assert loaded.secrets.parents["http://127.0.0.1:9"].get_secret_value() == "p4rent"  # matched without the slash
    assert loaded.config.subagents.parents[0].principal == "operator" and "p4rent" not in repr(loaded)
    for bad, key in (({"bearer": "p4rent"}, "bearer"), ({"url": "x"}, "url"), ({"principal": "alice"}, "principal")):
        with pytest.raises(ConfigError) as caught:
            parse({"subagents": {"parents": [{**parent, **bad}]}}, env={"P": "p4rent"})
        assert caught.value.key.endswith(key) and "p4rent" not in str(caught.value)
    with pytest.raises(ConfigError, match="configured twice"):
        parse({"subagents": {"parents": [parent, {**parent, "url": "http://127.0.0.1:9"}]}}, env={"P": "p4rent"})
    with pytest.raises(ConfigError, match="'P' is not set"):
        parse({"subagents": {"parents": [parent]}}, env={})


TOOL = {"id": "t1", "kind": "Read", "title": "Read notes.txt", "status": "Running"}
BUSY_TURN = [
    {"Emit": {"TextDelta": {"message_id": "m1", "text": "Reading "}}},
    {"Emit": {"TextDelta": {"message_id": "m1", "text": "the notes."}}},
    {"Emit": {"MessageEnded": {"message_id": "m1"}}},
    {"Emit": {"ToolUpdated": TOOL}},
    {"Emit": {"ToolUpdated": {**TOOL, "output": "more output, same status"}}},
    {"Emit": {"ToolUpdated": {**TOOL, "status": "Completed"}}},
    {"End": {"Completed": {"source": "Protocol"}}},
]


async def test_a_local_subagents_events_are_its_stream(tmp_path: Path) -> None:
    async with Runtime(mock_script={"turns": [BUSY_TURN, BUSY_TURN]}) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s", events_kept=4)
        await tg.start(manager.serve)
        record = await manager.spawn("user:alice", "mock", "read", "warm")
        first = [(e["stream"], e["event"]["subject"]) for e in record.events]
        assert first == [
            ("events", "TextDelta"),
            ("events", "ToolUpdated"),
            ("events", "ToolUpdated"),
            ("events", "TurnEnded"),
        ]
        text, running, completed, ended = (e["event"] for e in record.events)
        assert text["data"]["kind"] == {"TextDelta": {"message_id": "m1", "text": "Reading the notes."}}  # gathered
        assert running["data"]["kind"]["ToolUpdated"]["status"] == "Running"  # one per status change
        assert completed["data"]["kind"]["ToolUpdated"]["status"] == "Completed"
        assert {e["correlation"] for e in (text, running, ended)} == {ended["data"]["turn_info"]["id"]}
        assert text["id"] < running["id"] < completed["id"] < ended["id"]
        # the same keeping as a child's _instance.emit: bounded, newest last, one list
        await manager.send(record.handle, "user:alice", "again")
        assert len(record.events) == 4 and record.events[-1]["event"]["id"] > ended["id"]
        manager.child_event(record.handle, "events", {"id": 1, "subject": "Custom", "correlation": None, "data": {}})
        assert len(record.events) == 4 and record.events[-1] == {
            "stream": "events",
            "event": {"id": 1, "subject": "Custom", "correlation": None, "data": {}},
        }
        tg.cancel_scope.cancel()


async def test_mirrored_events_are_cut_and_their_integers_are_ints(tmp_path: Path) -> None:
    async with Runtime(mock_script=THREE_TURNS) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s")
        await tg.start(manager.serve)
        record = await manager.spawn("user:alice", "mock", "hello")
        # as an _instance.emit brings it: a protobuf Struct made every number a double
        manager.child_event(
            record.handle,
            "events",
            {
                "id": 3.0,
                "subject": "Custom",
                "correlation": "t" * 3000,
                "data": {"sequence": 3.0, "ratio": 0.5, "text": "x" * 5000, "at": {"secs_since_epoch": 1796127474.0}},
            },
        )
        kept = record.events[-1]["event"]
        assert kept["id"] == 3 and type(kept["id"]) is int and type(kept["data"]["sequence"]) is int
        assert type(kept["data"]["at"]["secs_since_epoch"]) is int and kept["data"]["ratio"] == 0.5
        for text in (kept["correlation"], kept["data"]["text"]):
            assert len(text.encode()) <= 2048 and text.endswith("…")
        tg.cancel_scope.cancel()


async def test_a_kill_leaves_an_ended_subagent_as_it_was(tmp_path: Path) -> None:
    slow = {"turns": [[{"Sleep": 10000}]]}
    async with Runtime(mock_script=slow) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s")
        await tg.start(manager.serve)
        record = await manager.spawn("user:alice", "mock", "take your time", "async")
        with anyio.fail_after(10):
            while record.status != "running":
                await anyio.sleep(0.01)
        await manager.kill(record.handle, "user:alice", "first")
        assert (record.status, record.error) == ("cancelled", "first")
        await manager.kill(record.handle, "user:alice", "second")
        assert (record.status, record.error) == ("cancelled", "first")
        tg.cancel_scope.cancel()


async def test_instance_result_is_for_child_instances_only(tmp_path: Path) -> None:
    async with Runtime(mock_script=THREE_TURNS) as runtime, anyio.create_task_group() as tg:
        manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "s")
        await tg.start(manager.serve)
        record = await manager.spawn("user:alice", "mock", "hello", "warm")
        record.status = "running"  # even with a turn running, a local subagent takes no report
        with pytest.raises(SubagentRefused, match="is not a child instance"):
            await manager.child_result(record.handle, "completed", "forged")
        assert record.result == HELLO and record.status == "running"
        tg.cancel_scope.cancel()


def test_a_parent_reports_only_to_messages_from_its_principal() -> None:
    from pydantic import SecretStr

    from anyagentd_a2a.subagents.reports import Parent, Parents, TaskReport

    started: list[object] = []
    parents = Parents([Parent("http://127.0.0.1:9", SecretStr("p4rent"), "user:alice")], spawn=started.append)
    metadata = {"agentd": {"handle": "sa-01X", "parent": "http://127.0.0.1:9/"}}
    assert parents.report_for("user:bob", metadata) is None
    assert parents.report_for("operator", metadata) is None
    assert started == []
    report = parents.report_for("user:alice", metadata)
    assert isinstance(report, TaskReport) and report.handle == "sa-01X" and started == [report.run]


def test_subagent_configuration_refusals() -> None:
    from anyagentd_a2a.config import ConfigError, parse

    child = {"name": "child", "url": "http://127.0.0.1:9"}
    with pytest.raises(ConfigError) as caught:
        parse({"subagents": {"instances": [{**child, "reports": "yes"}]}}, env={})
    assert caught.value.key == "subagents.instances.0.reports"
    parent = {"url": "http://127.0.0.1:9", "bearer": "{{secret:P}}", "principal": "user:carol"}
    with pytest.raises(ConfigError) as caught:
        parse({"subagents": {"parents": [parent]}}, env={"P": "p4rent"})
    assert caught.value.key == "subagents.parents.0.principal"
    assert "'user:carol' is not a configured" in str(caught.value)
    principal = {"id": "carol", "bearer": "{{secret:C}}"}
    loaded = parse({"a2a": {"principals": [principal]}, "subagents": {"parents": [parent]}}, env={"P": "p", "C": "c"})
    assert loaded.config.subagents.parents[0].principal == "user:carol"
    with pytest.raises(ConfigError, match="'agent:carol' is not a configured"):  # the role is part of the name
        parse(
            {"a2a": {"principals": [principal]}, "subagents": {"parents": [{**parent, "principal": "agent:carol"}]}},
            env={"P": "p", "C": "c"},
        )
