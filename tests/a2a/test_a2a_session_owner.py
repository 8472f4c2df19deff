"""Issue 25 (item 4): a conversation's engine session is opened with ``owner=`` its principal, so the runtime's
owner index (``Runtime.sessions(owner=…)``, ``Session.owner``) is the one truth of whose session it is; and the
daemon and the command face (``instance.py``) do not import each other — :class:`~anyagentd_a2a.instance.Instance`
is given the daemon's typed parts (its settings, lifecycle latches, runtime and conversations), never the daemon.

The first tests drive the daemon's own session opening (``Conversation.session_for`` →
``ConversationSessions.open`` → ``ConversationSessions._open_agent``; these were ``Daemon._open_session`` and
``Daemon._open_agent`` before the daemon became assembly) on a real :class:`~anyagentd.runtime.Runtime` with the
scripted mock agent, a real conversation table on SQLite and a real ``Conversations`` pool; only the HTTP face is
not started."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anyio
import pytest

import anyagentd_a2a
from anyagentd.runtime import Runtime
from anyagentd_a2a.config import parse
from anyagentd_a2a.conversations import Conversations
from anyagentd_a2a.sessions import ConversationSessions
from anyagentd_a2a.settings import Options, Settings
from anyagentd_a2a.store import ConversationTable, engine_for
from anyagentd_testing.imports import imports_of, package_modules

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]

PACKAGE = Path(anyagentd_a2a.__file__).resolve().parent


async def _conversation_sessions(tmp_path: Path, *, subagent_tools: bool) -> dict[str, Any]:
    """Open alice's and bob's conversations through the daemon's session opening; returns what the runtime then
    holds: ``{"alice": session, "bob": session, "by_owner": {owner: [session ids]}, "all": [session ids]}``."""
    state = tmp_path / "state"
    state.mkdir()
    settings = Settings(parse({"agent": {"dir": str(tmp_path / "work"), "approval": "auto"}}), Options(state_dir=state))
    engine = engine_for(f"sqlite+aiosqlite:///{state / 'a2a.db'}")
    try:
        table = ConversationTable(engine)
        await table.initialize()
        async with Runtime() as runtime, anyio.create_task_group() as tg:
            tools = None
            if subagent_tools:
                from anyagentd_a2a.subagents.manager import SubagentLimits, SubagentManager
                from anyagentd_a2a.subagents.mcp_server import SubagentMcpServer

                tools = SubagentMcpServer(SubagentManager(runtime, SubagentLimits(), work_root=tmp_path / "subagents"))
                tools.url = "http://127.0.0.1:9/mcp"  # never reached: the mock takes no Http MCP server
            sessions = ConversationSessions(settings.default, settings, runtime, table, tg.start_soon, tools)
            conversations = Conversations(state, sessions=sessions, start_pump=tg.start_soon)
            alice = await conversations.conversation("user:alice", "ctx-1").session_for()
            bob = await conversations.conversation("user:bob", "ctx-1").session_for()
            found = {
                "alice": alice,
                "bob": bob,
                "all": [s.id for s in runtime.sessions()],
                "by_owner": {
                    o: [s.id for s in runtime.sessions(owner=o)] for o in ("user:alice", "user:bob", "operator")
                },
            }
            await runtime.drain(0)
            tg.cancel_scope.cancel()
    finally:
        await engine.dispose()
    return found


@pytest.mark.parametrize("subagent_tools", [False, True], ids=["plain", "with-subagent-tools"])
async def test_a_conversation_session_is_registered_under_its_owner(tmp_path: Path, subagent_tools: bool) -> None:
    found = await _conversation_sessions(tmp_path, subagent_tools=subagent_tools)
    alice, bob = found["alice"], found["bob"]
    assert alice.owner == "user:alice" and bob.owner == "user:bob"
    assert found["by_owner"] == {"user:alice": [alice.id], "user:bob": [bob.id], "operator": []}
    assert found["all"] == [alice.id, bob.id]


# ------------------------------------------------------------------------------------------------ import graph


def _modules() -> dict[str, Path]:
    return package_modules(PACKAGE, "anyagentd_a2a")


def reaches(start: str, goal: str, modules: dict[str, Path]) -> list[str] | None:
    """A chain of imports (any import: module level, ``TYPE_CHECKING``, inside a function) from ``start`` to
    ``goal`` among the package's modules, or ``None``."""
    seen, paths = {start}, [[start]]
    while paths:
        path = paths.pop(0)
        for nxt in sorted(imports_of(path[-1], modules[path[-1]], modules)):
            if nxt == goal:
                return [*path, nxt]
            if nxt not in seen:
                seen.add(nxt)
                paths.append([*path, nxt])
    return None


def test_the_check_sees_a_type_checking_import(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n")
    modules = {"anyagentd_a2a.a": a, "anyagentd_a2a.b": tmp_path / "b.py"}
    assert imports_of("anyagentd_a2a.a", a, modules) == {"anyagentd_a2a.b"}


def test_the_daemon_and_the_instance_import_no_circle() -> None:
    modules = _modules()
    assert "anyagentd_a2a.instance" in reaches("anyagentd_a2a.daemon", "anyagentd_a2a.instance", modules)
    assert reaches("anyagentd_a2a.instance", "anyagentd_a2a.daemon", modules) is None
    tree = ast.parse((PACKAGE / "instance.py").read_text(encoding="utf-8"))
    named = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert "Daemon" not in named


def test_the_instance_is_given_typed_parts_of_the_daemon_never_the_daemon() -> None:
    """Rewritten with issue 25 item 4: the daemon no longer satisfies an ``InstanceHost`` protocol over itself;
    the instance is given the settings, the lifecycle latches and the log ring (issue 27: each path's face is given
    its agent's runtime and conversations)."""
    import inspect

    from anyagentd_a2a.instance import Instance

    parameters = inspect.signature(Instance).parameters.values()
    assert [p.annotation for p in parameters][:3] == ["Settings", "Lifecycle", "LogRing"]
    from anyagentd_a2a.agentface import AgentFace

    face = [p.annotation for p in inspect.signature(AgentFace).parameters.values()]
    assert face == ["Instance", "AgentSpec", "Runtime", "Conversations", "Control", "Agents"]
    assert not any("Daemon" in str(p.annotation) for p in parameters)
