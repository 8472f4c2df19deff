"""The wire's event lines: ``{"event": <Event>}`` and a newline, for one event or a batch of them.

The rule: the bytes are exactly those pydantic's serializer writes for the ``Event`` (compact JSON, the model's
field order, the same escapes), whatever the strings hold. The property test of it is
``tests/core/test_wire_lines.py::test_the_flat_encoder_writes_the_serializers_bytes`` (random events of the flat
kinds and others, models and parts mixed); the other tests there check single lines and bursts.

Why a second encoder (issue 17): the events of a streaming answer (deltas, message ends, tool output, request
closes) are a few strings in a fixed shape, so their line is formatted here instead of through the serializer and
its Python tag callbacks (2 us an event, most of the wire's per-event cost), straight from the event log's
:class:`~.engine.event_parts.EventParts` without building a model. ``json.encoder.encode_basestring`` escapes every
character as pydantic-core does. Anything else (another kind, extensions, a ``turn_info`` that is not exactly a
``TurnContext``, a lone surrogate) goes through the serializer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NamedTuple, cast

from .engine.event_parts import EventParts
from .model import (
    Event,
    MessageEnded,
    ReasoningDelta,
    RequestClosed,
    TextDelta,
    ToolOutputDelta,
    TurnContext,
    UserMessage,
)

_encode = json.encoder.encode_basestring
"""A str -> its JSON string literal (quotes included), non-ASCII kept, escaped as pydantic-core escapes it."""

_FLAT_HEAD = '{"event":{"sequence":%d,"occurred_at":{"secs_since_epoch":%d,"nanos_since_epoch":%d},"session_id":%s,'
"""The line up to ``session_id``: sequence, seconds, nanoseconds, then the session id's JSON."""


class _NotFlat(Exception):
    """This event's line is the serializer's to write (raised and caught here only)."""


class _FlatKind(NamedTuple):
    """How the line of one flat kind ends: ``tail`` (a %-format of the ``turn_info`` JSON and the kind's field
    values as JSON, in field order), ``values`` (the kind's ``__dict__`` -> its value, or tuple of values) and
    ``field_count`` (1 or 2)."""

    tail: str
    values: Callable[[dict[str, Any]], Any]
    field_count: int


@functools.cache
def _flat_kinds() -> dict[type, _FlatKind]:
    """The kinds with a hand-formatted line -> their :class:`_FlatKind`; built at the first line, not at import
    (start-up pays nothing for it), then cached. Each kind has one or two string fields."""
    kinds: dict[type, _FlatKind] = {}
    for cls in (TextDelta, ReasoningDelta, UserMessage, MessageEnded, ToolOutputDelta, RequestClosed):
        names = tuple(cls.model_fields)
        assert len(names) in (1, 2), f"{cls.__name__}: the flat lines format kinds of one or two fields"
        body = ",".join(f'"{name}":%s' for name in names)
        tail = '"turn_info":%s,"kind":{"' + cls.TAG + '":{' + body + '}},"extensions":{}}}\n'
        kinds[cls] = _FlatKind(tail, itemgetter(*names), len(names))
    return kinds


def event_line(event: Any) -> bytes:
    """One event line (UTF-8 bytes ending in a newline) for ``event``, an ``Event``. Raises
    (``PydanticSerializationError``) for an event that is not serializable, e.g. one holding a lone surrogate; see
    :func:`event_lines`."""
    try:
        return _flat_event_line(event)
    except (_NotFlat, TypeError, UnicodeEncodeError):  # another kind, or a value the serializer must judge
        return b'{"event":' + event.__pydantic_serializer__.to_json(event) + b"}\n"


def _flat_event_line(event: Any) -> bytes:
    """The hand-formatted line of ``event``, an ``Event`` of a flat kind without extensions; raises
    :class:`_NotFlat` for any other event, ``UnicodeEncodeError`` for a lone surrogate."""
    fields = event.__dict__
    kind = fields["kind"]
    spec = _flat_kinds().get(type(kind))
    if spec is None or fields["extensions"] or type(event) is not Event:
        raise _NotFlat
    tail, values, count = spec
    turn, session_id = fields["turn_info"], fields["session_id"]
    if turn is not _last[0] or session_id != _last[1]:  # the events of a burst share both: format them once
        _last[:] = [turn, session_id, _turn_json(turn), _encode(session_id)]
    at = fields["occurred_at"].__dict__
    head = _FLAT_HEAD % (fields["sequence"], at["secs_since_epoch"], at["nanos_since_epoch"], _last[3])
    picked = values(kind.__dict__)
    body = tail % ((_last[2], _encode(picked)) if count == 1 else (_last[2], *map(_encode, picked)))
    return (head + body).encode()


_last: list[Any] = [object(), None, "", ""]
"""The last (turn_info, session_id) :func:`_flat_event_line` formatted, and their JSON."""


def _turn_json(turn: Any) -> str:
    """The JSON of a ``turn_info``: ``null`` or a ``TurnContext``'s; raises :class:`_NotFlat` for anything else
    (a subclass: the serializer judges it)."""
    if turn is None:
        return "null"
    if type(turn) is not TurnContext:
        raise _NotFlat
    parent = turn.parent_tool_id
    return f'{{"id":{_encode(turn.id)},"parent_tool_id":{"null" if parent is None else _encode(parent)}}}'


def _flat_lines(events: list[Any], model: Callable[[Any], Any]) -> bytes:
    """The lines of ``events`` (models, or the :class:`~.engine.event_parts.EventParts` of an event log read with
    ``parts``, which ``model`` turns into models), as :func:`event_line` writes them one by one, formatted in one
    loop: the events of a burst (one kind, one turn, one session) share one format string and the batch is encoded
    once (issue 17: a third less per delta than a call per event; from parts, no model is built at all). Raises
    like :func:`event_line` (``UnicodeEncodeError`` for a lone surrogate), so :func:`event_lines` can look for the
    culprit."""
    kinds = _flat_kinds()
    chunks: list[bytes] = []
    out: list[str] = []
    key: tuple[Any, ...] = (None, None, None, None)
    line = ""
    kind: Any
    turn: Any
    extensions: Any
    for event in events:
        if event.__class__ is EventParts:
            sequence, ns, session_id, turn, kind, extensions = event
            secs, nanos = ns // 1_000_000_000, ns % 1_000_000_000
        elif event.__class__ is Event:
            fields = event.__dict__
            sequence, kind, turn = fields["sequence"], fields["kind"], fields["turn_info"]
            session_id, extensions = fields["session_id"], fields["extensions"]
            at = fields["occurred_at"].__dict__
            secs, nanos = at["secs_since_epoch"], at["nanos_since_epoch"]
        else:  # not an Event itself: the serializer judges it
            kind = turn = extensions = None
            sequence = secs = nanos = 0
            session_id = ""
        spec = kinds.get(kind.__class__)
        if spec is None or extensions or (turn is not None and turn.__class__ is not TurnContext):
            if out:
                chunks.append("".join(out).encode())
                out.clear()
            chunks.append(event_line(model(event)))
            continue
        tail, values, count = spec
        picked = values(kind.__dict__)
        first, last = (None, picked) if count == 1 else picked  # (message/tool id, text) or (the one id)
        if key[0] is not kind.__class__ or key[1] is not turn or key[2] != session_id or key[3] != first:
            # A burst shares kind, turn, session and (for deltas) message id: one format string for all of them.
            key = (kind.__class__, turn, session_id, first)
            baked = (_turn_json(turn),) if count == 1 else (_turn_json(turn), _encode(cast(str, first)))
            line = _FLAT_HEAD.replace("%s", _encode(session_id).replace("%", "%%")) + tail % (
                *(part.replace("%", "%%") for part in baked),
                "%s",
            )  # leaves the last value's %s
        out.append(line % (sequence, secs, nanos, _encode(last)))
    if out:
        chunks.append("".join(out).encode())
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _as_is(event: Any) -> Any:
    return event


def event_lines(events: list[Any], model: Callable[[Any], Any] = _as_is) -> tuple[bytes, Any, Exception | None]:
    """The lines of ``events`` that can be written (UTF-8, one per event, in order), the first event that cannot
    (or ``None``; else its model) and its error (or ``None``). ``events`` may hold the
    :class:`~.engine.event_parts.EventParts` of an event log read with ``parts``; ``model`` (the log's
    :meth:`~anyagentd.engine.event_log.EventLog.model`) builds the model of one when its line needs the
    serializer. Raises nothing for an unwritable event: that is what the second and third values report."""
    try:
        return _flat_lines(events, model), None, None
    except Exception:  # noqa: BLE001 - rare: find the culprit one by one
        pass
    written, bad, error = [], None, None
    for event in events:
        event = model(event)
        try:
            written.append(event_line(event))
        except Exception as err:  # noqa: BLE001 - whatever it is, it fails its session, not the writer
            if bad is None:
                bad, error = event, err
    return b"".join(written), bad, error


__all__ = ["event_line", "event_lines"]
