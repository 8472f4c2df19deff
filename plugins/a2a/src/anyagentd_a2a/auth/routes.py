"""The OAuth endpoints of the device grant, as Starlette routes the daemon mounts beside its JSON-RPC route.

``POST /oauth2/device_authorization`` (RFC 8628 §3.1), ``POST /oauth2/token`` (§3.4), ``GET /oauth2/device``
(the verification URI: what a person does with the code, since an operator approves it), ``POST /oauth2/revoke``
(RFC 7009) and ``GET /.well-known/oauth-authorization-server`` (RFC 8414). Requests are form-encoded
(``application/x-www-form-urlencoded``) of at most :data:`FORM_BYTES` (413 ``invalid_request`` with ``Connection:
close`` past it, read as :func:`..limits.read_body` reads a JSON-RPC body); answers are JSON with ``Cache-Control:
no-store``. Codes and tokens never reach the log: the daemon's ``on_event`` callback receives only event names and non-secret fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..limits import TooLarge, read_body
from ..observe.audit import audit
from .device import DeviceGrant, OAuthError, metadata
from .sessions import AuthSessions

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
FORM = "application/x-www-form-urlencoded"
FORM_BYTES = 16 * 1024
"""Bytes a form body may have: the largest form these routes take (a token to revoke, a device code, a client id
and a scope) is under 1 KiB; nothing past the limit is read or held."""


def _json(body: dict[str, Any], status: int = 200) -> JSONResponse:
    headers = NO_STORE | {"Connection": "close"} if status == 413 else NO_STORE  # the rest is never read
    return JSONResponse(body, status_code=status, headers=headers)


async def _form(request: Request) -> dict[str, str]:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != FORM:
        raise OAuthError("invalid_request", f"the body must be {FORM}")
    try:
        await read_body(request, FORM_BYTES)  # cached where request.form() reads it
    except TooLarge:
        raise OAuthError("invalid_request", f"the body is larger than {FORM_BYTES} bytes", 413) from None
    form = await request.form()
    values: dict[str, str] = {}
    for key in set(form.keys()):
        items = form.getlist(key)
        if len(items) != 1 or not isinstance(items[0], str):
            raise OAuthError("invalid_request", f"{key} must be given once")
        values[key] = items[0]
    return values


def device_routes(
    grant: DeviceGrant,
    sessions: AuthSessions,
    *,
    issuer: Callable[[], str],
    on_event: Callable[..., None] = lambda *a, **k: None,
) -> list[Route]:
    """The five routes; ``issuer`` gives the public base URL (the card's URL), ``on_event(name, **fields)`` logs."""

    async def device_authorization(request: Request) -> Response:
        peer = request.client.host if request.client else None
        try:
            form = await _form(request)
            body = grant.authorize(form.get("client_id"), form.get("scope"), peer)
        except OAuthError as err:
            on_event("auth.device.refused", error=err.error, peer=peer)
            return _json(err.body(), err.status)
        on_event("auth.device.requested", client_id=form.get("client_id"), peer=peer)
        return _json(body)

    async def token(request: Request) -> Response:
        try:
            form = await _form(request)
            body = await grant.poll(form.get("grant_type"), form.get("device_code"), form.get("client_id"))
        except OAuthError as err:
            if err.error not in ("authorization_pending", "slow_down"):
                on_event("auth.token.refused", error=err.error)
            return _json(err.body(), err.status)
        on_event("auth.token.issued", scope=body.get("scope"))
        return _json(body)

    async def revoke(request: Request) -> Response:
        try:
            form = await _form(request)
        except OAuthError as err:
            return _json(err.body(), err.status)
        if not form.get("token"):
            return _json(OAuthError("invalid_request", "token is required").body(), 400)
        principal = await sessions.revoke_token(form["token"])
        if principal is not None:
            on_event("auth.session.revoked", via="oauth2/revoke")
            # a revocation is audited as the operator's are (.observe.audit), by the session that ended itself
            audit("oauth2.revoke", principal, "ok")
        return Response(status_code=200, headers=NO_STORE)  # RFC 7009 §2.2: 200 whether or not it was ours

    async def verification(request: Request) -> Response:
        return PlainTextResponse(
            "To finish signing in, give the code your device shows to an operator of this "
            "daemon: they approve it (auth.device.approve) or deny it.\n",
            headers=NO_STORE,
        )

    async def server_metadata(request: Request) -> Response:
        return JSONResponse(metadata(issuer()), headers={"Cache-Control": "max-age=60"})

    return [
        Route("/oauth2/device_authorization", device_authorization, methods=["POST"]),
        Route("/oauth2/token", token, methods=["POST"]),
        Route("/oauth2/device", verification, methods=["GET"]),
        Route("/oauth2/revoke", revoke, methods=["POST"]),
        Route("/.well-known/oauth-authorization-server", server_metadata, methods=["GET"]),
    ]


__all__ = ["device_routes"]
