"""The a2a-sdk's call context for one of our principals: who the task store, the request handler and the card
modifier see as the caller.

A request through the front gets it from :class:`PrincipalContextBuilder` (the principal the front identified);
what the daemon does in a principal's name outside a request — read or write a task as its owner, the drain's
cancels as the operator — uses :func:`call_context`.
"""

from __future__ import annotations

from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from starlette.requests import Request

from .principals import Principal

HANDOFF = "handoff"
"""The key, in the SDK's ``ServerCallContext.state``, of what the front's intercept handed on with the request (a
task op that ran: :class:`.tasks.optasks.PreparedOp`)."""


class PrincipalUser(User):
    """The SDK's user for ``principal``: authenticated, its ``user_name`` the principal's id (the task store's
    owner of what it creates)."""

    def __init__(self, principal: Any) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.principal.id


def call_context(principal: Principal) -> ServerCallContext:
    """The SDK's call context of ``principal``: its :class:`PrincipalUser`, and the principal itself in
    ``state["principal"]`` (as a request's, :class:`PrincipalContextBuilder`)."""
    return ServerCallContext(user=PrincipalUser(principal), state={"principal": principal})


class PrincipalContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context with the front's principal as its user (the task store's owner)."""

    def build(self, request: Request) -> Any:
        context = super().build(request)
        context.state["principal"] = request.state.principal
        context.state["interface_url"] = getattr(request.state, "interface_url", None)  # the extended card's
        handoff = getattr(request.state, "handoff", None)
        if handoff is not None:  # what the front's intercept handed on for this request (a task op that ran)
            context.state[HANDOFF] = handoff
        return context

    def build_user(self, request: Request) -> User:
        return PrincipalUser(request.state.principal)


__all__ = ["HANDOFF", "PrincipalContextBuilder", "PrincipalUser", "call_context"]
