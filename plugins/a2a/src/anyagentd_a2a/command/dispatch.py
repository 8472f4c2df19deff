"""Answering a command: refused in order (:mod:`.envelope`), run as its op, replied to as a Message or a Task.

A ``message`` op answers a Message (ROLE_AGENT, one DataPart ``application/json`` with the op's result,
``extensions`` naming the command URI, ``metadata`` what the result's ``reply_metadata`` adds) and creates no
task; on SendStreamingMessage it is exactly one SSE frame, then the stream ends. A ``task`` op, once it ran, is
handed to the SDK's request handler, which serves its task as it serves a conversation's (stored under the caller,
history kept, pushed): :mod:`..tasks.optasks` says what the task shows. An :class:`~anyagentd.ops.OpError` raised
before the task exists is a JSON-RPC error, and nothing was created.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

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
    ResultModel,
    TargetNotFound,
)

from ..observe.audit import audit, audited
from ..tasks.optasks import PreparedOp, data_part, result_json
from .envelope import (
    COMMAND_URI,
    ERROR_DOMAIN,
    INVALID_PARAMS,
    PERMISSION_DENIED,
    TASK_NOT_FOUND,
    Command,
    CommandRefusal,
    attempted_arguments,
    dumped,
    resolve_command,
)

if TYPE_CHECKING:
    from .face import CommandFace

log = logging.getLogger("anyagentd.a2a.command")

STREAMING = "SendStreamingMessage"


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


class CommandDispatcher:
    """Runs commands for the front. Takes the start-up :class:`OpTable`, the ``face`` ops act on, ``switches()``
    (the configuration switches in force) and ``new_task_id()`` (a task id the task store reads as absent without
    a query: :meth:`..store.PrincipalTaskStore.new_task_id`). A task op's task is the SDK's to serve
    (:mod:`..tasks.optasks`)."""

    def __init__(
        self,
        table: OpTable,
        face: CommandFace,
        *,
        switches: Callable[[], Mapping[str, bool]],
        new_task_id: Callable[[], str],
    ) -> None:
        self.table = table
        self.face = face
        self.switches = switches
        self.new_task_id = new_task_id

    async def respond(
        self, principal: Principal, request_id: Any, method: str, params: Mapping[str, Any], activated: list[str]
    ) -> Response | PreparedOp | None:
        """The response to a send carrying a command, or ``None`` when it carries none. A task op that ran is
        handed to the SDK to serve its task (:class:`~..tasks.optasks.PreparedOp`): the send's message (``params``,
        edited in place: what the SDK reads) loses any ``taskId`` and names the task's context. A
        workflow-declared command (``command = "fix"`` on a workflow) is ``workflow.run`` of that workflow with its
        arguments as the inputs."""
        sent = params.get("message")
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
        task_id = self.new_task_id() if command.op.reply == "task" else None
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
                    "parts": [data_part(result_json(outcome))],
                    "extensions": [COMMAND_URI],
                }
            }
            extra = outcome.reply_metadata() if isinstance(outcome, ResultModel) else None
            if extra:
                reply["message"]["metadata"] = extra
            return self._result(request_id, method, [reply])
        assert task_id is not None
        op = command.op.name
        if isinstance(command.args, BaseModel) and "workflow" in type(command.args).model_fields:
            op = f"{op}:{command.args.workflow}"  # type: ignore[attr-defined]
        if isinstance(sent, dict):
            sent.pop("taskId", None)  # a command starts a task of its own
            sent["contextId"] = context_id
        return PreparedOp(
            task_id=task_id,
            context_id=context_id,
            principal=principal,
            metadata={"op": op, "extension": COMMAND_URI},
            result=None if isinstance(outcome, AsyncIterator) else outcome,
            progress=outcome if isinstance(outcome, AsyncIterator) else None,
        )

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


__all__ = ["CommandDispatcher", "ERROR_DOMAIN", "refusal_of"]
