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
from typing import Any, NamedTuple, NoReturn, cast

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

# A flat line, cut where its values go: _SEQUENCE, the sequence, _SECS, the seconds, _NANOS, the nanoseconds, then
# from the session id to the kind's last field name (the burst's, see _flat_lines), its value's JSON, then _END.
_SEQUENCE = '{"event":{"sequence":'
_SECS = ',"occurred_at":{"secs_since_epoch":'
_NANOS = ',"nanos_since_epoch":'
_END = '}},"extensions":{}}}\n'


class _NotFlat(Exception):
    """This event's line is the serializer's to write (raised and caught here only)."""


class _FlatKind(NamedTuple):
    """How the line of one flat kind is written: ``head`` (the kind's JSON up to its first field's value,
    ``'"kind":{"TextDelta":{"message_id":'``), ``second`` (for two fields, what comes between the two values:
    ``',"text":'``, else ``None``) and ``values`` (the kind's ``__dict__`` -> its value, or tuple of values)."""

    head: str
    second: str | None
    values: Callable[[dict[str, Any]], Any]


@functools.cache
def _flat_kinds() -> dict[type, _FlatKind]:
    """The kinds with a hand-formatted line -> their :class:`_FlatKind`; built at the first line, not at import
    (start-up pays nothing for it), then cached. Each kind has one or two string fields."""
    kinds: dict[type, _FlatKind] = {}
    for cls in (TextDelta, ReasoningDelta, UserMessage, MessageEnded, ToolOutputDelta, RequestClosed):
        names = tuple(cls.model_fields)
        assert len(names) in (1, 2), f"{cls.__name__}: the flat lines format kinds of one or two fields"
        second = f',"{names[1]}":' if len(names) == 2 else None
        kinds[cls] = _FlatKind(f'"kind":{{"{cls.TAG}":{{"{names[0]}":', second, itemgetter(*names))
    return kinds


def event_line(event: Any) -> bytes:
    """One event line (UTF-8 bytes ending in a newline) for ``event``, an ``Event``. Raises
    (``PydanticSerializationError``) for an event that is not serializable, e.g. one holding a lone surrogate; see
    :func:`event_lines`."""
    try:
        return _flat_event_line(event)
    except (_NotFlat, TypeError, UnicodeEncodeError):  # another kind, or a value the serializer must judge
        return b'{"event":' + event.__pydantic_serializer__.to_json(event) + b"}\n"


def _not_flat(event: object) -> NoReturn:
    # _flat_event_line's "model" for _flat_lines: an event that is not flat is not this fast path's to write.
    raise _NotFlat


def _flat_event_line(event: Any) -> bytes:
    """The hand-formatted line of ``event``, an ``Event`` of a flat kind without extensions; raises
    :class:`_NotFlat` for any other event, ``UnicodeEncodeError`` for a lone surrogate."""
    return _flat_lines([event], _not_flat)


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
    loop: the events of a burst (one kind, one turn, one session and, for two-field kinds, one first value such as
    a message id) share the middle of their line, formatted once, and the batch is encoded once (issue 17: a third
    less per delta than a call per event; from parts, no model is built at all). Raises like :func:`event_line`
    (``UnicodeEncodeError`` for a lone surrogate), so :func:`event_lines` can look for the culprit.

    A line is an f-string of its pieces, not a ``%`` format of a baked template: ``%`` reads its ~230-character
    template character by character, 0.58 us a line against 0.29 us for the pieces (issue 31).
    """
    kinds = _flat_kinds()
    chunks: list[bytes] = []
    out: list[str] = []
    key: tuple[Any, ...] = (None, None, None, None)
    middle = ""
    kind: Any
    turn: Any
    extensions: Any
    for event in events:
        if event.__class__ is EventParts:
            sequence, ns, session_id, turn, kind, extensions = event
            secs, nanos = divmod(ns, 1_000_000_000)
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
        picked = spec.values(kind.__dict__)
        first, last = (None, picked) if spec.second is None else picked  # (message/tool id, text) or (the one id)
        if key[0] is not kind.__class__ or key[1] is not turn or key[2] != session_id or key[3] != first:
            # A burst shares kind, turn, session and (for deltas) message id: the middle of its lines is theirs.
            key = (kind.__class__, turn, session_id, first)
            middle = f',"session_id":{_encode(session_id)},"turn_info":{_turn_json(turn)},{spec.head}'
            if spec.second is not None:
                middle += _encode(cast(str, first)) + spec.second
        out.append(f"{_SEQUENCE}{sequence}{_SECS}{secs}{_NANOS}{nanos}}}{middle}{_encode(last)}{_END}")
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
