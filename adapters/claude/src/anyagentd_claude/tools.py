"""Claude Code's tool calls as normalized ``ToolUpdate`` snapshots (``docs/agents/claude.md#tools``).

:func:`tool_update` builds the first snapshot of a ``tool_use`` block: kind, input, title, file diffs and
locations, by tool name:

- ``Bash`` → Execute, ``Command{command, cwd}``;
- ``Read`` → Read, ``Path``; ``Edit``/``MultiEdit``/``Write``/``NotebookEdit`` → Edit with ``FileDiff`` s
  (``Write``: ``old_text`` is the file's current content, ``None`` when it does not exist yet);
- ``Glob``/``Grep`` → Search, ``Pattern``; ``WebFetch`` → Fetch, ``Url``; ``WebSearch`` → Search, ``Query``;
- ``Task``/``Agent`` → Subagent, ``Text`` (the prompt);
- ``mcp__<server>__<tool>`` → ``Mcp{server, tool}`` with ``raw``;
- anything else → Other with ``raw``.

``TodoWrite`` is not a tool here: :func:`plan_entries` turns its input into ``PlanUpdated`` entries.
"""

from __future__ import annotations

import os
from typing import Any

from anyagentd.mcp.names import split_mcp_tool_name
from anyagentd.model import (
    Command,
    FileDiff,
    Mcp,
    PathInput,
    PatternInput,
    PlanEntry,
    QueryInput,
    RawTool,
    TextInput,
    ToolUpdate,
    UrlInput,
)

PLAN_TOOL = "TodoWrite"
"""The tool whose calls become ``PlanUpdated`` instead of ``ToolUpdated``."""

QUESTION_TOOL = "AskUserQuestion"
"""The tool whose permission request becomes a ``Question`` request."""

SUBAGENT_TOOLS = frozenset({"Task", "Agent"})

MAX_OLD_TEXT_BYTES = 1024 * 1024
"""Largest existing file (bytes) read to fill ``old_text`` of a ``Write`` diff; bigger files give ``None``."""

_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_PLAN_STATUS = {"pending": "Pending", "in_progress": "InProgress", "completed": "Completed"}


def _s(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _rel(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _read_existing(path: str, cwd: str | None) -> str | None:
    full = path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)
    try:
        if os.path.getsize(full) > MAX_OLD_TEXT_BYTES:
            return None
        with open(full, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def tool_update(tool_id: str, name: str, raw_input: Any, cwd: str | None = None) -> ToolUpdate:
    """The ``Running`` snapshot of a ``tool_use`` block ``{id, name, input}``; ``cwd`` is the session dir (the
    Bash cwd, the base for relative paths and the prefix stripped from titles)."""
    inp: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    fields: dict[str, Any] = {"id": tool_id, "status": "Running", "title": name}
    mcp = split_mcp_tool_name(name)
    if mcp is not None:
        fields.update(
            kind=Mcp(server=mcp[0], tool=mcp[1]), title=f"{mcp[0]}: {mcp[1]}", raw=RawTool(name=name, input=raw_input)
        )
    elif name == "Bash":
        command = _s(inp.get("command")) or ""
        fields.update(
            kind="Execute",
            input=Command(command=command, cwd=cwd),
            title=_s(inp.get("description")) or command or "Bash",
        )
    elif name == "Read":
        path = _s(inp.get("file_path")) or ""
        fields.update(
            kind="Read", input=PathInput(value=path), title=f"Read {_rel(path, cwd)}", locations=[path] if path else []
        )
    elif name in _EDIT_TOOLS:
        path = _s(inp.get("file_path")) or _s(inp.get("notebook_path")) or ""
        fields.update(
            kind="Edit",
            input=PathInput(value=path),
            title=f"{name} {_rel(path, cwd)}",
            locations=[path] if path else [],
            diffs=_diffs(name, inp, path, cwd),
        )
    elif name in ("Glob", "Grep"):
        pattern = _s(inp.get("pattern")) or ""
        where = _s(inp.get("path"))
        title = f"{name} {pattern}" + (f" in {_rel(where, cwd)}" if where else "")
        fields.update(kind="Search", input=PatternInput(value=pattern), title=title, locations=[where] if where else [])
    elif name == "WebFetch":
        url = _s(inp.get("url")) or ""
        fields.update(kind="Fetch", input=UrlInput(value=url), title=f"Fetch {url}")
    elif name == "WebSearch":
        query = _s(inp.get("query")) or ""
        fields.update(kind="Search", input=QueryInput(value=query), title=f"Search the web: {query}")
    elif name in SUBAGENT_TOOLS:
        prompt = _s(inp.get("prompt")) or ""
        fields.update(
            kind="Subagent",
            input=TextInput(value=prompt),
            title=_s(inp.get("description")) or _s(inp.get("subagent_type")) or name,
        )
    elif name == QUESTION_TOOL:
        fields.update(kind="Other", title="Ask the user", raw=RawTool(name=name, input=raw_input))
    else:
        fields.update(kind="Other", raw=RawTool(name=name, input=raw_input))
    return ToolUpdate(**fields)


def _diffs(name: str, inp: dict[str, Any], path: str, cwd: str | None) -> list[FileDiff]:
    if not path:
        return []
    if name == "Write":
        return [FileDiff(path=path, old_text=_read_existing(path, cwd), new_text=_s(inp.get("content")) or "")]
    if name == "Edit":
        return [FileDiff(path=path, old_text=_s(inp.get("old_string")), new_text=_s(inp.get("new_string")) or "")]
    if name == "MultiEdit":
        edits = inp.get("edits") if isinstance(inp.get("edits"), list) else []
        return [
            FileDiff(path=path, old_text=_s(e.get("old_string")), new_text=_s(e.get("new_string")) or "")
            for e in edits
            if isinstance(e, dict)
        ]
    if name == "NotebookEdit":
        return [FileDiff(path=path, old_text=None, new_text=_s(inp.get("new_source")) or "")]
    return []


def plan_entries(raw_input: object) -> list[PlanEntry]:
    """``TodoWrite`` input ``{todos: [{content, status, activeForm}]}`` → plan entries (unknown statuses are
    Pending)."""
    todos = raw_input.get("todos") if isinstance(raw_input, dict) else None
    entries = []
    for todo in todos if isinstance(todos, list) else []:
        if not isinstance(todo, dict):
            continue
        text = _s(todo.get("content")) or _s(todo.get("activeForm")) or ""
        entries.append(PlanEntry(text=text, status=_PLAN_STATUS.get(str(todo.get("status")), "Pending")))
    return entries


def result_text(content: object) -> str:
    """The text of a ``tool_result`` content: a string, or the text blocks of a block list (images are noted
    as ``[image]``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return "" if content is None else str(content)
