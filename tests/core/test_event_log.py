"""The per-session event log (issue 9.1) and readers that never block (issue 20.5): the ring, cursors, several
independent readers with their own bounds, and the primary reader (events()/event_batches(), the wire's)."""

from __future__ import annotations

import json
import random
import weakref
from typing import Any

import anyio
import pytest

from anyagentd.engine import event_parts
from anyagentd.engine.event_log import EventLog
from anyagentd.engine.event_parts import EventParts
from anyagentd.engine.settings import EngineSettings
from anyagentd.errors import ConsumerLagged, InvalidRequest
from anyagentd.model import Event, StatusChanged
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.anyio

END = {"End": {"Completed": {"source": "Protocol"}}}


def text(mid: str, t: str) -> dict[str, Any]:
    return {"Emit": {"TextDelta": {"message_id": mid, "text": t}}}


def flood(times: int, **script: Any) -> dict[str, Any]:
    return {"turns": [[{"Repeat": {"times": times, "steps": [text("m", "x")]}}, END]] * 3, **script}


def runtime(script: dict[str, Any], **kw: Any) -> Runtime:
    return Runtime(mock_script=script, settings=EngineSettings(**kw))


async def read_all(reader: Any) -> list[int]:
    return [event.sequence async for event in reader]


_streams: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


async def until_turn_ended(session: Any) -> list[Any]:
    """The session's events() up to the next TurnEnded, by a consumer that never blocks (one iterator per
    session, as events() has one consumer at a time)."""
    stream = _streams.setdefault(session, session.events())
    seen = []
    async for event in stream:
        seen.append(event)
        if event.tag == "TurnEnded":
            return seen
    raise AssertionError("the stream ended before TurnEnded")


def event(seq: int) -> Event:
    return Event.model_construct(
        sequence=seq, session_id="s", turn_info=None, kind=StatusChanged(value="Idle"), extensions={}
    )


# ------------------------------------------------------------------------------------------------- the ring


def test_ring_keeps_the_newest_and_reads_across_the_wrap():
    log = EventLog(5)
    assert (log.oldest_seq, log.newest_seq, len(log)) == (1, 0, 0)
    for seq in range(1, 13):
        log.append(event(seq))
        held = [e.sequence for e in log.events()]
        assert held == list(range(max(1, seq - 4), seq + 1))
    assert (log.oldest_seq, log.newest_seq) == (8, 12)
    for after in range(0, 14):
        for limit in range(1, 7):
            got = [e.sequence for e in log.read(after, limit)]
            first = max(after + 1, 8)
            assert got == list(range(first, min(12, first + limit - 1) + 1))


async def test_a_cursor_older_than_the_ring_counts_what_it_missed():
    log = EventLog(4)
    for seq in range(1, 11):
        log.append(event(seq))
    log.close()
    old = log.subscribe(2)
    assert await read_all(old) == [7, 8, 9, 10]
    assert old.dropped == 4  # 3, 4, 5, 6 left the ring before it read them
    fresh = log.subscribe(8)
    assert await read_all(fresh) == [9, 10] and fresh.dropped == 0
    assert await read_all(log.subscribe(0)) == [7, 8, 9, 10]


async def test_a_reader_lags_on_what_arrived_since_it_subscribed_not_on_the_backlog():
    log = EventLog(100)
    for seq in range(1, 51):
        log.append(event(seq))
    reader = log.subscribe(0, bound=10)  # 50 events of backlog: more than its bound, yet not lagging
    for seq in range(51, 61):
        log.append(event(seq))
    assert not reader.lagged
    log.append(event(61))  # the 11th event since it subscribed, none read
    assert reader.lagged
    got: list[int] = []
    with pytest.raises(ConsumerLagged):
        async for e in reader:
            got.append(e.sequence)
    assert got == list(range(1, 61))  # what it held when it lagged, then the error
    other = log.subscribe(55, bound=10)
    for seq in range(62, 70):
        log.append(event(seq))
    assert not other.lagged  # a second reader is unaffected by the first


# ------------------------------------------------------------------------------------------------- sessions


async def test_several_readers_see_identical_sequences(tmp_path):
    script = {"turns": [[text("m", "a"), {"Emit": {"PlanUpdated": {"entries": []}}}, text("m", "b"), END]]}
    async with runtime(script) as rt:
        session = await rt.open("mock", tmp_path)
        readers = [session.subscribe() for _ in range(3)]
        batched = session.subscribe()
        async with anyio.create_task_group() as tg:
            results: dict[int, list[int]] = {}

            async def read(index: int, reader: Any) -> None:
                results[index] = await read_all(reader)

            async def read_batches() -> None:
                results[99] = [e.sequence async for batch in batched.batches(2) for e in batch]

            for index, reader in enumerate(readers):
                tg.start_soon(read, index, reader)
            tg.start_soon(read_batches)
            await session.prompt("x")
            primary = await until_turn_ended(session)
            await session.close()
        wire = [e.sequence for e in primary]
        assert results[0] == results[1] == results[2] == results[99]
        assert results[0][: len(wire)] == wire
        assert results[0] == list(range(1, session.log.newest_seq + 1))
        assert session.log.events()[-1].tag == "StatusChanged"  # the readers ended after the session's last event


async def test_a_slow_extra_reader_is_dropped_while_the_wire_reader_and_session_go_on(tmp_path):
    async with runtime(flood(2000), event_bound=1024) as rt:
        session = await rt.open("mock", tmp_path)
        slow = session.subscribe(bound=50)  # never read while the flood runs
        await session.prompt("flood")
        primary = await until_turn_ended(session)
        assert sum(e.tag == "TextDelta" for e in primary) == 2000
        assert slow.lagged and not session.closed
        got: list[Any] = []
        with pytest.raises(ConsumerLagged):
            async for e in slow:
                got.append(e)
        assert [e.sequence for e in got] == list(range(1, 51))  # its bound, then the error
        await session.prompt("again")  # the session goes on
        assert sum(e.tag == "TextDelta" for e in await until_turn_ended(session)) == 2000


async def test_cursor_reads_from_the_ring_and_older_cursors_say_how_many_were_dropped(tmp_path):
    async with runtime(flood(300), log_size=64, event_bound=32) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        await until_turn_ended(session)
        log = session.log
        assert len(log) == 64 and log.newest_seq - log.oldest_seq == 63
        newest = log.newest_seq
        tail = session.subscribe(newest - 10)
        assert [e.sequence for e in tail.take(100)] == list(range(newest - 9, newest + 1)) and tail.dropped == 0
        old = session.subscribe(5)
        got = old.take(1000)
        assert old.dropped == log.oldest_seq - 1 - 5
        assert [e.sequence for e in got] == list(range(log.oldest_seq, newest + 1))
        await session.close()
        after_close = session.subscribe()  # after close: a replay of what the log holds, then the end
        replay = await read_all(after_close)
        assert replay == list(range(log.oldest_seq, log.newest_seq + 1)) and after_close.dropped == log.oldest_seq - 1


# ------------------------------------------------------------------------------------------------- issue 20.5


async def test_events_keeps_up_with_a_flood_when_the_consumer_never_blocks(tmp_path):
    async with runtime(flood(20_000)) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("flood")
        seen = await until_turn_ended(session)
        assert sum(e.tag == "TextDelta" for e in seen) == 20_000
        assert not session.closed


async def test_events_keeps_up_with_a_burst_handed_over_in_one_step(tmp_path):
    # After End the scripted agent plays its steps back to back without yielding, into a channel large enough
    # never to block: 5000 reports reach the engine in one go (an agent's large pipe read). The engine must let
    # its reader run during that burst.
    burst = {"buffer": 100_000, "turns": [[END, {"Repeat": {"times": 5000, "steps": [text("m", "y")]}}, END]]}
    async with runtime(burst) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        await until_turn_ended(session)
        later = await until_turn_ended(session)  # the agent-originated turn of the burst
        assert sum(e.tag == "TextDelta" for e in later) == 5000
        assert not session.closed


async def test_a_stalled_primary_reader_still_closes_the_session(tmp_path):
    async with runtime(flood(5000), event_bound=100) as rt:
        session = await rt.open("mock", tmp_path)
        extra = session.subscribe(bound=100_000)  # capped at the log's capacity; read after the fact
        await session.prompt("flood")
        with anyio.fail_after(10):
            await session.wait_closed()  # nobody read events(): the session was closed
        got = []
        with pytest.raises(ConsumerLagged):
            async for e in session.events():
                got.append(e)
        assert [e.sequence for e in got] == list(range(1, 101))
        assert extra.bound == session.log.capacity
        assert (await read_all(extra))[-1] == session.log.newest_seq  # the extra reader saw the shutdown too


def test_events_are_built_directly_and_equal_what_model_construct_builds():
    from anyagentd.model import TextDelta, TurnContext

    turn = TurnContext(id="t2", parent_tool_id="tool")
    for extensions in ({}, None, {"a/b": [1]}):
        parts = EventParts(3, 1_700_000_001_000_000_042, "s9", turn, TextDelta(message_id="m", text="hé"), extensions)
        # the fast path is the one in use with this pydantic
        assert event_parts.event_builder() is event_parts._direct_event
        direct, constructed = event_parts.build_event(parts), event_parts._constructed_event(parts)
        assert direct == constructed and direct.model_dump(mode="json") == constructed.model_dump(mode="json")
        assert direct.extensions == (extensions or {}) and direct.occurred_at.to_seconds() == pytest.approx(
            1_700_000_001.000000042
        )
        assert Event.model_validate_json(direct.model_dump_json()) == constructed


async def test_readers_against_a_model_of_the_ring():
    # Random appends and reads by several readers (with their own cursors and bounds) against a plain list: each
    # reader gets contiguous sequences, counts exactly what left the ring before it read it, and lags exactly
    # when more than its bound of the events since it subscribed are undrained.
    rng = random.Random(9)
    for capacity in (1, 2, 3, 7, 16):
        log = EventLog(capacity)
        readers: list[tuple[Any, int, list[int], int]] = []  # (reader, subscribed at, got, first cursor)
        for _ in range(400):
            choice = rng.random()
            if choice < 0.55:
                log.append(event(log.newest_seq + 1))
            elif choice < 0.65 and len(readers) < 5:
                after = rng.randint(0, log.newest_seq)
                reader = log.subscribe(after, bound=rng.randint(1, capacity + 2))
                readers.append((reader, log.newest_seq, [], after))
                assert reader.cursor == after and reader.bound <= capacity
            elif readers:
                reader, _, got, _ = rng.choice(readers)
                before, dropped = reader.cursor, reader.dropped
                batch = [e.sequence for e in reader.take(rng.randint(1, 4))]
                if batch:
                    assert batch == list(range(batch[0], batch[-1] + 1)) and batch[0] > before
                    assert reader.dropped - dropped == batch[0] - before - 1
                    assert batch[0] >= log.oldest_seq
                got.extend(batch)
            for reader, start, _got, _ in readers:
                undrained = log.newest_seq - max(reader.cursor, start)
                if not reader.lagged:
                    assert undrained <= reader.bound
        for reader, _, got, first in readers:
            assert len(got) + reader.dropped == reader.cursor - first  # every event after its cursor: got or gone


async def test_bad_cursors_and_bounds_are_typed_errors(tmp_path):
    async with runtime({"turns": []}) as rt:
        session = await rt.open("mock", tmp_path)
        for kwargs in ({"after": -1}, {"after": 0, "bound": 0}, {"after": "3"}):
            with pytest.raises(InvalidRequest):
                session.subscribe(**kwargs)
        reader = session.subscribe()
        reader.close()
        assert not reader.lagged and reader.finished


async def test_a_consumer_that_stops_early_leaves_the_rest_to_the_next_iterator(tmp_path):
    script = {"turns": [[text("m", "a"), text("m", "b"), END, text("n", "c"), END], [text("m", "d"), END]]}
    async with runtime(script) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        seen = []
        stream = session.events()
        async for event in stream:
            seen.append(event.sequence)
            if event.tag == "TurnEnded":
                break
        await stream.aclose()
        with anyio.fail_after(10):
            async for event in session.events():  # a second iterator, at once: the first one freed the reader
                seen.append(event.sequence)
                if event.tag == "TurnEnded":  # the agent-originated turn's
                    break
        assert seen == list(range(1, seen[-1] + 1))  # nothing was taken and lost between the two iterators
        assert [e.tag for e in session.log.events()].count("TurnEnded") == 2 and len(seen) > 8


# ------------------------------------------------------------------------------- parts in place of models


def parts(seq: int, text: str = "x") -> EventParts:
    from anyagentd.model import TextDelta, TurnContext

    return EventParts(
        seq, 1_700_000_000_000_000_000 + seq, "s", TurnContext(id="t1"), TextDelta(message_id="m", text=text), None
    )


def test_appended_parts_are_read_as_models_built_once_and_shared():
    # The engine appends an event's parts (issue 17); a reader that wants models gets Event models, each built the
    # first time any reader takes it and then kept, so every reader shares one instance; a parts reader gets the
    # EventParts as appended until a model reader has built it.
    built: list[int] = []

    def build(entry: EventParts) -> Event:
        built.append(entry.sequence)
        return event_parts._constructed_event(entry)

    log = EventLog(4, build)
    for seq in range(1, 7):  # wraps: 3..6 are held
        log.append(parts(seq))
    raw = log.read(2, 2, parts=True)
    assert [entry.__class__ for entry in raw] == [EventParts, EventParts] and built == []
    models = log.read(0, 10)
    assert [e.sequence for e in models] == [3, 4, 5, 6] and built == [3, 4, 5, 6]
    assert models[0] == event_parts._constructed_event(parts(3)) and models[0].extensions == {}
    assert models[0].occurred_at.nanos_since_epoch == 3
    again = log.read(0, 10)
    assert all(a is b for a, b in zip(again, models, strict=True)) and built == [3, 4, 5, 6]  # built once, shared
    assert log.read(4, 2, parts=True) == models[2:]  # once built, parts readers get the model too
    assert log.model(parts(9)).sequence == 9 and log.model(models[0]) is models[0]


async def test_the_engine_appends_event_parts_that_read_back_as_its_events(tmp_path):
    # Session._emit builds EventParts without their generated __new__ (tuple.__new__): the class is still
    # EventParts, which is how the log and the wire's writer tell parts from a model.
    async with runtime({"turns": [[text("m", "a"), text("m", "b"), END]]}) as rt:
        session = await rt.open("mock", tmp_path)
        await session.prompt("x")
        held: list[Any] = []
        with anyio.fail_after(10):
            async for batch in session.event_batches(parts=True):
                held.extend(batch)
                if any(entry.kind == "TurnEnded" or getattr(entry.kind, "TAG", "") == "TurnEnded" for entry in held):
                    break
    assert held and {entry.__class__ for entry in held} == {EventParts}
    assert [entry.sequence for entry in held] == list(range(1, len(held) + 1))
    models = [session.log.model(entry) for entry in held]
    assert [e.tag for e in models if e.tag == "TextDelta"] == ["TextDelta", "TextDelta"]
    assert all(e.session_id == session.id and e.extensions is not None for e in models)


async def test_subscribers_get_models_while_the_primary_reads_parts():
    log = EventLog(
        8,
        lambda entry: Event.model_construct(
            sequence=entry.sequence, session_id=entry.session_id, turn_info=None, kind=entry.kind, extensions={}
        ),
    )
    primary, other = log.subscribe(0), log.subscribe(0)
    for seq in (1, 2, 3):
        log.append(parts(seq))
    assert [entry[0] for entry in primary.take(2, parts=True)] == [1, 2]
    taken = await other.next_batch(10)
    assert [e.sequence for e in taken] == [1, 2, 3] and all(isinstance(e, Event) for e in taken)
    assert primary.take(10, parts=True) == [taken[2]]  # the model the other reader built took its parts' place


async def test_a_wire_flood_builds_no_event_model_per_delta(tmp_path, monkeypatch):
    # The wire's writer formats deltas from the log's parts: no Event is built for them (the flood's largest cost
    # before, issue 17), while the lines are still written in full and in order.
    from anyagentd.wire import WireServer

    kinds: list[str] = []

    def counting(entry: EventParts) -> Event:
        kinds.append(entry.kind.TAG if hasattr(entry.kind, "TAG") else str(entry.kind))
        return event_parts._constructed_event(entry)

    monkeypatch.setattr(event_parts, "event_builder", lambda: counting)
    commands = [b'{"id":1,"cmd":"open","agent":"mock","dir":"/tmp"}\n']
    out: list[bytes] = []
    opened, ended = anyio.Event(), anyio.Event()
    opened_id: list[str] = []

    async def read_line() -> bytes:
        if commands:
            return commands.pop()
        if not opened.is_set():
            await opened.wait()
            return b'{"id":2,"cmd":"prompt","session":"%s","text":"go"}\n' % opened_id[0].encode()
        await ended.wait()
        return b""

    async def write(data: bytes) -> None:
        out.append(data)
        if b'"ok"' in data and not opened.is_set():
            opened_id.append(json.loads(data.splitlines()[-1])["ok"]["id"])
            opened.set()
        if b"TurnEnded" in data:
            ended.set()

    async with runtime(flood(3000)) as rt:
        with anyio.fail_after(30):
            await WireServer(rt, read_line, write).run()
    lines = b"".join(out).splitlines()
    deltas = [line for line in lines if b'"TextDelta"' in line]
    assert len(deltas) == 3000
    assert "TextDelta" not in kinds and "TurnEnded" in kinds  # a line the serializer writes still has its model
