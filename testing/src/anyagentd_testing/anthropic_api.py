"""The Anthropic Messages API side of the scripted model server: reading requests, rendering replies.

Reading a ``POST /v1/messages`` body: which scripted turn it asks for (the number of ``assistant``
messages already in ``messages``; Claude Code also puts ``role: "system"`` messages there, which do not
count), whether it is a side request, and the agent's working directory (Claude Code's system prompt says
``Primary working directory: X``).

Rendering a :class:`~anyagentd_testing.model_script.Turn` as a message: one ``thinking`` block (with a
``signature_delta``), one ``text`` block, then one ``tool_use`` block per tool call, streamed as the
API's SSE events (``message_start``, ``ping``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``) or returned whole. Formats follow the public Messages API and what Claude Code 2.1.197
accepted (``docs/testing.md#anthropic-messages-api``).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .model_script import ScriptedError, Turn, Usage, fixed_chunks, new_id, text_chunks

API = "anthropic"

_CWD_PATTERNS = (
    re.compile(r"Primary working directory: *([^\n]+)"),
    re.compile(r"<cwd>([^<\n]+)</cwd>"),
    re.compile(r"Current working directory: *([^\n]+)"),
)


def turn_index(body: Mapping[str, Any]) -> int:
    """The scripted turn a request asks for: how many ``assistant`` messages it already carries."""
    return sum(1 for m in body.get("messages") or [] if isinstance(m, Mapping) and m.get("role") == "assistant")


def side_reason(body: Mapping[str, Any]) -> str | None:
    """Why a request is a side request (answered with the side reply, not the script), or ``None`` if main.

    Side: ``max_tokens <= 16`` (quota probes), no ``tools`` or an empty list (Claude Code's session-title
    request), or a helper forcing its only tool through ``tool_choice``.
    """
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 16:
        return f"max_tokens={max_tokens}"
    tools = body.get("tools") or []
    if not tools:
        return "no tools"
    if forced_tool(body) is not None:
        return "forced single tool"
    return None


def forced_tool(body: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """``(name, input_schema)`` of the tool a single-tool helper request forces via ``tool_choice``, else ``None``."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if len(tools) == 1 and isinstance(choice, Mapping) and choice.get("type") == "tool":
        tool = tools[0]
        return str(tool.get("name", choice.get("name"))), tool.get("input_schema") or {}
    return None


def requested_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema the request asks the reply to follow (``output_config.format``), or ``None``."""
    for config in (body.get("output_config"), body.get("output_format")):
        fmt = config.get("format", config) if isinstance(config, Mapping) else None
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), Mapping):
            return fmt["schema"]
    return None


def working_directory(body: Mapping[str, Any]) -> str | None:
    """The agent's working directory as its prompt states it (system prompt first, then messages), or ``None``."""
    for text in _strings(body.get("system")):
        found = _find_cwd(text)
        if found:
            return found
    for text in _strings(body.get("messages")):
        found = _find_cwd(text)
        if found:
            return found
    return None


def input_tokens(raw_body: bytes) -> int:
    """A rough input token count for a request body (4 bytes a token)."""
    return max(1, len(raw_body) // 4)


def count_tokens_reply(raw_body: bytes) -> dict[str, Any]:
    """The ``/v1/messages/count_tokens`` answer for a request body."""
    return {"input_tokens": input_tokens(raw_body)}


def error_body(error: ScriptedError) -> dict[str, Any]:
    """The JSON body of a scripted error, in the Anthropic error format."""
    return {"type": "error", "error": {"type": error.type, "message": error.message}}


def message(turn: Turn, model: str, usage: Usage) -> dict[str, Any]:
    """The whole reply message (non-streaming ``/v1/messages``) for a turn."""
    return {
        **_message_head(model, usage, new_id("msg")),
        "content": [block for block, _ in _blocks(turn)],
        "stop_reason": stop_reason(turn),
        "usage": _usage(usage),
    }


def stream_events(turn: Turn, model: str, usage: Usage) -> Iterator[tuple[dict[str, Any], bool]]:
    """The SSE events of a streamed reply, as ``(event data, is_delta)``; the SSE event name is ``data["type"]``."""
    head = _message_head(model, usage, new_id("msg"))
    start_usage = {**_usage(usage), "output_tokens": 1}
    yield (
        {"type": "message_start", "message": {**head, "content": [], "stop_reason": None, "usage": start_usage}},
        False,
    )
    yield {"type": "ping"}, False
    for index, (block, deltas) in enumerate(_blocks(turn)):
        yield {"type": "content_block_start", "index": index, "content_block": _empty(block)}, False
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}, True
        yield {"type": "content_block_stop", "index": index}, False
    yield (
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(turn), "stop_sequence": None},
            "usage": {"output_tokens": usage.output_tokens},
        },
        False,
    )
    yield {"type": "message_stop"}, False


def stop_reason(turn: Turn) -> str:
    """The turn's ``stop_reason``: as scripted, else ``tool_use`` when it calls tools, else ``end_turn``."""
    return turn.stop_reason or ("tool_use" if turn.tools else "end_turn")


def _message_head(model: str, usage: Usage, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "stop_sequence": None}


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "service_tier": "standard",
    }


def _blocks(turn: Turn) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each content block, whole, with the deltas that stream it."""
    if turn.thinking is not None:
        signature = base64.b64encode(f"mock-signature:{len(turn.thinking)}".encode()).decode()
        deltas = [{"type": "thinking_delta", "thinking": c} for c in text_chunks(turn.thinking)]
        deltas.append({"type": "signature_delta", "signature": signature})
        yield {"type": "thinking", "thinking": turn.thinking, "signature": signature}, deltas
    if turn.text is not None:
        yield {"type": "text", "text": turn.text}, [{"type": "text_delta", "text": c} for c in text_chunks(turn.text)]
    for tool in turn.tools:
        tool_input = tool.input if isinstance(tool.input, Mapping) else {"input": tool.input}
        encoded = json.dumps(tool_input, ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": c} for c in fixed_chunks(encoded)]
        yield {"type": "tool_use", "id": new_id("toolu"), "name": tool.name, "input": tool_input}, deltas


def _empty(block: dict[str, Any]) -> dict[str, Any]:
    """A block as ``content_block_start`` announces it, before its deltas."""
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    return {**block, "input": {}}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for key in ("text", "content"):
            yield from _strings(value.get(key))


def _find_cwd(text: str) -> str | None:
    for pattern in _CWD_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    return None
