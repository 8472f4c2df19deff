"""What the daemon answers itself, before the SDK's request handler (the front's :class:`~.front.Interceptor`):
a send carrying a command (:class:`~.command.dispatch.CommandDispatcher`), and — with workflows configured — a
message answering a workflow run's ``ask`` step or a CancelTask of a run's task (:class:`~.tasks.runs.RunTasks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from .command.envelope import is_command
from .front import SEND_METHODS

if TYPE_CHECKING:
    from .command.dispatch import CommandDispatcher
    from .principals import Principal
    from .tasks.runs import RunTasks


class Intercept:
    """Commands go to ``dispatcher``; the tasks of workflow runs to ``runs`` (``None``: no workflow runner, so no
    run's task)."""

    def __init__(self, dispatcher: CommandDispatcher, runs: RunTasks | None) -> None:
        self.dispatcher = dispatcher
        self.runs = runs

    async def intercept(
        self, principal: Principal, request_id: Any, method: str, params: dict[str, Any], activated: list[str]
    ) -> Response | None:
        """Commands; a message answering a workflow run's ``ask`` step; CancelTask of a run's task. ``None``:
        the SDK's handler serves it."""
        if method in SEND_METHODS:
            if is_command(params):
                return await self.dispatcher.respond(principal, request_id, method, params, activated)
            if self.runs is not None:
                return await self.runs.answer(principal, request_id, params)
        elif method == "CancelTask" and self.runs is not None:
            return await self.runs.cancel(principal, request_id, params)
        return None


__all__ = ["Intercept"]
