"""The tasks of workflow runs a restart resumed: each is followed again by its op's task source
(:class:`..tasks.optasks.OpTask`), on an SDK ``ActiveTask`` of its own, so that the run's progress, an answer to
its ``ask`` step and a CancelTask of it take the same path as before the restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a.server.agent_execution import RequestContext

from ..calls import HANDOFF, call_context
from ..command.extension import COMMAND_URI
from ..principals import OPERATOR, Principal
from .optasks import PreparedOp
from .state import OPEN

if TYPE_CHECKING:
    from a2a.server.request_handlers import DefaultRequestHandler

    from ..workflows.runner import WorkflowRunner
    from .feed import TaskFeed


class RunTasks:
    """The tasks of ``runner``'s runs after a restart: ``feed`` reads them as stored, ``handler`` (the SDK's
    request handler) serves them."""

    def __init__(self, runner: WorkflowRunner, handler: DefaultRequestHandler, feed: TaskFeed) -> None:
        self.runner = runner
        self.handler = handler
        self.feed = feed

    async def follow_resumed(self) -> None:
        """After a restart: the task of every run whose task is still open follows the run again — a resumed run
        to its end, a run that ended during recovery (a step interrupted with no retry left) at once — going on
        from the stored task (its history kept). Each is followed in its own SDK ``ActiveTask``, started by a
        request with no message (a2a-sdk 1.3.0 has no public way to start a task's producer without a send: the
        registry is the handler's ``_active_task_registry``)."""
        from anyio import create_task_group

        from ..ops.workflow import run_progress

        async with create_task_group() as tg:
            for record in await self.runner.store.list():
                if not record.task_id:
                    continue
                task = await self.feed.get(record.task_id, OPERATOR)
                if task is None or task.status.state not in OPEN:
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
                tg.start_soon(self._follow, prepared)

    async def _follow(self, prepared: PreparedOp) -> None:
        context = call_context(prepared.principal)
        context.state[HANDOFF] = prepared
        registry = self.handler._active_task_registry  # noqa: SLF001 - see follow_resumed
        active = await registry.get_or_create(prepared.task_id, call_context=context, create_task_if_missing=False)
        request = RequestContext(call_context=context, task_id=prepared.task_id, context_id=prepared.context_id)
        async for _ in active.subscribe(request=request):
            pass  # the executor follows the run (OpTasks.follow); this request ends once the task stops


__all__ = ["RunTasks"]
