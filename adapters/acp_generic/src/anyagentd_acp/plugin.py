"""The ``acp`` plugin (entry point ``anyagentd: acp = "anyagentd_acp.plugin"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyagentd.hookspecs import hookimpl

from .adapter import AcpAdapter


@hookimpl
def register_adapters(register: Callable[[Any], None]) -> None:
    """Register the generic ACP adapter."""
    register(AcpAdapter)
