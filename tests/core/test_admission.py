"""Admission states of a Runtime (issue 9.4): accepting, paused (nothing new starts, queued prompts held and then
promoted in order on resume), draining (open and prompt refused with Draining, in-flight turns cancelled after
the timeout, every session closed); statuses stay true throughout."""

from __future__ import annotations

import weakref
from typing import Any

import anyio
import pytest

from anyagentd.errors import Draining, SessionClosed
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.anyio

END = {"End": {"Completed": {"source": "Protocol"}}}
_streams: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_seen: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def text(mid: str, t: str) -> dict[str, Any]:
    return {"Emit": {"TextDelta": {"message_id": mid, "text": t}}}


def permission(rid: str) -> dict[str, Any]:
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
    return {"Emit": {"RequestOpened": {"Permission": {"id": rid, "tool": t, "options": ["AllowOnce", "DenyOnce"]}}}}


async def until(session: Any, pred: Any) -> Any:
    stream = _streams.setdefault(session, session.events())
    seen = _seen.setdefault(session, [])
    with anyio.fail_after(10):
        async for event in stream:
            seen.append(event)
            if pred(event):
                return event
    raise AssertionError("the stream ended")


async def rest(session: Any) -> list[Any]:
    stream = _streams.setdefault(session, session.events())
    seen = _seen.setdefault(session, [])
    with anyio.fail_after(10):
        async for event in stream:
            seen.append(event)
    return seen


def ended(e: Any) -> bool:
    return e.tag == "TurnEnded"


def statuses(session: Any) -> list[str]:
    return [e.kind.value for e in _seen.get(session, []) if e.tag == "StatusChanged"]


def origins(session: Any) -> list[str]:
    return [e.kind.origin.value for e in _seen.get(session, []) if e.tag == "TurnStarted"]


async def settle() -> None:
    # Give the session's own task every chance to promote (it must not): no claim about time is made.
    await anyio.sleep(0.05)


async def test_paused_prompts_are_queued_held_at_turn_ends_and_promoted_in_order_on_resume(tmp_path):
    turn = [{"Sleep": 30}, text("m", "x"), END]
    async with Runtime(mock_script={"turns": [turn, turn, turn, turn]}) as rt:
        session = await rt.open("mock", tmp_path)
        first = await session.prompt("one")
        assert first.kind.TAG == "Started"
        rt.pause()
        assert rt.admission == "paused"
        second, third = await session.prompt("two"), await session.prompt("three")
        assert [(d.kind.TAG, d.kind.position) for d in (second, third)] == [("Queued", 0), ("Queued", 1)]
        stop = await until(session, ended)
        assert stop.kind.stop.TAG == "Completed"  # the turn in flight finished
        await settle()
        assert not session.running and session.status == "Working"  # held, and not Idle: work is waiting
        fresh = await rt.open("mock", tmp_path)  # opening is still allowed while paused
        queued = await fresh.prompt("idle but paused")
        assert (queued.kind.TAG, queued.kind.position) == ("Queued", 0)
        await settle()
        assert not fresh.running
        rt.resume()
        assert rt.admission == "accepting"
        await until(session, ended)
        await until(session, ended)
        await until(fresh, ended)
        assert origins(session) == [first.prompt_id, second.prompt_id, third.prompt_id]
        assert origins(fresh) == [queued.prompt_id]
        await until(session, lambda e: e.tag == "StatusChanged" and e.kind.value == "Idle")
        assert statuses(session) == ["Working", "Idle"]  # no flashing Idle between the held turns
        rt.resume()  # idempotent


async def test_paused_steer_capable_session_queues_instead_of_steering(tmp_path):
    script = {"steer": True, "turns": [[{"Sleep": 50}, END], [text("m", "later"), END]]}
    async with Runtime(mock_script=script) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("one")
        rt.pause()
        rt.pause()  # idempotent
        delivery = await session.prompt("more")
        assert delivery.kind.TAG == "Queued"
        rt.resume()
        started = await until(
            session,
            lambda e: e.tag == "TurnStarted" and e.kind.origin != "Agent" and e.kind.origin.value == delivery.prompt_id,
        )
        assert started.turn_info.id == "t2"


async def test_drain_refuses_open_and_prompt_cancels_in_flight_turns_after_the_timeout_and_closes_all(tmp_path):
    stuck = {"turns": [[text("m", "working"), permission("r1"), "AwaitAnswer", END]]}
    async with Runtime(mock_script=stuck) as rt:
        busy = await rt.open("mock", tmp_path)
        idle = await rt.open("mock", tmp_path)
        await busy.prompt("x")
        await until(busy, lambda e: e.tag == "RequestOpened")
        async with anyio.create_task_group() as tg:
            tg.start_soon(rt.drain, 0.3)
            while rt.admission != "draining":
                await anyio.sleep(0)
            with pytest.raises(Draining):
                await rt.open("mock", tmp_path)
            with pytest.raises(Draining):
                await idle.prompt("refused")
            with pytest.raises(Draining):
                rt.pause()
            with pytest.raises(Draining):
                rt.resume()
            assert busy.running  # within the timeout the turn is left alone
        assert busy.closed and idle.closed
        events = await rest(busy)
        stop = next(e for e in events if ended(e))
        assert stop.kind.stop == "Cancelled"
        assert statuses(busy) == ["Working", "NeedsInput", "Working", "Idle"]
        assert [e.tag for e in await rest(idle)] == []
        assert rt.sessions() == [] and len(rt.sessions(include_closed=True)) == 2
        assert rt.admission == "draining"


async def test_drain_leaves_a_waiting_session_unanswered_and_cancels_the_others(tmp_path):
    """Issue 25.6 through the engine: a session named in ``leave_waiting`` (the A2A drain of a task waiting for
    input, its agent resumable) is neither waited for nor cancelled — it closes through the connection's
    ``close_unanswered``, its open request never answered — while every other session closes as ever."""
    stuck = {"turns": [[text("m", "working"), permission("r1"), "AwaitAnswer", END]]}
    async with Runtime(mock_script=stuck) as rt:
        kept, other = await rt.open("mock", tmp_path), await rt.open("mock", tmp_path)
        await kept.prompt("x")
        await until(kept, lambda e: e.tag == "RequestOpened")
        calls: dict[str, list[str]] = {}
        for name, session in (("kept", kept), ("other", other)):
            conn, seen = session._conn, calls.setdefault(name, [])
            real_close, real_unanswered = conn.close, conn.close_unanswered

            async def close(seen: list[str] = seen, real: Any = real_close) -> None:
                seen.append("close")
                await real()

            async def close_unanswered(seen: list[str] = seen, real: Any = real_unanswered) -> None:
                seen.append("close_unanswered")
                await real()

            conn.close, conn.close_unanswered = close, close_unanswered
        with anyio.fail_after(20):
            await rt.drain(30, leave_waiting=[kept])  # no wait for the kept one's turn: it never ends by itself
        assert kept.closed and other.closed
        assert calls == {"kept": ["close_unanswered", "close"], "other": ["close"]}
        assert next(e for e in await rest(kept) if ended(e)).kind.stop == "Cancelled"


async def test_drain_lets_turns_that_finish_in_time_complete(tmp_path):
    script = {"turns": [[{"Sleep": 50}, text("m", "done"), END], [text("m", "never"), END]]}
    async with Runtime(mock_script=script) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        held = await session.prompt("queued, never run")
        assert held.kind.TAG == "Queued"
        with anyio.fail_after(20):
            await rt.drain(timeout=30)  # returns when the turn has ended, long before the timeout
        events = await rest(session)
        assert [e.kind.stop.TAG for e in events if ended(e)] == ["Completed"]
        assert origins(session) == ["p1"]  # the queued prompt was not started
        assert statuses(session)[-1] == "Idle" and session.status == "Idle"
        with pytest.raises(SessionClosed):
            await session.prompt("late")


def test_draining_is_a_session_closed_on_the_wire(wire_schema):
    err = Draining()
    assert isinstance(err, SessionClosed) and err.kind == "Draining"
    body = err.body()
    assert body == {"kind": "SessionClosed", "message": err.message, "reason": "draining"}
    wire_schema.validate_def("ErrorBody", body)
