"""An event's parts, what the engine appends to a session's event log, and the fast way to build its ``Event``.

The engine does not build a pydantic ``Event`` (and its ``SystemTime``) per emitted event: that was a fifth of a
flood's cost (issue 17). It appends the event's :class:`EventParts` to the session's
:class:`~.event_log.EventLog`; the wire's writer formats its lines from them (:mod:`anyagentd.wire_lines`), and
the ``Event`` is built by :func:`build_event` only when a reader asks for the model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..model import Event, MessageEnded, SystemTime, TurnContext

if TYPE_CHECKING:
    from ..model import EventKind


class EventParts(NamedTuple):
    """The fields of one ``Event``, as the engine emits it: valid as they are (nothing here is validated).

    ``ns`` is the engine's wall clock when it emitted the event, in nanoseconds since the epoch (the model's
    ``occurred_at``); ``extensions`` is ``None`` for none (the model gets ``{}``).

    The engine builds these on its per-event path with ``tuple.__new__(EventParts, (...))``, which skips the
    generated ``__new__``'s Python call (the figures are at ``_new_parts`` in :mod:`.session`); the class is the
    same. Readers tell parts from a model by ``entry.__class__ is EventParts``.
    """

    sequence: int
    ns: int
    session_id: str
    turn_info: TurnContext | None
    kind: EventKind
    extensions: dict[str, Any] | None


def build_event(parts: EventParts) -> Event:
    """The ``Event`` of ``parts`` (``extensions`` ``None`` becomes ``{}``), built without validation, the way
    :func:`event_builder` chose for this process. Raises nothing of its own."""
    return event_builder()(parts)


@functools.cache
def event_builder() -> Callable[[EventParts], Event]:
    """How this process builds events (a function of :class:`EventParts` -> ``Event``), chosen at its first event
    (not at import: the probe's kinds build their small schemas) and kept: :func:`_direct_event` if it leaves
    exactly what ``model_construct`` leaves with the installed pydantic, else :func:`_constructed_event`.

    Why two: ``model_construct`` walks every field; through it an event cost the engine 3.3 us, and the engine's
    whole per-event cost fell from 4.1 to 1.8 us with the direct build (bench/README.md, "the event log,
    projections and retention"). But the direct build writes pydantic's private state, so it is used only where
    this pydantic leaves the same. The state of the two builds' instances is compared, not their serialized bytes:
    building ``Event``'s serializer (every event kind) here cost the first event of every process about 17 ms
    (issue 17).
    """
    probe = EventParts(
        7, 1_700_000_000_123_456_789, "s0", TurnContext(id="t1"), MessageEnded(message_id="m"), {"a/b": 1}
    )
    try:
        direct, constructed = _direct_event(probe), _constructed_event(probe)
        same = _state(direct) == _state(constructed) and _state(direct.occurred_at) == _state(constructed.occurred_at)
    except Exception:  # noqa: BLE001 - any surprise: use the public constructor
        same = False
    return _direct_event if same else _constructed_event


def _state(model: Any) -> tuple[Any, ...]:
    """Everything a pydantic instance holds (what its ``==`` and its serializer read)."""
    return (
        type(model),
        model.__dict__,
        model.__pydantic_fields_set__,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


_set = object.__setattr__
_new_time = SystemTime.__new__
_new_event = Event.__new__
_EVENT_FIELDS = frozenset(("sequence", "occurred_at", "session_id", "turn_info", "kind", "extensions"))
_TIME_FIELDS = frozenset(("secs_since_epoch", "nanos_since_epoch"))


def _direct_event(parts: EventParts) -> Event:
    """The ``Event`` of ``parts``, its pydantic state written directly.

    What ``model_construct`` leaves behind, without its per-field walk (at a third of its cost): every field is
    given, already valid, the models have no extras and no private attributes. Written out (no helper call)
    because it runs once per event a reader takes as a model (issue 17). Used only where :func:`event_builder`
    found it equal to :func:`_constructed_event`.
    """
    sequence, ns, session_id, turn_info, kind, extensions = parts
    if extensions is None:
        extensions = {}
    occurred = _new_time(SystemTime)
    _set(occurred, "__dict__", {"secs_since_epoch": ns // 1_000_000_000, "nanos_since_epoch": ns % 1_000_000_000})
    _set(occurred, "__pydantic_fields_set__", _TIME_FIELDS)
    _set(occurred, "__pydantic_extra__", None)
    _set(occurred, "__pydantic_private__", None)
    event = _new_event(Event)
    _set(
        event,
        "__dict__",
        {
            "sequence": sequence,
            "occurred_at": occurred,
            "session_id": session_id,
            "turn_info": turn_info,
            "kind": kind,
            "extensions": extensions,
        },
    )
    _set(event, "__pydantic_fields_set__", _EVENT_FIELDS)
    _set(event, "__pydantic_extra__", None)
    _set(event, "__pydantic_private__", None)
    return event


def _constructed_event(parts: EventParts) -> Event:
    """The ``Event`` of ``parts`` through pydantic's public ``model_construct`` (the reference the direct build is
    checked against, and the fallback)."""
    sequence, ns, session_id, turn_info, kind, extensions = parts
    occurred = SystemTime.model_construct(secs_since_epoch=ns // 1_000_000_000, nanos_since_epoch=ns % 1_000_000_000)
    return Event.model_construct(
        sequence=sequence,
        occurred_at=occurred,
        session_id=session_id,
        turn_info=turn_info,
        kind=kind,
        extensions={} if extensions is None else extensions,
    )


__all__ = ["EventParts", "build_event", "event_builder"]
