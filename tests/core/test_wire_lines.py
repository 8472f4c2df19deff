"""The wire's fast event lines (issue 17, ``anyagentd.wire_lines``) are byte for byte what pydantic's serializer
writes, for every string: :func:`test_the_flat_encoder_writes_the_serializers_bytes` is the property its module
names; the others check single lines, bursts and an unwritable event."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_schema import validate_line

from anyagentd.engine.event_log import EventLog
from anyagentd.engine.event_parts import EventParts
from anyagentd.model import (
    CompletedStop,
    Event,
    MessageEnded,
    ReasoningDelta,
    RequestClosed,
    SystemTime,
    TextDelta,
    ToolOutputDelta,
    TurnContext,
    TurnEnded,
    TurnStarted,
    UserMessage,
    diagnostic,
)
from anyagentd.wire_lines import _flat_event_line, _flat_lines, _NotFlat, event_line, event_lines

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # every code point but surrogates
turns = st.one_of(st.none(), st.builds(TurnContext, id=text, parent_tool_id=st.one_of(st.none(), text)))
kinds = st.one_of(
    st.builds(TextDelta, message_id=text, text=text),
    st.builds(ReasoningDelta, message_id=text, text=text),
    st.builds(UserMessage, message_id=text, text=text),
    st.builds(MessageEnded, message_id=text),
    st.builds(ToolOutputDelta, tool_id=text, text=text),
    st.builds(RequestClosed, request_id=text),
)


def serialized(event: Event) -> bytes:
    return b'{"event":' + event.__pydantic_serializer__.to_json(event) + b"}\n"


@settings(max_examples=300, deadline=None)
@given(
    kind=kinds,
    turn=turns,
    session_id=text,
    sequence=st.integers(0, 2**63),
    at=st.builds(SystemTime, secs_since_epoch=st.integers(0, 2**40), nanos_since_epoch=st.integers(0, 10**9 - 1)),
)
def test_fast_lines_are_the_serializers_bytes(kind, turn, session_id, sequence, at) -> None:  # type: ignore[no-untyped-def]
    event = Event(sequence=sequence, occurred_at=at, session_id=session_id, turn_info=turn, kind=kind)
    fast = _flat_event_line(event)
    assert fast == serialized(event)
    assert event_line(event) == fast
    validate_line(json.loads(fast))


def test_events_of_other_shapes_and_lone_surrogates_go_through_the_serializer() -> None:
    turn = TurnContext(id="t1")
    with_extensions = Event(
        sequence=1, session_id="s", turn_info=turn, kind=MessageEnded(message_id="m"), extensions={"a/b": 1}
    )
    other = Event(sequence=2, session_id="s", kind=diagnostic("Info", "hi"))
    for event in (with_extensions, other):
        with pytest.raises(_NotFlat):
            _flat_event_line(event)
        assert event_line(event) == serialized(event)
    broken = Event(sequence=3, session_id="s", turn_info=turn, kind=TextDelta(message_id="m", text="a\ud800"))
    with pytest.raises(Exception) as err:
        event_line(broken)
    assert "surrogate" in str(err.value).lower() or "utf-8" in str(err.value).lower()
    data, bad, _ = event_lines([other, broken, with_extensions])  # the unwritable one is found, the rest written
    assert bad is broken and data == serialized(other) + serialized(with_extensions)


shared_ids = st.sampled_from(["m1", "m%s", 'm"%%d'])  # bursts of one message (its id is baked into the format)
burst_kinds = st.one_of(
    st.builds(TextDelta, message_id=shared_ids, text=text),
    st.builds(ToolOutputDelta, tool_id=shared_ids, text=text),
    st.builds(MessageEnded, message_id=shared_ids),
)
shared_turns = st.sampled_from([None, TurnContext(id="t1"), TurnContext(id="t%s", parent_tool_id="tool\n1")])
batch_events = st.builds(
    lambda kind, turn, session_id, sequence, extensions: Event(
        sequence=sequence, session_id=session_id, turn_info=turn, kind=kind, extensions=extensions
    ),
    kind=st.one_of(kinds, burst_kinds, st.builds(lambda text: diagnostic("Info", text), text)),
    turn=st.one_of(shared_turns, turns),
    session_id=st.sampled_from(["s1", "s%d", "é\u2028"]),
    sequence=st.integers(0, 2**63),
    extensions=st.sampled_from([{}, {}, {"a/b": 1}]),
)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(batch_events, max_size=12))
def test_a_batch_of_lines_is_the_serializers_bytes_event_by_event(events) -> None:  # type: ignore[no-untyped-def]
    # event_lines formats a burst in one loop (one format string per kind, turn and session): the bytes must be
    # those of the serializer, one line per event, in order, whatever the mix of kinds, turns and sessions.
    data, bad, error = event_lines(events)
    assert (bad, error) == (None, None)
    assert data == b"".join(serialized(event) for event in events)
    for line in data.splitlines():
        validate_line(json.loads(line))


def as_parts(event: Event, empty: dict[str, object] | None = None) -> EventParts:
    """The event log's parts of ``event`` (what the engine appends, issue 17); no extensions as ``empty``."""
    at = event.occurred_at
    return EventParts(
        event.sequence,
        at.secs_since_epoch * 1_000_000_000 + at.nanos_since_epoch,
        event.session_id,
        event.turn_info,
        event.kind,
        event.extensions or empty,
    )


def model_of(entry: Event | EventParts) -> Event:
    return EventLog(1).model(entry)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.tuples(batch_events, st.booleans()), max_size=12))
def test_lines_from_the_logs_parts_are_the_serializers_bytes(events) -> None:  # type: ignore[no-untyped-def]
    # The wire's writer formats lines straight from the parts the event log holds (no model built), mixed with
    # models: the bytes must be the serializer's for the model each entry stands for, and valid wire lines.
    entries = [as_parts(event) if raw else event for event, raw in events]
    data, bad, error = event_lines(entries, model_of)
    assert (bad, error) == (None, None)
    assert data == b"".join(serialized(event) for event, _ in events)
    for entry, (event, _) in zip(entries, events, strict=True):
        assert model_of(entry) == event
    for line in data.splitlines():
        validate_line(json.loads(line))


def test_an_unwritable_event_among_parts_is_reported_as_its_model() -> None:
    turn = TurnContext(id="t1")
    good = Event(sequence=1, session_id="s", turn_info=turn, kind=TextDelta(message_id="m", text="a"))
    broken = Event(sequence=2, session_id="s", turn_info=turn, kind=TextDelta(message_id="m", text="a\ud800"))
    other = Event(sequence=3, session_id="s", kind=diagnostic("Info", "hi"))
    data, bad, error = event_lines([as_parts(good), as_parts(broken), as_parts(other)], model_of)
    assert data == serialized(good) + serialized(other) and error is not None
    assert isinstance(bad, Event) and bad == broken


# Strings the hand-formatted lines must escape as the serializer does: '%' (the format strings), quotes,
# backslashes, control characters, non-ASCII (kept as is), line and paragraph separators, astral characters.
tricky = st.text(st.sampled_from("%\"\\'\n\r\t\x00\x1f\x7f\x85é€\u2028\u2029\U0001f600s1%d%%{}:,"), max_size=12)
strings = st.one_of(text, tricky, st.sampled_from(["m1", "s1", "t1", "%s", "%%", "a%%d", '"']))  # shared: bursts
any_turns = st.one_of(
    st.none(),
    st.sampled_from([TurnContext(id="t1"), TurnContext(id="t%", parent_tool_id="p\n")]),
    st.builds(TurnContext, id=strings, parent_tool_id=st.one_of(st.none(), strings)),
)
flat_kinds = st.one_of(
    st.builds(TextDelta, message_id=strings, text=strings),
    st.builds(ReasoningDelta, message_id=strings, text=strings),
    st.builds(UserMessage, message_id=strings, text=strings),
    st.builds(MessageEnded, message_id=strings),
    st.builds(ToolOutputDelta, tool_id=strings, text=strings),
    st.builds(RequestClosed, request_id=strings),
)
other_kinds = st.one_of(
    st.builds(diagnostic, st.sampled_from(["Info", "Warning", "Error"]), strings),
    st.just("ContextCompacted"),
    st.just(TurnStarted(origin="Agent")),
    st.builds(
        lambda background: TurnEnded(stop=CompletedStop(source="Protocol"), background=background),
        st.lists(strings, max_size=3),
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
    max_leaves=6,
)
any_extensions = st.one_of(st.just({}), st.dictionaries(strings, json_values, min_size=1, max_size=3))
any_events = st.builds(
    lambda kind, turn, session_id, sequence, secs, nanos, extensions: Event(
        sequence=sequence,
        occurred_at=SystemTime(secs_since_epoch=secs, nanos_since_epoch=nanos),
        session_id=session_id,
        turn_info=turn,
        kind=kind,
        extensions=extensions,
    ),
    kind=st.one_of(flat_kinds, flat_kinds, other_kinds),
    turn=any_turns,
    session_id=strings,
    sequence=st.integers(0, 2**63),
    secs=st.integers(0, 2**40),
    nanos=st.integers(0, 10**9 - 1),
    extensions=st.one_of(st.just({}), st.just({}), any_extensions),
)
FLAT_KINDS = (TextDelta, ReasoningDelta, UserMessage, MessageEnded, ToolOutputDelta, RequestClosed)
# How the log may hold each event: its model, or its parts with no extensions as None (the engine's usual) or {}.
held_as = st.sampled_from(["model", "parts", "parts with {}"])


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.tuples(any_events, held_as), max_size=16))
def test_the_flat_encoder_writes_the_serializers_bytes(events) -> None:  # type: ignore[no-untyped-def]
    # The rule of anyagentd.wire_lines: whatever the kinds (flat or not), turn_info, extensions and strings, and
    # whether the log holds a model or its parts, the flat encoder's bytes are the serializer's, line by line. The
    # batch formatter is called itself: event_lines would hide a format that raises behind its one-by-one retry.
    entries = [
        event if how == "model" else as_parts(event, {} if how == "parts with {}" else None) for event, how in events
    ]
    expected = b"".join(serialized(event) for event, _ in events)
    flat = _flat_lines(entries, model_of)
    assert flat == expected
    assert event_lines(entries, model_of) == (expected, None, None)
    for entry, (event, _) in zip(entries, events, strict=True):
        assert event_line(event) == serialized(event) and model_of(entry) == event
        if isinstance(event.kind, FLAT_KINDS) and not event.extensions:
            assert _flat_event_line(event) == serialized(event)  # the one-event fast path, not the serializer
