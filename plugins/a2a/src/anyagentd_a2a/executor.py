"""The a2a-sdk ``AgentExecutor`` over :mod:`.conversations`.

``execute``: a message that starts a task (no stored task yet) becomes a prompt of its conversation — (owner,
contextId), the owner being the caller's principal id — and the task is served until it is terminal or waits for
input. A message naming a task that waits for input answers its open request (:func:`.translate.answer_of`); one
that is not an answer keeps the task waiting and says why. ``cancel``: dequeue or cancel the turn, then deliver the
task's end (bounded by ``CANCEL_GRACE``; past it the SDK records CANCELED itself).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Part, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from anyagentd.errors import AnyagentError
from google.protobuf.json_format import MessageToDict

from .conversations import Conversations, TaskRun
from .translate import (
    PromptIn,
    agent_message,
    answer_of,
    fetch_url_parts,
    parked_request,
    prompt_of,
    request_text,
    resumed_answer_prompt,
)

log = logging.getLogger("anyagentd.a2a")

CANCEL_GRACE = 15.0
"""Seconds ``cancel`` waits for the agent to confirm before leaving the task to the SDK's own CANCELED."""


def owner_of(context: RequestContext) -> str:
    return context.call_context.user.user_name


class ConversationExecutor(AgentExecutor):
    """Runs each A2A task as one prompt of its conversation; see the module docstring."""

    def __init__(self, conversations: Conversations, *, allow_private_urls: bool = False,
                 parked: dict[str, tuple[str, str]] | None = None, parents: Any = None) -> None:  # fmt: skip
        self.conversations = conversations
        self.allow_private_urls = allow_private_urls
        self.parked = parked if parked is not None else {}
        self.parents = parents  # subagents.reports.Parents: a parent daemon's subagent is reported to it

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            await self._start(context, event_queue)
            return
        run = self.conversations.runs.get(task.id)
        if run is None and task.id in self.parked:
            await self._answer_parked(task, context, event_queue)
            return
        if run is None:
            await _status(event_queue, task, TaskState.TASK_STATE_FAILED,
                          "This task's turn is no longer running in this daemon.")  # fmt: skip
            return
        if run.request is not None:
            await self._answer(run, context)
        await run.drain(event_queue.enqueue_event)

    async def _start(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        conversation = self.conversations.conversation(owner_of(context), context.context_id)
        ticket = conversation.ticket()  # before any await: prompts keep the order their messages arrived in
        task = Task(id=context.task_id, context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[context.message])  # fmt: skip
        task.status.timestamp.GetCurrentTime()
        run = self.conversations.new_run(conversation, context.task_id)
        if self.parents is not None and context.message.HasField("metadata"):
            run.report = self.parents.report_for(owner_of(context), MessageToDict(context.message.metadata))
        await event_queue.enqueue_event(task)
        try:
            fetched = await fetch_url_parts(context.message, allow_private=self.allow_private_urls)
            prompt = prompt_of(context.message, conversation.files_dir, fetched)
        except (ValueError, OSError) as err:
            ticket[1].set()
            run.fail(f"The prompt could not be delivered: {err}")
        else:
            try:
                await conversation.prompt(run, prompt, ticket)
            except AnyagentError as err:
                log.warning("task %s failed to start: %s: %s", context.task_id, err.kind, err.message)
                run.fail(f"The prompt could not be delivered: {err.kind}: {err.message}")
        await run.drain(event_queue.enqueue_event)

    async def _answer(self, run: TaskRun, context: RequestContext) -> None:
        request = run.request
        answer = answer_of(context.message, request)
        if isinstance(answer, str):
            run.status(TaskState.TASK_STATE_INPUT_REQUIRED,
                       [Part(text=f"Not an answer: {answer}. {request_text(request)}")])  # fmt: skip
            return
        session = run.conversation.session
        try:
            await session.answer(request.value.id, answer)
        except AnyagentError as err:
            run.status(TaskState.TASK_STATE_INPUT_REQUIRED,
                       [Part(text=f"The answer was refused: {err.message}. {request_text(request)}")])  # fmt: skip

    async def _answer_parked(self, task: Task, context: RequestContext, event_queue: EventQueue) -> None:
        """An answer to a request left open by a daemon that stopped: the agent's conversation is resumed with its
        token (never a fresh session) and told the request and its answer as the next prompt; the task follows that
        turn. Where the agent cannot resume, the task fails saying why."""
        owner, context_id = self.parked[task.id]
        request = parked_request(task)
        conversation = self.conversations.conversation(owner, context_id)
        run = self.conversations.new_run(conversation, task.id)
        answer = answer_of(context.message, request) if request is not None else "the open request is not recorded"
        if isinstance(answer, str):
            self.conversations.runs.pop(task.id, None)  # still parked: the next answer comes here again
            text = f"Not an answer: {answer}." + (f" {request_text(request)}" if request is not None else "")
            await _status(event_queue, task, TaskState.TASK_STATE_INPUT_REQUIRED, text)
            return
        del self.parked[task.id]
        run.carried = (request, answer)
        prompt = PromptIn(resumed_answer_prompt(request, answer), ())
        try:
            await conversation.prompt(run, prompt, conversation.ticket(), require_resume=True)
        except AnyagentError as err:
            log.warning("task %s: the conversation could not resume: %s: %s", task.id, err.kind, err.message)
            run.fail(f"The daemon restarted while this task waited for input, and the agent's conversation could "
                     f"not be resumed ({err.kind}: {err.message}), so the answer was not delivered.")
        await run.drain(event_queue.enqueue_event)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        run = self.conversations.runs.get(context.task_id or "")
        if run is None:
            return
        try:
            await run.conversation.cancel(run)
        except AnyagentError as err:
            log.warning("cancel of task %s: %s", run.task_id, err.message)
        with anyio.move_on_after(CANCEL_GRACE):
            await run.finished.wait()
            await run.drain(event_queue.enqueue_event)


async def _status(queue: EventQueue, task: Task, state: int, text: str) -> None:
    status = TaskStatus(state=state, message=agent_message([Part(text=text)], context_id=task.context_id,
                                                          task_id=task.id))  # fmt: skip
    status.timestamp.GetCurrentTime()
    await queue.enqueue_event(TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status))
