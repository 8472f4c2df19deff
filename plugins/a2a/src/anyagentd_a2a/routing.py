"""The URL layout of the agents one daemon serves, one card and one endpoint each under its own sub-path — A2A
1.0's multi-tenancy by URL path, each agent with its own Agent Card, so a stock client given an agent's card URL
reaches that agent and no other (the cards' interfaces carry no ``tenant``):

- ``GET /agents``: the served agents and their card URLs (this daemon's own convention: A2A 1.0 has no standard
  multi-agent catalog), public like the cards;
- ``GET /agents/{id}/.well-known/agent-card.json``: that agent's card;
- ``POST /agents/{id}`` and ``POST /agents/{id}/``: that agent's JSON-RPC endpoint (the front);
- ``GET /.well-known/agent-card.json`` and ``POST /``: the default agent's, at the root URL, as before several
  agents were served.

An unknown ``{id}`` is HTTP 404 with a JSON body naming it and the agents served (:func:`agent_not_found`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .card import CARD_CACHE_CONTROL, CARD_PATH, card_responder
from .front import AGENTD_DOMAIN, rpc_error

if TYPE_CHECKING:
    from .agents import Agents
    from .front import Endpoint, Front

AGENTS = "/agents"
AGENT_NOT_FOUND = -31404
"""The JSON-RPC code of a POST to an agent this daemon does not serve (beside -31401, -31403 and -31429)."""


def agent_path(agent: str) -> str:
    """``/agents/{agent}``: the agent's sub-path (its JSON-RPC endpoint, its card below it)."""
    return f"{AGENTS}/{agent}"


def agent_url(public_url: str, agent: str) -> str:
    """The agent's JSON-RPC interface URL under the daemon's ``public_url``."""
    return public_url.rstrip("/") + agent_path(agent)


def card_url(public_url: str, agent: str) -> str:
    """The agent's card URL under the daemon's ``public_url``."""
    return agent_url(public_url, agent) + CARD_PATH


def agent_not_found(request: Request, agent: str, known: list[str]) -> Response:
    """The 404 of a request to ``/agents/{agent}`` when no such agent is served: for a POST a JSON-RPC error (``id``
    null, code :data:`AGENT_NOT_FOUND`, ErrorInfo ``AGENT_NOT_FOUND`` with metadata ``agent``), else a JSON error
    object; both name the agents served (``known``)."""
    message = f"no agent {agent!r} is served here; GET {AGENTS} lists them"
    if request.method == "POST":
        return rpc_error(
            None,
            AGENT_NOT_FOUND,
            message,
            status=404,
            reason="AGENT_NOT_FOUND",
            domain=AGENTD_DOMAIN,
            metadata={"agent": agent, "agents": ", ".join(known)},
        )
    return JSONResponse(
        {"error": {"reason": "AGENT_NOT_FOUND", "message": message, "agent": agent, "agents": known}},
        status_code=404,
    )


class AgentRoutes:
    """The routes of every served agent (see the module docstring) over ``agents``, the ``front`` every POST
    passes, and the daemon's ``public_url`` (``a2a.url``, else the listener's: the cards' and the listing's
    URLs)."""

    def __init__(self, agents: Agents, front: Front, public_url: str) -> None:
        self.agents = agents
        self.front = front
        self.public_url = public_url
        self._cards = {a.id: card_responder(a.card) for a in agents}
        self._root_card = card_responder(agents.default.root_card)

    def routes(self) -> list[Route]:
        return [
            Route(CARD_PATH, self._root_card, methods=["GET"]),
            Route("/", self.post_root, methods=["POST"]),
            Route(AGENTS, self.listing, methods=["GET"]),
            Route(AGENTS + "/{agent}" + CARD_PATH, self.card, methods=["GET"]),
            Route(AGENTS + "/{agent}", self.post, methods=["POST"]),
            Route(AGENTS + "/{agent}/", self.post, methods=["POST"]),
            Route(AGENTS + "/{agent}", self.get, methods=["GET"]),
            Route(AGENTS + "/{agent}/", self.get, methods=["GET"]),
        ]

    def _endpoint(self, request: Request) -> Endpoint | Response:
        agent_id = request.path_params["agent"]
        agent = self.agents.get(agent_id)
        if agent is None:
            return agent_not_found(request, agent_id, self.agents.ids())
        return agent.endpoint

    async def post_root(self, request: Request) -> Response:
        return await self.front.handle(request, self.agents.default.root_endpoint)

    async def post(self, request: Request) -> Response:
        endpoint = self._endpoint(request)
        if isinstance(endpoint, Response):
            return endpoint
        return await self.front.handle(request, endpoint)

    async def get(self, request: Request) -> Response:
        """``GET /agents/{id}``: 404 (:func:`agent_not_found`) for an agent not served; else 405 saying where the
        agent's card is (its endpoint answers JSON-RPC POSTs only)."""
        agent_id = request.path_params["agent"]
        if self.agents.get(agent_id) is None:
            return agent_not_found(request, agent_id, self.agents.ids())
        message = f"POST JSON-RPC requests here; the agent's card is at {card_url(self.public_url, agent_id)}"
        return JSONResponse(
            {"error": {"reason": "METHOD_NOT_ALLOWED", "message": message, "agent": agent_id}},
            status_code=405,
            headers={"Allow": "POST"},
        )

    async def card(self, request: Request) -> Any:
        agent_id = request.path_params["agent"]
        serve = self._cards.get(agent_id)
        if serve is None:
            return agent_not_found(request, agent_id, self.agents.ids())
        return await serve(request)

    async def listing(self, request: Request) -> Response:
        """``GET /agents``: ``{"default": id, "agents": [{"id", "name", "description", "default", "state", "url",
        "card"}]}`` — ``name`` the agent it drives, ``state`` ``serving``, ``paused`` or ``draining``."""
        default = self.agents.default
        rows = [
            {
                "id": a.id,
                "name": a.spec.label,
                "description": a.card.description,
                "default": a is default,
                "state": a.admission.state,
                "url": agent_url(self.public_url, a.id),
                "card": card_url(self.public_url, a.id),
            }
            for a in self.agents
        ]
        return JSONResponse({"default": default.id, "agents": rows}, headers={"Cache-Control": CARD_CACHE_CONTROL})


__all__ = ["AGENTS", "AGENT_NOT_FOUND", "AgentRoutes", "agent_not_found", "agent_path", "agent_url", "card_url"]
