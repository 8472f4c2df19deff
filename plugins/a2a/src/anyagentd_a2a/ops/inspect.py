"""The inspect op family: ``plan.get``, and the introspection ops ``conversation.get`` and ``debug.events``.

``plan.get {id?}`` (message, users or a grant): a conversation's current plan and its progress ``"n/m done"``;
without ``id`` the root conversation, as the schema says — an A2A daemon has none (every conversation is named by
its contextId), so that is "no root conversation here".
``conversation.get {id, limit=200 ≤ 1000}`` (message, users or a grant; introspection): the newest messages of a
conversation, strings truncated at 4096 bytes. ``debug.events {after, limit=200 ≤ 500, level?, prefix?}``
(message, operator; introspection): a cursor read of the daemon's log ring. A conversation the caller does not own
is "no such conversation" (``TargetNotFound``), never confirmed to exist. A conversation's ``id`` in a result is as
the caller names it (:func:`..command.face.caller_id`): its own by the contextId, another principal's (the operator
sees them) as ``<principal>/<contextId>``; a bare contextId several principals share is INVALID_COMMAND_ARGS
naming the qualified ids.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import ArgsModel, Op, OpContext, ResultModel, TargetNotFound

from ..command.face import CommandFace, caller_id
from ..truncation import truncate
from . import _views

CONVERSATION_LIMIT, CONVERSATION_MAX = 200, 1000
EVENTS_LIMIT, EVENTS_MAX = 200, 500


class PlanArgs(ArgsModel):
    id: Annotated[str, Field(min_length=1)] | None = None


class PlanResult(ResultModel):
    conversation: str
    plan: dict[str, Any] | None
    progress: str | None


class PlanGet(Op):
    name = "plan.get"
    reply = "message"
    floor = "user"
    args = PlanArgs
    result = PlanResult
    description = "One conversation's current plan and its progress"

    async def run(self, context: OpContext, args: PlanArgs) -> PlanResult:
        face: CommandFace = context.face
        view = face.conversation(context.principal, args.id)
        if view is None and args.id is None:  # the schema's "without it, the root": never the newest, guessed
            raise TargetNotFound(
                "no root conversation here: an A2A conversation is named by its id (status lists them)"
            )
        if view is None:
            raise TargetNotFound("no such conversation")
        plan, progress = _views.plan_and_progress(view)
        return PlanResult(conversation=caller_id(view, context.principal), plan=plan, progress=progress)


class ConversationArgs(ArgsModel):
    id: Annotated[str, Field(min_length=1)]
    limit: Annotated[int, Field(ge=0, le=CONVERSATION_MAX)] = CONVERSATION_LIMIT


class ConversationResult(ResultModel):
    conversation: dict[str, Any]


class ConversationGet(Op):
    name = "conversation.get"
    reply = "message"
    floor = "user"
    switch = "introspection"
    introspection = True
    args = ConversationArgs
    result = ConversationResult
    description = "One conversation's transcript, message bodies included"

    async def run(self, context: OpContext, args: ConversationArgs) -> ConversationResult:
        face: CommandFace = context.face
        view = face.conversation(context.principal, args.id)
        if view is None:
            raise TargetNotFound("no such conversation")
        messages = _views.transcript(view)
        newest = messages[-args.limit :] if args.limit else []
        plan, _ = _views.plan_and_progress(view)
        return ConversationResult(
            conversation={
                "id": caller_id(view, context.principal),
                "kind": view.kind,
                "version": view.version,
                "turns": view.turns,
                "est_tokens": _views.est_tokens(messages),
                "principal": view.principal,
                "task": view.task_id,
                "skills": face.skills,
                "plan": plan,
                "summary": None,
                "total_messages": len(messages),
                "messages": truncate(newest, _views.TRUNCATE_MESSAGE_BYTES),
                "updated": view.updated_ms,
            }
        )


class EventsArgs(ArgsModel):
    after: Annotated[int, Field(ge=0)] = 0
    limit: Annotated[int, Field(ge=0, le=EVENTS_MAX)] = EVENTS_LIMIT
    level: str | None = None
    prefix: str | None = None


class EventsResult(ResultModel):
    events: list[dict[str, Any]]
    oldest_seq: int
    newest_seq: int
    dropped: int


class DebugEvents(Op):
    name = "debug.events"
    reply = "message"
    floor = "operator"
    switch = "introspection"
    introspection = True
    args = EventsArgs
    result = EventsResult
    description = "A cursor read of the live log ring, across every principal"

    async def run(self, context: OpContext, args: EventsArgs) -> EventsResult:
        face: CommandFace = context.face
        page = face.log.read(args.after, args.limit, level=args.level, prefix=args.prefix)
        return EventsResult(
            events=page.events, oldest_seq=page.oldest_seq, newest_seq=page.newest_seq, dropped=page.dropped
        )


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    register(PlanGet)
    register(ConversationGet)
    register(DebugEvents)
