"""The ``acp`` plugin (entry point ``anyagentd: acp = "anyagentd_acp.plugin"``): the catalog entries of the ACP
agents, and the adapter registered lazily (:mod:`.adapter` loads when an ACP session or probe first needs it, the
ACP library later still, when a connection starts: issue 17)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anyagentd.adapters.profile import AgentProfile
from anyagentd.hookspecs import hookimpl

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AgentAdapter

PROFILES = (
    AgentProfile(
        id="codex-acp",
        name="Codex (ACP)",
        executable="codex-acp",
        install_hint="npm install -g @zed-industries/codex-acp",
        acp_args=(),
    ),
    AgentProfile(
        id="claude-acp",
        name="Claude Code (ACP)",
        executable="claude-agent-acp",
        install_hint="npm install -g @zed-industries/claude-agent-acp",
        acp_args=(),
    ),
    AgentProfile(
        id="gemini",
        name="Gemini CLI",
        executable="gemini",
        install_hint="npm install -g @google/gemini-cli",
        acp_args=("--experimental-acp",),
    ),
)
"""The ACP agents the catalog knows (environment overrides ``ANYAGENTD_CODEX_ACP_BIN``,
``ANYAGENTD_CLAUDE_ACP_BIN``, ``ANYAGENTD_GEMINI_BIN``)."""


@hookimpl
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    """Register the generic ACP adapter (:class:`~anyagentd_acp.adapter.AcpAdapter`, imported on first use); it
    also opens ``{"acp": {...}}`` AgentRefs."""
    from anyagentd.adapters.lazy import lazy_adapter

    register(lazy_adapter("anyagentd_acp.adapter:AcpAdapter", name="acp", profiles=PROFILES, acp_ref=True))
