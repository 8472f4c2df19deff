"""The tasks of workflow runs a restart resumed: each is followed again by its op's task source
(:class:`..tasks.optasks.OpTask`), on an SDK ``ActiveTask`` of its own, so that the run's progress, an answer to
its ``ask`` step and a CancelTask of it take the same path as before the restart.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from a2a.server.agent_execution import RequestContext

from ..calls import HANDOFF, call_context
from ..command.extension import COMMAND_URI
from ..principals import OPERATOR, Principal
from .optasks import PreparedOp
from .state import OPEN

if TYPE_CHECKING:
    from a2a.server.request_handlers import DefaultRequestHandler

    from ..agents import Agents
    from ..workflows.runner import WorkflowRunner


class RunTasks:
    """The tasks of ``runner``'s runs after a restart, each served by the agent whose task table holds it (a run's
    task is made by the agent whose path ``workflow.run`` was sent to): its ``feed`` reads it as stored, its
    ``handler`` (the SDK's request handler) serves it."""

    def __init__(self, runner: WorkflowRunner, agents: Agents) -> None:
        self.runner = runner
        self.agents = agents

    async def follow_resumed(self, runs: Collection[str] | None = None, tasks: Collection[str] = ()) -> None:
        """After a restart or a takeover: the task of every run of ``runs`` or whose task is of ``tasks`` (the ids
        of the runs and tasks this daemon claimed, :mod:`..members`: another live daemon follows its own; ``None``:
        every stored run) whose task is still open follows the run again — a resumed run to its end, a run that ended during
        recovery (a step interrupted with no retry left) at once — going on from the stored task (its history
        kept). Each is followed in its own SDK ``ActiveTask``, started by a request with no message (a2a-sdk 1.3.0
        has no public way to start a task's producer without a send: the registry is the handler's
        ``_active_task_registry``)."""
        from anyio import create_task_group

        from ..ops.workflow import run_progress

        async with create_task_group() as tg:
            for record in await self.runner.store.list():
                if not record.task_id or (runs is not None and record.id not in runs and record.task_id not in tasks):
                    continue
                agent = await self.agents.holding(record.task_id)
                task = None if agent is None else await agent.feed.get(record.task_id, OPERATOR)
                if agent is None or task is None or task.status.state not in OPEN:
                    continue  # the task already shows the run's end (a run ended at recovery is brought up to date)
                owner_id = record.principal or OPERATOR.id
                owner = OPERATOR if owner_id == OPERATOR.id else Principal(owner_id, owner_id.split(":", 1)[0])
                op = f"workflow.run:{record.workflow}"
                if "op" in task.metadata:  # a protobuf Struct: `in` and [], no get()
                    op = task.metadata["op"]
                prepared = PreparedOp(
                    task_id=record.task_id,
                    context_id=task.context_id,
                    principal=owner,
                    metadata={"op": op, "extension": COMMAND_URI, "run": record.id},
                    progress=run_progress(self.runner, record),
                )
                tg.start_soon(self._follow, agent.handler, prepared)

    async def _follow(self, handler: DefaultRequestHandler, prepared: PreparedOp) -> None:
        context = call_context(prepared.principal)
        context.state[HANDOFF] = prepared
        registry = handler._active_task_registry  # noqa: SLF001 - see follow_resumed
        active = await registry.get_or_create(prepared.task_id, call_context=context, create_task_if_missing=False)
        request = RequestContext(call_context=context, task_id=prepared.task_id, context_id=prepared.context_id)
        async for _ in active.subscribe(request=request):
            pass  # the executor follows the run (OpTasks.follow); this request ends once the task stops


__all__ = ["RunTasks"]
