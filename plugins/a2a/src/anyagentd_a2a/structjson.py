"""JSON that went through a protobuf ``Struct``: every number in it is a double.

A2A 1.0 carries a DataPart's data, a message's and a task's ``metadata`` as ``google.protobuf.Struct``, whose numbers
are all doubles; so a client built on the a2a-sdk sends ``5`` as ``5.0``, and what the daemon reads back from its task
store says ``1.0`` for ``1``. :func:`whole_numbers` undoes that where integers are meant.
"""

from __future__ import annotations

from typing import Any


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


__all__ = ["whole_numbers"]
