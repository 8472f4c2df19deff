"""The tasks of task ops, served by the SDK's request handler like a conversation's: a task source each.

A task op (``reply = "task"`` in the command schema) runs before the SDK sees its send — its refusals create
nothing (:mod:`..command.dispatch`) — and is handed over as a :class:`PreparedOp` in the call context's state
(:data:`..calls.HANDOFF`). The SDK then creates the task, stores every update, keeps the history and pushes, exactly as
for a conversation's task; the executor (:class:`..executor.TaskExecutor`) starts the op's task here
(:meth:`OpTasks.start`) and sends a later message or CancelTask of it to its :class:`OpTask` (``answer``,
``cancel``).

An op with a result is one event: its Task, COMPLETED, the result as its artifact. A long-running op (its progress
an async iterator, ``workflow.run``) is followed by its :class:`OpTask`'s writer, which puts every progress on the
event queue of the task's SDK ``ActiveTask`` — the one queue its consumer stores from, between requests too (a run
goes on after a unary send returned at a question). A request that serves the task returns once the task waits for
input or ends, or at once once the drain is requested (the SDK then answers the task as stored).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import BaseModel

from anyagentd.ops import Principal, Progress

from ..calls import HANDOFF
from ..command.extension import COMMAND_URI, RESULT_MEDIA_TYPE
from ..translate import wire_part
from .state import PAUSED, TERMINAL, WORKING, from_progress, move, name, progress_of

if TYPE_CHECKING:
    from a2a.server.agent_execution import RequestContext
    from a2a.server.context import ServerCallContext
    from a2a.server.events import EventQueue

log = logging.getLogger("anyagentd.a2a.command")

ANSWER_WAIT = 30.0
"""Seconds an answer's request waits for the run's next state before answering the task as it stands."""
DRAIN_NOTE = "The daemon is stopping; this task's work is kept and goes on once the daemon is back."
"""The status message of a task op's task still working when the drain answers the request that served it."""
CANCEL_WAIT = 5.0
"""Seconds a CancelTask waits for the run's end before the SDK records CANCELED itself."""


@dataclass(frozen=True)
class EventProgress(Progress):
    """A :class:`Progress` that also shows one engine event: ``event``, the wire's JSON of it, becomes the status
    message's event part (:func:`..translate.wire_part`) after the text, as a conversation task's does
    (``workflow.run``'s ``ask`` step: its ``RequestOpened``)."""

    event: dict[str, Any] | None = None


@dataclass(frozen=True)
class PreparedOp:
    """A task op that ran, handed to the SDK to serve its task: ``task_id`` and ``context_id`` (ours: the op's
    context named the task id before the SDK saw the send), the caller ``principal``, ``metadata`` (``op``,
    ``extension``) and the outcome — ``result`` (an op that answered at once; ``None`` with no result) or
    ``progress`` (a long-running op)."""

    task_id: str
    context_id: str
    principal: Principal
    metadata: dict[str, Any]
    result: BaseModel | None = None
    progress: AsyncIterator[Progress] | None = None


class RunControl(Protocol):
    """What a workflow run's task asks of the runner (:class:`..workflows.runner.WorkflowRunner`)."""

    def awaiting_input(self, run_id: str) -> dict[str, Any] | None: ...

    async def asked(self, run_id: str) -> dict[str, Any] | None: ...

    async def answer(self, run_id: str, answer: Any) -> bool: ...

    async def cancel(self, run_id: str, reason: str) -> Any: ...

    async def get(self, run_id: str) -> Any: ...


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def result_json(value: BaseModel | None) -> Any:
    """An op's result model as JSON (its aliases; ``None`` for none)."""
    return None if value is None else value.model_dump(mode="json", by_alias=True)


def data_part(value: Any) -> dict[str, Any]:
    """A DataPart (proto3 JSON) of the command extension: ``value`` as ``application/json``."""
    return {"data": value, "mediaType": RESULT_MEDIA_TYPE}


def result_artifact(task_id: str, result: BaseModel | None) -> dict[str, Any]:
    """A task op's result as its task's artifact ``<taskId>.result`` (proto3 JSON; ``extensions`` naming the
    command URI), as the command schema gives it."""
    return {
        "artifactId": f"{task_id}.result",
        "name": f"{task_id}.result",
        "parts": [data_part(result_json(result))],
        "extensions": [COMMAND_URI],
    }


class OpTask:
    """The task of one long-running op: its writer puts every :class:`Progress` of ``progress`` on the task's SDK
    event queue (given by the first request that serves it) until a terminal one. ``run_id`` is the workflow run
    behind it once its progress names one (answers and cancels go to ``runs``); ``released()`` returns once the
    drain is requested (a request serving the task answers then, with the task as stored)."""

    def __init__(
        self,
        prepared: PreparedOp,
        *,
        runs: RunControl | None,
        released: Callable[[], Awaitable[None]],
        forget: Callable[[str], None],
    ) -> None:
        self.task_id = prepared.task_id
        self.context_id = prepared.context_id
        self.principal = prepared.principal
        self.metadata = dict(prepared.metadata)
        self.progress = prepared.progress
        self.runs = runs
        self.released = released
        self.forget = forget
        self.run_id: str | None = prepared.metadata.get("run")
        self.state: int = WORKING
        self.stops = 0  # how many times the task stopped (waits for input, or ended): what a request waits for
        self.ended = False
        self.queue: EventQueue | None = None
        self.last_data: Any = None  # the last progress's data: kept by the drain's status
        self._changed = anyio.Event()
        self._lock = anyio.Lock()  # one status at a time: the writer's and a request's

    # -- what the executor calls --------------------------------------------------------------------------------

    async def start(self, queue: EventQueue, spawn: Callable[..., Any], initial: Task | None) -> None:
        """Serve the first request: put ``initial`` (the new task; ``None``: a restart follows a stored one) on
        ``queue``, start the writer in ``spawn`` and return once the task stops or the drain is requested."""
        self.queue = queue
        if initial is not None:
            await queue.enqueue_event(initial)
        seen = self.stops
        spawn(self._write_all)
        await self._until_stopped(seen)

    async def answer(self, context: RequestContext, queue: EventQueue) -> None:
        """A message to the task (SendMessage with its ``taskId``): the answer to the run's waiting ``ask`` step (a
        DataPart with the wire's Answer JSON, or allow/deny/… text); the request returns once the task stops again
        (:data:`ANSWER_WAIT` at most). Something that is not an answer keeps the task waiting, its status saying
        why and what is expected, as for a conversation task."""
        from anyagentd.model import REQUEST

        from ..translate import answer_of, request_text

        self.queue = queue
        waiting = self.runs.awaiting_input(self.run_id) if self.runs is not None and self.run_id else None
        if waiting is None:
            return  # it stopped waiting meanwhile (the send checks refuse a message to a task that waits for none)
        request = REQUEST.validate_python(waiting["request"])
        assert context.message is not None
        answer = answer_of(context.message, request)
        if isinstance(answer, str):
            async with self._lock:
                await self._put(Progress("input_required", text=f"Not an answer: {answer}. {request_text(request)}"))
            return
        seen = self.stops
        assert self.runs is not None and self.run_id is not None
        from ..workflows.runner import EngineUnavailable

        try:
            answered = await self.runs.answer(self.run_id, answer)
        except EngineUnavailable as err:  # nothing reached the agent: the task keeps waiting, saying why
            async with self._lock:
                await self._put(
                    Progress(
                        "input_required",
                        text=f"The answer did not reach the agent: {err.message}. "
                        f"Send it again. {request_text(request)}",
                    )
                )
            return
        if answered:
            with anyio.move_on_after(ANSWER_WAIT):  # the writer stores the step's next state once the agent has it
                await self._until_stopped(seen)

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        """CancelTask of the task: its run is cancelled and the request returns once the writer put the run's end
        (:data:`CANCEL_WAIT` at most; past it, or with no run behind the task, the SDK records CANCELED)."""
        from ..workflows.runner import RunStateRefused

        if self.runs is None or self.run_id is None:
            return
        principal = context.call_context.state.get("principal") if context.call_context else None
        seen = self.stops
        try:
            await self.runs.cancel(self.run_id, f"cancelled by {getattr(principal, 'id', '?')} (CancelTask)")
        except RunStateRefused:
            return  # it ended meanwhile: its end is on its way
        with anyio.move_on_after(CANCEL_WAIT):
            while not (self.ended or self.state in TERMINAL):
                await self._until_stopped(seen)
                seen = self.stops

    # -- the writer ---------------------------------------------------------------------------------------------

    async def _until_stopped(self, seen: int) -> None:
        """Return once the task stopped after ``seen`` stops (waits for input, or ended), its writer ended, or the
        drain was requested — then, the task still working, its status says so first (:data:`DRAIN_NOTE`, the
        last progress's data kept): the request serving it answers with the task as it stands, a stream's last
        frame says why it ends."""
        released = False

        async def stopped() -> None:
            while self.stops == seen and not self.ended:
                await self._changed.wait()

        async with anyio.create_task_group() as tg:

            async def release() -> None:
                nonlocal released
                await self.released()
                released = True
                tg.cancel_scope.cancel()

            tg.start_soon(release)
            await stopped()
            tg.cancel_scope.cancel()
        if released and self.stops == seen and not self.ended:
            async with self._lock:
                await self._put(Progress(progress_of(self.state), text=DRAIN_NOTE, data=self.last_data))

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _write_all(self) -> None:
        """Put every progress on the queue until a terminal one; a failing op ends its task FAILED, never the
        daemon; a progress whose state may not follow the last (:func:`.state.move`) fails the task too."""
        assert self.progress is not None
        try:
            async for step in self.progress:
                if step.data and "run" in step.data:
                    self.run_id = str(step.data["run"])
                    self.metadata["run"] = self.run_id
                async with self._lock:
                    await self._put(step)
                if self.state in TERMINAL:
                    break
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as err:  # noqa: BLE001 - a failing op ends its task FAILED, never the daemon
            log.exception("op %s failed", self.metadata.get("op"))
            if self.state not in TERMINAL:
                try:
                    async with self._lock:
                        await self._put(Progress("failed", text=f"{type(err).__name__}: {err}"))
                except Exception:  # noqa: BLE001 - the task's queue is closed: the SDK ended the task
                    pass
        finally:
            self.ended = True
            self.forget(self.task_id)
            self._changed_now()

    async def _put(self, step: Progress) -> None:
        """Put ``step`` on the task's queue as its next status (its result first, as its artifact). Raises
        :class:`.state.MoveRefused` when the step's state may not follow the task's."""
        assert self.queue is not None
        state = move(self.state, from_progress(step.state))
        parts = [{"text": step.text}] if step.text else []
        if isinstance(step, EventProgress) and step.event is not None:
            parts.append(MessageToDict(wire_part(step.event)))
        if step.data is not None:
            parts.append(data_part(step.data))
            self.last_data = step.data
        status: dict[str, Any] = {"state": name(state), "timestamp": now()}
        if parts:
            status["message"] = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_AGENT",
                "taskId": self.task_id,
                "contextId": self.context_id,
                "parts": parts,
            }
        if step.result is not None:
            await self.queue.enqueue_event(self._artifact(step.result))
        event = TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=ParseDict(status, TaskStatus())
        )
        event.metadata.update(self.metadata)
        await self.queue.enqueue_event(event)
        self.state = state
        if state in PAUSED or state in TERMINAL:
            self.stops += 1
        self._changed_now()

    def _artifact(self, result: BaseModel) -> TaskArtifactUpdateEvent:
        return ParseDict(
            {
                "taskId": self.task_id,
                "contextId": self.context_id,
                "lastChunk": True,
                "artifact": result_artifact(self.task_id, result),
            },
            TaskArtifactUpdateEvent(),
        )


class PreparedIds(SimpleRequestContextBuilder):
    """The SDK's request context builder, with a handed-on task op's ids: its task is the one the op already knows
    (``OpContext.task_id``), in the context the dispatcher chose."""

    async def build(
        self,
        context: ServerCallContext,
        params: Any = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        prepared = context.state.get(HANDOFF) if context is not None else None
        if isinstance(prepared, PreparedOp) and task_id is None:
            task_id, context_id = prepared.task_id, prepared.context_id
        return await super().build(context, params, task_id, context_id, task)


class OpTasks:
    """The open tasks of long-running ops, by task id: what the executor sends their messages and cancels to.
    ``runs`` is the workflow runner (``None`` without workflows), ``spawn`` a task group's ``start_soon`` (the
    writers run there), ``released()`` returns once the drain is requested."""

    def __init__(
        self, runs: RunControl | None, spawn: Callable[..., Any], released: Callable[[], Awaitable[None]]
    ) -> None:
        self.runs = runs
        self.spawn = spawn
        self.released = released
        self.open: dict[str, OpTask] = {}

    def get(self, task_id: str) -> OpTask | None:
        return self.open.get(task_id)

    def _forget(self, task_id: str) -> None:
        self.open.pop(task_id, None)

    async def start(self, prepared: PreparedOp, message: Message | None, queue: EventQueue) -> None:
        """Serve a task op's new task on ``queue``: COMPLETED with its result at once, or WORKING and followed by
        its :class:`OpTask` (see :meth:`OpTask.start`)."""
        task = self.first_task(prepared, message)
        if prepared.progress is None:
            await queue.enqueue_event(task)
            return
        source = OpTask(prepared, runs=self.runs, released=self.released, forget=self._forget)
        self.open[prepared.task_id] = source
        await source.start(queue, self.spawn, task)

    async def follow(self, prepared: PreparedOp, queue: EventQueue) -> None:
        """After a restart: follow the stored, still open task of ``prepared`` (a resumed run's) on ``queue``."""
        source = OpTask(prepared, runs=self.runs, released=self.released, forget=self._forget)
        self.open[prepared.task_id] = source
        await source.start(queue, self.spawn, None)

    @staticmethod
    def first_task(prepared: PreparedOp, message: Message | None) -> Task:
        """The op's task as it starts: WORKING (a long-running op) or COMPLETED with the result as its artifact
        (``<taskId>.result``, no artifact for an op whose result schema is ``false``), the send's message its
        history, ``metadata`` the op's."""
        completed = prepared.progress is None
        task: dict[str, Any] = {
            "id": prepared.task_id,
            "contextId": prepared.context_id,
            "metadata": dict(prepared.metadata),
            "status": {"state": name(from_progress("completed" if completed else "working")), "timestamp": now()},
        }
        if completed and prepared.result is not None:
            task["artifacts"] = [result_artifact(prepared.task_id, prepared.result)]
        parsed = ParseDict(task, Task())
        if message is not None:
            first = Message()
            first.CopyFrom(message)
            first.task_id = prepared.task_id
            first.context_id = prepared.context_id
            parsed.history.append(first)
        return parsed


__all__ = ["PreparedIds", "EventProgress", "OpTask", "OpTasks", "PreparedOp", "RunControl"]
