"""The ``claude`` plugin (entry point ``anyagentd: claude = "anyagentd_claude.plugin"``)."""

from __future__ import annotations

from typing import Any, Callable

from anyagentd.hookspecs import hookimpl

from .adapter import ClaudeAdapter


@hookimpl
def register_adapters(register: Callable[[Any], None]) -> None:
    """Register the Claude Code adapter."""
    register(ClaudeAdapter)
