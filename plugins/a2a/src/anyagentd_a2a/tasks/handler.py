"""The a2a-sdk's request handler as the daemon serves it: CancelTask of a workflow run's task cancels the run first.

The SDK cancels a task by calling the executor only where the task's producer runs (``_cancel_local``); a task
another replica holds it records CANCELED in the store at once (``_cancel_remote``), and an executor whose cancel
raises gets its task marked FAILED. A run's task is the run's view, so neither may happen before the run is
cancelled: :class:`RunCancelHandler` asks the workflow runner to cancel the run (the ``temporal`` engine reaches it
from any daemon; the local engine the runs it drives), then lets the SDK record the task's end. A runner that cannot
be reached refuses the CancelTask (-32603, the engine named), and so does a daemon whose local engine does not drive
the run (-32002, naming the run: another daemon sharing the database does); either changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.utils.errors import InternalError, TaskNotCancelableError

from .state import TERMINAL

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.types import CancelTaskRequest, Task

    from .optasks import RunControl


class RunCancelHandler(DefaultRequestHandler):
    """:class:`~a2a.server.request_handlers.DefaultRequestHandler` (its arguments), and ``runs``: the workflow
    runner (``None`` without workflows)."""

    def __init__(self, *args: Any, runs: RunControl | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = runs

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """Cancel the run behind a run's task (owner-scoped read: another principal's task is left to the SDK's
        "not found"), then the SDK's CancelTask. Raises ``InternalError`` when the runner cannot be reached."""
        if self.runs is not None:
            task = await self.task_store.get(params.id, context)
            if task is not None and task.status.state not in TERMINAL and "run" in task.metadata:
                await self._cancel_run(str(task.metadata["run"]), context)
                try:
                    return await super().on_cancel_task(params, context)
                except TaskNotCancelableError:  # the run's end became its task's meanwhile (its follower wrote it)
                    return await self.task_store.get(params.id, context)
        return await super().on_cancel_task(params, context)

    async def _cancel_run(self, run_id: str, context: ServerCallContext) -> None:
        from ..workflows.runner import EngineUnavailable, RunNotFound, RunStateRefused

        assert self.runs is not None
        principal = context.state.get("principal")
        try:
            await self.runs.cancel(run_id, f"cancelled by {getattr(principal, 'id', '?')} (CancelTask)")
        except RunNotFound:
            return
        except RunStateRefused:
            record = await self.runs.get(run_id)
            if record is not None and not record.terminal:  # driven by another daemon's local runner
                raise TaskNotCancelableError(
                    message=f"run {run_id} is driven by another daemon (the local workflow engine): cancel it "
                    "through that daemon"
                ) from None
            return  # ended meanwhile: the SDK records the task's end
        except EngineUnavailable as err:
            raise InternalError(message=f"the run was not cancelled: {err.message}") from None


__all__ = ["RunCancelHandler"]
