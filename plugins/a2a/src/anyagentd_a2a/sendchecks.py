"""A send's own refusals, the front's last step before the SDK creates or touches a task (:class:`SendChecks`).

Commands have their own (:mod:`.command.envelope`); these are a conversation message's: output modes we cannot
produce (-32005), file URLs we will not fetch (-32602), a message naming the caller's own task while it runs and
waits for no input, or a task a restart left unanswerable (-32004).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from anyagentd.ops import owns

from .front import invalid_params, rpc_error
from .tasks.state import FAILED, UNRESUMABLE_MESSAGE
from .translate import accepts_our_output, url_violations

if TYPE_CHECKING:
    from .conversations import Conversations
    from .principals import Principal
    from .settings import Settings
    from .tasks.feed import TaskFeed


class SendChecks:
    """The checks of a send to this daemon: ``conversations`` hold the running tasks, ``parked`` the tasks a
    restart left waiting for input (task id → (owner, contextId)), ``feed`` reads the stored tasks, ``output_modes``
    are the card's default output modes (named in a refusal) and ``settings`` say whether ``[a2a.push]
    allow_private`` lets file URLs point at private addresses (read at each send: a reload applies)."""

    def __init__(
        self,
        conversations: Conversations,
        parked: dict[str, tuple[str, str]],
        feed: TaskFeed,
        output_modes: Sequence[str],
        settings: Settings,
    ) -> None:
        self.conversations = conversations
        self.parked = parked
        self.feed = feed
        self.output_modes = output_modes
        self.settings = settings

    async def check(self, principal: Principal, request_id: Any, params: dict[str, Any]) -> Response | None:
        """A send's own refusals, before the SDK creates or touches a task: output modes we cannot produce
        (-32005), file URLs we will not fetch (-32602), a message naming the caller's own task while it runs and
        waits for no input (-32004: the SDK would hold it until the task stops, then drop it). ``None``: the send
        goes on. A taskId-only message to a parked task gets the task's contextId (``params`` is completed)."""
        message = params.get("message")
        task_id = message.get("taskId") if isinstance(message, dict) else None
        run = self.conversations.runs.get(task_id) if isinstance(task_id, str) else None
        if run is not None and run.request is None and owns(principal, run.conversation.owner):
            return rpc_error(
                request_id,
                -32004,
                f"task {task_id} is running and waits for no input: send the "
                "message without taskId, in its contextId, to steer or queue it",
                reason="UNSUPPORTED_OPERATION",
            )
        parked = self.parked.get(task_id) if isinstance(task_id, str) else None
        if parked is not None and isinstance(message, dict) and not message.get("contextId"):
            # After a restart the SDK would give a taskId-only message a fresh contextId, and then refuse the
            # task's own events as "another context": name the task's context, as the client could have.
            message["contextId"] = parked[1]
        if isinstance(task_id, str) and run is None and parked is None:
            refused = await self._refuse_unresumable(principal, request_id, task_id)
            if refused is not None:
                return refused
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
        return invalid_params(request_id, violations) if violations else None

    async def _refuse_unresumable(self, principal: Principal, request_id: Any, task_id: str) -> Response | None:
        """-32004 naming why, for a message to the caller's task that a restart left unanswerable
        (:data:`.tasks.state.UNRESUMABLE_MESSAGE`); ``None`` for any other task (the SDK answers those)."""
        task = await self.feed.get(task_id, principal)
        if task is None or task.status.state != FAILED:
            return None
        text = " ".join(p.text for p in task.status.message.parts if p.text)
        if text != UNRESUMABLE_MESSAGE:
            return None
        return rpc_error(
            request_id, -32004, f"task {task_id} cannot be answered: {text}", reason="UNSUPPORTED_OPERATION"
        )


__all__ = ["SendChecks"]
