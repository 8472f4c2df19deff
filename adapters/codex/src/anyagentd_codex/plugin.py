"""The ``codex`` plugin (entry point ``anyagentd: codex = "anyagentd_codex.plugin"``): the catalog entry, and the
adapter registered lazily (:mod:`.adapter` and what it imports load when a Codex session, probe or plan query first
needs them, not when ``anyagentd --help`` loads the plugins or ``serve`` builds its runtime: issue 17)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anyagentd.adapters.profile import AgentProfile
from anyagentd.hookspecs import hookimpl

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AgentAdapter

PROFILE = AgentProfile(
    id="codex",
    name="Codex",
    executable="codex",
    install_hint="npm install -g @openai/codex",
)
"""Codex's catalog entry (environment override ``ANYAGENTD_CODEX_BIN``)."""


@hookimpl
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    """Register the Codex adapter (:class:`~anyagentd_codex.adapter.CodexAdapter`, imported on first use)."""
    from anyagentd.adapters.lazy import lazy_adapter

    register(lazy_adapter("anyagentd_codex.adapter:CodexAdapter", name="codex", profiles=(PROFILE,)))
