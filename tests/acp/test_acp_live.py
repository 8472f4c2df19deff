"""End to end: the REAL pinned ACP agents (``codex-acp`` 0.16.0 and ``claude-agent-acp`` 0.23.1 from
``tests/agents``) against the scripted model server, through :class:`anyagentd.runtime.Runtime` and their catalog
ids (discovery finds them through ``ANYAGENTD_CODEX_ACP_BIN`` / ``ANYAGENTD_CLAUDE_ACP_BIN``).

They fail (never skip) when an agent is missing. codex-acp gets its provider ``-c`` flags through
``ANYAGENTD_CODEX_ACP_ARGS``; see ``acp_support``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_support import STEP

from anyagentd.runtime import Runtime
from anyagentd_testing.conformance import Conformance
from anyagentd_testing.events import EventStream, event_tag

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

AGENTS = ["codex-acp", "claude-acp"]


def write_script(agent: str, name: str = "out.txt") -> dict[str, Any]:
    """One tool call that creates ``name`` in the working directory, then a final text."""
    if agent == "codex-acp":
        tool = {"name": "exec_command", "input": {"cmd": f"printf 'hi\\n' > {name}"}}
    else:
        tool = {"name": "Write", "input": {"file_path": "{{cwd}}/" + name, "content": "hi\n"}}
    return {"turns": [{"text": "Writing the file.", "tool": tool}, {"text": "Done."}]}


@pytest.fixture
def agent(request: pytest.FixtureRequest) -> Any:
    """``agent(script)`` starts the model server and the environment of the parametrized agent."""
    return request.getfixturevalue(request.param.replace("-", "_"))


def after_cancel(agent: str, *turns: dict[str, Any]) -> list[dict[str, Any]]:
    """The script turns for the prompts after a cancelled one. The cancelled prompt got no reply, so codex-acp's
    next request is turn 0 again; claude-acp's session is reloaded after a cancel, and Claude Code's resume
    records the interrupted turn with a synthetic assistant reply ("No response requested."): turn 1."""
    return [{"text": "(the cancelled turn)"}, *turns] if agent == "claude-acp" else list(turns)


def request_text(entry: dict[str, Any]) -> str:
    body = entry["body"]
    return json.dumps(body.get("messages") or body.get("input") or [], ensure_ascii=False)


class AcpConformance(Conformance):
    """The adapter contract (anyagentd_testing.conformance) against a real ACP agent: the resume token is
    ACP's session id (session/load), the version the agent's ``agentInfo``."""

    cancel_within = 1.0
    features = frozenset({"Resume"})

    def check_permission(self, request: Any) -> None:
        assert request.tool.kind == ("Execute" if self.agent == "codex-acp" else "Edit")

    def write_tool(self, name: str) -> dict[str, Any]:
        return write_script(self.agent, name)["turns"][0]["tool"]

    def after_cancel(self, *turns: dict[str, Any]) -> list[dict[str, Any]]:
        return after_cancel(self.agent, *turns)


class TestCodexAcpConformance(AcpConformance):
    agent = "codex-acp"
    version = "0.16.0"
    denial_aborts = True  # codex-acp sends DenyOnce as Codex's "abort"

    @pytest.fixture
    def scripted(self, codex_acp: Any) -> Any:
        return codex_acp


class TestClaudeAcpConformance(AcpConformance):
    agent = "claude-acp"
    version = "0.23.1"

    def denial_seen(self) -> str:
        return "refused"

    @pytest.fixture
    def scripted(self, claude_acp: Any) -> Any:
        return claude_acp


@pytest.mark.parametrize("agent", AGENTS, indirect=True)
async def test_after_a_cancel_every_prompt_gets_its_own_answer(
    agent: Any, work: Path, request: pytest.FixtureRequest
) -> None:
    """claude-agent-acp 0.23.1 keeps the interrupted query's end: unhandled, the prompt after a cancel ended at once
    and empty, and every later prompt carried the previous one's answer (the slow reply streaming in late)."""
    name = request.node.callspec.params["agent"]
    answers = after_cancel(name, {"text": "Answer one."}, {"text": "Answer two."}, {"text": "Answer three."})
    answers[0] = {**answers[0], "delay": 3}  # the cancelled prompt's request gets this turn, slowly
    server = agent({"turns": answers})
    async with Runtime() as rt:
        session = await rt.open(name, dir=work)
        stream = EventStream(session)
        await session.prompt("Take your time")
        await anyio.to_thread.run_sync(lambda: server.wait_for_requests(1, timeout=STEP))
        await session.cancel()
        assert (await stream.until("TurnEnded")).kind.stop == "Cancelled"
        for word in ("one", "two", "three"):
            seen = len(stream.seen)
            await session.prompt(f"Say answer {word}")
            ended = await stream.until("TurnEnded")
            assert ended.kind.stop.TAG == "Completed"
            texts = [e.kind.text for e in stream.seen[seen:] if event_tag(e) == "TextDelta"]
            assert "".join(texts) == f"Answer {word}."
        await anyio.sleep(3.5)  # past the cancelled request's delay: its reply streams into nothing
        assert not [e for e in stream.seen if event_tag(e) == "TurnStarted"][4:]
        assert [e for e in stream.of("TextDelta")][-1].kind.text.endswith("three.")


async def test_codex_acp_config_option_switch(codex_acp: Any, work: Path) -> None:
    server = codex_acp({"turns": [{"text": "ok"}]})
    async with Runtime() as rt:
        session = await rt.open("codex-acp", dir=work)
        effort = session.info().details.option("reasoning_effort")
        assert effort is not None and effort.live
        stream = EventStream(session)
        await session.configure("reasoning_effort", "high")
        updated = await stream.until("SessionUpdated")
        while updated.kind.value.configuration.options["reasoning_effort"] != "high":
            # an update the agent sent on its own after the open (its options as they were) may come first: one
            # loaded CI run read "medium" there; the change must still arrive, or the read times out
            updated = await stream.until("SessionUpdated")
        await session.prompt("hi")
        await stream.until("TurnEnded")
    assert server.main_requests()[-1]["body"]["reasoning"]["effort"] == "high"


async def test_claude_acp_mode_switch(claude_acp: Any, work: Path) -> None:
    claude_acp(write_script("claude-acp"))
    async with Runtime() as rt:
        session = await rt.open("claude-acp", dir=work)
        assert session.info().configuration.options["mode"] == "default"
        stream = EventStream(session)
        await session.configure("mode", "acceptEdits")
        updated = await stream.until("SessionUpdated")
        while updated.kind.value.configuration.options.get("mode") != "acceptEdits":
            updated = await stream.until("SessionUpdated")
        assert session.info().configuration.options["mode"] == "acceptEdits"
        await session.prompt("Write out.txt")
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop.TAG == "Completed"
        assert "RequestOpened" not in [event_tag(e) for e in stream.seen]  # acceptEdits: no permission asked
        assert (work / "out.txt").read_text() == "hi\n"


async def test_an_agent_seen_leaving_a_stale_end_is_reloaded(claude_acp: Any, work: Path) -> None:
    """Without the catalog's knowledge (``resync_after_cancel`` off), claude-agent-acp's leftover end is recognised
    when it ends the first prompt after a cancel at once and empty: the session is reloaded, the prompt sent again,
    and it gets its own answer."""
    answers = after_cancel("claude-acp", {"text": "Answer one."}, {"text": "Answer two."})
    answers[0] = {**answers[0], "delay": 3}
    server = claude_acp({"turns": answers})
    async with Runtime(adapter_config={"acp": {"resync_after_cancel": False}}) as rt:
        session = await rt.open("claude-acp", dir=work)
        stream = EventStream(session)
        await session.prompt("Take your time")
        await anyio.to_thread.run_sync(lambda: server.wait_for_requests(1, timeout=STEP))
        await session.cancel()
        await stream.until("TurnEnded")
        for word in ("one", "two"):
            seen = len(stream.seen)
            await session.prompt(f"Say answer {word}")
            assert (await stream.until("TurnEnded")).kind.stop.TAG == "Completed"
            assert "".join(e.kind.text for e in stream.seen[seen:] if event_tag(e) == "TextDelta") == f"Answer {word}."
        warnings = [e.kind.value.message for e in stream.of("Diagnostic") if e.kind.value.level == "Warning"]
        assert any("reloaded" in w for w in warnings)
