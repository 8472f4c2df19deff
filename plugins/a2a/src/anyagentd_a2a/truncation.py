"""Cutting a JSON value's long strings to a byte bound, for the views that show an agent's output (``status``,
``conversation.get``, ``run.get``, a subagent's stream): a leaf module, so the ops' views and the subagents' streams
share it without importing each other."""

from __future__ import annotations

from typing import Any


def truncate(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` UTF-8 bytes cut to at most ``limit`` bytes (on a
    character boundary) and marked with ``…``; containers are walked."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) <= limit:
            return value
        return raw[: max(0, limit - 3)].decode("utf-8", errors="ignore") + "…"
    if isinstance(value, dict):
        return {k: truncate(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [truncate(v, limit) for v in value]
    return value


__all__ = ["truncate"]
