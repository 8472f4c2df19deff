"""The first-party plugins core knows by name, so it can say what to install when one is missing.

Core drives no real agent itself: each adapter is a separate distribution. A person who installed core alone and
asks for ``claude`` should learn that ``anyagentd-claude`` provides it, not only that "no plugin" does.
:data:`AGENT_DISTRIBUTIONS` maps catalog ids to the distribution whose adapter drives them,
:data:`MCP_DISTRIBUTIONS` MCP transports to theirs; :func:`install_hint` says how to install one, naming the
source directory when core runs from a checkout of this repository (``pip install -e ./adapters/claude``, what the
README installs) and the published name otherwise (``pip install anyagentd-claude``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Distribution:
    """A first-party distribution: its published ``name`` and its ``source`` directory in this repository."""

    name: str
    source: str


_CLAUDE = Distribution("anyagentd-claude", "adapters/claude")
_CODEX = Distribution("anyagentd-codex", "adapters/codex")
_ACP = Distribution("anyagentd-acp", "adapters/acp_generic")

AGENT_DISTRIBUTIONS: dict[str, tuple[str, Distribution]] = {
    "claude": ("Claude Code", _CLAUDE),
    "codex": ("Codex", _CODEX),
    "codex-acp": ("Codex (ACP)", _ACP),
    "claude-acp": ("Claude Code (ACP)", _ACP),
    "gemini": ("Gemini CLI", _ACP),
}
"""Catalog id → (agent name, the distribution whose adapter drives it)."""

MCP_DISTRIBUTIONS: dict[str, Distribution] = {
    "Stdio": Distribution("anyagentd-mcp-stdio", "plugins/mcp_stdio"),
    "Http": Distribution("anyagentd-mcp-http", "plugins/mcp_http"),
    "Sse": Distribution("anyagentd-mcp-sse", "plugins/mcp_sse"),
}
"""MCP transport tag → the distribution of its transport plugin."""


def checkout_root() -> Path | None:
    """The repository this core runs from (an editable install of ``core/``), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "core" / "pyproject.toml").is_file() and (root / "adapters").is_dir() else None


def install_hint(dist: Distribution, *, cwd: Path | None = None) -> str:
    """How to install ``dist``: ``pip install -e ./adapters/claude (published as anyagentd-claude)`` from a
    checkout (the path relative to ``cwd`` when it is inside the checkout, else absolute), else
    ``pip install anyagentd-claude``."""
    root = checkout_root()
    if root is None or not (root / dist.source).is_dir():
        return f"pip install {dist.name}"
    here = (cwd or Path.cwd()).resolve()
    target = root / dist.source
    shown = "./" + os.path.relpath(target, here) if here == root or root in here.parents else str(target)
    if shown.startswith("./../"):
        shown = shown[2:]
    return f"pip install -e {shown} (published as {dist.name})"


def agent_install_hint(agent_id: str) -> str | None:
    """The install hint for the adapter of catalog id ``agent_id``, or None when core does not know the id."""
    entry = AGENT_DISTRIBUTIONS.get(agent_id)
    return install_hint(entry[1]) if entry else None


def mcp_install_hint(transport: str) -> str:
    """The install hint for the plugin of MCP ``transport`` (``Stdio``, ``Http``, ``Sse``)."""
    dist = MCP_DISTRIBUTIONS.get(transport)
    return install_hint(dist) if dist else f"pip install anyagentd-mcp-{transport.lower()}"


def uninstalled_agents(driven: set[str]) -> list[tuple[str, str, str]]:
    """The first-party catalog ids no installed adapter drives, as (id, name, install hint), in catalog order."""
    return [
        (agent_id, name, install_hint(dist))
        for agent_id, (name, dist) in AGENT_DISTRIBUTIONS.items()
        if agent_id not in driven
    ]
