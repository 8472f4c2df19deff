"""The ``codex`` plugin (entry point ``anyagentd: codex = "anyagentd_codex.plugin"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyagentd.hookspecs import hookimpl

from .adapter import CodexAdapter


@hookimpl
def register_adapters(register: Callable[[Any], None]) -> None:
    """Register the Codex adapter."""
    register(CodexAdapter)
