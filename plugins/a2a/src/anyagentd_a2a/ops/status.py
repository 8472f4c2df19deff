"""The ``status`` op family: liveness and a snapshot of the instance as the caller may see it.

``status`` (message, any named caller): instance, uptime, drain and pause state, the agent, version, skills,
workflows, runs, conversations and live activity; a non-operator sees only what it owns
(``agentd-command.schema.json`` ``$defs/ops/status``). A conversation's ``id`` is the name ``plan.get`` and
``conversation.get`` take from this caller (:func:`..command.face.caller_id`): the contextId for its own, and
``<principal>/<contextId>`` for another principal's, so two users' ``ctx-1`` list as two ids.
"""

from __future__ import annotations

import time
from typing import Any

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import NoArgs, Op, OpContext, ResultModel, owner_scope

from ..command.face import CommandFace, caller_id
from . import _views
from .subagent import activity as subagent_activity


class StatusResult(ResultModel):
    instance: str
    uptime_ms: int
    draining: bool
    paused: bool
    model: str
    version: str
    skills: list[str]
    skill_prefix: str
    values: dict[str, Any]
    workflows: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    conversations: list[dict[str, Any]]
    activity: list[dict[str, Any]]


class Status(Op):
    name = "status"
    reply = "message"
    floor = "named"
    args = NoArgs
    result = StatusResult
    description = "Liveness and a snapshot of this instance, as the caller may see it"

    async def run(self, context: OpContext, args: NoArgs) -> StatusResult:
        face: CommandFace = context.face
        conversations, activity = [], []
        for view in face.conversations(context.principal):
            messages = _views.transcript(view)
            _, progress = _views.plan_and_progress(view)
            conversations.append(
                {
                    "id": caller_id(view, context.principal),
                    "contextId": view.id,
                    "kind": view.kind,
                    "version": view.version,
                    "messages": len(messages),
                    "est_tokens": _views.est_tokens(messages),
                    "turns": view.turns,
                    "principal": view.principal,
                    "skills": face.skills,
                    "plan": progress,
                    "updated": view.updated_ms,
                }
            )
            row = _views.activity(view)
            if row is not None:
                activity.append(row)
        activity += subagent_activity(context)  # the caller's running subagents, one row each (id: the handle)
        return StatusResult(
            instance=face.instance,
            uptime_ms=max(0, int(time.time() * 1000) - face.started_ms),
            draining=face.draining,
            paused=face.paused,
            model=face.agent_name,
            version=face.version,
            skills=face.skills,
            skill_prefix="",
            values=face.values(context.principal),
            workflows=[{"name": name} for name in sorted(face.workflows)],
            runs=await _runs(face, context),
            conversations=conversations,
            activity=activity,
        )


async def _runs(face: CommandFace, context: OpContext) -> list[dict[str, Any]]:
    """The caller's workflow runs (every run for the operator), newest first, each step as its attempt count."""
    if face.runner is None:
        return []
    records = await face.runner.store.list(principal=owner_scope(context.principal))
    return [
        {
            "id": r.id,
            "workflow": r.workflow,
            "status": r.status,
            "start": "workflow.run",
            "steps": {step_id: state.attempt for step_id, state in r.steps.items()},
            "tokens": r.tokens,
            "created": r.created,
            "updated": r.updated,
            "finished": r.finished,
            "output": r.output,
            "error": r.error,
            "task": r.task_id,
            "principal": r.principal,
        }
        for r in reversed(records)
    ]


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    register(Status)
