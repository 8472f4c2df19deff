"""The script a scripted model server plays: its file format, and the replies it turns into.

A script is JSON (a file, a string or a dict)::

    {
      "turns": [
        {"text": "I'll write the file.",
         "tool": {"name": "Write", "input": {"file_path": "{{cwd}}/hello.txt", "content": "hi\\n"}}},
        {"text": "Done."}
      ],
      "side_reply": "ok"
    }

Each turn is one model reply. Its keys (all optional, but a turn must have at least one of ``text``,
``thinking``, ``tools``/``tool`` or ``error``):

``text``
    Assistant text.
``thinking``
    Reasoning, sent before the text (Anthropic ``thinking`` block; Responses ``reasoning`` item with a
    summary).
``tools`` / ``tool``
    Tool calls, sent after the text: ``[{"name": str, "input": {...} | str, "custom": bool}]``;
    ``tool`` is shorthand for a single one. ``custom`` marks a Responses freeform tool (Codex
    ``apply_patch``, whose input is the patch text); it is also inferred when the request declares the
    tool with ``type: "custom"``. (Anthropic tool inputs are objects: a string input is sent as
    ``{"input": "..."}``.)
``error``
    ``{"status": int, "type": str, "message": str, "times": int}``: answer with this HTTP error instead.
    Without ``times`` every request for this turn fails (retries too, since a failed request adds nothing
    to the history); with ``times: N`` only the first N requests for this turn index fail and later ones
    get the rest of the turn (which then needs ``text``/``tools``).
``delay``
    Seconds to wait before answering (asynchronously: other requests are served meanwhile).
``chunk_delay``
    Seconds to wait between streamed deltas.
``usage``
    Token counts to report instead of the estimates: ``input_tokens``, ``output_tokens``,
    ``cache_read_input_tokens`` (alias ``cached_tokens``), ``cache_creation_input_tokens``,
    ``reasoning_tokens``. Each API reports the ones it has.
``stop_reason``
    Anthropic stop reason to report (default ``tool_use`` when the turn calls tools, else ``end_turn``).
    ``max_tokens`` makes a Responses reply ``incomplete``.

In every string of ``text``, ``thinking`` and tool inputs, ``{{cwd}}`` becomes the agent's working
directory as found in the request (``.`` when none is found), so scripts carry no absolute paths.

``side_reply`` (default ``"ok"``) answers side requests (titles, quota probes, ...), which never consume
a turn. This format follows the scripted endpoint described in
``docs/testing.md#script-format``
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

CWD_PLACEHOLDER = "{{cwd}}"
EXHAUSTED_TEXT = "(script exhausted)"
"""Text answered to a main request whose turn index is past the end of the script."""

_TURN_KEYS = {"text", "thinking", "tools", "tool", "error", "delay", "chunk_delay", "usage", "stop_reason"}
_TOOL_KEYS = {"name", "input", "custom"}
_ERROR_KEYS = {"status", "type", "message", "times"}
_USAGE_KEYS = {
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cached_tokens",
    "cache_creation_input_tokens",
    "reasoning_tokens",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool call: the tool ``name`` and its ``input`` (a dict, or a string for freeform tools)."""

    name: str
    input: Any = field(default_factory=dict)
    custom: bool = False


@dataclass(frozen=True)
class ScriptedError:
    """An HTTP error to answer with: ``status`` code, API error ``type`` and ``message``.

    ``times`` limits how many requests for the turn get the error (``None``: all of them).
    """

    status: int = 400
    type: str = "invalid_request_error"
    message: str = "scripted failure"
    times: int | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts reported with a reply (each API reports the fields it knows)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class Turn:
    """One scripted model reply (see the module docstring for what each field does)."""

    text: str | None = None
    thinking: str | None = None
    tools: tuple[ToolCall, ...] = ()
    error: ScriptedError | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    usage: Mapping[str, int] | None = None
    stop_reason: str | None = None

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], where: str = "turn") -> Turn:
        """Build a turn from its JSON form; raises ``ValueError`` on unknown keys or bad values."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"{where}: a turn must be an object, got {type(obj).__name__}")
        unknown = set(obj) - _TURN_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_TURN_KEYS)})")
        raw_tools = list(obj.get("tools") or [])
        if obj.get("tool") is not None:
            raw_tools.append(obj["tool"])
        tools = tuple(_tool_from_obj(t, f"{where}.tools[{i}]") for i, t in enumerate(raw_tools))
        error = _error_from_obj(obj["error"], f"{where}.error") if obj.get("error") is not None else None
        usage = obj.get("usage")
        if usage is not None:
            if not isinstance(usage, Mapping) or set(usage) - _USAGE_KEYS:
                raise ValueError(f"{where}.usage: expected an object with keys among {sorted(_USAGE_KEYS)}")
            usage = {k: int(v) for k, v in usage.items()}
        turn = cls(
            text=_opt_str(obj.get("text"), f"{where}.text"),
            thinking=_opt_str(obj.get("thinking"), f"{where}.thinking"),
            tools=tools,
            error=error,
            delay=float(obj.get("delay") or 0.0),
            chunk_delay=float(obj.get("chunk_delay") or 0.0),
            usage=usage,
            stop_reason=_opt_str(obj.get("stop_reason"), f"{where}.stop_reason"),
        )
        if turn.text is None and turn.thinking is None and not turn.tools and turn.error is None:
            raise ValueError(f"{where}: a turn needs at least one of text, thinking, tool(s) or error")
        answers = turn.text is not None or turn.thinking is not None or bool(turn.tools)
        if turn.error is not None and turn.error.times is not None and not answers:
            raise ValueError(f"{where}: an error with 'times' needs text, thinking or tool(s) to answer afterwards")
        if turn.delay < 0 or turn.chunk_delay < 0:
            raise ValueError(f"{where}: delay and chunk_delay are seconds >= 0")
        return turn

    def without_error(self) -> Turn:
        """This turn as answered once its ``error`` has been served ``times`` times."""
        return replace(self, error=None)

    def with_cwd(self, cwd: str | None) -> Turn:
        """A copy with ``{{cwd}}`` replaced by ``cwd`` (``"."`` when ``None``) in text, thinking and tool inputs."""
        value = cwd if cwd else "."
        return replace(
            self,
            text=_fill(self.text, value),
            thinking=_fill(self.thinking, value),
            tools=tuple(replace(t, input=_fill(t.input, value)) for t in self.tools),
        )

    def usage_for(self, input_tokens: int) -> Usage:
        """The usage to report: estimates (``input_tokens`` given, output ~ 4 chars a token) overridden by ``usage``."""
        produced = (self.text or "") + (self.thinking or "")
        produced += "".join(t.input if isinstance(t.input, str) else json.dumps(t.input) for t in self.tools)
        given = dict(self.usage or {})
        if "cached_tokens" in given:
            given.setdefault("cache_read_input_tokens", given.pop("cached_tokens"))
        estimate = {"input_tokens": input_tokens, "output_tokens": max(1, len(produced) // 4)}
        if self.thinking:
            estimate["reasoning_tokens"] = max(1, len(self.thinking) // 4)
        return Usage(**{**estimate, **given})


@dataclass(frozen=True)
class Script:
    """A whole script: the ``turns`` played in order and the ``side_reply`` text for side requests."""

    turns: tuple[Turn, ...] = ()
    side_reply: str = "ok"

    @classmethod
    def load(cls, source: Script | Mapping[str, Any] | str | Path | None) -> Script:
        """Read a script from a ``Script``, a dict, a JSON string, or a path to a JSON file (``None``: empty).

        A string that does not start with ``{`` is taken as a file path. Raises ``ValueError`` on a malformed
        script and ``OSError`` when the file cannot be read.
        """
        if source is None:
            return cls()
        if isinstance(source, Script):
            return source
        if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
            source = json.loads(Path(source).read_text(encoding="utf-8"))
        elif isinstance(source, str):
            source = json.loads(source)
        if not isinstance(source, Mapping):
            raise ValueError("a script must be a JSON object with a 'turns' list")
        unknown = set(source) - {"turns", "side_reply", "$schema", "description"}
        if unknown:
            raise ValueError(f"script: unknown keys {sorted(unknown)} (allowed: turns, side_reply)")
        turns = source.get("turns") or []
        if not isinstance(turns, list):
            raise ValueError("script: 'turns' must be a list")
        side_reply = source.get("side_reply", "ok")
        if not isinstance(side_reply, str):
            raise ValueError("script: 'side_reply' must be a string")
        return cls(
            turns=tuple(Turn.from_obj(t, f"turns[{i}]") for i, t in enumerate(turns)),
            side_reply=side_reply,
        )

    def turn(self, index: int) -> Turn | None:
        """The turn at ``index``, or ``None`` past the end of the script."""
        return self.turns[index] if 0 <= index < len(self.turns) else None


def minimal_instance(schema: Any, filler: str = "ok", _root: Any = None, _depth: int = 0) -> Any:
    """The smallest JSON value valid for a JSON ``schema``, with strings set to ``filler``.

    Objects get their ``required`` properties (all properties when ``required`` is absent, as structured
    output schemas list them all), arrays ``minItems`` items, numbers their ``minimum`` or 0, booleans
    ``False``. Handles ``const``, ``enum`` (first value), ``anyOf``/``oneOf``/``allOf`` (first non-null
    branch) and local ``$ref``s.
    """
    root = schema if _root is None else _root
    if not isinstance(schema, Mapping) or _depth > 32:
        return None if schema is False else {}
    if "$ref" in schema and isinstance(schema["$ref"], str) and schema["$ref"].startswith("#"):
        target: Any = root
        for part in schema["$ref"].lstrip("#").strip("/").split("/"):
            if part:
                target = (
                    target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, Mapping) else {}
                )
        return minimal_instance(target, filler, root, _depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            branches = [b for b in schema[key] if not (isinstance(b, Mapping) and b.get("type") == "null")]
            return minimal_instance((branches or schema[key])[0], filler, root, _depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        names = schema.get("required", list(props))
        return {name: minimal_instance(props.get(name, {"type": "string"}), filler, root, _depth + 1) for name in names}
    if kind == "array":
        item = minimal_instance(schema.get("items", {}), filler, root, _depth + 1)
        return [item for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        text = filler
        if len(text) < int(schema.get("minLength", 0)):
            text = text.ljust(int(schema["minLength"]), "-")
        return text
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    return None


# Helpers shared by the two wire renderers (anthropic_api, responses_api).


def new_id(prefix: str) -> str:
    """A fresh id such as ``msg_mock_1a2b...`` (``prefix`` + ``_mock_`` + 24 hex digits)."""
    return f"{prefix}_mock_{uuid.uuid4().hex[:24]}"


def text_chunks(text: str, size: int = 24) -> Iterator[str]:
    """Split ``text`` into deltas of about ``size`` characters, cutting after whitespace when possible."""
    if not text:
        return
    pieces = re.findall(r"\S+\s*|\s+", text)
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > size:
            yield current
            current = ""
        current += piece
        while len(current) > 2 * size:
            yield current[:size]
            current = current[size:]
    if current:
        yield current


def fixed_chunks(text: str, count: int = 3) -> Iterator[str]:
    """Split ``text`` into ``count`` roughly equal pieces (to exercise JSON reassembly in clients)."""
    if not text:
        return
    step = max(1, -(-len(text) // count))
    for start in range(0, len(text), step):
        yield text[start : start + step]


def error_type(status: int) -> str:
    """The Anthropic-style error type for an HTTP ``status`` (``api_error`` when unknown)."""
    return _ERROR_TYPES.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")


def _tool_from_obj(obj: Any, where: str) -> ToolCall:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise ValueError(f"{where}: a tool call is an object with a string 'name'")
    unknown = set(obj) - _TOOL_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_TOOL_KEYS)})")
    return ToolCall(name=obj["name"], input=obj.get("input", {}), custom=bool(obj.get("custom", False)))


def _error_from_obj(obj: Any, where: str) -> ScriptedError:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected an object {{status, type, message}}")
    unknown = set(obj) - _ERROR_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_ERROR_KEYS)})")
    status = int(obj.get("status", 400))
    if not 400 <= status <= 599:
        raise ValueError(f"{where}.status: expected an HTTP error status, got {status}")
    times = obj.get("times")
    return ScriptedError(
        status=status,
        type=str(obj.get("type") or error_type(status)),
        message=str(obj.get("message", "scripted failure")),
        times=None if times is None else int(times),
    )


def _opt_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: expected a string")


def _fill(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace(CWD_PLACEHOLDER, cwd)
    if isinstance(value, list):
        return [_fill(v, cwd) for v in value]
    if isinstance(value, Mapping):
        return {k: _fill(v, cwd) for k, v in value.items()}
    return value
