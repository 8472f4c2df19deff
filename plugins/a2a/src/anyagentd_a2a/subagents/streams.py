"""A subagent's event stream: the engine events its owner reads, in one shape whether the subagent runs here or on
a child instance (``docs/commands.md#subagent-events``).

A stream event is ``{"id", "subject", "correlation", "data"}`` (the shape ``_instance.emit`` carries): ``id`` the
engine event's sequence in its session, ``subject`` its kind (``TextDelta``, ``ToolUpdated``, ``TurnEnded``…),
``correlation`` the turn it belongs to, ``data`` the engine event as the wire writes it, strings cut at
:data:`STRING_LIMIT` bytes. :class:`EventMirror` picks what is worth showing: top-level text gathered into one
event per message, a tool each time its status changes, requests, plans, diagnostics and the turn's end (its
start is the ``correlation``). A
subagent's record keeps ``{"stream", "event"}`` entries, the newest :attr:`~.manager.SubagentManager.events_kept`.
"""

from __future__ import annotations

from typing import Any

from anyagentd.model import Event, TextDelta

from ..structjson import whole_numbers
from ..translate import wire_json
from ..truncation import truncate

STREAM = "events"
"""The stream both sides declare for a subagent's events (``_instance.emit``'s ``stream``)."""

STRING_LIMIT = 2048
"""Bytes a string of a stream event's ``data`` keeps."""

MIRRORED = frozenset({"RequestOpened", "RequestClosed", "PlanUpdated", "Diagnostic", "TurnEnded"})
"""Kinds mirrored as they come (text and tools are handled apart)."""


def cut(event: dict[str, Any]) -> dict[str, Any]:
    """A stream event with every string cut at :data:`STRING_LIMIT` bytes: a local subagent's and a child's
    mirrored ones alike."""
    return truncate(event, STRING_LIMIT)  # type: ignore[no-any-return]


def stream_event(event: Any) -> dict[str, Any]:
    """One engine ``Event`` as a stream event (see the module doc)."""
    turn = event.turn_info
    return cut(
        {
            "id": event.sequence,
            "subject": event.tag,
            "correlation": turn.id if turn is not None else None,
            "data": wire_json(event),
        }
    )


def mirrored(event: dict[str, Any]) -> dict[str, Any]:
    """A child's ``_instance.emit`` event as a record keeps it: cut like a local one (:func:`cut`), and every
    integral float an int again. The child's event travels in a protobuf ``Struct`` (the command's DataPart), whose
    numbers are all doubles, so ``id``, ``sequence`` or ``secs_since_epoch`` arrive as ``3.0``; the wire types them
    integer, and a local subagent's events carry ints."""
    return cut(whole_numbers(event))


class EventMirror:
    """The stream events of one session's engine events: :meth:`feed` each event as it comes, :meth:`flush` at the
    end. Holds the text of the message being written and each tool's last status; returns promptly."""

    def __init__(self) -> None:
        self._text: dict[str, tuple[Any, list[str]]] = {}  # message id -> (its last delta, the text so far)
        self._tools: dict[str, str] = {}  # tool id -> the status last mirrored

    def feed(self, event: Any) -> list[dict[str, Any]]:
        """The stream events ``event`` completes (none, or the gathered text before it, or itself)."""
        tag = event.tag
        if tag == "TextDelta":
            if event.turn_info is not None and event.turn_info.parent_tool_id is None:
                _, parts = self._text.get(event.kind.message_id, (None, []))
                parts.append(event.kind.text)  # in place: a long message's deltas are not copied again each time
                self._text[event.kind.message_id] = (event, parts)
            return []
        if tag == "MessageEnded":
            return self._text_of(event.kind.message_id)
        if tag == "ToolUpdated":
            tool = event.kind.value
            if self._tools.get(tool.id) == tool.status:
                return []
            self._tools[tool.id] = tool.status
            return [*self.flush(), stream_event(event)]
        if tag in MIRRORED:
            return [*self.flush(), stream_event(event)]
        return []

    def flush(self) -> list[dict[str, Any]]:
        """The text gathered and not yet given, one stream event per message."""
        return [item for message_id in list(self._text) for item in self._text_of(message_id)]

    def _text_of(self, message_id: str) -> list[dict[str, Any]]:
        last, parts = self._text.pop(message_id, (None, []))
        if last is None:
            return []
        whole = Event(
            sequence=last.sequence,
            occurred_at=last.occurred_at,
            session_id=last.session_id,
            turn_info=last.turn_info,
            kind=TextDelta(message_id=message_id, text="".join(parts)),
        )
        return [stream_event(whole)]


def running_tool(events: list[dict[str, Any]]) -> str | None:
    """The tool the newest ``ToolUpdated`` of a record's ``events`` shows running (its title, else its id), or
    ``None``; entries of another shape (a child names its own) are passed over."""
    for entry in reversed(events):
        event = entry.get("event")
        if not isinstance(event, dict) or event.get("subject") != "ToolUpdated":
            continue
        kind = event.get("data", {}).get("kind") if isinstance(event.get("data"), dict) else None
        tool = kind.get("ToolUpdated") if isinstance(kind, dict) else None
        if isinstance(tool, dict) and tool.get("status") == "Running":
            return str(tool.get("title") or tool.get("id") or "") or None
        return None
    return None


def keep(events: list[dict[str, Any]], stream: str, event: dict[str, Any], kept: int) -> None:
    """Append ``event`` of ``stream`` to a record's ``events``, dropping the oldest past ``kept``."""
    events.append({"stream": stream, "event": event})
    if len(events) > kept:
        del events[: len(events) - kept]


__all__ = ["STREAM", "EventMirror", "cut", "keep", "mirrored", "running_tool", "stream_event"]
