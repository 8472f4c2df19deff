"""The admin op family (operator only, task replies that complete at once): ``admin.drain``, ``admin.pause``,
``admin.resume`` for the whole instance, and ``admin.set``.

``admin.drain {reason?}`` latches the same drain as SIGTERM and answers ``{ok, state: "draining", reason}`` at once;
``admin.pause {reason?}`` / ``admin.resume`` hold and release the instance (the engine's admission states);
``admin.set {path, value}`` changes a settable path until the next reload, parsing ``value`` with the
configuration file's own types. With ``run``, pause and resume act on one workflow run (``{ok, paused: run}`` /
``{ok, resumed: run}``): a terminal run, or resuming one not paused, is refused (``InvalidOpState``), an unknown
one is "no such run"; ``admin.cancel`` lives with the workflow family.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import RootModel

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import ArgsModel, InvalidOpState, Op, OpContext, ResultModel, TargetNotFound

from ..command.face import CommandFace

DEFAULT_REASON = "operator request"


async def _on_run(context: OpContext, action: Literal["pause", "resume"], run_id: str) -> None:
    from ..workflows.runner import RunNotFound, RunStateRefused

    face: CommandFace = context.face
    if face.runner is None:
        raise TargetNotFound("no such run")
    try:
        await (face.runner.pause if action == "pause" else face.runner.resume)(run_id)
    except RunNotFound:
        raise TargetNotFound("no such run") from None
    except RunStateRefused as err:
        raise InvalidOpState(str(err)) from None


class DrainArgs(ArgsModel):
    reason: str | None = None


class DrainResult(ResultModel):
    ok: Literal[True]
    state: Literal["draining"]
    reason: str


class Drain(Op):
    name = "admin.drain"
    reply = "task"
    floor = "operator"
    args = DrainArgs
    result = DrainResult
    description = "Begin a graceful drain, then exit 0"

    async def run(self, context: OpContext, args: DrainArgs) -> DrainResult:
        reason = args.reason or DEFAULT_REASON
        context.face.begin_drain(reason)
        return DrainResult(ok=True, state="draining", reason=reason)


class PauseArgs(ArgsModel):
    reason: str | None = None
    run: str | None = None


class PauseResult(RootModel[dict[str, Any]]):
    """``{ok, state: "paused", reason}`` for the instance (``{ok, paused: run}`` for a run, with workflows)."""


class Pause(Op):
    name = "admin.pause"
    reply = "task"
    floor = "operator"
    args = PauseArgs
    result = PauseResult
    description = "Hold the instance, or one run, at a safe boundary"

    async def run(self, context: OpContext, args: PauseArgs) -> PauseResult:
        if args.run is not None:
            await _on_run(context, "pause", args.run)
            return PauseResult({"ok": True, "paused": args.run})
        reason = args.reason or DEFAULT_REASON
        context.face.pause(reason)
        return PauseResult({"ok": True, "state": "paused", "reason": reason})


class ResumeArgs(ArgsModel):
    run: str | None = None


class ResumeResult(RootModel[dict[str, Any]]):
    """``{ok, state: "running"}`` for the instance (``{ok, resumed: run}`` for a run, with workflows)."""


class Resume(Op):
    name = "admin.resume"
    reply = "task"
    floor = "operator"
    args = ResumeArgs
    result = ResumeResult
    description = "Clear a prior pause"

    async def run(self, context: OpContext, args: ResumeArgs) -> ResumeResult:
        if args.run is not None:
            await _on_run(context, "resume", args.run)
            return ResumeResult({"ok": True, "resumed": args.run})
        context.face.resume()
        return ResumeResult({"ok": True, "state": "running"})


class SetArgs(ArgsModel):
    # a2a.introspection is the configuration file's key; a2a.introspection.enabled the schema's name for it
    path: Literal["agent.approval", "a2a.introspection", "a2a.introspection.enabled"]
    value: Any


SCHEMA_PATHS = {"a2a.introspection": "a2a.introspection.enabled"}
"""A path as the configuration file spells it → the name the schema's ``admin.set`` result gives it."""


class SetResult(ResultModel):
    path: str
    value: Any


class Set(Op):
    name = "admin.set"
    reply = "task"
    floor = "operator"
    args = SetArgs
    result = SetResult
    description = "Set a runtime-settable path until the next reload"

    async def run(self, context: OpContext, args: SetArgs) -> SetResult:
        face: CommandFace = context.face
        value = face.set_setting(args.path, args.value)
        return SetResult(path=SCHEMA_PATHS.get(args.path, args.path), value=value)


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    register(Drain)
    register(Pause)
    register(Resume)
    register(Set)
