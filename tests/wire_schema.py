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
def validator(name: str) -> jsonschema.Draft7Validator:
    """A Draft 7 validator for ``#/definitions/<name>`` that resolves the schema's other definitions."""
    if name not in DEFINITIONS:
        raise KeyError(f"the wire schema has no definition {name!r}")
    schema = {"$schema": SCHEMA["$schema"], "$ref": f"#/definitions/{name}", "definitions": DEFINITIONS}
    jsonschema.Draft7Validator.check_schema(schema)
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
        raise AssertionError(f"not a valid {name}: {json.dumps(obj)[:600]}\n  " + "\n  ".join(errors[:10]))


def validate_line(obj: Any) -> None:
    """Raise ``AssertionError`` unless ``obj`` is a valid wire output ``Line``."""
    validate_def("Line", obj)
