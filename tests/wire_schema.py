"""The vendored wire schema (``anyagentd/schema/anyagent-wire.schema.json``) as Draft 7 validators.

``validate_line(obj)`` checks one output line against ``#/definitions/Line``; ``validate_def(name, obj)`` checks a
value against any definition. Both raise ``AssertionError`` naming the failing path, so a test fails with a readable
message; ``line_errors`` / ``def_errors`` return the messages instead.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

SCHEMA: dict[str, Any] = json.loads(
    (resources.files("anyagentd") / "schema" / "anyagent-wire.schema.json").read_text(encoding="utf-8")
)
DEFINITIONS: dict[str, Any] = SCHEMA["definitions"]


@cache
def _checked() -> None:
    """Check the whole schema against Draft 7's metaschema, once: it was checked again for each definition's
    validator (tests/core/test_model.py builds one per definition: 17.0 → 13.8 s user with coverage)."""
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@cache
def validator(name: str) -> jsonschema.Draft7Validator:
    """A Draft 7 validator for ``#/definitions/<name>`` that resolves the schema's other definitions (the schema
    itself checked once, :func:`_checked`)."""
    if name not in DEFINITIONS:
        raise KeyError(f"the wire schema has no definition {name!r}")
    _checked()
    schema = {"$schema": SCHEMA["$schema"], "$ref": f"#/definitions/{name}", "definitions": DEFINITIONS}
    return jsonschema.Draft7Validator(schema)


def def_errors(name: str, obj: Any) -> list[str]:
    """Every schema violation of ``obj`` as ``#/definitions/<name>``, as ``path: message`` strings."""
    return [
        f"{'/'.join(map(str, err.absolute_path)) or '<root>'}: {err.message}"
        for err in sorted(validator(name).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]


def line_errors(obj: Any) -> list[str]:
    return def_errors("Line", obj)


def validate_def(name: str, obj: Any) -> None:
    """Raise ``AssertionError`` unless ``obj`` is a valid ``#/definitions/<name>``."""
    errors = def_errors(name, obj)
    if errors:
        best = jsonschema.exceptions.best_match(validator(name).iter_errors(obj))
        where = "/".join(map(str, best.absolute_path)) or "<root>"
        raise AssertionError(
            f"not a valid {name}: {json.dumps(obj)[:600]}\n  most relevant: {where}: {best.message[:300]}\n  "
            + "\n  ".join(e[:300] for e in errors[:10])
        )


_VALID_LINES: set[str] = set()


def _is_u64(value: Any) -> bool:
    return type(value) is int and value >= 0


def _cache_key(obj: Any) -> str | None:
    """An event line with ``sequence`` and ``occurred_at`` replaced by fixed values, when those two fields are
    exactly what the schema allows (a non-negative integer; ``{secs_since_epoch, nanos_since_epoch}`` of
    non-negative integers): lines equal under this key are equally valid. Floods of identical deltas then cost
    one full validation. ``None`` for every other line (always validated in full)."""
    event = obj.get("event") if isinstance(obj, dict) and len(obj) == 1 else None
    if not isinstance(event, dict):
        return None
    at = event.get("occurred_at")
    if not (
        _is_u64(event.get("sequence"))
        and isinstance(at, dict)
        and set(at) == {"secs_since_epoch", "nanos_since_epoch"}
        and _is_u64(at["secs_since_epoch"])
        and _is_u64(at["nanos_since_epoch"])
    ):
        return None
    normalized = dict(event, sequence=0, occurred_at=None)
    return json.dumps(normalized, sort_keys=True)


def validate_line(obj: Any) -> None:
    """Raise ``AssertionError`` unless ``obj`` is a valid wire output ``Line``."""
    key = _cache_key(obj)
    if key is not None and key in _VALID_LINES:
        return
    validate_def("Line", obj)
    if key is not None:
        if len(_VALID_LINES) > 100_000:
            _VALID_LINES.clear()
        _VALID_LINES.add(key)
