"""The agent card (A2A 1.0, a2a-sdk's ``AgentCard``): public at ``/.well-known/agent-card.json``, extended per
caller through GetExtendedAgentCard.

Takes the loaded configuration and the public URL; returns the card: name, description, version, the JSON-RPC
interface at the URL, capabilities (streaming, push as configured, extended card), one skill for the conversation
agent, the bearer security scheme when any credential is configured, the OAuth 2.0 device-code scheme (RFC 8628:
device authorization and token URLs on the card's URL) when ``[a2a.device_grant]`` is enabled, and the command
extension (declared, never required; its params: ``dataPartKey``, ``schema``, and ``ops`` — the daemon narrows them
per caller on the extended card and adds ``commands`` and ``settable``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    DeviceCodeOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from anyagentd import __version__

from .command.envelope import COMMAND_URI as COMMAND_EXTENSION
from .config import Loaded
from .translate import OUTPUT_MODES

if TYPE_CHECKING:
    from anyagentd.ops import OpTable

    from .agentspec import AgentSpec
    from .instance import Instance

CARD_PATH = "/.well-known/agent-card.json"
CARD_CACHE_CONTROL = "public, max-age=60"
SCHEMA_PATH = "/a2a/ext/command/schema.json"
"""Where the daemon serves the command extension's schema (the card's ``params.schema`` is this on its URL)."""


def build_card(
    loaded: Loaded,
    url: str,
    *,
    ops: list[tuple[str, str]] = (),
    schema_url: str | None = None,
    spec: AgentSpec | None = None,
    daemon_url: str | None = None,
) -> AgentCard:
    """The public card of the agent ``spec`` (``None``: the configuration's default agent) at ``url`` (its
    JSON-RPC interface; no ``tenant``: one card per agent, each at its own path); ``ops`` (``[(op, reply)]``) are
    the command-extension ops this instance serves (reserved ones never), ``schema_url`` where the daemon serves
    the extension's schema; ``daemon_url`` (default ``url``) is where the daemon-wide routes are (the device
    grant's)."""
    config = loaded.config
    if spec is None:
        from .agentspec import agent_specs, default_of

        spec = default_of(agent_specs(config, None))
    agent = spec.label
    base = (daemon_url or url).rstrip("/")
    skills = [
        AgentSkill(id=s.id, name=s.name, description=s.description, tags=list(s.tags), examples=list(s.examples))
        for s in spec.skills
    ] or [
        AgentSkill(
            id=agent,
            name=agent,
            tags=["coding", "agent"],
            description=f"A conversation with the coding agent {agent!r} in its working directory.",
        )
    ]
    card = AgentCard(
        name=f"anyagentd {spec.id}",
        description=spec.description
        or f"Coding agent {agent!r} driven by anyagentd: each contextId is one conversation with the agent, "
        "each message one prompt run as a task.",
        version=__version__,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=config.a2a.push.enabled,
            extended_agent_card=True,
            extensions=[
                AgentExtension(
                    uri=COMMAND_EXTENSION,
                    required=False,
                    description="agentd command extension (status, workflows, admin)",
                )
            ],
        ),
        default_input_modes=["text/plain", "application/json", "application/octet-stream"],
        default_output_modes=list(OUTPUT_MODES),
        skills=skills,
    )
    card.capabilities.extensions[0].params.update(
        {
            "dataPartKey": "agentd",
            "schema": schema_url or f"{base}{SCHEMA_PATH}",
            "ops": [{"op": name, "reply": reply} for name, reply in ops],
        }
    )
    if loaded.credentialed:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer", description="anyagentd bearer token")
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    if config.a2a.device_grant.enabled:
        flow = DeviceCodeOAuthFlow(
            device_authorization_url=f"{base}/oauth2/device_authorization",
            token_url=f"{base}/oauth2/token",
            scopes={
                "user": "a user: its own tasks and conversations",
                "operator": "an operator (approved as such only)",
            },
        )
        card.security_schemes["device"].CopyFrom(
            SecurityScheme(
                oauth2_security_scheme=OAuth2SecurityScheme(
                    description="sign in with the device authorization grant; an operator approves each device",
                    flows=OAuthFlows(device_code=flow),
                    oauth2_metadata_url=f"{base}/.well-known/oauth-authorization-server",
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={"device": StringList(list=["user"])}))
    return card


async def extend_for_caller(card: AgentCard, context: ServerCallContext) -> AgentCard:
    """The extended card for this caller: the public card plus who the caller is and what it may call (in the
    command extension's params)."""
    extended = AgentCard()
    extended.CopyFrom(card)
    principal = context.state.get("principal")
    if principal is not None:
        extended.capabilities.extensions[0].params.update(
            {
                "principal": principal.id,
                "role": principal.role,
                "grants": list(principal.grants),
                "methods": list(principal.methods),
            }
        )
    return extended


class CallerCard:
    """The SDK's ``extended_card_modifier``: the card a caller's GetExtendedAgentCard answers, over the ``ops``
    served (the start-up table) and the ``instance`` (its switches, workflows, settable paths)."""

    def __init__(self, ops: OpTable, instance: Instance) -> None:
        self.ops = ops
        self.instance = instance

    async def __call__(self, card: AgentCard, context: ServerCallContext) -> AgentCard:
        """The caller's card: the public one, its ops narrowed to what this caller may run, plus the
        workflow-declared commands and the paths ``admin.set`` accepts."""
        principal = context.state.get("principal")
        extended = await extend_for_caller(card, context)
        interface_url = context.state.get("interface_url")
        if interface_url:  # the root and the default agent's path share one handler: each shows its own URL
            extended.supported_interfaces[0].url = interface_url
        if principal is not None:
            params = extended.capabilities.extensions[0].params
            ops = self.ops.listed(self.instance.switches(), principal)
            params.update(
                {
                    "ops": [{"op": name, "reply": reply} for name, reply in ops],
                    "commands": [
                        {"command": w.command, "workflow": w.name, "description": w.description}
                        for w in self.instance.workflows.values()
                        if w.command
                    ],
                    "settable": self.instance.settable() if principal.is_operator else [],
                }
            )
        return extended


def schema_route() -> Any:
    """The Starlette route for ``GET`` :data:`SCHEMA_PATH`: the command extension's JSON Schema
    (``anyagentd.ops.command_schema``), cacheable for an hour."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from anyagentd.ops import command_schema

    async def schema(request: Request) -> Any:
        return JSONResponse(command_schema(), headers={"Cache-Control": "public, max-age=3600"})

    return Route(SCHEMA_PATH, schema, methods=["GET"])


def card_json(card: AgentCard) -> dict[str, Any]:
    """The card as A2A 1.0 proto3 JSON (lowerCamelCase, defaults left out) and nothing else: the SDK's own card
    route merges the 0.3 top-level fields (``url``, ``protocolVersion``, ``preferredTransport``, …) into it, which
    a strict 1.0 parser refuses."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(card)


def card_route(card: AgentCard, *, modified: datetime | None = None) -> Any:
    """The Starlette route for ``GET /.well-known/agent-card.json``: :func:`card_responder` of ``card``."""
    from starlette.routing import Route

    return Route(CARD_PATH, card_responder(card, modified=modified), methods=["GET"])


def card_responder(card: AgentCard, *, modified: datetime | None = None) -> Callable[[Any], Awaitable[Any]]:
    """The answer to a ``GET`` of ``card``: :func:`card_json`, a weak ``ETag`` (sha256 of the JSON),
    ``Cache-Control`` :data:`CARD_CACHE_CONTROL` and ``Last-Modified`` (``modified``, default now: the card is
    built once per start); ``If-None-Match`` or ``If-Modified-Since`` that still hold get 304."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    body = card_json(card)
    etag = 'W/"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'
    stamp = (modified or datetime.now(UTC)).replace(microsecond=0)
    headers = {"ETag": etag, "Cache-Control": CARD_CACHE_CONTROL, "Last-Modified": format_datetime(stamp, usegmt=True)}

    def not_modified(request: Request) -> bool:
        tags = request.headers.get("if-none-match")
        if tags is not None:
            return any(
                t.strip() == "*" or t.strip().removeprefix("W/") == etag.removeprefix("W/") for t in tags.split(",")
            )
        since = request.headers.get("if-modified-since")
        if since:
            try:
                return parsedate_to_datetime(since) >= stamp
            except (TypeError, ValueError):
                return False
        return False

    async def serve(request: Request) -> Response:
        if not_modified(request):
            return Response(status_code=304, headers=headers)
        return JSONResponse(body, headers=headers)

    return serve
