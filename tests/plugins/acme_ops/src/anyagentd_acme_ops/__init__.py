"""A third-party op family: ``acme.echo`` (a message op any named caller may run) and ``acme.touch`` (a task op
behind a grant, with a result artifact). Its argument schemas are its own; the face validates them the same way as
the built-ins'."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import ArgsModel, Op, OpContext, ResultModel


class EchoArgs(ArgsModel):
    text: Annotated[str, Field(min_length=1, max_length=256)]
    times: Annotated[int, Field(ge=1, le=5)] = 1


class EchoResult(ResultModel):
    text: str
    principal: str


class Echo(Op):
    name = "acme.echo"
    reply = "message"
    floor = "named"
    args = EchoArgs
    result = EchoResult
    description = "Echo text back, times over"

    async def run(self, context: OpContext, args: EchoArgs) -> EchoResult:
        return EchoResult(text=" ".join([args.text] * args.times), principal=context.principal.id)


class TouchArgs(ArgsModel):
    label: Annotated[str, Field(pattern=r"^[a-z]{1,16}$")]


class TouchResult(ResultModel):
    touched: str


class Touch(Op):
    name = "acme.touch"
    reply = "task"
    floor = "grant"
    args = TouchArgs
    result = TouchResult
    description = "Record a label (needs the acme.touch grant)"

    async def run(self, context: OpContext, args: TouchArgs) -> TouchResult:
        return TouchResult(touched=args.label)


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    register(Echo)
    register(Touch)
