"""Live projections kept by the engine from the events (issue 9.2), for each shipped mock script: transcript,
plan and progress, open requests, usage, current tool, phase, last activity; readable during and after the
session, and JSON-able."""

from __future__ import annotations

import json
import time
import weakref
from typing import Any

import anyio
import pytest

from anyagentd.adapters.interface import AgentAdapter, AgentConnection
from anyagentd.engine.projections import TOKENS_EXTENSION
from anyagentd.errors import ProcessExited
from anyagentd.hookspecs import hookimpl
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    AnswerPermission,
    AnswerQuestion,
    Capabilities,
    ContextUsage,
    SessionConfiguration,
    TextAnswer,
)
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.anyio

_streams: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


async def until(session: Any, name: str) -> Any:
    """Read the session's events() up to the next event tagged ``name`` and return it."""
    stream = _streams.setdefault(session, session.events())
    with anyio.fail_after(10):
        async for event in stream:
            if event.tag == name:
                return event
    raise AssertionError(f"no {name}")


def kinds(p: Any) -> list[tuple[str, str, str]]:
    return [(e.kind, e.role, e.text) for e in p.transcript]


async def test_hello(tmp_path):
    async with Runtime(mock_script="hello") as rt:
        session = await rt.open("mock", tmp_path)
        p = session.projections
        assert (p.transcript, p.plan, p.progress, p.phase, p.last_activity) == ([], None, None, "idle", None)
        before = time.time()
        await session.prompt("say hi", ["notes.txt"])
        await until(session, "TurnEnded")
        assert kinds(p) == [
            ("prompt", "user", "say hi"),
            (
                "message",
                "assistant",
                "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network.",
            ),
        ]
        prompt, message = p.transcript
        assert (prompt.id, prompt.turn_id, prompt.attachments, prompt.status) == ("p1", "t1", ("notes.txt",), "started")
        assert (message.id, message.turn_id) == ("m1", "t1")
        usage = p.usage
        assert (usage.used_tokens, usage.window_tokens, usage.cost_usd, usage.reports) == (1200, 200000, 0.0, 1)
        assert (usage.tokens_in, usage.tokens_out) == (None, None)  # the mock reports no in/out split
        assert p.phase == "idle" and p.turn_id is None and p.turns == 1 and p.current_tool is None
        assert before - 1 <= p.last_activity <= time.time() + 1
        await session.close()
        assert p.phase == "closed"
        assert session.projections.transcript[1].text.startswith("Hello!")  # still readable after close
        data = json.loads(json.dumps(p.to_json()))
        assert data["transcript"][0] == {
            "kind": "prompt",
            "role": "user",
            "id": "p1",
            "turn_id": "t1",
            "parent_tool_id": None,
            "status": "started",
            "text": "say hi",
            "attachments": ["notes.txt"],
        }
        assert data["usage"]["used_tokens"] == 1200 and data["phase"] == "closed"
        assert p.to_json(limit=1)["transcript"] == [data["transcript"][1]]


async def test_permission_plan_progress_tool_and_request(tmp_path):
    async with Runtime(mock_script="permission") as rt:
        session = await rt.open("mock", tmp_path)
        p = session.projections
        await session.prompt("write hello.txt")
        opened = await until(session, "RequestOpened")
        assert p.progress == "0/2 done" and [e.text for e in p.plan] == ["Write hello.txt", "Report back"]
        assert p.phase == "needs_input"
        assert [r.value.id for r in p.open_requests] == ["req1"]
        assert p.current_tool is not None and p.current_tool.id == "tool1" and p.current_tool.status == "Pending"
        await session.answer(opened.kind.value.value.id, AnswerPermission(value="AllowAlways"))
        await until(session, "TurnEnded")
        assert p.progress == "2/2 done" and p.open_requests == [] and p.current_tool is None
        assert [(e.kind, e.status) for e in p.transcript] == [
            ("prompt", "started"),
            ("reasoning", None),
            ("message", None),
            ("tool", "Completed"),
            ("request", "answered"),
            ("message", None),
        ]
        reasoning, tool, request = p.transcript[1], p.transcript[3], p.transcript[4]
        assert reasoning.role == "assistant" and reasoning.text.startswith("I am the scripted agent")
        assert tool.tool.output.startswith("scripted: allowed") and tool.tool.title == "Write hello.txt"
        assert request.answer.value == "AllowAlways" and request.request.value.tool.id == "tool1"
        assert p.transcript[5].text.startswith("You allowed it.")
        assert (p.usage.used_tokens, p.usage.cost_usd) == (5400, 0.03)
        data = json.loads(json.dumps(p.to_json()))
        assert data["transcript"][4]["answer"] == {"Permission": "AllowAlways"}
        assert data["transcript"][3]["tool"]["status"] == "Completed"
        assert data["plan"][1] == {"text": "Report back", "status": "Completed"} and data["progress"] == "2/2 done"


async def test_question_answer_and_a_request_closed_by_cancel(tmp_path):
    async with Runtime(mock_script="question") as rt:
        session = await rt.open("mock", tmp_path)
        p = session.projections
        await session.prompt("greet me")
        await until(session, "RequestOpened")
        await session.answer("q1", AnswerQuestion(value=[TextAnswer(value="in Welsh")]))
        await until(session, "TurnEnded")
        assert kinds(p) == [
            ("prompt", "user", "greet me"),
            ("message", "assistant", "Before I start, one question."),
            ("request", "assistant", ""),
            ("message", "assistant", "Thanks, noted."),
        ]
        assert p.transcript[2].status == "answered"
        assert p.transcript[2].to_json()["answer"] == {"Question": [{"Text": "in Welsh"}]}
    async with Runtime(mock_script="question") as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("greet me")
        await until(session, "RequestOpened")
        await session.cancel()
        await until(session, "TurnEnded")
        request = session.projections.transcript[-1]
        assert (request.kind, request.status, request.answer) == ("request", "closed", None)
        assert session.projections.open_requests == []


async def test_chatter_agent_originated_turn_and_message_assembly(tmp_path):
    async with Runtime(mock_script="chatter") as rt:
        session = await rt.open("mock", tmp_path)
        p = session.projections
        await session.prompt("talk")
        await until(session, "TurnEnded")
        await until(session, "TurnEnded")
        assert kinds(p) == [
            ("prompt", "user", "talk"),
            ("message", "assistant", "chatter " * 20),
            ("message", "assistant", "(and one more thing, unprompted)"),
        ]
        assert [e.turn_id for e in p.transcript] == ["t1", "t1", "t2"] and p.turns == 2


async def test_flood_assembles_one_message(tmp_path):
    async with Runtime(mock_script="flood") as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("flood")
        await until(session, "TurnEnded")
        p = session.projections
        assert [e.kind for e in p.transcript] == ["prompt", "message"]
        assert p.transcript[1].text == "x" * 200_000


async def test_dies(tmp_path):
    async with Runtime(mock_script="dies") as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        with pytest.raises(ProcessExited):
            await until(session, "never")
        p = session.projections
        assert kinds(p) == [("prompt", "user", "x"), ("message", "assistant", "Starting... ")]
        assert p.phase == "closed" and p.turn_id is None


async def test_model_option_two_turns(tmp_path):
    async with Runtime(mock_script="model-option") as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("one")
        queued = await session.prompt("two")  # queued: it enters the transcript when its turn starts
        assert queued.kind.TAG == "Queued"
        assert [e.text for e in session.projections.transcript] == ["one"]
        await until(session, "TurnEnded")
        await until(session, "TurnEnded")
        assert [(e.kind, e.text, e.turn_id) for e in session.projections.transcript] == [
            ("prompt", "one", "t1"),
            ("message", "Answering with the configured model.", "t1"),
            ("prompt", "two", "t2"),
            ("message", "Second turn.", "t2"),
        ]


async def test_steered_prompt_joins_the_running_turn(tmp_path):
    script = {"steer": True, "turns": [[{"Sleep": 100}, {"End": {"Completed": {"source": "Protocol"}}}]]}
    async with Runtime(mock_script=script) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("one")
        await session.prompt("and this")
        await until(session, "TurnEnded")
        assert [(e.text, e.status, e.turn_id) for e in session.projections.transcript] == [
            ("one", "started", "t1"),
            ("and this", "steered", "t1"),
        ]


# ------------------------------------------------------------------------------------------------- tokens in/out


class _UsageConnection(AgentConnection):
    def __init__(self, link: Any) -> None:
        self.link = link
        self.details = AgentDetails(capabilities=Capabilities())
        self.configuration = SessionConfiguration()

    async def start_turn(self, turn_id: str, prompt: Any) -> None:
        async def play() -> None:
            await self.link.turn_ack()
            await self.link.emit(
                ContextUsage(used_tokens=300, window_tokens=1000, cost_usd=0.5),
                extensions={TOKENS_EXTENSION: {"in": 200, "out": 100}},
            )
            await self.link.emit(ContextUsage(used_tokens=450), extensions={TOKENS_EXTENSION: {"in": 120, "out": 30}})
            await self.link.turn_ended({"Completed": {"source": "Protocol"}})

        self.link.start_soon(play)

    async def answer(self, request_id: str, answer: Any) -> None: ...
    async def cancel(self) -> None: ...
    async def close(self) -> None: ...


class _UsageAdapter(AgentAdapter):
    PLUGIN_NAME = "usage"

    def pinned_installations(self) -> list[Any]:
        return [AgentInstallation(id="usage", name="Usage reporter", executable_path="-", source="Pinned")]

    async def probe(self, installation: Any) -> AgentDetails:
        return AgentDetails()

    async def connect(self, installation: Any, options: Any, link: Any, *, no_tools: bool = False) -> Any:
        return _UsageConnection(link)


class _UsagePlugin:
    @hookimpl
    def register_adapters(self, register: Any) -> None:
        register(_UsageAdapter)


async def test_usage_sums_tokens_in_and_out_when_the_agent_reports_them(tmp_path):
    async with Runtime(plugins=Plugins(load_entry_points=False, extra=[_UsagePlugin()])) as rt:
        session = await rt.open("usage", tmp_path)
        await session.prompt("x")
        await until(session, "TurnEnded")
        usage = session.projections.usage
        assert (
            usage.tokens_in,
            usage.tokens_out,
            usage.used_tokens,
            usage.window_tokens,
            usage.cost_usd,
            usage.reports,
        ) == (320, 130, 450, 1000, 0.5, 2)
