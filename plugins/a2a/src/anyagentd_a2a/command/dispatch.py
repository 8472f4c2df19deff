"""Answering a command: refused in order (:mod:`.envelope`), run as its op, replied to as a Message or a Task.

A ``message`` op answers a Message (ROLE_AGENT, one DataPart ``application/json`` with the op's result,
``extensions`` naming the command URI, ``metadata`` what the result's ``reply_metadata`` adds) and creates no
task; on SendStreamingMessage it is exactly one SSE frame, then the stream ends. A ``task`` op answers a Task
stored in the task store under the caller (so GetTask and ListTasks show it): COMPLETED with one artifact
``<taskId>.result`` (a DataPart, ``extensions`` naming the URI), or without an artifact when the op's result
schema is ``false``. A long-running task op (``workflow.run``) keeps
its task open: each :class:`~anyagentd.ops.Progress` becomes a status update, written through the SDK's
``TaskManager`` (:class:`TrackedTask`: the previous status message moves into the history, as a conversation
task's does), and a unary send returns once the task ends or needs input. The drain releases every reply
that waits on such a task: it answers at once with the task as it stands (``docs/a2a-tasks.md#drain``), and its
writer goes on until the daemon stops. An :class:`~anyagentd.ops.OpError` raised before the task exists is a
JSON-RPC error, and nothing was created.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
from a2a.server.tasks import TaskManager
from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response, StreamingResponse

from anyagentd.ops import (
    InvalidOpArguments,
    InvalidOpState,
    OpContext,
    OpError,
    OpNotPermitted,
    OpTable,
    Principal,
    Progress,
    ResultModel,
    TargetNotFound,
)

from ..observe.audit import audit, audited
from ..tasks.state import TERMINAL, WORKING, from_progress, move, name
from ..translate import wire_part
from .envelope import (
    COMMAND_URI,
    ERROR_DOMAIN,
    INVALID_PARAMS,
    PERMISSION_DENIED,
    RESULT_MEDIA_TYPE,
    TASK_NOT_FOUND,
    Command,
    CommandRefusal,
    attempted_arguments,
    dumped,
    resolve_command,
)

if TYPE_CHECKING:
    from ..tasks.feed import TaskFeed
    from .face import CommandFace

log = logging.getLogger("anyagentd.a2a.command")

STREAMING = "SendStreamingMessage"


@dataclass(frozen=True)
class EventProgress(Progress):
    """A :class:`Progress` that also shows one engine event: ``event``, the wire's JSON of it, becomes the status
    message's event part (:func:`.translate.wire_part`) after the text, as a conversation task's does
    (``workflow.run``'s ``ask`` step: its ``RequestOpened``)."""

    event: dict[str, Any] | None = None


@dataclass
class TrackedTask:
    """A long-running op's task, held by its one writer (:meth:`CommandDispatcher.track`) until it ends.

    Every write goes through ``manager``, the SDK's ``TaskManager`` over the daemon's store: a status update moves
    the previous status message into the history and a message received joins it, as for a conversation task
    (``TaskManager.save_task_event`` / ``update_with_message``). ``state`` is the last state saved; :meth:`wait`
    wakes on every save, at the end (``ended``) and once ``released()`` returns (the drain)."""

    manager: TaskManager
    principal: Principal
    metadata: dict[str, Any]
    released: Callable[[], Awaitable[None]]
    state: int = WORKING
    task: Task | None = None
    ended: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    _saved: anyio.Event = field(default_factory=anyio.Event)

    def saved(self, task: Task | None) -> None:
        """Record ``task`` (what the manager just saved) and wake every :meth:`wait`."""
        if task is not None:
            self.task = task
            self.state = task.status.state
        self._saved.set()
        self._saved = anyio.Event()

    async def wait(self, done: Callable[[int], bool]) -> int:
        """The task's state once ``done(state)`` holds, the task is no longer tracked (its writer ended) or the
        drain released its waiters (``released``): the state as it stands."""

        async def saved() -> None:
            while not (done(self.state) or self.ended):
                await self._saved.wait()

        await until_released(self.released, saved)
        return self.state


async def until_released(released: Callable[[], Awaitable[None]], wait: Callable[[], Awaitable[None]]) -> bool:
    """Await ``wait()`` unless ``released()`` returns first (the drain was requested: at once if it was); whether
    ``wait()`` returned. What a reply waiting on a task awaits, so that the drain answers it as the task stands."""
    finished = False
    async with anyio.create_task_group() as tg:

        async def release() -> None:
            await released()
            tg.cancel_scope.cancel()

        tg.start_soon(release)
        await wait()
        finished = True
        tg.cancel_scope.cancel()
    return finished


def _audit(command: Command, principal: Principal, outcome: str, reason: str | None = None) -> None:
    """The audit line of an operator op (:mod:`.observe.audit`): here, so every op of that floor is audited once,
    whatever its family, with its arguments (:func:`.envelope.dumped`; redacted by :func:`.observe.audit.audit`)."""
    if audited(command.op.floor):
        audit(command.op.name, principal.id, outcome, args=dumped(command.args), reason=reason)


def _audit_refusal(refusal: CommandRefusal, table: OpTable, principal: Principal) -> None:
    """The audit line of an operator op refused before it ran (:func:`.envelope.resolve_command`), with the
    arguments it was sent as a run of it would show them (:func:`.envelope.attempted_arguments`)."""
    op = table.get(refusal.metadata.get("op", ""))
    if op is not None and audited(op.floor):
        audit(op.name, principal.id, "refused", args=attempted_arguments(op, refusal.envelope), reason=refusal.reason)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def refusal_of(err: OpError, op: str) -> CommandRefusal:
    """An op's own refusal as the JSON-RPC error ``docs/commands.md`` gives it."""
    if isinstance(err, TargetNotFound):
        return CommandRefusal(TASK_NOT_FOUND, "NOT_FOUND", err.message, metadata={"op": op})
    if isinstance(err, InvalidOpArguments):
        return CommandRefusal(
            INVALID_PARAMS, "INVALID_COMMAND_ARGS", err.message, violations=err.violations, metadata={"op": op}
        )
    if isinstance(err, OpNotPermitted):
        return CommandRefusal(PERMISSION_DENIED, "PERMISSION_DENIED", err.message, metadata={"op": op}, http_status=403)
    if isinstance(err, InvalidOpState):
        return CommandRefusal(INVALID_PARAMS, "INVALID_STATE", err.message, metadata={"op": op})
    return CommandRefusal(-32603, err.reason, err.message, metadata={"op": op})


def _json(value: BaseModel | None) -> Any:
    return None if value is None else value.model_dump(mode="json", by_alias=True)


def data_part(value: Any) -> dict[str, Any]:
    return {"data": value, "mediaType": RESULT_MEDIA_TYPE}


class CommandDispatcher:
    """Runs commands for the front. Takes the start-up :class:`OpTable`, the ``face`` ops act on, ``switches()``
    (the configuration switches in force), ``feed`` (:class:`~..tasks.feed.TaskFeed`: stores an op's finished
    task, gives the SDK's TaskManager a long-running op's task is written through, and tells its push
    subscribers), ``spawn`` (runs a long-running op's remainder in the daemon's task group) and ``released``
    (returns once the replies waiting on a task are to be answered with the task as it stands: the drain,
    :meth:`~..lifecycle.Lifecycle.drain_requested`)."""

    def __init__(
        self,
        table: OpTable,
        face: CommandFace,
        *,
        switches: Callable[[], Mapping[str, bool]],
        feed: TaskFeed,
        spawn: Callable[..., Any],
        released: Callable[[], Awaitable[None]],
    ) -> None:
        self.table = table
        self.face = face
        self.switches = switches
        self.feed = feed
        self.spawn = spawn
        self.released = released
        self.run_tasks: dict[str, tuple[str, Principal]] = {}
        """Open tasks of long-running ops that follow a workflow run: task id → (run id, its principal)."""
        self.tracked: dict[str, TrackedTask] = {}
        """Every open task of a long-running op, by task id (:meth:`track` adds and removes it)."""

    async def respond(
        self, principal: Principal, request_id: Any, method: str, params: Mapping[str, Any], activated: list[str]
    ) -> Response | None:
        """The response to a send carrying a command, or ``None`` when it carries none. A workflow-declared
        command (``command = "fix"`` on a workflow) is ``workflow.run`` of that workflow with its arguments as
        the inputs."""
        params = self._expand_workflow_command(params)
        try:
            command = resolve_command(
                params, activated_uris=activated, table=self.table, principal=principal, switches=self.switches()
            )
        except CommandRefusal as refusal:
            self.face.log.emit("command.refused", "warning", reason=refusal.reason, principal=principal.id)
            _audit_refusal(refusal, self.table, principal)
            return self._error(request_id, refusal)
        if command is None:
            return None
        message = params["message"]
        context_id = message.get("contextId") or str(uuid.uuid4())
        task_id = str(uuid.uuid4()) if command.op.reply == "task" else None
        context = OpContext(
            principal=principal, runtime=self.face.runtime, face=self.face, task_id=task_id, switches=self.switches()
        )
        try:
            outcome = await command.op.run(context, command.args)
        except OpError as err:
            self.face.log.emit(
                "command.refused", "warning", op=command.op.name, reason=err.reason, principal=principal.id
            )
            _audit(command, principal, "refused", err.reason)
            return self._error(request_id, refusal_of(err, command.op.name))
        except Exception as err:  # noqa: BLE001 - an op's bug is a JSON-RPC error, never a 500 or a dead daemon
            log.exception("op %s failed", command.op.name)
            _audit(command, principal, "failed", type(err).__name__)
            return self._error(
                request_id,
                CommandRefusal(
                    -32603,
                    "OP_FAILED",
                    f"{command.op.name} failed: {type(err).__name__}",
                    metadata={"op": command.op.name},
                ),
            )
        self.face.log.emit("command.ran", op=command.op.name, principal=principal.id)
        _audit(command, principal, "started" if isinstance(outcome, AsyncIterator) else "ok")
        if command.op.reply == "message":
            reply = {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "contextId": context_id,
                    "role": "ROLE_AGENT",
                    "parts": [data_part(_json(outcome))],
                    "extensions": [COMMAND_URI],
                }
            }
            extra = outcome.reply_metadata() if isinstance(outcome, ResultModel) else None
            if extra:
                reply["message"]["metadata"] = extra
            return self._result(request_id, method, [reply])
        assert task_id is not None
        if isinstance(outcome, AsyncIterator):
            immediate = (params.get("configuration") or {}).get("returnImmediately") is True
            return await self._follow(
                principal, request_id, method, command, task_id, context_id, message, outcome, immediate=immediate
            )
        task = self._task(task_id, context_id, message, "completed", result=outcome, op=command.op.name)
        await self.feed.save(task, principal)
        return self._result(request_id, method, [{"task": task}])

    def _expand_workflow_command(self, params: Mapping[str, Any]) -> Mapping[str, Any]:
        commands = {w.command: w.name for w in self.face.workflows.values() if w.command}
        message = params.get("message")
        if not commands or not isinstance(message, dict):
            return params
        parts = []
        for part in message.get("parts") or []:
            data = part.get("data") if isinstance(part, dict) else None
            envelope = data.get("agentd") if isinstance(data, dict) else None
            if isinstance(envelope, dict) and envelope.get("op") in commands and envelope["op"] not in self.table:
                inputs = {k: v for k, v in envelope.items() if k != "op"}
                part = {
                    **part,
                    "data": {
                        **data,
                        "agentd": {"op": "workflow.run", "workflow": commands[envelope["op"]], "inputs": inputs},
                    },
                }
            parts.append(part)
        return {**params, "message": {**message, "parts": parts}}

    # -- tasks --------------------------------------------------------------------------------------------------

    @staticmethod
    def _task(
        task_id: str,
        context_id: str,
        message: Mapping[str, Any],
        state: str,
        *,
        op: str,
        result: BaseModel | None = None,
        text: str | None = None,
        data: Any = None,
    ) -> dict[str, Any]:
        history = dict(message, taskId=task_id, contextId=context_id)
        task: dict[str, Any] = {
            "id": task_id,
            "contextId": context_id,
            "history": [history],
            "metadata": {"op": op, "extension": COMMAND_URI},
            "status": {"state": name(from_progress(state)), "timestamp": now()},
        }
        parts = ([{"text": text}] if text else []) + ([data_part(data)] if data is not None else [])
        if parts:
            task["status"]["message"] = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_AGENT",
                "taskId": task_id,
                "contextId": context_id,
                "parts": parts,
            }
        if result is not None:
            task["artifacts"] = [
                {
                    "artifactId": f"{task_id}.result",
                    "name": f"{task_id}.result",
                    "parts": [data_part(_json(result))],
                    "extensions": [COMMAND_URI],
                }
            ]
        return task

    async def _follow(
        self,
        principal: Principal,
        request_id: Any,
        method: str,
        command: Command,
        task_id: str,
        context_id: str,
        message: Mapping[str, Any],
        progress: AsyncIterator[Progress],
        *,
        immediate: bool = False,
    ) -> Response:
        """Keep a long-running op's task up to date from its progress; answer once it ends or needs input (a
        unary send; at once with ``returnImmediately``), or stream every update (a streaming send). The drain
        (``released``) answers a unary send that still waits with the task as it stands, and ends a stream with
        that task as its last frame. The rest runs on in the daemon."""
        op = command.op.name
        if isinstance(command.args, BaseModel) and "workflow" in type(command.args).model_fields:
            op = f"{op}:{command.args.workflow}"  # type: ignore[attr-defined]
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](256)
        first = anyio.Event()
        self.spawn(self.track, principal, task_id, context_id, message, op, progress, send, first)
        await first.wait()
        if method != STREAMING and immediate:
            first_item = await receive.receive()
            receive.close()
            return self._result(request_id, method, [first_item])
        if method == STREAMING:
            return StreamingResponse(
                self._frames(request_id, receive, task_id, principal), media_type="text/event-stream"
            )
        final: dict[str, Any] | None = None

        async def stopped() -> None:
            nonlocal final
            async for item in receive:
                if "end" in item or "pause" in item:
                    final = item.get("end") or item.get("pause")
                    return

        with receive:
            if not await until_released(self.released, stopped):
                final = await self._standing(task_id, principal)
        return self._result(request_id, method, [{"task": final}])

    async def _standing(self, task_id: str, principal: Principal) -> dict[str, Any]:
        """The task ``task_id`` as it stands: as stored, read as ``principal`` (proto3 JSON)."""
        task = await self.feed.get(task_id, principal)
        return MessageToDict(task) if task is not None else {}

    async def track(
        self,
        principal: Principal,
        task_id: str,
        context_id: str,
        message: Mapping[str, Any],
        op: str,
        progress: AsyncIterator[Progress],
        send: Any = None,
        first: anyio.Event | None = None,
        *,
        resumed: bool = False,
    ) -> None:
        """Store every :class:`Progress` of a long-running op as its task's new status (and offer it to ``send``,
        a live request's stream, while one listens) until a terminal one; a progress whose state may not follow
        the last (:func:`.tasks.state.move`) fails the task. Also what a restart uses to follow a resumed run's
        task again (``resumed``: the stored task, its history included, is where it goes on; no ``send``)."""
        metadata = {"op": op, "extension": COMMAND_URI}
        tracked = TrackedTask(self.feed.manager(principal, task_id, context_id), principal, metadata, self.released)
        self.tracked[task_id] = tracked
        try:
            if resumed:
                tracked.saved(await tracked.manager.get_task())
            else:
                task = ParseDict(self._task(task_id, context_id, message, "working", op=op), Task())
                tracked.saved(await tracked.manager.save_task_event(task))
                if send is not None:
                    send.send_nowait({"task": MessageToDict(tracked.task)})
            if first is not None:
                first.set()
            async for step in progress:
                if step.data and "run" in step.data:
                    metadata["run"] = step.data["run"]
                    self.run_tasks[task_id] = (step.data["run"], principal)
                event, artifact = await self._write(tracked, step)
                if send is not None:
                    _offer(send, {"statusUpdate": MessageToDict(event)})
                    if artifact is not None:
                        _offer(send, {"artifactUpdate": MessageToDict(artifact)})
                    if step.state == "input_required":
                        _offer(send, {"pause": MessageToDict(tracked.task)})
                if tracked.state in TERMINAL:
                    break
        except Exception as err:  # noqa: BLE001 - a failing op ends its task FAILED, never the daemon
            log.exception("op %s failed", op)
            if tracked.task is not None and tracked.state not in TERMINAL:
                event, _ = await self._write(tracked, Progress("failed", text=f"{type(err).__name__}: {err}"))
                if send is not None:
                    _offer(send, {"statusUpdate": MessageToDict(event)})
        finally:
            self.run_tasks.pop(task_id, None)
            self.tracked.pop(task_id, None)
            tracked.ended = True
            tracked.saved(None)
            if first is not None:
                first.set()
            if send is not None:
                _offer(send, {"end": MessageToDict(tracked.task) if tracked.task is not None else {}})
                send.close()

    async def _write(
        self, tracked: TrackedTask, step: Progress
    ) -> tuple[TaskStatusUpdateEvent, TaskArtifactUpdateEvent | None]:
        """Save ``step`` as the tracked task's next status (its result first, as its artifact) through the SDK's
        TaskManager, tell the push subscribers, and return the status update and the artifact update (``None``
        without a result). Raises :class:`.tasks.state.MoveRefused` when the step's state may not follow the
        task's."""
        async with tracked.lock:
            assert tracked.task is not None
            task_id, context_id = tracked.task.id, tracked.task.context_id
            state = move(tracked.state, from_progress(step.state))
            parts = [{"text": step.text}] if step.text else []
            if isinstance(step, EventProgress) and step.event is not None:
                parts.append(MessageToDict(wire_part(step.event)))
            if step.data is not None:
                parts.append(data_part(step.data))
            status: dict[str, Any] = {"state": name(state), "timestamp": now()}
            if parts:
                status["message"] = {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_AGENT",
                    "taskId": task_id,
                    "contextId": context_id,
                    "parts": parts,
                }
            artifact = None
            if step.result is not None:
                artifact = ParseDict(
                    {
                        "taskId": task_id,
                        "contextId": context_id,
                        "lastChunk": True,
                        "artifact": {
                            "artifactId": f"{task_id}.result",
                            "name": f"{task_id}.result",
                            "parts": [data_part(_json(step.result))],
                            "extensions": [COMMAND_URI],
                        },
                    },
                    TaskArtifactUpdateEvent(),
                )
                tracked.saved(await tracked.manager.save_task_event(artifact))
            event = TaskStatusUpdateEvent(
                task_id=task_id, context_id=context_id, status=ParseDict(status, TaskStatus())
            )
            event.metadata.update(tracked.metadata)
            tracked.saved(await tracked.manager.save_task_event(event))
        await self.feed.tell(event)
        return event, artifact

    async def note(self, task_id: str, step: Progress, received: Mapping[str, Any] | None = None) -> Task | None:
        """Write ``step`` on the open task ``task_id`` as :meth:`track` writes its progress, after the message
        ``received`` (proto3 JSON: a follow-up the task was sent) joins its history (``TaskManager``'s
        ``update_with_message``); the task as saved, or ``None`` when no such task is tracked. For an answer the
        task refuses (``Not an answer``): it keeps waiting, saying so, as a conversation task does."""
        tracked = self.tracked.get(task_id)
        if tracked is None or tracked.task is None:
            return None
        if received is not None:
            await self.receive(task_id, received)
        await self._write(tracked, step)
        return tracked.task

    async def receive(self, task_id: str, received: Mapping[str, Any]) -> None:
        """Add the message ``received`` (proto3 JSON) to the open task ``task_id``'s history, the SDK's way
        (``TaskManager.update_with_message``: the status message moves there first, then the message); nothing
        for a task no longer tracked."""
        tracked = self.tracked.get(task_id)
        if tracked is None or tracked.task is None:
            return
        async with tracked.lock:
            message = ParseDict(dict(received), Message(), ignore_unknown_fields=True)
            task = tracked.manager.update_with_message(message, tracked.task)
            tracked.saved(await tracked.manager.save_task_event(task))

    async def _frames(self, request_id: Any, receive: Any, task_id: str, principal: Principal) -> AsyncIterator[bytes]:
        """Every update of a streaming send's task until it ends or needs input; once the drain releases it
        (``released``), the task as it stands as the last frame."""
        async with receive:
            while True:
                got: dict[str, Any] = {}

                async def next_item(got: dict[str, Any] = got) -> None:
                    try:
                        got["item"] = await receive.receive()
                    except anyio.EndOfStream:
                        pass

                if not await until_released(self.released, next_item):
                    yield _sse(request_id, {"task": await self._standing(task_id, principal)})
                    break
                item = got.get("item")
                if item is None or "end" in item or "pause" in item:
                    break
                yield _sse(request_id, item)

    # -- replies ------------------------------------------------------------------------------------------------

    def _result(self, request_id: Any, method: str, results: list[dict[str, Any]]) -> Response:
        if method == STREAMING:

            async def frames() -> AsyncIterator[bytes]:
                for result in results:
                    yield _sse(request_id, result)

            return StreamingResponse(frames(), media_type="text/event-stream")
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": results[-1]})

    @staticmethod
    def _error(request_id: Any, refusal: CommandRefusal) -> Response:
        return JSONResponse(
            {"jsonrpc": "2.0", "id": request_id, "error": refusal.error()}, status_code=refusal.http_status
        )


def _sse(request_id: Any, result: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, ensure_ascii=False)
    return f"data: {body}\n\n".encode()


def _offer(send: Any, item: dict[str, Any]) -> None:
    try:
        send.send_nowait(item)
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # nobody is listening (a unary send already answered): the store has every update


__all__ = ["CommandDispatcher", "ERROR_DOMAIN", "refusal_of"]
