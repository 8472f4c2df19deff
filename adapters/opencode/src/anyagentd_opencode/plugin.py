"""The ``opencode`` plugin, registered through the ``anyagentd`` entry-point group: the catalog entry, and the
adapter registered lazily (:mod:`.adapter`, its connection and HTTP client load when an opencode session or probe
first needs them: issue 17)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anyagentd.adapters.profile import AgentProfile
from anyagentd.hookspecs import hookimpl

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AgentAdapter

PROFILE = AgentProfile(
    id="opencode",
    name="opencode",
    executable="opencode",
    install_hint="npm install -g opencode-ai",
    extra_paths=("~/.opencode/bin",),
)
"""opencode's catalog entry (environment override ``ANYAGENTD_OPENCODE_BIN``)."""


@hookimpl
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    """Register the opencode adapter (:class:`~anyagentd_opencode.adapter.OpencodeAdapter`, imported on first
    use)."""
    from anyagentd.adapters.lazy import lazy_adapter

    register(lazy_adapter("anyagentd_opencode.adapter:OpencodeAdapter", name="opencode", profiles=(PROFILE,)))
