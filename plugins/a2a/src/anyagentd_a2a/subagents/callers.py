"""Who a subagent tool call speaks for (:class:`Caller`): a leaf module, so the manager names the caller of a
subagent's own session without importing the MCP server that serves the tools (which imports the manager)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who a bearer speaks for: the ``owner`` principal, the ``depth`` its subagents get, and ``handle`` when
    the caller is itself a subagent."""

    owner: str
    depth: int = 0
    handle: str | None = None


__all__ = ["Caller"]
