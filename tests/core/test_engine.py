"""The session engine's behaviour checks (``docs/engine.md#behaviour-checks``), run over
the scripted agent through the Python API."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from anyagentd.adapters.interface import AgentAdapter, AgentConnection
from anyagentd.engine.settings import EngineSettings
from anyagentd.errors import (
    AuthRequired,
    ConsumerLagged,
    InvalidConfiguration,
    InvalidRequest,
    ProcessExited,
    ResumeFailed,
    SessionBusy,
    SessionClosed,
    UnsupportedFeature,
)
from anyagentd.model import (
    COMPLETED_PROTOCOL,
    AgentDetails,
    AnswerPermission,
    AnswerQuestion,
    Capabilities,
    Choices,
    SessionConfiguration,
    TextAnswer,
    TextDelta,
)
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.anyio

END = {"End": {"Completed": {"source": "Protocol"}}}


def text(mid: str, t: str) -> dict[str, Any]:
    return {"Emit": {"TextDelta": {"message_id": mid, "text": t}}}


def tool(tid: str, status: str) -> dict[str, Any]:
    return {
        "Emit": {
            "ToolUpdated": {
                "id": tid,
                "kind": "Execute",
                "title": "run",
                "status": status,
                "input": {"Command": {"command": "ls", "cwd": None}},
                "output": None,
                "diffs": [],
                "locations": [],
                "raw": None,
            }
        }
    }


def permission(rid: str, options: list[str] | None = None) -> dict[str, Any]:
    t = {
        "id": "tool1",
        "kind": "Edit",
        "title": "write",
        "status": "Pending",
        "input": {"Path": "a.txt"},
        "output": None,
        "diffs": [],
        "locations": [],
        "raw": None,
    }
    return {
        "Emit": {
            "RequestOpened": {"Permission": {"id": rid, "tool": t, "options": options or ["AllowOnce", "DenyOnce"]}}
        }
    }


def question(rid: str, *, free: bool = False, multi: bool = False) -> dict[str, Any]:
    q = {
        "id": "q",
        "text": "which?",
        "header": None,
        "multi_select": multi,
        "allows_free_text": free,
        "choices": [{"id": "a", "label": "A", "description": None}, {"id": "b", "label": "B", "description": None}],
    }
    return {"Emit": {"RequestOpened": {"Question": {"id": rid, "questions": [q]}}}}


def tag(event: Any) -> str:
    return event.kind if isinstance(event.kind, str) else event.kind.TAG


class Events:
    """Reads a session's events with a bound, keeping them all."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.all: list[Any] = []
        self._it = session.events().__aiter__()

    async def until(self, pred: Any, timeout: float = 5.0) -> list[Any]:
        got = []
        with anyio.fail_after(timeout):
            while True:
                event = await self._it.__anext__()
                self.all.append(event)
                got.append(event)
                if pred(event):
                    return got

    async def until_tag(self, name: str, timeout: float = 5.0) -> list[Any]:
        return await self.until(lambda e: tag(e) == name, timeout)

    async def until_count(self, name: str, count: int, timeout: float = 5.0) -> list[Any]:
        return await self.until(lambda e: sum(tag(x) == name for x in self.all) >= count, timeout)

    async def rest(self, timeout: float = 5.0) -> list[Any]:
        got = []
        with anyio.fail_after(timeout):
            async for event in self._it:
                self.all.append(event)
                got.append(event)
        return got

    def statuses(self) -> list[str]:
        return [e.kind.value for e in self.all if tag(e) == "StatusChanged"]


def settings(**kw: Any) -> EngineSettings:
    return EngineSettings(**kw)


async def open_mock(rt: Runtime, tmp_path: Any, **kw: Any) -> tuple[Any, Events]:
    session = await rt.open("mock", tmp_path, **kw)
    return session, Events(session)


def runtime(script: dict[str, Any], **kw: Any) -> Runtime:
    return Runtime(mock_script=script, settings=settings(**kw))


# ------------------------------------------------------------------------------------------------- 1


async def test_01_contract_prompt_request_answer_completion(tmp_path):
    script = {"turns": [[text("m1", "Hel"), text("m1", "lo"), permission("r1"), "AwaitAnswer", text("m1", "!"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        delivery = await session.prompt("hi")
        assert delivery.prompt_id == "p1" and delivery.kind.TAG == "Started"
        turn_id = delivery.kind.turn_id
        first = (await ev.until_tag("TurnStarted"))[-1]
        assert first.kind.origin.value == "p1" and first.turn_info.id == turn_id and first.sequence == 1
        opened = (await ev.until_tag("RequestOpened"))[-1]
        await session.answer(opened.kind.value.value.id, AnswerPermission(value="AllowOnce"))
        await ev.until_tag("TurnEnded")
        assert "".join(e.kind.text for e in ev.all if tag(e) == "TextDelta") == "Hello!"
        ended = ev.all[-1]
        assert ended.kind.stop.TAG == "Completed" and ended.kind.stop.source == "Protocol"
        assert [tag(e) for e in ev.all].index("RequestClosed") > [tag(e) for e in ev.all].index("RequestOpened")
        # every content event of the turn carries its turn id; the unclosed message got a synthesized end
        assert {e.turn_info.id for e in ev.all if tag(e) in ("TextDelta", "RequestOpened", "TurnEnded")} == {turn_id}
        assert any(tag(e) == "MessageEnded" and e.kind.message_id == "m1" for e in ev.all)
        await session.close()
        await ev.rest()  # the stream ends after close
        seqs = [e.sequence for e in ev.all]
        assert seqs == list(range(1, len(seqs) + 1))


# ------------------------------------------------------------------------------------------------- 2


async def test_02_queued_prompts_promoted_fifo(tmp_path):
    turn = [{"Sleep": 50}, text("m", "x"), END]
    async with runtime({"turns": [turn, turn, turn]}) as rt:
        session, ev = await open_mock(rt, tmp_path)
        d1 = await session.prompt("one")
        d2 = await session.prompt("two")
        d3 = await session.prompt("three")
        assert d1.kind.TAG == "Started"
        assert (d2.kind.TAG, d2.kind.position) == ("Queued", 0)
        assert (d3.kind.TAG, d3.kind.position) == ("Queued", 1)
        await ev.until_count("TurnEnded", 3)
        origins = [e.kind.origin.value for e in ev.all if tag(e) == "TurnStarted"]
        assert origins == [d1.prompt_id, d2.prompt_id, d3.prompt_id]


# ------------------------------------------------------------------------------------------------- 3


async def test_03_steer_accepted_into_the_same_turn(tmp_path):
    script = {"steer": True, "turns": [[text("m", "a"), {"Sleep": 300}, END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        d1 = await session.prompt("one")
        d2 = await session.prompt("more")
        assert d2.kind.TAG == "Steered" and d2.kind.turn_id == d1.kind.turn_id
        await ev.until_tag("TurnEnded")


async def test_03_steer_rejected_is_queued_first_and_runs_next(tmp_path):
    script = {"steer": True, "steer_rejects": True, "turns": [[{"Sleep": 200}, END], [text("m", "b"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("one")
        d2 = await session.prompt("more")
        assert (d2.kind.TAG, d2.kind.position) == ("Queued", 0)
        await ev.until(
            lambda e: tag(e) == "TurnStarted" and e.kind.origin != "Agent" and e.kind.origin.value == d2.prompt_id
        )


# ------------------------------------------------------------------------------------------------- 4, 5


async def test_04_quiet_agent_completes_inferred(tmp_path):
    script = {"deterministic": False, "turns": [[text("m", "hi")]]}
    async with runtime(script, quiet_prompted=0.3) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        ended = (await ev.until_tag("TurnEnded"))[-1]
        assert ended.kind.stop.TAG == "Completed" and ended.kind.stop.source == "Inferred"


async def test_05_no_inference_while_a_request_is_open_and_answering_rearms(tmp_path):
    script = {"deterministic": False, "turns": [[permission("r1"), "AwaitAnswer"]]}
    async with runtime(script, quiet_prompted=0.2) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        await anyio.sleep(0.6)  # well past the quiet period: the open request holds the turn
        assert session.status == "NeedsInput"
        assert not any(tag(e) == "TurnEnded" for e in ev.all)
        await session.answer("r1", AnswerPermission(value="AllowOnce"))
        ended = (await ev.until_tag("TurnEnded"))[-1]
        assert ended.kind.stop.source == "Inferred"


# ------------------------------------------------------------------------------------------------- 6, 7


async def test_06_content_after_turn_end_opens_agent_turn(tmp_path):
    script = {"turns": [[text("m1", "a"), END, text("m2", "later"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("TurnEnded")
        await ev.until_tag("TurnEnded")
        starts = [e for e in ev.all if tag(e) == "TurnStarted"]
        assert starts[1].kind.origin == "Agent" and starts[1].turn_info.id != starts[0].turn_info.id
        first_turn = [tag(e) for e in ev.all if e.turn_info and e.turn_info.id == starts[0].turn_info.id]
        assert first_turn.index("MessageEnded") < first_turn.index("TurnEnded")  # synthesized for m1
        later = next(e for e in ev.all if tag(e) == "TextDelta" and e.kind.message_id == "m2")
        assert later.turn_info.id == starts[1].turn_info.id


async def test_07_trailing_content_beats_a_queued_prompt(tmp_path):
    script = {"turns": [[{"Sleep": 100}, text("m1", "a"), END, text("m2", "trailing"), END], [text("m3", "q"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        queued = await session.prompt("y")
        assert queued.kind.TAG == "Queued"
        await ev.until(lambda e: tag(e) == "TextDelta" and e.kind.message_id == "m3")
        origins = [
            e.kind.origin if isinstance(e.kind.origin, str) else e.kind.origin.value
            for e in ev.all
            if tag(e) == "TurnStarted"
        ]
        assert origins == ["p1", "Agent", queued.prompt_id]


# ------------------------------------------------------------------------------------------------- 8


async def test_08_bookkeeping_late_stop_and_background_tools(tmp_path):
    script = {
        "turns": [
            [
                tool("bg", "Running"),
                tool("done", "Completed"),
                END,
                {"Emit": {"ContextUsage": {"used_tokens": 5, "window_tokens": None, "cost_usd": None}}},
                END,
            ]
        ]
    }
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        ended = (await ev.until_tag("TurnEnded"))[-1]
        assert ended.kind.background == ["bg"]
        await ev.until_tag("Diagnostic")
        usage = next(e for e in ev.all if tag(e) == "ContextUsage")
        assert usage.turn_info is None  # non-content while idle: no turn
        diag = ev.all[-1]
        assert diag.kind.value.level == "Warning" and diag.turn_info is None
        assert sum(tag(e) == "TurnStarted" for e in ev.all) == 1  # the late stop opened no turn


# ------------------------------------------------------------------------------------------------- 9


async def test_09_status_flips_and_never_idles_between_queued_turns(tmp_path):
    script = {"turns": [[permission("r1"), "AwaitAnswer", END], [{"Sleep": 30}, END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        await session.prompt("y")
        await session.answer("r1", AnswerPermission(value="AllowOnce"))
        await ev.until(lambda e: tag(e) == "StatusChanged" and e.kind.value == "Idle")
        assert ev.statuses() == ["Working", "NeedsInput", "Working", "Idle"]
        assert sum(tag(e) == "TurnEnded" for e in ev.all) == 2
        assert session.info().status == "Idle"


# ------------------------------------------------------------------------------------------------- 10, 12, 13


async def test_10_stalled_consumer_is_disconnected(tmp_path):
    flood = {"turns": [[{"Repeat": {"times": 100000, "steps": [text("m", "x")]}}, END]]}
    async with runtime(flood, event_bound=100) as rt:
        session = await rt.open("mock", tmp_path)
        other = await rt.open("mock", tmp_path)  # nothing else suffers
        await session.prompt("flood")
        with anyio.fail_after(5):
            await session.wait_closed()
        events: list[Any] = []
        with pytest.raises(ConsumerLagged):
            async for event in session.events():
                events.append(event)
        assert len(events) <= 100  # memory stayed bounded
        with pytest.raises(SessionClosed):
            await session.prompt("more")
        assert not other.closed and other.info().status == "Idle"


async def test_12_slow_consumer_loses_no_events(tmp_path):
    script = {"turns": [[{"Repeat": {"times": 300, "steps": [text("m", "x")]}}, END]]}
    async with runtime(script, event_bound=1024) as rt:
        session = await rt.open("mock", tmp_path)
        ev = type("Seen", (), {"all": []})()
        await session.prompt("x")
        with anyio.fail_after(10):
            async for event in session.events():  # a slow consumer: it pauses after every event
                ev.all.append(event)
                await anyio.sleep(0.001)
                if tag(event) == "TurnEnded":
                    break
        assert sum(tag(e) == "TextDelta" for e in ev.all) == 300
        seqs = [e.sequence for e in ev.all]
        assert all(b == a + 1 for a, b in itertools.pairwise(seqs))


async def test_13_cancel_is_not_blocked_by_a_full_buffer(tmp_path):
    flood = {"buffer": 4, "turns": [[{"Repeat": {"times": 100000, "steps": [text("m", "x")]}}, END]]}
    async with runtime(flood, event_bound=100000) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await anyio.sleep(0.05)  # the adapter's channel is full, the consumer has read nothing
        with anyio.fail_after(2):  # a hang guard, not a timing claim
            await session.cancel()
        ended = (await ev.until_tag("TurnEnded", timeout=30))[-1]
        assert ended.kind.stop == "Cancelled"


# ------------------------------------------------------------------------------------------------- 11


async def test_11_stale_frames_before_ack_are_dropped(tmp_path):
    script = {"stale_before_ack": True, "turns": [[text("m1", "a"), END], [text("m2", "b"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("TurnEnded")
        await session.prompt("y")
        await ev.until_tag("TurnEnded")
        texts = [e.kind.message_id for e in ev.all if tag(e) == "TextDelta"]
        assert texts == ["m1", "m2"]  # no "stale" message, and no agent turn opened for it
        assert sum(tag(e) == "TurnStarted" for e in ev.all) == 2


# ------------------------------------------------------------------------------------------------- 14


@pytest.mark.parametrize("clear_queue", [False, True])
async def test_14_cancel_closes_requests_and_keeps_or_clears_queue(tmp_path, clear_queue):
    script = {"turns": [[permission("r1"), "AwaitAnswer", END], [text("m", "next"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        await session.prompt("queued")
        await session.cancel(clear_queue=clear_queue)
        await ev.until_tag("TurnEnded")
        tags = [tag(e) for e in ev.all]
        assert tags.index("RequestClosed") < tags.index("TurnEnded")
        assert ev.all[-1].kind.stop == "Cancelled"
        if clear_queue:
            await ev.until(lambda e: tag(e) == "StatusChanged" and e.kind.value == "Idle")
            await anyio.sleep(0.1)
            assert sum(tag(e) == "TurnStarted" for e in ev.all) == 1
        else:
            nxt = (await ev.until_tag("TurnStarted"))[-1]
            assert nxt.kind.origin.value == "p2"
        await session.cancel()  # idempotent when idle... or ends the promoted turn
        with pytest.raises(InvalidRequest):
            await session.answer("r1", AnswerPermission(value="AllowOnce"))


# ------------------------------------------------------------------------------------------------- 15, 16


async def test_15_auto_approve_answers_permissions_itself(tmp_path):
    script = {"turns": [[permission("r1"), "AwaitAnswer", question("q1", free=True), "AwaitAnswer", END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path, permission_mode="AutoApprove")
        await session.prompt("x")
        opened = (await ev.until_tag("RequestOpened"))[-1]
        assert opened.kind.value.TAG == "Question"  # the permission never reached the caller
        await session.answer("q1", AnswerQuestion(value=[TextAnswer(value="b")]))
        await ev.until_tag("TurnEnded")
        assert [e.kind.request_id for e in ev.all if tag(e) == "RequestClosed"] == ["q1"]


async def test_16_close_during_a_turn_ends_it_and_closes_requests(tmp_path):
    script = {"turns": [[text("m1", "a"), permission("r1"), "AwaitAnswer", END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        with anyio.fail_after(5):
            await session.close()
        rest = [e for e in await ev.rest() if tag(e) != "StatusChanged"]
        assert [tag(e) for e in rest] == ["MessageEnded", "RequestClosed", "TurnEnded"]
        assert rest[2].kind.stop == "Cancelled"
        with pytest.raises(SessionClosed):
            await session.prompt("again")
        await session.close()  # idempotent


@pytest.mark.parametrize("answer_pending", [True, False])
async def test_16_close_leaving_the_open_request_unanswered_goes_through_close_unanswered(tmp_path, answer_pending):
    # issue 25.6: Session.close(answer_pending=False) (the A2A drain of a task waiting for input) ends the agent
    # through the connection's close_unanswered (the default falls back to close); the session's events are the
    # same either way
    script = {"turns": [[text("m1", "a"), permission("r1"), "AwaitAnswer", END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        conn, calls = session._conn, []
        real_close, real_unanswered = conn.close, conn.close_unanswered

        async def close() -> None:
            calls.append("close")
            await real_close()

        async def close_unanswered() -> None:
            calls.append("close_unanswered")
            await real_unanswered()

        conn.close, conn.close_unanswered = close, close_unanswered
        with anyio.fail_after(5):
            await session.close(answer_pending=answer_pending)
        rest = [e for e in await ev.rest() if tag(e) != "StatusChanged"]
        assert [tag(e) for e in rest] == ["MessageEnded", "RequestClosed", "TurnEnded"]
        assert rest[2].kind.stop == "Cancelled"
        assert calls == (["close"] if answer_pending else ["close_unanswered", "close"])


async def test_close_with_a_queued_prompt_ends_idle(tmp_path):
    # issue 16.7: the queued prompt will never run, so the last status is Idle, not Working
    script = {"turns": [[permission("r1"), "AwaitAnswer", END], [text("m", "never"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        assert (await session.prompt("queued")).kind.TAG == "Queued"
        await session.close()
        await ev.rest()
        assert ev.statuses() == ["Working", "NeedsInput", "Idle"]
        assert session.status == "Idle" and session.snapshot().status == "Idle"
        assert sum(tag(e) == "TurnStarted" for e in ev.all) == 1


async def test_close_while_paused_with_a_held_prompt_ends_idle(tmp_path):
    async with runtime({"turns": [[text("m", "never"), END]]}) as rt:
        session, ev = await open_mock(rt, tmp_path)
        rt.pause()
        await session.prompt("held")
        await session.close()
        await ev.rest()
        assert ev.statuses() == ["Working", "Idle"] and session.status == "Idle"


# ------------------------------------------------------------------------------------------------- 17


async def test_17_invalid_requests_and_dequeue(tmp_path):
    script = {"turns": [[permission("r1"), "AwaitAnswer", END], [text("m", "never"), END], [text("m", "3"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        with pytest.raises(InvalidRequest):
            await session.answer("nope", AnswerPermission(value="AllowOnce"))
        with pytest.raises(InvalidRequest):  # not among the options: stays open
            await session.answer("r1", AnswerPermission(value="AllowAlways"))
        assert session.status == "NeedsInput"
        queued = await session.prompt("dequeue me")
        await session.dequeue(queued.prompt_id)
        with pytest.raises(InvalidRequest):
            await session.dequeue(queued.prompt_id)
        await session.answer("r1", AnswerPermission(value="AllowOnce"))
        with pytest.raises(InvalidRequest):
            await session.answer("r1", AnswerPermission(value="AllowOnce"))
        await ev.until_tag("TurnEnded")
        third = await session.prompt("third")
        assert third.prompt_id == "p3"  # the prompt counter counts every prompt
        await ev.until_tag("TurnEnded")
        origins = [e.kind.origin.value for e in ev.all if tag(e) == "TurnStarted"]
        assert queued.prompt_id not in origins


# ------------------------------------------------------------------------------------------------- guards


async def test_question_answers_are_validated(tmp_path):
    script = {"turns": [[question("q1", free=False, multi=False), "AwaitAnswer", END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        bad = [
            AnswerPermission(value="AllowOnce"),
            AnswerQuestion(value=[]),
            AnswerQuestion(value=[TextAnswer(value="free")]),
            AnswerQuestion(value=[Choices(value=[])]),
            AnswerQuestion(value=[Choices(value=["a", "b"])]),
            AnswerQuestion(value=[Choices(value=["zzz"])]),
        ]
        for answer in bad:
            with pytest.raises(InvalidRequest):
                await session.answer("q1", answer)
        await session.answer("q1", AnswerQuestion(value=[Choices(value=["b"])]))
        assert (await ev.until_tag("TurnEnded"))[-1].kind.stop.TAG == "Completed"


async def test_configure_validation_and_live_update(tmp_path):
    async with Runtime(mock_script="model-option") as rt:
        session, ev = await open_mock(rt, tmp_path)
        assert session.info().configuration.options == {"model": "small", "fast": False}
        for option, value in [("nope", "x"), ("fast", True), ("model", "huge"), ("model", True)]:
            with pytest.raises(InvalidConfiguration):
                await session.configure(option, value)
        await session.configure("model", "large")
        updated = (await ev.until_tag("SessionUpdated"))[-1]
        assert updated.kind.value.configuration.options["model"] == "large"
        assert session.info().configuration.options["model"] == "large"


async def test_creation_options_are_checked(tmp_path):
    async with Runtime(mock_script="model-option") as rt:
        with pytest.raises(InvalidConfiguration):
            await rt.open("mock", tmp_path, configure={"model": "huge"})
        with pytest.raises(ResumeFailed):
            await rt.open("mock", tmp_path, resume="token")
        with pytest.raises(UnsupportedFeature):
            await rt.open("mock", tmp_path, fork="token")
        with pytest.raises(InvalidConfiguration):
            await rt.open("mock", tmp_path / "missing")
        session = await rt.open("mock", tmp_path, configure={"model": "large", "fast": True})
        assert session.info().configuration.options == {"model": "large", "fast": True}


async def test_rollback_and_compact_guards(tmp_path):
    async with Runtime(mock_script="hello") as rt:
        session, _ = await open_mock(rt, tmp_path)
        with pytest.raises(UnsupportedFeature):
            await session.rollback(1, "Conversation")
        with pytest.raises(UnsupportedFeature):
            await session.compact()


async def test_agent_death_fails_the_turn_then_process_exited(tmp_path):
    async with Runtime(mock_script="dies") as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        with pytest.raises(ProcessExited) as info:
            await ev.rest()
        assert info.value.status == "9"
        ended = next(e for e in ev.all if tag(e) == "TurnEnded")
        assert ended.kind.stop.TAG == "Failed" and "exited" in ended.kind.stop.message
        with pytest.raises(SessionClosed):
            await session.prompt("again")


async def test_engine_owned_kinds_from_an_adapter_are_dropped(tmp_path):
    script = {"turns": [[{"Emit": {"StatusChanged": "Idle"}}, text("m", "a"), END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("TurnEnded")
        assert ev.statuses() == ["Working"]
        assert any(tag(e) == "Diagnostic" and "StatusChanged" in e.kind.value.message for e in ev.all)


# ------------------------------------------------------------------------------------------------- auth lost


class _AuthLosingConnection(AgentConnection):
    def __init__(self, link: Any) -> None:
        self.link = link
        self.details = AgentDetails(capabilities=Capabilities())
        self.configuration = SessionConfiguration()
        self.closed = False

    async def start_turn(self, turn_id: str, prompt: Any) -> None:
        async def lose() -> None:
            await self.link.turn_ack()
            await self.link.emit(TextDelta(message_id="m", text="working"))
            await self.link.auth_lost([{"EnvVar": {"name": "SOME_API_KEY"}}])

        self.link.start_soon(lose)

    async def answer(self, request_id: str, answer: Any) -> None: ...
    async def cancel(self) -> None: ...

    async def close(self) -> None:
        self.closed = True


class _AuthLosingAdapter(AgentAdapter):
    PLUGIN_NAME = "authloss"

    def pinned_installations(self) -> list[Any]:
        from anyagentd.model import AgentInstallation

        return [AgentInstallation(id="authloss", name="Auth loser", executable_path="-", source="Pinned")]

    async def probe(self, installation: Any) -> AgentDetails:
        return AgentDetails()

    async def connect(self, installation: Any, options: Any, link: Any, *, no_tools: bool = False) -> Any:
        self.conn = _AuthLosingConnection(link)
        return self.conn


class _AuthLossPlugin:
    from anyagentd.hookspecs import hookimpl

    @hookimpl
    def register_adapters(self, register: Any) -> None:
        register(_AuthLosingAdapter)


async def test_auth_lost_fails_the_turn_and_ends_with_auth_required(tmp_path):
    plugins = Plugins(load_entry_points=False, extra=[_AuthLossPlugin()])
    async with Runtime(plugins=plugins) as rt:
        session = await rt.open("authloss", tmp_path)
        ev = Events(session)
        await session.prompt("x")
        with pytest.raises(AuthRequired) as info:
            await ev.rest()
        assert info.value.login == [{"EnvVar": {"name": "SOME_API_KEY"}}] or info.value.login[0].name == "SOME_API_KEY"
        ended = next(e for e in ev.all if tag(e) == "TurnEnded")
        assert ended.kind.stop.TAG == "Failed" and ended.kind.stop.message == "agent needs login"
        assert rt.adapters["authloss"].conn.closed


async def test_session_busy_for_compact_while_running(tmp_path):
    script = {"turns": [[{"Sleep": 200}, END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        # the mock has no Compact: the capability check comes first
        await session.prompt("x")
        with pytest.raises(UnsupportedFeature):
            await session.compact()
        assert SessionBusy  # imported for the compact-capable adapters' tests


async def test_generate_returns_text_and_refuses_resume(tmp_path):
    async with Runtime(mock_script="hello") as rt:
        out = await rt.generate("mock", tmp_path, "say hi")
        assert out.startswith("Hello! I am the scripted agent.")
        with pytest.raises(InvalidConfiguration):
            await rt.generate("mock", tmp_path, "x", resume="abc")


async def test_one_consumer_at_a_time_and_answers_as_wire_json(tmp_path):
    script = {"turns": [[permission("r1"), "AwaitAnswer", END]]}
    async with runtime(script) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("RequestOpened")
        with pytest.raises(InvalidRequest):
            await session.events().__anext__()  # the Events helper already iterates them
        with pytest.raises(InvalidRequest):
            await session.answer("r1", "AllowOnce")
        with pytest.raises(InvalidRequest):
            await session.prompt(123)  # type: ignore[arg-type]
        await session.answer("r1", {"Permission": "AllowOnce"})
        assert (await ev.until_tag("TurnEnded"))[-1].tag == "TurnEnded"


async def test_mcp_servers_the_agent_cannot_take_are_refused(tmp_path):
    server = {"name": "files", "connection": {"Stdio": {"command": "python", "args": [], "env": {}}}}
    async with Runtime(mock_script="hello") as rt:
        with pytest.raises(UnsupportedFeature) as info:
            await rt.open("mock", tmp_path, mcp_servers=[server])
        assert "Stdio" in info.value.message


# ------------------------------------------------------------------------------------------------- cancel


class _StubbornConnection(AgentConnection):
    """Acks each turn and streams a word; on Cancel it either does nothing (``mode="ignore"``) or reports a failed
    tool and a Failed stop (``mode="fail"``), as agents do when a cancel breaks the running call. ``late_end``:
    after an ignored cancel, end the turn anyway this many seconds later."""

    def __init__(self, link: Any, mode: str, late_end: float | None = None) -> None:
        self.link = link
        self.mode = mode
        self.late_end = late_end
        self.details = AgentDetails(capabilities=Capabilities())
        self.configuration = SessionConfiguration()
        self.turns = 0

    async def start_turn(self, turn_id: str, prompt: Any) -> None:
        self.turns += 1
        turn = self.turns

        async def run() -> None:
            await self.link.turn_ack()
            await self.link.emit(TextDelta(message_id=f"m{turn}", text=f"turn {turn}"))
            if turn > 1:
                await self.link.turn_ended(COMPLETED_PROTOCOL)

        self.link.start_soon(run)

    async def answer(self, request_id: str, answer: Any) -> None: ...

    async def cancel(self) -> None:
        if self.mode == "fail":
            from anyagentd.model import FailedStop, ToolUpdate, ToolUpdated

            async def fail() -> None:
                await self.link.emit(ToolUpdated(value=ToolUpdate(id="t1", status="Failed", output="interrupted")))
                await self.link.turn_ended(FailedStop(message="request aborted"))

            self.link.start_soon(fail)
        elif self.late_end is not None:

            async def late() -> None:
                await anyio.sleep(self.late_end)
                await self.link.turn_ended("Cancelled")

            self.link.start_soon(late)

    async def close(self) -> None: ...


class _StubbornAdapter(AgentAdapter):
    PLUGIN_NAME = "stubborn"

    def pinned_installations(self) -> list[Any]:
        from anyagentd.model import AgentInstallation

        return [AgentInstallation(id="stubborn", name="Stubborn", executable_path="-", source="Pinned")]

    async def probe(self, installation: Any) -> AgentDetails:
        return AgentDetails()

    async def connect(self, installation: Any, options: Any, link: Any, *, no_tools: bool = False) -> Any:
        self.conn = _StubbornConnection(link, self.config.get("mode", "ignore"), self.config.get("late_end"))
        return self.conn


class _StubbornPlugin:
    from anyagentd.hookspecs import hookimpl

    @hookimpl
    def register_adapters(self, register: Any) -> None:
        register(_StubbornAdapter)


def stubborn(mode: str = "ignore", late_end: float | None = None, **kw: Any) -> Runtime:
    plugins = Plugins(load_entry_points=False, extra=[_StubbornPlugin()])
    return Runtime(
        plugins=plugins, settings=settings(**kw), adapter_config={"stubborn": {"mode": mode, "late_end": late_end}}
    )


async def test_a_cancel_the_agent_ignores_ends_the_turn_after_the_grace(tmp_path):
    async with stubborn(cancel_grace=0.2) as rt:
        session = await rt.open("stubborn", tmp_path)
        ev = Events(session)
        await session.prompt("x")
        await ev.until_tag("TextDelta")
        await session.cancel()
        got = await ev.until_tag("TurnEnded", timeout=5)  # without the engine's deadline: never
        assert got[-1].kind.stop == "Cancelled"
        warnings = [e for e in got if tag(e) == "Diagnostic" and e.kind.value.level == "Warning"]
        assert warnings and "0.2 s of the cancel" in warnings[0].kind.value.message
        assert session.status == "Idle"
        await session.prompt("again")  # the session goes on
        nxt = await ev.until_tag("TurnEnded")
        assert nxt[-1].kind.stop.TAG == "Completed"


async def test_the_late_end_of_a_turn_the_engine_ended_is_not_a_warning(tmp_path):
    async with stubborn(late_end=0.4, cancel_grace=0.1) as rt:
        session = await rt.open("stubborn", tmp_path)
        ev = Events(session)
        await session.prompt("x")
        await ev.until_tag("TextDelta")
        await session.cancel()
        assert (await ev.until_tag("TurnEnded"))[-1].kind.stop == "Cancelled"
        await anyio.sleep(0.6)  # the agent's own end arrives while idle
        await session.close()
        await ev.rest()
        assert not [e for e in ev.all if tag(e) == "Diagnostic" and "idle" in e.kind.value.message]
        assert sum(tag(e) == "TurnEnded" for e in ev.all) == 1


async def test_failures_reported_after_a_cancel_read_cancelled(tmp_path):
    async with stubborn("fail", cancel_grace=30) as rt:
        session = await rt.open("stubborn", tmp_path)
        ev = Events(session)
        await session.prompt("x")
        await ev.until_tag("TextDelta")
        await session.cancel()
        got = await ev.until_tag("TurnEnded")
        assert got[-1].kind.stop == "Cancelled"
        tools = [e.kind.value for e in got if tag(e) == "ToolUpdated"]
        assert [t.status for t in tools] == ["Cancelled"] and tools[0].output == "interrupted"
        assert not [e for e in got if tag(e) == "Diagnostic"]


async def test_cancel_grace_comes_from_the_environment():
    assert EngineSettings.from_env({"ANYAGENTD_CANCEL_GRACE": "1.5"}).cancel_grace == 1.5
    assert EngineSettings.from_env({}).cancel_grace == 5.0


async def test_connection_is_the_adapter_s_live_connection(tmp_path):
    """``Session.connection``: the public handle the conformance kit reads (issue 18), the adapter's own object."""
    async with runtime({"turns": [[text("m", "hi"), END]]}) as rt:
        session, ev = await open_mock(rt, tmp_path)
        assert isinstance(session.connection, AgentConnection)
        assert session.connection.details == session.info().details
        await session.close()
        await ev.rest()


async def test_fail_ends_the_running_turn_failed_and_the_stream_with_the_error(tmp_path):
    """``Session.fail``: the wire's way to end a session whose events cannot be written (public, issue 18)."""
    from anyagentd.errors import ProtocolFailed

    async with runtime({"turns": [[text("m", "a"), {"Sleep": 5000}, END]]}) as rt:
        session, ev = await open_mock(rt, tmp_path)
        await session.prompt("x")
        await ev.until_tag("TextDelta")
        error = ProtocolFailed("event 3 cannot be written", "it broke")
        await session.fail(error)
        with pytest.raises(ProtocolFailed):
            await ev.rest()
        ended = [e for e in ev.all if tag(e) == "TurnEnded"]
        assert len(ended) == 1 and ended[0].kind.stop.message == error.message
        assert session.closed
