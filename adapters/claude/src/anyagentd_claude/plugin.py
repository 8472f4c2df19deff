"""The ``claude`` plugin (entry point ``anyagentd: claude = "anyagentd_claude.plugin"``): the catalog entry, and the
adapter registered lazily (:mod:`.adapter` and what it imports load when a Claude session or probe first needs
them, not when ``anyagentd --help`` loads the plugins or ``serve`` builds its runtime: issue 17)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anyagentd.adapters.profile import AgentProfile
from anyagentd.hookspecs import hookimpl

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AgentAdapter

PROFILE = AgentProfile(
    id="claude",
    name="Claude Code",
    executable="claude",
    install_hint="npm install -g @anthropic-ai/claude-code",
    extra_paths=("~/.claude/local", "~/.local/bin"),
)
"""Claude Code's catalog entry (environment override ``ANYAGENTD_CLAUDE_BIN``)."""


@hookimpl
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    """Register the Claude Code adapter (:class:`~anyagentd_claude.adapter.ClaudeAdapter`, imported on first use)."""
    from anyagentd.adapters.lazy import lazy_adapter

    register(lazy_adapter("anyagentd_claude.adapter:ClaudeAdapter", name="claude", profiles=(PROFILE,)))
