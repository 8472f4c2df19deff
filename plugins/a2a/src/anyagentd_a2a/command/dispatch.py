"""Answering a command: refused in order (:mod:`.envelope`), run as its op, replied to as a Message or a Task.

A ``message`` op answers a Message (ROLE_AGENT, one DataPart ``application/json`` with the op's result,
``extensions`` naming the command URI, ``metadata`` what the result's ``reply_metadata`` adds) and creates no
task; on SendStreamingMessage it is exactly one SSE frame, then the stream ends. A ``task`` op answers a Task
stored in the task store under the caller (so GetTask and ListTasks show it): COMPLETED with one artifact
``<taskId>.result`` (a DataPart, ``extensions`` naming the URI), or without an artifact when the op's result
schema is ``false``. A long-running task op (``workflow.run``) keeps
its task open: each :class:`~anyagentd.ops.Progress` becomes a status update, and a unary send returns once the
task ends or needs input. An :class:`~anyagentd.ops.OpError` raised before the task exists is a JSON-RPC error,
and nothing was created.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import anyio
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

from ..tasks.state import TERMINAL, WORKING, from_progress, move, name
from .envelope import (
    COMMAND_URI,
    ERROR_DOMAIN,
    INVALID_PARAMS,
    PERMISSION_DENIED,
    RESULT_MEDIA_TYPE,
    TASK_NOT_FOUND,
    Command,
    CommandRefusal,
    resolve_command,
)

log = logging.getLogger("anyagentd.a2a.command")

STREAMING = "SendStreamingMessage"

SaveTask = Callable[[dict[str, Any], Principal], Awaitable[None]]
"""Stores a task (proto3 JSON) under its owner; the daemon's bridge to the SDK's task store."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def refusal_of(err: OpError, op: str) -> CommandRefusal:
    """An op's own refusal as the JSON-RPC error ``docs/commands.md`` gives it."""
    if isinstance(err, TargetNotFound):
        return CommandRefusal(TASK_NOT_FOUND, "NOT_FOUND", err.message, metadata={"op": op})
    if isinstance(err, InvalidOpArguments):
        return CommandRefusal(INVALID_PARAMS, "INVALID_COMMAND_ARGS", err.message, violations=err.violations,
                              metadata={"op": op})  # fmt: skip
    if isinstance(err, OpNotPermitted):
        return CommandRefusal(PERMISSION_DENIED, "PERMISSION_DENIED", err.message, metadata={"op": op},
                              http_status=403)  # fmt: skip
    if isinstance(err, InvalidOpState):
        return CommandRefusal(INVALID_PARAMS, "INVALID_STATE", err.message, metadata={"op": op})
    return CommandRefusal(-32603, err.reason, err.message, metadata={"op": op})


def _json(value: BaseModel | None) -> Any:
    return None if value is None else value.model_dump(mode="json", by_alias=True)


def data_part(value: Any) -> dict[str, Any]:
    return {"data": value, "mediaType": RESULT_MEDIA_TYPE}


class CommandDispatcher:
    """Runs commands for the front. Takes the start-up :class:`OpTable`, the ``face`` ops act on, ``switches()``
    (the configuration switches in force), ``save_task`` and ``spawn`` (runs a long-running op's remainder in
    the daemon's task group)."""

    def __init__(self, table: OpTable, face: Any, *, switches: Callable[[], Mapping[str, bool]],
                 save_task: SaveTask, spawn: Callable[..., None]) -> None:  # fmt: skip
        self.table = table
        self.face = face
        self.switches = switches
        self.save_task = save_task
        self.spawn = spawn
        self.run_tasks: dict[str, tuple[str, Principal]] = {}
        """Open tasks of long-running ops that follow a workflow run: task id → (run id, its principal)."""

    async def respond(self, principal: Principal, request_id: Any, method: str, params: Mapping[str, Any],
                      activated: list[str]) -> Response | None:  # fmt: skip
        """The response to a send carrying a command, or ``None`` when it carries none. A workflow-declared
        command (``command = "fix"`` on a workflow) is ``workflow.run`` of that workflow with its arguments as
        the inputs."""
        params = self._expand_workflow_command(params)
        try:
            command = resolve_command(params, activated_uris=activated, table=self.table, principal=principal,
                                      switches=self.switches())  # fmt: skip
        except CommandRefusal as refusal:
            self.face.log.emit("command.refused", "warning", reason=refusal.reason, principal=principal.id)
            return self._error(request_id, refusal)
        if command is None:
            return None
        message = params["message"]
        context_id = message.get("contextId") or str(uuid.uuid4())
        task_id = str(uuid.uuid4()) if command.op.reply == "task" else None
        context = OpContext(principal=principal, runtime=getattr(self.face, "runtime", None), face=self.face,
                            task_id=task_id, switches=self.switches())  # fmt: skip
        try:
            outcome = await command.op.run(context, command.args)
        except OpError as err:
            self.face.log.emit("command.refused", "warning", op=command.op.name, reason=err.reason,
                               principal=principal.id)  # fmt: skip
            return self._error(request_id, refusal_of(err, command.op.name))
        except Exception as err:  # noqa: BLE001 - an op's bug is a JSON-RPC error, never a 500 or a dead daemon
            log.exception("op %s failed", command.op.name)
            return self._error(request_id, CommandRefusal(-32603, "OP_FAILED", f"{command.op.name} failed: "
                                                          f"{type(err).__name__}", metadata={"op": command.op.name}))
        self.face.log.emit("command.ran", op=command.op.name, principal=principal.id)
        if command.op.reply == "message":
            reply = {"message": {"messageId": str(uuid.uuid4()), "contextId": context_id, "role": "ROLE_AGENT",
                                 "parts": [data_part(_json(outcome))], "extensions": [COMMAND_URI]}}  # fmt: skip
            extra = outcome.reply_metadata() if isinstance(outcome, ResultModel) else None
            if extra:
                reply["message"]["metadata"] = extra
            return self._result(request_id, method, [reply])
        assert task_id is not None
        if isinstance(outcome, AsyncIterator):
            immediate = (params.get("configuration") or {}).get("returnImmediately") is True
            return await self._follow(principal, request_id, method, command, task_id, context_id, message, outcome,
                                      immediate=immediate)  # fmt: skip
        task = self._task(task_id, context_id, message, "completed", result=outcome, op=command.op.name)
        await self.save_task(task, principal)
        return self._result(request_id, method, [{"task": task}])

    def _expand_workflow_command(self, params: Mapping[str, Any]) -> Mapping[str, Any]:
        commands = {w.command: w.name for w in (getattr(self.face, "workflows", None) or {}).values() if w.command}
        message = params.get("message")
        if not commands or not isinstance(message, dict):
            return params
        parts = []
        for part in message.get("parts") or []:
            data = part.get("data") if isinstance(part, dict) else None
            envelope = data.get("agentd") if isinstance(data, dict) else None
            if isinstance(envelope, dict) and envelope.get("op") in commands and envelope["op"] not in self.table:
                inputs = {k: v for k, v in envelope.items() if k != "op"}
                part = {**part, "data": {**data, "agentd": {"op": "workflow.run", "workflow": commands[envelope["op"]],
                                                            "inputs": inputs}}}  # fmt: skip
            parts.append(part)
        return {**params, "message": {**message, "parts": parts}}

    # -- tasks --------------------------------------------------------------------------------------------------

    @staticmethod
    def _task(task_id: str, context_id: str, message: Mapping[str, Any], state: str, *, op: str,
              result: BaseModel | None = None, text: str | None = None, data: Any = None) -> dict[str, Any]:  # fmt: skip
        history = dict(message, taskId=task_id, contextId=context_id)
        task: dict[str, Any] = {"id": task_id, "contextId": context_id, "history": [history],
                                "metadata": {"op": op, "extension": COMMAND_URI},
                                "status": {"state": name(from_progress(state)), "timestamp": now()}}  # fmt: skip
        parts = ([{"text": text}] if text else []) + ([data_part(data)] if data is not None else [])
        if parts:
            task["status"]["message"] = {"messageId": str(uuid.uuid4()), "role": "ROLE_AGENT", "taskId": task_id,
                                         "contextId": context_id, "parts": parts}  # fmt: skip
        if result is not None:
            task["artifacts"] = [{"artifactId": f"{task_id}.result", "name": f"{task_id}.result",
                                  "parts": [data_part(_json(result))], "extensions": [COMMAND_URI]}]  # fmt: skip
        return task

    async def _follow(self, principal: Principal, request_id: Any, method: str, command: Command, task_id: str,
                      context_id: str, message: Mapping[str, Any], progress: AsyncIterator[Progress], *,
                      immediate: bool = False) -> Response:
        """Keep a long-running op's task up to date from its progress; answer once it ends or needs input (a
        unary send; at once with ``returnImmediately``), or stream every update (a streaming send). The rest runs
        on in the daemon."""
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
            return StreamingResponse(self._frames(request_id, receive), media_type="text/event-stream")
        final: dict[str, Any] | None = None
        async for item in receive:
            if "end" in item or "pause" in item:
                final = item.get("end") or item.get("pause")
                break
        receive.close()
        return self._result(request_id, method, [{"task": final}])

    async def track(self, principal: Principal, task_id: str, context_id: str, message: Mapping[str, Any], op: str,
                    progress: AsyncIterator[Progress], send: Any = None, first: anyio.Event | None = None) -> None:
        """Store every :class:`Progress` of a long-running op as its task's new state (and offer it to ``send``,
        a live request's stream, while one listens) until a terminal one; a progress whose state may not follow
        the last (:func:`.tasks.state.move`) fails the task. Also what a restart uses to follow a resumed run's
        task again (no ``send`` then)."""
        state = WORKING
        task = self._task(task_id, context_id, message, "working", op=op)
        await self.save_task(task, principal)
        if send is not None:
            send.send_nowait({"task": task})
        if first is not None:
            first.set()
        try:
            async for step in progress:
                state = move(state, from_progress(step.state))
                task = self._task(task_id, context_id, message, step.state, op=op, text=step.text,
                                  data=step.data, result=step.result)  # fmt: skip
                if step.data and "run" in step.data:
                    task["metadata"]["run"] = step.data["run"]
                    self.run_tasks[task_id] = (step.data["run"], principal)
                await self.save_task(task, principal)
                if send is not None:
                    _offer(send, {"statusUpdate": {"taskId": task_id, "contextId": context_id,
                                                   "status": task["status"], "metadata": task["metadata"]}})
                    if step.result is not None:
                        _offer(send, {"artifactUpdate": {"taskId": task_id, "contextId": context_id,
                                                         "artifact": task["artifacts"][0], "lastChunk": True}})
                    if step.state == "input_required":
                        _offer(send, {"pause": task})
                if state in TERMINAL:
                    break
        except Exception as err:  # noqa: BLE001 - a failing op ends its task FAILED, never the daemon
            log.exception("op %s failed", op)
            task = self._task(task_id, context_id, message, "failed", op=op, text=f"{type(err).__name__}: {err}")
            await self.save_task(task, principal)
            if send is not None:
                _offer(send, {"statusUpdate": {"taskId": task_id, "contextId": context_id, "status": task["status"]}})
        finally:
            self.run_tasks.pop(task_id, None)
            if send is not None:
                _offer(send, {"end": task})
                send.close()

    async def _frames(self, request_id: Any, receive: Any) -> AsyncIterator[bytes]:
        async with receive:
            async for item in receive:
                if "end" in item or "pause" in item:
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
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": refusal.error()},
                            status_code=refusal.http_status)  # fmt: skip


def _sse(request_id: Any, result: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, ensure_ascii=False)
    return f"data: {body}\n\n".encode()


def _offer(send: Any, item: dict[str, Any]) -> None:
    try:
        send.send_nowait(item)
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # nobody is listening (a unary send already answered): the store has every update


__all__ = ["CommandDispatcher", "ERROR_DOMAIN", "refusal_of"]
