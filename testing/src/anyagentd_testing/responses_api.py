"""The OpenAI Responses API side of the scripted model server: reading requests, rendering replies.

Reading a ``POST /v1/responses`` body: which scripted turn it asks for (Codex sends the whole history
with ``store: false``, so the index is the number of runs of consecutive model output items in
``input``: assistant messages, ``reasoning``, ``function_call``, ``custom_tool_call`` and other
``*_call`` items), whether it is a side request, and the agent's working directory (Codex's environment
context says ``<cwd>X</cwd>``; the last one wins).

Rendering a :class:`~anyagentd_testing.model_script.Turn` as a response whose output is a ``reasoning``
item (summary = the turn's thinking), an assistant ``message`` (the text), then one ``function_call``
per tool call, or a ``custom_tool_call`` for freeform tools such as Codex's ``apply_patch``. Streamed as
the SSE events Codex 0.171 consumes (``response.created``, ``response.in_progress``,
``response.output_item.added/done``, ``response.content_part.added/done``,
``response.output_text.delta/done``, ``response.reasoning_summary_*``,
``response.function_call_arguments.delta/done``, ``response.custom_tool_call_input.delta/done``,
``response.completed`` with ``usage``) or returned whole (``docs/testing.md#openai-responses-api``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from .model_script import ScriptedError, ToolCall, Turn, Usage, fixed_chunks, new_id, text_chunks

API = "responses"

_CWD = re.compile(r"<cwd>([^<\n]+)</cwd>")
TURN_METADATA_HEADER = "x-codex-turn-metadata"
"""Header (and ``client_metadata`` key) in which Codex describes each request, with ``request_kind``."""


def turn_index(body: Mapping[str, Any]) -> int:
    """The scripted turn a request asks for: the number of runs of model output items in ``input``."""
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    runs, in_run = 0, False
    for item in items:
        output = isinstance(item, Mapping) and _is_model_output(item)
        if output and not in_run:
            runs += 1
        in_run = output
    return runs


def request_kind(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """Codex's ``request_kind`` for a request (``"turn"`` for agent turns), from its turn metadata, else ``None``."""
    raw = headers.get(TURN_METADATA_HEADER)
    if raw is None:
        meta = body.get("client_metadata")
        raw = meta.get(TURN_METADATA_HEADER) if isinstance(meta, Mapping) else None
    try:
        kind = json.loads(raw).get("request_kind") if isinstance(raw, str) else None
    except (ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def side_reason(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """Why a request is a side request (answered with the side reply, not the script), or ``None`` if main.

    Side: Codex turn metadata with a ``request_kind`` other than ``turn``, ``max_output_tokens <= 16``, no
    ``tools`` or an empty list, or a helper forcing its only function through ``tool_choice``.
    """
    kind = request_kind(body, headers)
    if kind is not None and kind != "turn":
        return f"request_kind={kind}"
    max_tokens = body.get("max_output_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 16:
        return f"max_output_tokens={max_tokens}"
    if not body.get("tools"):
        return "no tools"
    if forced_tool(body) is not None:
        return "forced single tool"
    return None


def forced_tool(body: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """``(name, parameters schema)`` of the function a single-tool helper request forces, else ``None``."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if len(tools) == 1 and isinstance(choice, Mapping) and choice.get("type") == "function":
        tool = tools[0]
        return str(tool.get("name", choice.get("name"))), tool.get("parameters") or {}
    return None


def requested_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema the request asks the reply to follow (``text.format``), or ``None``."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), Mapping):
        return fmt["schema"]
    return None


def working_directory(body: Mapping[str, Any]) -> str | None:
    """The agent's working directory: the last ``<cwd>X</cwd>`` in ``input`` (or ``instructions``), or ``None``."""
    found = None
    for text in (*_strings(body.get("instructions")), *_strings(body.get("input"))):
        for match in _CWD.finditer(text):
            found = match.group(1).strip()
    return found


def input_tokens(raw_body: bytes) -> int:
    """A rough input token count for a request body (4 bytes a token)."""
    return max(1, len(raw_body) // 4)


def error_body(error: ScriptedError) -> dict[str, Any]:
    """The JSON body of a scripted error, in the OpenAI error format."""
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": error.type}}


def response(turn: Turn, model: str, usage: Usage, body: Mapping[str, Any]) -> dict[str, Any]:
    """The whole response object (non-streaming ``/v1/responses``) for a turn."""
    items = [done for done, _ in _items(turn, body)]
    return _response(new_id("resp"), model, _status(turn), items, usage)


def stream_events(
    turn: Turn, model: str, usage: Usage, body: Mapping[str, Any]
) -> Iterator[tuple[dict[str, Any], bool]]:
    """The SSE events of a streamed reply, as ``(event data, is_delta)``; the SSE event name is ``data["type"]``."""
    response_id = new_id("resp")
    seq = iter(range(1 << 30))
    started = _response(response_id, model, "in_progress", [], None)
    yield {"type": "response.created", "sequence_number": next(seq), "response": started}, False
    yield {"type": "response.in_progress", "sequence_number": next(seq), "response": started}, False
    finished: list[dict[str, Any]] = []
    for index, (done, events) in enumerate(_items(turn, body)):
        for event, is_delta in events(index):
            yield {**event, "sequence_number": next(seq)}, is_delta
        finished.append(done)
    status = _status(turn)
    final = _response(response_id, model, status, finished, usage)
    kind = "response.completed" if status == "completed" else "response.incomplete"
    yield {"type": kind, "sequence_number": next(seq), "response": final}, False


def _status(turn: Turn) -> str:
    return "incomplete" if turn.stop_reason in ("max_tokens", "max_output_tokens") else "completed"


def _response(
    response_id: str, model: str, status: str, output: list[dict[str, Any]], usage: Usage | None
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": _usage(usage) if usage is not None else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "store": False,
    }


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


_Events = Iterator[tuple[dict[str, Any], bool]]


def _items(turn: Turn, body: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each output item, finished, with a function of its output index yielding the events that stream it."""
    if turn.thinking is not None:
        yield _reasoning(turn.thinking)
    if turn.text is not None:
        yield _message(turn.text)
    custom_names = {
        t.get("name") for t in body.get("tools") or [] if isinstance(t, Mapping) and t.get("type") == "custom"
    }
    for tool in turn.tools:
        yield _custom_call(tool) if tool.custom or tool.name in custom_names else _function_call(tool)


def _reasoning(summary: str) -> tuple[dict[str, Any], Any]:
    item_id = new_id("rs")
    part = {"type": "summary_text", "text": summary}
    done = {"id": item_id, "type": "reasoning", "summary": [part], "encrypted_content": None}

    def events(index: int) -> _Events:
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        yield {"type": "response.output_item.added", "output_index": index, "item": {**done, "summary": []}}, False
        yield {"type": "response.reasoning_summary_part.added", **where, "part": {**part, "text": ""}}, False
        for chunk in text_chunks(summary):
            yield {"type": "response.reasoning_summary_text.delta", **where, "delta": chunk}, True
        yield {"type": "response.reasoning_summary_text.done", **where, "text": summary}, False
        yield {"type": "response.reasoning_summary_part.done", **where, "part": part}, False
        yield {"type": "response.output_item.done", "output_index": index, "item": done}, False

    return done, events


def _message(text: str) -> tuple[dict[str, Any], Any]:
    item_id = new_id("msg")
    part = {"type": "output_text", "text": text, "annotations": []}
    done = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}

    def events(index: int) -> _Events:
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        added = {**done, "status": "in_progress", "content": []}
        yield {"type": "response.output_item.added", "output_index": index, "item": added}, False
        yield {"type": "response.content_part.added", **where, "part": {**part, "text": ""}}, False
        for chunk in text_chunks(text):
            yield {"type": "response.output_text.delta", **where, "delta": chunk, "logprobs": []}, True
        yield {"type": "response.output_text.done", **where, "text": text, "logprobs": []}, False
        yield {"type": "response.content_part.done", **where, "part": part}, False
        yield {"type": "response.output_item.done", "output_index": index, "item": done}, False

    return done, events


def _function_call(tool: ToolCall) -> tuple[dict[str, Any], Any]:
    item_id = new_id("fc")
    arguments = tool.input if isinstance(tool.input, str) else json.dumps(tool.input, ensure_ascii=False)
    done = {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": new_id("call"),
        "name": tool.name,
        "arguments": arguments,
    }

    def events(index: int) -> _Events:
        where = {"item_id": item_id, "output_index": index}
        added = {**done, "status": "in_progress", "arguments": ""}
        yield {"type": "response.output_item.added", "output_index": index, "item": added}, False
        for chunk in fixed_chunks(arguments):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": chunk}, True
        done_event = {"type": "response.function_call_arguments.done", **where, "name": tool.name}
        yield {**done_event, "arguments": arguments}, False
        yield {"type": "response.output_item.done", "output_index": index, "item": done}, False

    return done, events


def _custom_call(tool: ToolCall) -> tuple[dict[str, Any], Any]:
    item_id = new_id("ctc")
    text = tool.input if isinstance(tool.input, str) else json.dumps(tool.input, ensure_ascii=False)
    done = {
        "id": item_id,
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": new_id("call"),
        "name": tool.name,
        "input": text,
    }

    def events(index: int) -> _Events:
        where = {"item_id": item_id, "output_index": index}
        added = {**done, "status": "in_progress", "input": ""}
        yield {"type": "response.output_item.added", "output_index": index, "item": added}, False
        for chunk in fixed_chunks(text):
            yield {"type": "response.custom_tool_call_input.delta", **where, "delta": chunk}, True
        yield {"type": "response.custom_tool_call_input.done", **where, "input": text}, False
        yield {"type": "response.output_item.done", "output_index": index, "item": done}, False

    return done, events


def _is_model_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return item.get("role") == "assistant"
    if not isinstance(kind, str):
        return False
    return kind == "reasoning" or (kind.endswith("_call") and not kind.endswith("_output"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for key in ("text", "content"):
            yield from _strings(value.get(key))
