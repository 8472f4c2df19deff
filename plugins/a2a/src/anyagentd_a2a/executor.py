"""The a2a-sdk ``AgentExecutor`` over :mod:`.conversations`.

``execute``: a message that starts a task (no stored task yet) becomes a prompt of its conversation — (owner,
contextId), the owner being the caller's principal id — and the task is served until it is terminal or waits for
input. A message naming a task that waits for input answers its open request (:func:`.translate.answer_of`); one
that is not an answer keeps the task waiting and says why. An answer to a task a restart left waiting (``parked``)
resumes the agent's conversation, or — the agent never having saved it — replays the turn in a fresh session when
:func:`replay_refusal` allows (``_answer_parked``). ``cancel``: dequeue or cancel the turn, then deliver the task's
end (bounded by ``CANCEL_GRACE``; past it the SDK records CANCELED itself).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from anyagentd.errors import AnyagentError, ResumeFailed

from .calls import HANDOFF
from .conversations import Conversations, ReplayRefused, TaskRun
from .tasks.optasks import OpTasks, PreparedOp
from .tasks.state import TERMINAL
from .translate import (
    PromptIn,
    agent_message,
    answer_of,
    asking_message,
    fetch_url_parts,
    opened_request,
    parked_request,
    prompt_of,
    request_text,
    resumed_answer_prompt,
)

log = logging.getLogger("anyagentd.a2a")

CANCEL_GRACE = 15.0
"""Seconds ``cancel`` waits for the agent to confirm before leaving the task to the SDK's own CANCELED."""

REPLAY_NOTE = (
    "The daemon restarted while this task waited for input, and the agent had never saved this "
    "conversation's session, so it could not be resumed: this turn is replayed in a fresh agent "
    "conversation, and the answer given is applied when the agent asks again."
)
"""The status message (with ``metadata.freshSession``) of a task whose turn is replayed (:func:`replay_refusal`)."""


def replay_refusal(task: Task, conversation_tasks: list[Task]) -> str | None:
    """Why ``task`` — waiting for input when the daemon stopped, its agent session never saved — cannot have its
    turn replayed in a fresh session; ``None`` when it can. ``conversation_tasks``: every stored task of its
    conversation (itself included).

    The rule (``plugins/a2a/README.md``, "Durability"): only a conversation's first and only turn is replayed, and
    only up to its first question. So the conversation has no other task (apart from commands, whose metadata
    names an ``op``: they never prompt the agent) — replaying an earlier turn would run its side effects again,
    and not replaying it would leave the agent without it — and the task asked nothing before the question left
    open (a replay would ask that again, and only the last answer is stored with the task). The turn's own steps
    before its question (e.g. a file it read) run again."""
    others = [t for t in conversation_tasks if t.id != task.id and "op" not in t.metadata]
    if others:
        return (
            f"only a conversation's first turn is replayed, and this conversation has {len(others)} other "
            f"task(s) (replaying them would run what they did again; skipping them would lose them)"
        )
    if not any(m.role == Role.ROLE_USER for m in task.history):
        return "the task's prompt is not recorded"
    asking = asking_message(task)
    open_id = _request_id(asking) if asking is not None else None
    asked = {_request_id(m) for m in task.history} - {None, open_id}
    if asked:
        return (
            f"the turn had asked {len(asked)} other question(s) before this one; a replay would ask them again, "
            "and their answers are not kept"
        )
    return None


def _request_id(message: Any) -> str | None:
    """The id of the request a ``RequestOpened`` event part of ``message`` opens (None: no such part)."""
    opened = opened_request(message)
    request = next(iter(opened.values()), None) if opened else None
    return str(request["id"]) if isinstance(request, dict) and request.get("id") else None


def owner_of(context: RequestContext) -> str:
    return context.call_context.user.user_name


class ConversationExecutor(AgentExecutor):
    """Runs each A2A task as one prompt of its conversation; see the module docstring."""

    def __init__(
        self,
        conversations: Conversations,
        *,
        allow_private_urls: bool = False,
        parked: dict[str, tuple[str, str]] | None = None,
        parents: Any = None,
        tasks_of: Callable[[str, str], Awaitable[list[Task]]] | None = None,
        ops: OpTasks | None = None,
    ) -> None:
        """``parked``: the tasks a restart left waiting for input (task id → (owner, contextId)); ``parents``: the
        parent daemons reported to; ``tasks_of(owner, contextId)``: a conversation's stored tasks (the store's
        ``tasks_of``), read before a turn is replayed (:func:`replay_refusal`; without it none is); ``ops``: the tasks of
        task ops (:mod:`.tasks.optasks`), started from the op the front handed on and answered and cancelled
        there."""
        self.conversations = conversations
        self.ops = ops
        self.tasks_of = tasks_of
        self.allow_private_urls = allow_private_urls
        self.parked = parked if parked is not None else {}
        self.parents = parents  # subagents.reports.Parents: a parent daemon's subagent is reported to it

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        handoff = context.call_context.state.get(HANDOFF) if context.call_context is not None else None
        if isinstance(handoff, PreparedOp) and self.ops is not None:
            if task is None:  # a task op that ran: its new task
                await self.ops.start(handoff, context.message, event_queue)
                return
            if context.message is None:  # a restart follows its stored task again (RunTasks.follow_resumed)
                await self.ops.follow(handoff, event_queue)
                return
        if task is None:
            await self._start(context, event_queue)
            return
        if task.status.state in TERMINAL:
            return  # it ended while this message waited its turn (two answers at once): nothing to answer
        source = self.ops.get(task.id) if self.ops is not None else None
        if source is not None:  # an op's task: a message to it is an answer
            await source.answer(context, event_queue)
            return
        if "op" in task.metadata:
            return  # an op's task whose writer has ended (or not yet started again after a restart): as stored
        run = self.conversations.runs.get(task.id)
        if run is None and task.id in self.parked:
            await self._answer_parked(task, context, event_queue)
            return
        if run is None:
            await _status(
                event_queue, task, TaskState.TASK_STATE_FAILED, "This task's turn is no longer running in this daemon."
            )
            return
        if run.request is not None:
            await self._answer(run, context)
        await run.drain(event_queue.enqueue_event)

    async def _start(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        conversation = self.conversations.conversation(owner_of(context), context.context_id)
        ticket = conversation.ticket()  # before any await: prompts keep the order their messages arrived in
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            history=[context.message],
        )
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
            run.status(
                TaskState.TASK_STATE_INPUT_REQUIRED, [Part(text=f"Not an answer: {answer}. {request_text(request)}")]
            )
            return
        session = run.conversation.session
        try:
            await session.answer(request.value.id, answer)
        except AnyagentError as err:
            run.status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                [Part(text=f"The answer was refused: {err.message}. {request_text(request)}")],
            )

    async def _answer_parked(self, task: Task, context: RequestContext, event_queue: EventQueue) -> None:
        """An answer to a request left open by a daemon that stopped; the task follows the turn that gets it.

        The agent's conversation is resumed with its token and told the request and its answer as the next prompt
        (:func:`.translate.resumed_answer_prompt`); if the resumed agent asks the same again, the answer is applied
        to that request (``TaskRun.carried``). Where the agent never saved the session (``ResumeFailed``
        ``never_saved``: it was killed before writing it, e.g. within a second of the first prompt), the turn is
        replayed in a fresh agent session when :func:`replay_refusal` allows it: the task's own prompt is given
        again, the agent asks again and the stored answer is applied (anything else it asks first, or a turn that
        ends without asking, fails the task); the task's status says the conversation was reopened afresh
        (``metadata.freshSession``). Where the agent cannot resume and the turn is not replayed, the task fails
        saying why."""
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

        async def replay(err: ResumeFailed) -> PromptIn:
            return await self._replay(task, run, err)

        try:
            await conversation.prompt(run, prompt, conversation.ticket(), opening="require_resume", replay=replay)
        except ReplayRefused as refused:
            log.warning(
                "task %s: the agent never saved its session, and the turn is not replayed: %s", task.id, refused
            )
            run.fail(
                f"The daemon restarted while this task waited for input, and the agent had never saved its "
                f"conversation, so it could not be resumed; the turn was not replayed in a fresh one either: "
                f"{refused}. The answer was not delivered."
            )
        except AnyagentError as err:
            log.warning("task %s: the conversation could not resume: %s: %s", task.id, err.kind, err.message)
            run.fail(
                f"The daemon restarted while this task waited for input, and the agent's conversation could "
                f"not be resumed ({err.kind}: {err.message}), so the answer was not delivered."
            )
        await run.drain(event_queue.enqueue_event)

    async def _replay(self, task: Task, run: TaskRun, err: ResumeFailed) -> PromptIn:
        """The prompt that replays ``task``'s turn in a fresh session (the message that started the task, its files
        saved — or fetched — again), once :func:`replay_refusal` finds nothing against it; marks ``run`` replayed and
        has the conversation's next task status say it starts afresh. Raises :class:`ReplayRefused` saying why
        not."""
        conversation = run.conversation
        if self.tasks_of is None:
            raise ReplayRefused("the conversation's tasks cannot be read here")
        try:
            stored = await self.tasks_of(conversation.owner, conversation.context_id)
        except Exception as problem:  # noqa: BLE001 - the store's driver error: the task fails saying so
            log.warning("task %s: reading its conversation's tasks failed: %s", task.id, problem)
            raise ReplayRefused(f"the conversation's tasks could not be read ({type(problem).__name__})") from None
        why = replay_refusal(task, stored)
        if why is not None:
            raise ReplayRefused(why)
        first = next(m for m in task.history if m.role == Role.ROLE_USER)  # replay_refusal checked there is one
        try:
            fetched = await fetch_url_parts(first, allow_private=self.allow_private_urls)
            prompt = prompt_of(first, conversation.files_dir, fetched)
        except (ValueError, OSError) as problem:
            raise ReplayRefused(f"its prompt cannot be given again: {problem}") from None
        run.replayed = True
        conversation.fresh_note = REPLAY_NOTE
        log.info(
            "task %s: the agent never saved its session (%s); replaying the turn in a fresh one", task.id, err.message
        )
        return prompt

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        source = self.ops.get(context.task_id or "") if self.ops is not None else None
        if source is not None:
            await source.cancel(context, event_queue)
            return
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
    status = TaskStatus(
        state=state, message=agent_message([Part(text=text)], context_id=task.context_id, task_id=task.id)
    )
    status.timestamp.GetCurrentTime()
    await queue.enqueue_event(TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status))
