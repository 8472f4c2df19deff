"""Shared read-outs of a conversation for the status and inspect ops: sizes, truncation and the activity row."""

from __future__ import annotations

from typing import Any

from ..command.face import ConversationView

TRUNCATE_MESSAGE_BYTES = 4096


def transcript(view: ConversationView) -> list[dict[str, Any]]:
    """The conversation's messages as JSON (the engine's transcript projection), oldest first."""
    if view.session is None:
        return []
    return [entry.to_json() for entry in view.session.projections.transcript]


def est_tokens(messages: list[dict[str, Any]]) -> int:
    """A rough token estimate of ``messages``: a quarter of their text's length (no tokenizer in the daemon)."""
    return sum(len(str(m.get("text") or "")) for m in messages) // 4


def plan_and_progress(view: ConversationView) -> tuple[dict[str, Any] | None, str | None]:
    """The current plan as JSON (``{"entries": [...]}``) and its progress (``"n/m done"``), or ``(None, None)``."""
    if view.session is None:
        return None, None
    projections = view.session.projections
    plan = projections.plan
    if plan is None:
        return None, None
    return {"entries": [entry.model_dump(mode="json") for entry in plan]}, projections.progress


def activity(view: ConversationView) -> dict[str, Any] | None:
    """The activity row of a conversation whose turn is running (``status.activity``), else ``None``."""
    session = view.session
    if session is None or view.turn_started_ms is None:
        return None
    projections = session.projections
    usage = projections.usage
    tool = projections.current_tool
    return {
        "id": view.id,
        "task": view.task_id,
        "ctx": view.id,
        "phase": projections.phase or "working",
        "tool": (tool.title or tool.id) if tool is not None else None,
        "round": view.turns,
        "tokens_in": usage.tokens_in or 0,
        "tokens_out": usage.tokens_out or 0,
        "started_ms": view.turn_started_ms,
        "updated_ms": int((projections.last_activity or view.updated_ms / 1000) * 1000),
    }
