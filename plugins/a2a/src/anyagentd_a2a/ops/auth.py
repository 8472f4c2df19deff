"""The auth op family (operator only): device sign-ins waiting and their approval or denial, the signed-in
sessions and their revocation (``$defs/ops/auth.*``). The device ops are served when ``[a2a.device_grant]`` is
enabled (switch ``device_grant``); the session ops on a TCP listener (switch ``tcp_listener``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import ArgsModel, InvalidOpArguments, NoArgs, Op, OpContext, ResultModel

from ..auth.names import RESERVED_NAMES, ApprovalRefused


def _grant(context: OpContext) -> Any:
    return context.face.device_grant


class PendingResult(ResultModel):
    pending: list[dict[str, Any]]


class DevicePending(Op):
    name = "auth.device.pending"
    reply = "message"
    floor = "operator"
    switch = "device_grant"
    args = NoArgs
    result = PendingResult
    description = "Device sign-ins waiting for an operator's decision"

    async def run(self, context: OpContext, args: NoArgs) -> PendingResult:
        return PendingResult(pending=_grant(context).pending())


class ApproveArgs(ArgsModel):
    user_code: Annotated[str, Field(min_length=1)]
    as_: Annotated[str, Field(alias="as", pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    scope: Literal["user", "operator"] | None = None

    @model_validator(mode="after")
    def _not_reserved(self) -> ApproveArgs:
        if self.as_ in RESERVED_NAMES:
            raise ValueError(f"'as' may not be the reserved name {self.as_!r}")
        return self


class ApproveResult(ResultModel):
    approved: dict[str, Any]


class DeviceApprove(Op):
    name = "auth.device.approve"
    reply = "task"
    floor = "operator"
    switch = "device_grant"
    args = ApproveArgs
    result = ApproveResult
    description = "Approve a device sign-in {user_code, as, scope?}"

    async def run(self, context: OpContext, args: ApproveArgs) -> ApproveResult:
        try:
            approved = await _grant(context).approve(args.user_code, args.as_, args.scope, context.principal.id)
        except ApprovalRefused as err:
            raise InvalidOpArguments(str(err), [(err.field, str(err))]) from None
        context.face.log.emit("auth.device.approved", principal=approved["principal"], scope=approved["scope"])
        return ApproveResult(approved=approved)


class DenyArgs(ArgsModel):
    user_code: Annotated[str, Field(min_length=1)] | None = None
    all: bool | None = None

    @model_validator(mode="after")
    def _one_of(self) -> DenyArgs:
        if (self.user_code is None) == (self.all is not True):
            raise ValueError("give user_code, or all: true")
        return self


class CountDenied(ResultModel):
    denied: int


class DeviceDeny(Op):
    name = "auth.device.deny"
    reply = "task"
    floor = "operator"
    switch = "device_grant"
    args = DenyArgs
    result = CountDenied
    description = "Refuse a pending device sign-in {user_code}, or all of them {all: true}"

    async def run(self, context: OpContext, args: DenyArgs) -> CountDenied:
        try:
            denied = _grant(context).deny(args.user_code, every=bool(args.all))
        except ApprovalRefused as err:
            raise InvalidOpArguments(str(err), [(err.field, str(err))]) from None
        return CountDenied(denied=denied)


class SessionsResult(ResultModel):
    sessions: list[dict[str, Any]]


class Sessions(Op):
    name = "auth.sessions"
    reply = "message"
    floor = "operator"
    switch = "tcp_listener"
    args = NoArgs
    result = SessionsResult
    description = "The signed-in sessions: kind, name, principal and expiry"

    async def run(self, context: OpContext, args: NoArgs) -> SessionsResult:
        sessions = context.face.auth_sessions  # None without the device grant: nobody signed in
        return SessionsResult(sessions=[s.to_json() for s in await sessions.list()] if sessions else [])


class RevokeArgs(ArgsModel):
    sid: Annotated[str, Field(min_length=1)] | None = None
    name: Annotated[str, Field(min_length=1)] | None = None
    all: bool | None = None

    @model_validator(mode="after")
    def _one_of(self) -> RevokeArgs:
        given = [self.sid is not None, self.name is not None, self.all is True]
        if sum(given) != 1:
            raise ValueError("give exactly one of sid, name, or all: true")
        return self


class CountRevoked(ResultModel):
    revoked: int


class Revoke(Op):
    name = "auth.sessions.revoke"
    reply = "task"
    floor = "operator"
    switch = "tcp_listener"
    args = RevokeArgs
    result = CountRevoked
    description = "End one session {sid}, every session of a name {name}, or all {all: true}"

    async def run(self, context: OpContext, args: RevokeArgs) -> CountRevoked:
        sessions = context.face.auth_sessions
        revoked = await sessions.revoke(sid=args.sid, name=args.name, every=bool(args.all)) if sessions else 0
        context.face.log.emit("auth.session.revoked", count=revoked)
        return CountRevoked(revoked=revoked)


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    for op in (DevicePending, DeviceApprove, DeviceDeny, Sessions, Revoke):
        register(op)
