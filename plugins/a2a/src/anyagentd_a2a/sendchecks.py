"""A send's own refusals, the front's last step before the SDK creates or touches a task (:class:`SendChecks`).

Commands have their own (:mod:`.command.envelope`); these are a conversation message's: output modes we cannot
produce (-32005), file URLs we will not fetch (-32602), a message naming the caller's own task while it runs and
waits for no input, a task a restart left unanswerable, or a task that has ended (-32004).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from a2a.types import TaskState
from starlette.responses import Response

from anyagentd.ops import owns

from .front import invalid_params, rpc_error
from .tasks.state import FAILED, TERMINAL, UNRESUMABLE_MESSAGE, label
from .translate import accepts_our_output, url_violations

if TYPE_CHECKING:
    from a2a.types import Task

    from .conversations import Conversations
    from .principals import Principal
    from .settings import Settings
    from .tasks.feed import TaskFeed
    from .tasks.optasks import OpTasks


class SendChecks:
    """The checks of a send to this daemon: ``conversations`` hold the running tasks, ``parked`` the tasks a
    restart left waiting for input (task id → (owner, contextId)), ``ops`` the open tasks of task ops, ``feed`` reads the stored tasks, ``output_modes``
    are the card's default output modes (named in a refusal) and ``settings`` say whether ``[a2a.push]
    allow_private`` lets file URLs point at private addresses (read at each send: a reload applies)."""

    def __init__(
        self,
        conversations: Conversations,
        parked: dict[str, tuple[str, str]],
        ops: OpTasks,
        feed: TaskFeed,
        output_modes: Sequence[str],
        settings: Settings,
    ) -> None:
        self.conversations = conversations
        self.parked = parked
        self.ops = ops
        self.feed = feed
        self.output_modes = output_modes
        self.settings = settings

    async def check(self, principal: Principal, request_id: Any, params: dict[str, Any]) -> Response | None:
        """A send's own refusals, before the SDK creates or touches a task: output modes we cannot produce
        (-32005), file URLs we will not fetch (-32602), a message naming the caller's own task while it runs and
        waits for no input (-32004: the SDK would hold it until the task stops, then drop it), a task a restart left
        unanswerable (-32004), or a task that has ended (-32004, the SDK's own refusal: :meth:`_refuse_ended`).
        ``None``: the send goes on. A taskId-only message to the caller's own task gets the task's contextId
        (``params`` is completed): the SDK would give it a fresh one, which its history would then show."""
        message = params.get("message")
        task_id = message.get("taskId") if isinstance(message, dict) else None
        run = self.conversations.runs.get(task_id) if isinstance(task_id, str) else None
        if run is not None and owns(principal, run.conversation.owner) and not message.get("contextId"):
            message["contextId"] = run.context_id  # the SDK would give a taskId-only message a context of its own
        if run is not None and run.request is None and owns(principal, run.conversation.owner):
            return rpc_error(
                request_id,
                -32004,
                f"task {task_id} is running and waits for no input: send the "
                "message without taskId, in its contextId, to steer or queue it",
                reason="UNSUPPORTED_OPERATION",
            )
        source = self.ops.get(task_id) if isinstance(task_id, str) else None
        if source is not None and owns(principal, source.principal.id):
            if source.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                return rpc_error(
                    request_id,
                    -32004,
                    f"task {task_id} waits for no answer ({label(source.state)})",
                    reason="UNSUPPORTED_OPERATION",
                )
            if isinstance(message, dict) and not message.get("contextId"):
                message["contextId"] = source.context_id  # as for a parked task, below
        parked = self.parked.get(task_id) if isinstance(task_id, str) else None
        if parked is not None and isinstance(message, dict) and not message.get("contextId"):
            # After a restart the SDK would give a taskId-only message a fresh contextId, and then refuse the
            # task's own events as "another context": name the task's context, as the client could have.
            message["contextId"] = parked[1]
        # the caller's own stored task (another principal's reads as None: the SDK answers -32001, as ever)
        task = None
        if isinstance(task_id, str) and run is None and parked is None and source is None:
            task = await self.feed.get(task_id, principal)
            refused = self._refuse_unresumable(request_id, task_id, task) if task is not None else None
            if refused is None and task is not None:
                refused = await self._refuse_followed_elsewhere(request_id, task_id, task)
            if refused is not None:
                return refused
            if task is not None and isinstance(message, dict) and not message.get("contextId"):
                message["contextId"] = task.context_id
        configuration = params.get("configuration")
        modes = configuration.get("acceptedOutputModes") if isinstance(configuration, dict) else None
        if isinstance(modes, list) and modes and not accepts_our_output(modes):
            return rpc_error(
                request_id,
                -32005,
                f"none of the accepted output modes {modes} is produced here ({', '.join(self.output_modes)})",
                reason="CONTENT_TYPE_NOT_SUPPORTED",
            )
        violations = await url_violations(params, allow_private=self.settings.loaded.config.a2a.push.allow_private)
        if violations:
            return invalid_params(request_id, violations)
        return await self._refuse_ended(request_id, params, task) if task is not None else None

    async def _refuse_followed_elsewhere(self, request_id: Any, task_id: str, task: Task) -> Response | None:
        """-32004 for a message to an open task of a workflow run that another daemon sharing the database follows
        (its holder): only that daemon writes the task, so an answer sent here would reach the run while this
        daemon's copy of the task, with the answer in its history, lost to the follower's next write. The message
        names that daemon's URL where known."""
        from .members import TASK

        if "run" not in task.metadata or task.status.state in TERMINAL:
            return None
        members = self.feed.store.members
        holder = await members.holder_of(TASK, task_id) if members is not None else None
        if members is None or holder is None or holder[0] == members.instance:
            return None  # this daemon's own (its follower about to start again after a restart): as ever
        where = holder[1]
        return rpc_error(
            request_id,
            -32004,
            f"task {task_id} is followed by another daemon sharing this database: send the message to "
            + (where or "the daemon that started its run"),
            reason="UNSUPPORTED_OPERATION",
        )

    @staticmethod
    def _refuse_unresumable(request_id: Any, task_id: str, task: Task) -> Response | None:
        """-32004 naming why, for a message to the caller's ``task`` that a restart left unanswerable
        (:data:`.tasks.state.UNRESUMABLE_MESSAGE`); ``None`` for any other task."""
        if task.status.state != FAILED:
            return None
        text = " ".join(p.text for p in task.status.message.parts if p.text)
        if text != UNRESUMABLE_MESSAGE:
            return None
        return rpc_error(
            request_id, -32004, f"task {task_id} cannot be answered: {text}", reason="UNSUPPORTED_OPERATION"
        )

    @staticmethod
    async def _refuse_ended(request_id: Any, params: dict[str, Any], task: Task) -> Response | None:
        """The SDK's own refusal of a message to the caller's ``task`` that has ended, word for word (a2a-sdk 1.3.0
        ``ActiveTask.start``: -32004 "Task <id> is in terminal state: TASK_STATE_<state>", reason
        UNSUPPORTED_OPERATION), answered before its handler runs: the handler's refusal leaves the event queues of
        the ``ActiveTask`` it made for the send unclosed, one pending dispatch loop each, destroyed only at
        shutdown (an asyncio and an opentelemetry.context error line apiece).

        ``None`` (the SDK answers, as ever) for a task that has not ended, and wherever the handler refuses the send
        before its terminal check: params it cannot parse or that lack a required field, a negative historyLength,
        a contextId other than the task's, a push URL its guard may refuse. A push config of a refused send is not
        stored here (the SDK stored it for the ended task before refusing)."""
        if task.status.state not in TERMINAL:
            return None
        from a2a.types import SendMessageRequest
        from a2a.utils.proto_utils import validate_proto_required_fields
        from a2a.utils.push_url_validator import validate_push_notification_url
        from a2a.utils.task import validate_history_length
        from google.protobuf.json_format import ParseDict

        try:  # the SDK's dispatcher's parse and its handler's first checks, in their order
            request = ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)
            validate_proto_required_fields(request)
            validate_history_length(request.configuration)
        except Exception:  # noqa: BLE001 - the SDK refuses these params itself, and first
            return None
        context_id = request.message.context_id
        if context_id and context_id != task.context_id:
            return None
        configuration = request.configuration
        if configuration.HasField("task_push_notification_config") and not await validate_push_notification_url(
            configuration.task_push_notification_config.url
        ):
            return None
        return rpc_error(
            request_id,
            -32004,
            f"Task {task.id} is in terminal state: {TaskState.Name(task.status.state)}",
            reason="UNSUPPORTED_OPERATION",
        )


__all__ = ["SendChecks"]
