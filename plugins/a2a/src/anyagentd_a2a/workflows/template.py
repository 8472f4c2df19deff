"""Step templates: ``{{inputs.x}}``, ``{{steps.<id>.output}}`` (also ``.status``, ``.error``), ``{{run.id}}``,
``{{run.workflow}}``.

A reference is a dotted path between double braces (spaces allowed inside the braces); everything else is literal
text. A value that is not a string renders as compact JSON, so a JSON step output can be passed on whole, and a
path into it (``{{steps.review.output.verdict}}``) picks a field. Unknown references are refused when the workflow
loads (:mod:`.definition`); rendering a path that is absent at run time raises ``KeyError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_REF = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")


def references(text: str) -> list[tuple[str, ...]]:
    """The references ``text`` makes, as path tuples (``("steps", "write", "output")``), in order. Raises
    ``ValueError`` for a reference that is not a dotted path, or unbalanced braces."""
    found = []
    for match in _REF.finditer(text):
        path = match.group(1)
        if not _PATH.match(path):
            raise ValueError(f"bad template reference {{{{{path}}}}}")
        found.append(tuple(path.split(".")))
    if "{{" in _REF.sub("", text) or "}}" in _REF.sub("", text):
        raise ValueError("unbalanced {{ }} in template")
    return found


def render(text: str, scope: Mapping[str, Any]) -> str:
    """``text`` with every reference replaced by its value in ``scope`` (``{"inputs": {...}, "steps": {id:
    {"output": ..., "status": ...}}, "run": {"id": ..., "workflow": ...}}``)."""

    def value(match: re.Match[str]) -> str:
        node: Any = scope
        for key in match.group(1).split("."):
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            else:
                raise KeyError(match.group(1))
        return node if isinstance(node, str) else json.dumps(node, ensure_ascii=False, separators=(",", ":"))

    return _REF.sub(value, text)


__all__ = ["references", "render"]
