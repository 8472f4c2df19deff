"""docs/commands.md "Op arguments" is the served schema's (``anyagentd.ops.command_schema()``, what the daemon
serves at its schema URL) arguments of every op, one table per family: this test renders the tables from the
schema and fails, printing the section to paste, when the doc drifts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anyagentd.ops import command_schema

DOC = Path(__file__).parents[2] / "docs" / "commands.md"
START, END = (
    "<!-- op-arguments: generated from the served schema; tests/a2a_command/test_op_arguments_doc.py -->",
    "<!-- /op-arguments -->",
)


def _type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    kind = spec.get("type")
    if kind is None:
        return "any JSON"
    return " or ".join(kind) if isinstance(kind, list) else kind


def _bounds(spec: dict[str, Any]) -> str:
    said = [
        f"{word} {spec[key]}"
        for key, word in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"))
        if key in spec
    ]
    return f" ({', '.join(said)})" if said else ""


def rendered(schema: dict[str, Any]) -> str:
    """The section's tables: per family (the op name up to its first dot), one row per argument."""
    defs = schema["$defs"]
    families: dict[str, list[str]] = {}
    for name, entry in sorted(defs["ops"].items()):
        args = entry.get("args") or {}
        props, required = args.get("properties") or {}, set(args.get("required") or [])
        rows = families.setdefault(name.split(".")[0], [])
        if not props:
            rows.append(f"| `{name}` | — | | |")
        for arg, spec in props.items():
            need = "required" if arg in required else "optional"
            text = (spec.get("description") or "").replace("|", "\\|")
            rows.append(f"| `{name}` | `{arg}` | {_type(spec)}{_bounds(spec)}, {need} | {text} |")
    out = [START]
    for family, rows in families.items():
        out += ["", f"**{family}**", "", "| op | argument | type | meaning |", "|---|---|---|---|", *rows]
    return "\n".join([*out, "", END])


def test_the_docs_op_arguments_are_the_served_schemas() -> None:
    text = DOC.read_text()
    assert START in text and END in text, f"docs/commands.md needs the section:\n{rendered(command_schema())}"
    section = text[text.index(START) : text.index(END) + len(END)]
    assert section == rendered(command_schema()), f"paste into docs/commands.md:\n{rendered(command_schema())}"
