"""The ``acp`` plugin (entry point ``anyagentd: acp = "anyagentd_acp.plugin"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyagentd.hookspecs import hookimpl


@hookimpl
def register_adapters(register: Callable[[Any], None]) -> None:
    """Register the generic ACP adapter (its module loads here, not when the plugin loads)."""
    from .adapter import AcpAdapter

    register(AcpAdapter)
