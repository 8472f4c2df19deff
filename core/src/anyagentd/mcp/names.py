"""The ``mcp__<server>__<tool>`` tool names agents give MCP tools (Claude Code's convention, which
claude-agent-acp and Codex follow), so every adapter reports such calls as ``ToolKind::Mcp``."""

from __future__ import annotations


def split_mcp_tool_name(name: str) -> tuple[str, str] | None:
    """``"mcp__server__tool"`` → ``("server", "tool")``; any other name → ``None``."""
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[5:].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool
