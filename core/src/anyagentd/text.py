"""Text that can always be written: lone UTF-16 surrogates replaced at the boundary where agent frames are decoded.

A JSON text may carry ``"\\ud83d"`` (half of a surrogate pair) on its own; Python's ``json`` decodes it into a
``str`` no UTF-8 encoder accepts, so one such character from a model or an MCP tool would make every later
``model_dump_json`` (and the wire's writer) raise. Adapters decode their agent's lines with :func:`loads` (or clean
already-decoded values with :func:`clean`); every lone surrogate becomes U+FFFD REPLACEMENT CHARACTER, the way a
UTF-8 decoder treats bytes it cannot read. Properly paired escapes (``"\\ud83d\\ude00"``) decode to one code
point and are left alone.

:func:`clip` shortens text quoted in error messages (a client's 10 MB field must not be echoed back whole).
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape of a surrogate (\uD800-\uDFFF), or a surrogate itself. Only a line containing one can decode to a
# lone surrogate, so other lines skip the walk over the decoded value. (A false match such as an escaped backslash
# before "ud800" only costs the walk.)
_MAY_HOLD_SURROGATE = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD; the same object when it has none."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def clean(value: Any) -> Any:
    """A JSON value (``dict``/``list``/``str``/scalars, as ``json.loads`` returns) with lone surrogates replaced in
    every string, keys included."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, dict):
        return {sanitize(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def loads(line: str | bytes) -> Any:
    """``json.loads(line)`` whose strings never hold a lone surrogate (see the module docstring). Raises what
    ``json.loads`` raises (``ValueError`` for text that is not JSON)."""
    text = line if isinstance(line, str) else line.decode("utf-8", "replace")  # (json.loads would pass surrogates)
    value = json.loads(text)
    if _MAY_HOLD_SURROGATE.search(text) is None:
        return value
    return clean(value)


def find_surrogate(value: Any, path: str = "") -> str | None:
    """The dotted path (``"text"``, ``"answer.Question.0.Text"``) of the first string in a JSON value that holds a
    lone surrogate, ``"<key>"`` for a key; ``None`` when there is none."""
    if isinstance(value, str):
        return (path or "<root>") if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if _SURROGATE.search(key):
                return f"{path}.<key>" if path else "<key>"
            found = find_surrogate(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_surrogate(item, f"{path}.{index}" if path else str(index))
            if found is not None:
                return found
    return None


def clip(text: str, limit: int = 300) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked with how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
