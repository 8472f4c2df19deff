"""The tasks of workflow runs, as a task source: the answer to a run's waiting ``ask`` step and the cancel of a
run, each sent to the run's task (SendMessage with its ``taskId``, CancelTask), and the following of the runs a
restart resumed.

A run's task is written by its one writer (:meth:`..command.dispatch.CommandDispatcher.track`);
:class:`RunTasks` answers and cancels the run behind it, then replies with the task as stored.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from google.protobuf.json_format import MessageToDict
from starlette.responses import JSONResponse, Response

from anyagentd.ops import owns

from ..front import rpc_error
from ..principals import OPERATOR
from .state import INPUT_REQUIRED, OPEN, TERMINAL

if TYPE_CHECKING:
    from ..command.dispatch import CommandDispatcher
    from ..principals import Principal
    from ..workflows.runner import WorkflowRunner
    from .feed import TaskFeed


class RunTasks:
    """The tasks of ``runner``'s runs: ``dispatcher`` writes them (and knows which task follows which run: its
    ``run_tasks``), ``feed`` reads them as stored, ``spawn`` (a task group's ``start_soon``) runs the writers of
    the resumed runs' tasks (:meth:`follow_resumed`)."""

    def __init__(
        self, runner: WorkflowRunner, dispatcher: CommandDispatcher, feed: TaskFeed, spawn: Callable[..., Any]
    ) -> None:
        self.runner = runner
        self.dispatcher = dispatcher
        self.feed = feed
        self.spawn = spawn

    async def answer(self, principal: Principal, request_id: Any, params: dict[str, Any]) -> Response | None:
        """A SendMessage naming a run's task: the answer to its waiting ``ask`` step (a DataPart with the wire's
        Answer JSON, or allow/deny/… text), answered with the task once it no longer waits (30 s at most); or, as
        for a conversation task (:meth:`..executor.ConversationExecutor._answer`), something that is not an answer:
        the task stays INPUT_REQUIRED with a status saying why and what is expected, the run still waits. Either
        way the message joins the task's history. Another principal's task is -32001; a run that waits for no
        answer is -32004. ``None`` when the message names no run's task (the SDK's handler serves it)."""
        message = params.get("message")
        if not isinstance(message, dict):
            return None
        tracked = self.dispatcher.run_tasks.get(message.get("taskId") or "")
        if tracked is None:
            return None
        run_id, owner = tracked
        from a2a.types import Message
        from google.protobuf.json_format import ParseDict

        from anyagentd.model import REQUEST
        from anyagentd.ops import Progress

        from ..translate import answer_of, request_text

        task_id = message["taskId"]
        if not owns(principal, owner.id):
            return rpc_error(request_id, -32001, f"Task not found: {task_id}", reason="TASK_NOT_FOUND")
        runner = self.runner
        waiting = runner.awaiting_input(run_id)
        if waiting is None:
            return rpc_error(request_id, -32004, f"run {run_id} waits for no answer", reason="UNSUPPORTED_OPERATION")
        request = REQUEST.validate_python(waiting["request"])
        answer = answer_of(ParseDict(message, Message(), ignore_unknown_fields=True), request)
        if isinstance(answer, str):
            said = Progress("input_required", text=f"Not an answer: {answer}. {request_text(request)}")
            await self.dispatcher.note(task_id, said, received=message)
            return await self.reply(request_id, task_id, principal)
        task = self.dispatcher.tracked.get(task_id)
        await self.dispatcher.receive(task_id, message)
        if await runner.answer(run_id, answer) and task is not None:
            with anyio.move_on_after(30):  # the writer stores the step's next state once the agent has the answer
                await task.wait(lambda state: state != INPUT_REQUIRED)
        return await self.reply(request_id, task_id, principal)

    async def cancel(self, principal: Principal, request_id: Any, params: dict[str, Any]) -> Response | None:
        """CancelTask of a run's task, by its owner: the run is cancelled and the task answered once its writer
        stored the end (5 s at most) — the Task itself as the result, as A2A 1.0's CancelTask answers (not wrapped
        like a SendMessage result). ``None`` (the SDK's handler serves it) for any other task, another
        principal's, or a run that ended meanwhile (the SDK refuses to cancel an ended task)."""
        from ..workflows.runner import RunStateRefused

        tracked = self.dispatcher.run_tasks.get(str(params.get("id") or ""))
        if tracked is None:
            return None
        run_id, owner = tracked
        if not owns(principal, owner.id):
            return None
        task = self.dispatcher.tracked.get(params["id"])
        try:
            await self.runner.cancel(run_id, f"cancelled by {principal.id} (CancelTask)")
        except RunStateRefused:
            return None  # it ended meanwhile: the SDK refuses to cancel an ended task
        if task is not None:
            with anyio.move_on_after(5):  # the writer stores the run's end (CANCELED) right after it
                await task.wait(lambda state: state in TERMINAL)
        return await self.reply(request_id, params["id"], principal, wrapped=False)

    async def reply(self, request_id: Any, task_id: str, principal: Principal, *, wrapped: bool = True) -> Response:
        """The stored task ``task_id`` (read as ``principal``) as the JSON-RPC result of request ``request_id``:
        ``{"task": Task}`` as a SendMessage answers (``wrapped``), else the Task itself (CancelTask, GetTask)."""
        task = MessageToDict(await self.feed.get(task_id, principal))
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"task": task} if wrapped else task})

    async def follow_resumed(self) -> None:
        """After a restart: the task of every run whose task is still open follows the run again — a resumed run
        to its end, a run that ended during recovery (a step interrupted with no retry left) at once — going on
        from the stored task (its history kept)."""
        from ..ops.workflow import run_progress
        from ..principals import Principal

        runner = self.runner
        for record in await runner.store.list():
            if not record.task_id:
                continue
            task = await self.feed.get(record.task_id, OPERATOR)
            if task is None:
                continue
            if task.status.state not in OPEN:
                continue  # the task already shows the run's end (a run ended at recovery is brought up to date)
            owner_id = record.principal or OPERATOR.id
            owner = OPERATOR if owner_id == OPERATOR.id else Principal(owner_id, owner_id.split(":", 1)[0])
            op = f"workflow.run:{record.workflow}"
            if "op" in task.metadata:  # a protobuf Struct: `in` and [], no get()
                op = task.metadata["op"]
            self.dispatcher.run_tasks[record.task_id] = (record.id, owner)
            self.spawn(
                partial(
                    self.dispatcher.track,
                    owner,
                    record.task_id,
                    task.context_id,
                    {},
                    op,
                    run_progress(runner, record),
                    resumed=True,
                )
            )


__all__ = ["RunTasks"]
