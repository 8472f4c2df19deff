"""JSON that went through a protobuf ``Struct``: every number in it is a double.

A2A 1.0 carries a DataPart's data, a message's and a task's ``metadata`` as ``google.protobuf.Struct``, whose numbers
are all doubles; so a client built on the a2a-sdk sends ``5`` as ``5.0``, and what the daemon reads back from its task
store says ``1.0`` for ``1``. :func:`whole_numbers` undoes that where integers are meant.

A double cannot hold every JSON number: ``1e400`` parses to ``inf`` and ``1`` followed by 400 zeros overflows it,
and a ``Struct`` holding ``inf`` or ``NaN`` cannot be written as JSON again (protobuf's ``MessageToDict`` raises
``SerializeToJsonError``: proto3 JSON has no such number in a ``Value``). :func:`loads` is how the front reads a
request, so such a number is refused where it arrives, named by :func:`beyond_double`; :func:`finite` is the task
store's rule for one that got into a task some other way (an agent's event).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

_MAX_DIGITS = len(str(int(sys.float_info.max)))  # 309: an integer literal with fewer digits fits a double


class Loaded:
    """What :func:`loads` read: the value, and whether a number in it is beyond a double (then
    :func:`beyond_double` names the first)."""

    __slots__ = ("value", "overflows")

    def __init__(self, value: Any, overflows: bool) -> None:
        self.value = value
        self.overflows = overflows


def loads(text: str | bytes) -> Loaded:
    """``text`` parsed as JSON (RFC 8259), noting whether a number in it is beyond a double: a float literal that
    parses to ±inf (``1e400``), an integer literal whose magnitude passes ``sys.float_info.max``. Costs a Python
    call per number literal and nothing else. Raises ``ValueError`` for what is not JSON — ``NaN``, ``Infinity``
    and ``-Infinity`` among it (Python's ``json`` would take them; RFC 8259 §6 has no such literal) — and
    ``RecursionError`` for nesting deeper than the interpreter's stack."""
    overflows = False

    def parse_float(literal: str) -> float:
        nonlocal overflows
        number = float(literal)
        if math.isinf(number):
            overflows = True
        return number

    def parse_int(literal: str) -> int:
        nonlocal overflows
        number = int(literal)
        if len(literal) >= _MAX_DIGITS and abs(number) > sys.float_info.max:
            overflows = True
        return number

    def parse_constant(literal: str) -> Any:
        raise ValueError(f"{literal} is not a JSON number (RFC 8259 section 6)")

    value = json.loads(text, parse_float=parse_float, parse_int=parse_int, parse_constant=parse_constant)
    return Loaded(value, overflows)


def _overflows(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max


def beyond_double(value: Any, path: str = "") -> str | None:
    """Where in ``value`` (JSON: dicts, lists, scalars) the first number no finite double holds is, as a field path
    the way google.rpc ``BadRequest`` names fields (``message.parts[0].data.x``; a key that is not a plain name
    quoted: ``metadata["a b"]``), ``path`` its prefix; ``None`` when every number fits. Depth first, keys in
    their order; visits every value, so call it when :func:`loads` says one overflows."""
    if _overflows(value):
        return path or "(the value)"
    if isinstance(value, dict):
        for key, item in value.items():
            step = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
            found = beyond_double(item, step.lstrip(".") if not path else step)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = beyond_double(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


VALUE = "google.protobuf.Value"


def finite(message: Any) -> int:
    """Make every ``google.protobuf.Value`` in ``message`` (any protobuf message, changed in place) that holds a
    number JSON cannot write (NaN, ±inf) hold ``null`` instead; returns how many did. Walks the message fields set
    (repeated and map ones included); a message without a ``Value`` in it costs one visit per set message field."""
    changed = 0
    if (
        message.DESCRIPTOR.full_name == VALUE
        and message.WhichOneof("kind") == "number_value"
        and not math.isfinite(message.number_value)
    ):
        message.null_value = 0  # NULL_VALUE
        return 1
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            entry_value = field.message_type.fields_by_name["value"]
            if entry_value.message_type is not None:
                changed += sum(finite(item) for item in value.values())
        elif field.is_repeated:
            changed += sum(finite(item) for item in value)
        else:
            changed += finite(value)
    return changed


def whole_numbers(value: Any) -> Any:
    """``value`` (JSON: dicts, lists, scalars) with every float that is a whole number made an ``int``, keys in their
    order; a new structure, ``value`` unchanged. Done for every whole float, not only where a schema types an
    integer: for an untyped value ``1`` and ``1.0`` are the same JSON number, and a field typed ``number`` accepts
    the int (the command schema types no field as a non-integer number)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


__all__ = ["Loaded", "beyond_double", "finite", "loads", "whole_numbers"]
