"""The subagent op family: message a warm subagent, kill one, read its status, and ``subagent.get``
(introspection); plus the reserved ``_instance.result`` / ``_instance.emit`` a child instance reports with
(``$defs/ops/subagent.*``, ``$defs/reserved``). Another principal's handle is "no such subagent"; the reserved ops
are the operator's alone and never listed on a card."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, PrivateAttr, field_validator, model_serializer

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import ArgsModel, InvalidOpState, Op, OpContext, ResultModel, TargetNotFound, owner_scope

from ..command.face import CommandFace
from ..subagents.errors import SubagentNotFound, SubagentRefused

if TYPE_CHECKING:
    from ..subagents.manager import SubagentManager


def _owner(context: OpContext) -> str | None:
    return owner_scope(context.principal)


@contextmanager
def _their_own() -> Iterator[None]:
    """Another principal's handle, or none: the same "no such subagent" (existence never confirmed)."""
    try:
        yield
    except SubagentNotFound:
        raise TargetNotFound("no such subagent") from None


def _manager(context: OpContext) -> SubagentManager:
    """The subagent manager; with subagents not enabled there are none, so every handle is unknown."""
    face: CommandFace = context.face
    if face.subagents is None:
        raise TargetNotFound("no such subagent")
    return face.subagents


def activity(context: OpContext) -> list[dict[str, Any]]:
    """``status.activity`` rows of the caller's subagents whose turn runs (the operator's: everyone's); none when
    subagents are not enabled."""
    face: CommandFace = context.face
    return [] if face.subagents is None else face.subagents.activity(_owner(context))


class HandleArgs(ArgsModel):
    handle: str


class Ack(ResultModel):
    ok: bool
    handle: str | None = None


class SendArgs(ArgsModel):
    handle: str
    message: str


class SubagentSend(Op):
    name = "subagent.send"
    reply = "task"
    floor = "user"
    args = SendArgs
    result = Ack
    description = "Send a message to a warm subagent"

    async def run(self, context: OpContext, args: SendArgs) -> Ack:
        with _their_own():
            try:
                await _manager(context).send(args.handle, _owner(context), args.message, wait=False)
            except SubagentRefused as err:
                raise InvalidOpState(str(err)) from None
        return Ack(ok=True, handle=args.handle)


class KillArgs(ArgsModel):
    handle: str
    reason: str | None = None


class SubagentKill(Op):
    name = "subagent.kill"
    reply = "task"
    floor = "grant"
    args = KillArgs
    result = Ack
    description = "Stop a subagent"

    async def run(self, context: OpContext, args: KillArgs) -> Ack:
        with _their_own():
            await _manager(context).kill(args.handle, _owner(context), args.reason)
        return Ack(ok=True, handle=args.handle)


class StatusResult(ResultModel):
    handle: str
    status: str
    mode: str | None = None
    result: Any = None
    error: str | None = None

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        # mode/result/error are absent until known: the schema types them string/any, never null
        return {k: v for k, v in handler(self).items() if v is not None or k in ("handle", "status")}


class SubagentStatus(Op):
    name = "subagent.status"
    reply = "message"
    floor = "user"
    args = HandleArgs
    result = StatusResult
    description = "The status of one subagent, and its result once it has one"

    async def run(self, context: OpContext, args: HandleArgs) -> StatusResult:
        with _their_own():
            record = _manager(context).get(args.handle, _owner(context))
        return StatusResult(**record.status_json())


class GetArgs(ArgsModel):
    handle: Annotated[str, Field(min_length=1)]


class GetResult(ResultModel):
    """The record; its newest events (``{stream, event}``, oldest first) travel beside it, in the reply's
    ``metadata.agentd.events``: the seed's ``subagent.get`` result has no field for them
    (``docs/commands.md#subagent-events``)."""

    subagent: dict[str, Any]
    _events: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    def reply_metadata(self) -> dict[str, Any]:
        return {"agentd": {"events": self._events}}


class SubagentGet(Op):
    name = "subagent.get"
    reply = "message"
    floor = "user"
    switch = "introspection"
    introspection = True
    args = GetArgs
    result = GetResult
    description = "One subagent's instruction, attempts, result and error"

    async def run(self, context: OpContext, args: GetArgs) -> GetResult:
        with _their_own():
            record = _manager(context).get(args.handle, _owner(context))
        got = GetResult(subagent=record.to_json())
        got._events = list(record.events)
        return got


class ChildResultArgs(ArgsModel):
    handle: Annotated[str, Field(min_length=1)]
    status: Any = None
    output: Any = None


class InstanceResult(Op):
    name = "_instance.result"
    reply = "task"
    floor = "operator"
    reserved = True
    args = ChildResultArgs
    result = None
    description = "A sync child's first result, recorded on the parent's handle"

    async def run(self, context: OpContext, args: ChildResultArgs) -> None:
        with _their_own():
            try:
                await _manager(context).child_result(args.handle, args.status, args.output)
            except SubagentRefused as err:
                raise InvalidOpState(str(err)) from None
        return None


EMIT_LIMIT = 256 * 1024
"""Bytes (UTF-8 JSON) one ``_instance.emit`` event may take; a bigger one is refused (-32602) before any task."""


class EmitArgs(ArgsModel):
    handle: Annotated[str, Field(min_length=1)]
    stream: Annotated[str, Field(min_length=1)]
    event: dict[str, Any]

    @field_validator("event")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        # an argument refusal, so it comes before the task store write like every other (command/dispatch.py)
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
        if size > EMIT_LIMIT:
            raise ValueError(f"an event takes {EMIT_LIMIT} bytes at most (this one: {size})")
        return value


class InstanceEmit(Op):
    name = "_instance.emit"
    reply = "task"
    floor = "operator"
    reserved = True
    args = EmitArgs
    result = None
    description = "One event of a child's stream, mirrored onto the parent's"

    async def run(self, context: OpContext, args: EmitArgs) -> None:
        with _their_own():
            _manager(context).child_event(args.handle, args.stream, args.event)
        return None


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    for op in (SubagentSend, SubagentKill, SubagentStatus, SubagentGet, InstanceResult, InstanceEmit):
        register(op)
