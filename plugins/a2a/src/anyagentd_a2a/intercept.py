"""What the daemon answers itself, before the SDK's request handler (the front's :class:`~.front.Interceptor`): a
send carrying a command (:class:`~.command.dispatch.CommandDispatcher`). A message op is answered here; a task op
that ran is handed on to the SDK, which serves its task (:mod:`.tasks.optasks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from .command.envelope import is_command
from .front import SEND_METHODS

if TYPE_CHECKING:
    from .command.dispatch import CommandDispatcher
    from .principals import Principal
    from .tasks.optasks import PreparedOp


class Intercept:
    """Commands go to ``dispatcher``."""

    def __init__(self, dispatcher: CommandDispatcher) -> None:
        self.dispatcher = dispatcher

    async def intercept(
        self, principal: Principal, request_id: Any, method: str, params: dict[str, Any], activated: list[str]
    ) -> Response | PreparedOp | None:
        """A send carrying a command: its refusal or a message op's answer (a Response), or the task op that ran
        (handed on); ``None``: the SDK's handler serves it."""
        if method in SEND_METHODS and is_command(params):
            return await self.dispatcher.respond(principal, request_id, method, params, activated)
        return None


__all__ = ["Intercept"]
