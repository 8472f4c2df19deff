"""The workflow op family: start, watch, signal and cancel runs; ``run.get`` (introspection); and the operator's
``admin.cancel`` (``$defs/ops/workflow.*``, ``run.get``, ``admin.cancel``).

``workflow.run {workflow, inputs?}`` is a long-running task op: its task follows the run (its state per
:func:`..tasks.state.from_run`: pending, running, suspended and paused read WORKING; completed COMPLETED; refused
REJECTED; cancelled CANCELED; failed and stalled FAILED; INPUT_REQUIRED while an ``ask`` step waits), step
transitions and agent text stream as status updates, and
the run's output is the result artifact. Whether the caller may run a workflow (a grant ``workflow.run:<name>``
or a role the workflow lists) is checked before anything exists, and a workflow the caller may not run is
PERMISSION_DENIED whether or not it exists; a caller that may run any workflow of that name (the operator, a grant
matching it) is told instead that none is configured: NOT_FOUND "no workflow named 'x' (configured: a, b)", the
ones it may run (:func:`may_run_any`). Ownership as everywhere: another principal's run is "no such run".
``workflow.cancel`` and ``admin.cancel`` of a run that has ended are INVALID_STATE, as ``admin.pause`` of it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, RootModel

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import (
    ArgsModel,
    InvalidOpArguments,
    InvalidOpState,
    Op,
    OpContext,
    OpNotPermitted,
    Principal,
    Progress,
    ResultModel,
    TargetNotFound,
    grant_matches,
    owner_scope,
    owns,
)

from ..command.face import CommandFace
from ..truncation import truncate
from ..workflows.state import RUN_TERMINAL

if TYPE_CHECKING:
    from ..workflows.runner import WorkflowRunner
    from ..workflows.store import RunRecord

RUN_TRUNCATE_BYTES = 2048


def may_run(principal: Principal, workflow: Any) -> bool:
    """A workflow's own rule: the operator, a role the workflow lists, or a grant for ``workflow.run`` on it."""
    if principal.is_operator or principal.role in workflow.roles:
        return True
    return any(grant_matches(grant, "workflow.run", workflow.name) for grant in principal.grants)


def may_run_any(principal: Principal, name: str) -> bool:
    """Whether ``principal`` could run a workflow called ``name`` whatever it lists (the operator, or a grant for
    ``workflow.run`` on that name): such a caller learns that no workflow has the name, and which ones it may run,
    since that tells it nothing it could not try; anyone else is PERMISSION_DENIED, whether or not it exists."""
    return principal.is_operator or any(grant_matches(g, "workflow.run", name) for g in principal.grants)


def runner_of(context: OpContext) -> WorkflowRunner:
    """The workflow runner; with no workflows configured there is no run, so every run id is unknown."""
    face: CommandFace = context.face
    if face.runner is None:
        raise TargetNotFound("no such run")
    return face.runner


async def owned_run(context: OpContext, run_id: str) -> RunRecord:
    """The run if the caller owns it (:func:`anyagentd.ops.owns`: the operator any); else "no such run"."""
    record = await runner_of(context).get(run_id)
    if record is None or not owns(context.principal, record.principal):
        raise TargetNotFound("no such run")
    return record


def summary(record: RunRecord) -> dict[str, Any]:
    return {
        "run": record.id,
        "workflow": record.workflow,
        "status": record.status,
        "output": record.output,
        "error": record.error,
    }


def run_json(record: RunRecord) -> dict[str, Any]:
    """A run as ``run.get`` and ``status.runs`` show it, strings truncated at 2048 bytes."""
    return truncate(
        {
            "id": record.id,
            "workflow": record.workflow,
            "status": record.status,
            "start": "workflow.run",
            "steps": {step_id: _step_json(state) for step_id, state in record.steps.items()},
            "tokens": record.tokens,
            "created": record.created,
            "updated": record.updated,
            "finished": record.finished,
            "output": record.output,
            "error": record.error,
            "task": record.task_id,
            "principal": record.principal,
            "vars": record.inputs,
        },
        RUN_TRUNCATE_BYTES,
    )


def _step_json(state: Any) -> dict[str, Any]:
    """A step as ``run.get`` shows it: its state, without the wire event a Temporal run's ``ask`` step keeps in its
    wait for the task's status message (the local engine keeps it in memory): the same on both engines."""
    step = state.to_json()
    if isinstance(step.get("wait"), dict) and "event" in step["wait"]:
        step["wait"] = {k: v for k, v in step["wait"].items() if k != "event"}
    return step


class RunArgs(ArgsModel):
    workflow: Annotated[str, Field(min_length=1)]
    inputs: dict[str, Any] | None = None


class RunOutput(RootModel[Any]):
    """The run's output (any JSON)."""


class WorkflowRun(Op):
    name = "workflow.run"
    reply = "task"
    floor = "user_or_agent"
    args = RunArgs
    result = RunOutput
    description = "Start a workflow; the reply is the task it runs under"

    async def run(self, context: OpContext, args: RunArgs) -> AsyncIterator[Progress]:
        face: CommandFace = context.face
        workflow = face.workflows.get(args.workflow)
        if workflow is None and may_run_any(context.principal, args.workflow):
            mine = sorted(n for n, w in face.workflows.items() if may_run(context.principal, w))
            raise TargetNotFound(f"no workflow named {args.workflow!r} (configured: {', '.join(mine) or 'none'})")
        if workflow is None or not may_run(context.principal, workflow):
            raise OpNotPermitted(f"not permitted to run workflow {args.workflow!r}")
        inputs = dict(args.inputs or {})
        problems = _input_problems(workflow.inputs_schema(), inputs)
        if problems:
            raise InvalidOpArguments(f"invalid inputs for {workflow.name}", problems)
        runner = runner_of(context)  # configured workflows have their runner
        record = await runner.start(workflow.name, inputs, context.principal.id, task_id=context.task_id)
        return run_progress(runner, record)


async def run_progress(runner: Any, record: RunRecord) -> AsyncIterator[Progress]:
    """The progress of the run ``record`` as a task shows it, from now to its end: its start, text, questions
    (input_required) and step changes, then its terminal state — none when the runner stops driving the run
    before its end (the drain checkpoints it: its task keeps its state, INPUT_REQUIRED while an ``ask`` step
    waits). Used by ``workflow.run`` and by the daemon to refollow a run's open task after a restart."""
    async with runner.follow(record.id) as changes:
        # read with no await since subscribing: an ask the run waits on now came before, and sends no change any
        # more (the task would read WORKING for ever); any later change is in ``changes``
        asked = runner.awaiting_input(record.id)
        yield Progress("working", text=f"run {record.id} started", data={"run": record.id, "status": record.status})
        if asked is not None:
            yield _asking(record.id, asked["step"], asked)
        elif record.status == "pending" and (paused := runner.held()):
            # nothing starts while the instance is paused: say so, as a queued conversation prompt does
            text = f"The instance is {paused}; this run starts when it is resumed."
            yield Progress("working", text=text, data={"run": record.id, "status": record.status})
        async for current, change in changes:
            kind = change.get("type")
            if kind == "text":
                yield Progress("working", text=change["text"], data={"run": current.id, "step": change["step"]})
            elif kind == "input":
                yield _asking(current.id, change["step"], runner.awaiting_input(current.id))
            elif kind == "step":
                steps = {s: current.steps[s].status for s in change.get("steps", ())}
                yield Progress(
                    "working",
                    text=", ".join(f"{s}: {v}" for s, v in steps.items()),
                    data={"run": current.id, "status": current.status, "steps": steps},
                )
            if current.status in RUN_TERMINAL:
                break
    from ..tasks.state import from_run, progress_of  # imports a2a-sdk: by a run, never with the op table

    final = await runner.get(record.id)
    if final.status not in RUN_TERMINAL:
        return  # the runner stopped driving it (the drain checkpointed it): its task stays as it stands
    state = progress_of(from_run(final.status))
    text = f"run {final.id} {final.status}" + (f": {final.error}" if final.error else "")
    yield Progress(
        state,
        text=text,
        data=summary(final),  # type: ignore[arg-type]
        result=RunOutput(final.output) if state == "completed" else None,
    )


def _asking(run_id: str, step: str, pending: dict[str, Any] | None) -> Progress:
    """The input_required progress of an ``ask`` step waiting on ``pending`` (``runner.awaiting_input``): shown as a
    conversation task shows an open request — a line for a person (the step, then the request's words,
    :func:`..translate.request_text`) and the ``RequestOpened`` event part — then the run's DataPart ``{run, step,
    request}``."""
    from anyagentd.model import REQUEST

    from ..tasks.optasks import EventProgress
    from ..translate import request_text

    pending = dict(pending or {})
    event = pending.pop("event", None)
    text = f"step {step} waits for an answer"
    if pending.get("request") is not None:
        text += f": {request_text(REQUEST.validate_python(pending['request']))}"
    return EventProgress("input_required", text=text, data={"run": run_id, "step": step, **pending}, event=event)


def _input_problems(schema: dict[str, Any], inputs: dict[str, Any]) -> list[tuple[str, str]]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [
        (".".join(["inputs", *map(str, e.absolute_path)]) if e.absolute_path else "inputs", e.message)
        for e in validator.iter_errors(inputs)
    ]


class StatusArgs(ArgsModel):
    run: Annotated[str, Field(min_length=1)] | None = None


class StatusResult(ResultModel):
    runs: list[dict[str, Any]]


class WorkflowStatus(Op):
    name = "workflow.status"
    reply = "message"
    floor = "user_or_agent"
    args = StatusArgs
    result = StatusResult
    description = "One run, or every run the caller may see"

    async def run(self, context: OpContext, args: StatusArgs) -> StatusResult:
        if args.run is not None:
            return StatusResult(runs=[summary(await owned_run(context, args.run))])
        face: CommandFace = context.face
        if face.runner is None:
            return StatusResult(runs=[])
        records = await face.runner.store.list(principal=owner_scope(context.principal))
        return StatusResult(runs=[summary(r) for r in records])


class RunIdArgs(ArgsModel):
    run: Annotated[str, Field(min_length=1)]


class WorkflowCancel(Op):
    name = "workflow.cancel"
    reply = "task"
    floor = "user"
    args = RunIdArgs
    result = None
    description = "Cancel a run the caller owns"

    async def run(self, context: OpContext, args: RunIdArgs) -> None:
        await owned_run(context, args.run)
        await _cancel(context, args.run, f"cancelled by {context.principal.id}")
        return None


async def _cancel(context: OpContext, run_id: str, reason: str) -> None:
    """Cancel run ``run_id``, the runner's refusals as the ops give them: an unknown run is "no such run", one that
    has ended INVALID_STATE (as ``admin.pause`` of it is)."""
    from ..workflows.runner import RunNotFound, RunStateRefused

    try:
        await runner_of(context).cancel(run_id, reason)
    except RunNotFound:
        raise TargetNotFound("no such run") from None
    except RunStateRefused as err:
        raise InvalidOpState(str(err)) from None


class SignalArgs(ArgsModel):
    name: Annotated[str, Field(min_length=1)]
    payload: Any = None
    run: Annotated[str, Field(min_length=1)] | None = None


class SignalResult(ResultModel):
    signal: str
    delivered: int


class WorkflowSignal(Op):
    name = "workflow.signal"
    reply = "task"
    floor = "grant"
    args = SignalArgs
    result = SignalResult
    description = "Resolve the steps waiting on a signal"

    async def run(self, context: OpContext, args: SignalArgs) -> SignalResult:
        if args.run is not None:
            await owned_run(context, args.run)
        face: CommandFace = context.face
        if face.runner is None:
            return SignalResult(signal=args.name, delivered=0)
        delivered = await face.runner.signal(
            args.name, args.payload, context.principal.id, owner=owner_scope(context.principal), run_id=args.run
        )
        return SignalResult(signal=args.name, delivered=delivered)


class RunGetResult(ResultModel):
    run: dict[str, Any]


class RunGet(Op):
    name = "run.get"
    reply = "message"
    floor = "user"
    switch = "introspection"
    introspection = True
    args = RunIdArgs
    result = RunGetResult
    description = "One run with its steps"

    async def run(self, context: OpContext, args: RunIdArgs) -> RunGetResult:
        return RunGetResult(run=run_json(await owned_run(context, args.run)))


class CancelArgs(ArgsModel):
    run: Annotated[str, Field(min_length=1)]
    reason: str | None = None


class CancelResult(ResultModel):
    ok: bool
    cancelled: str


class AdminCancel(Op):
    name = "admin.cancel"
    reply = "task"
    floor = "operator"
    args = CancelArgs
    result = CancelResult
    description = "Cancel any run"

    async def run(self, context: OpContext, args: CancelArgs) -> CancelResult:
        await _cancel(context, args.run, args.reason or "cancelled by the operator")
        return CancelResult(ok=True, cancelled=args.run)


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    for op in (WorkflowRun, WorkflowStatus, WorkflowCancel, WorkflowSignal, RunGet, AdminCancel):
        register(op)
