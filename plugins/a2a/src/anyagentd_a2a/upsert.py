"""INSERT … ON CONFLICT for the dialects that take it, imported on first use: the stores' upserts (:mod:`.store`)
and the membership's claims (:mod:`.members`) share it."""

from __future__ import annotations

import importlib
from typing import Any

UPSERT_DIALECTS = frozenset({"sqlite", "postgresql"})
"""Dialects whose INSERT takes ``ON CONFLICT … DO UPDATE``. Each one's ``insert`` is imported on its first upsert:
SQLAlchemy's PostgreSQL dialect alone costs a SQLite daemon ~65 ms of its start (issue 17, target 4)."""


def dialect_insert(dialect: str) -> Any:
    """``sqlalchemy.dialects.<dialect>.insert`` for a dialect of :data:`UPSERT_DIALECTS`, else ``None``."""
    if dialect not in UPSERT_DIALECTS:
        return None
    return importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert


__all__ = ["UPSERT_DIALECTS", "dialect_insert"]
