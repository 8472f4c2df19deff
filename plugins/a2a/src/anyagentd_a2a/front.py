"""The front pipeline: what runs before the SDK's JSON-RPC dispatcher of the agent a POST is for (its
:class:`Endpoint`: ``/agents/{id}/``, or the root for the default agent, :mod:`.routing`), in the order of
``docs/commands.md`` (the listener). Each refusal is plain JSON-RPC/HTTP and nothing behind it runs (no task is
created, no agent started).

Host gate (421, plain body; :class:`HostGate`: a Host neither loopback nor the public URL's — DNS rebinding) →
CORS exact-origin gate (403, empty body; :class:`CorsGate`, a pure ASGI layer so streaming stays intact) →
failed-credential limiter per source (429 + Retry-After for a source past its allowance, unless what it presents
is valid: a configured bearer, a live device session or the implicit loopback operator is served whatever its
source; the source is the peer, or behind ``[a2a] trusted_proxies`` the client ``X-Forwarded-For`` names,
:mod:`.proxies`) → ``Content-Type: application/json`` (415, code -32005 ContentTypeNotSupported) → identity (401,
code -31401, ``WWW-Authenticate: Bearer realm=…``; configured bearers, then device sessions; a bad credential
counts against its source) → request body at most ``a2a.limits.body_bytes`` (413 + ``Connection: close``, code
-32600 naming the limit; a ``Content-Length`` over it before any of the body is read, a body without one cut off
as soon as it passes it: :func:`.limits.read_body`) → JSON-RPC envelope (-32700; -32600 batch / missing id /
wrong jsonrpc / no method; -32602 params not an object, or holding a number no double holds, such as
``1e400``, named by its field: :mod:`.structjson`) → ``A2A-Version`` 1.0 or 1.0.x (-32009
VERSION_NOT_SUPPORTED) → per-principal rate (429) → exact method route (-32601) → extension negotiation
(activated URIs echoed in ``A2A-Extensions``) → method authorization (403, -31403) → agent reach (403, -31403
PERMISSION_DENIED naming the agent: the principal's ``agents`` patterns do not match the path's agent) → tenant
(-32602 naming ``tenant`` when ``params.tenant`` names another agent than the path's: A2A 1.0's tenant, which the
cards never set) → while the path's agent (or the daemon) drains, sends refused (-32603 DRAINING) → message limits, for every send (-32602 LIMIT_EXCEEDED naming
``a2a.limits.message_parts`` or ``a2a.limits.part_bytes``: :func:`.limits.message_refusal`) → an empty message,
for a send naming no ``taskId`` (-32602 EMPTY_MESSAGE naming ``message.parts``: no text, data or file, so no
prompt — :func:`.limits.empty_message_refusal`, by the rule ``prompt_of`` refuses by,
:func:`.translate.empty_prompt`) → send checks
(-32005 when ``acceptedOutputModes`` excludes everything we produce; -32602 for a file URL that is not http(s)
or points at a private address; -32004 for a message naming one's own task that runs and waits for no input) →
the SDK's ``JsonRpcDispatcher.handle_requests`` (one Starlette endpoint; the body is read once, Starlette caches
it). What passes has its ``historyLength`` held to ``a2a.limits.task_history`` (GetTask, ListTasks, sends other
than commands: :func:`.limits.held_history`). An answer to a caller signed in with a device session ends when
that session is revoked (:class:`~.auth.revocable.RevocableResponse`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from . import structjson
from .command.envelope import CONTENT_TYPE_NOT_SUPPORTED, command_parts, is_command
from .config import A2ASection, Loaded, Secrets, is_loopback
from .limits import TooLarge, body_too_large, empty_message_refusal, held_history, message_refusal, read_body
from .principals import (
    FAILED_CREDENTIAL_BURST,
    FAILED_CREDENTIAL_REFILL_SECONDS,
    Identities,
    Principal,
    RateLimits,
    TokenBucket,
    Unauthenticated,
)
from .proxies import Network, client_address, parse_proxy
from .settings import seconds

if TYPE_CHECKING:
    from .lifecycle import Draining

log = logging.getLogger("anyagentd.a2a")

A2A_DOMAIN = "a2a-protocol.org"
AGENTD_DOMAIN = "agentd.dev"
SEND_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})
_VERSION = re.compile(r"^1\.0(\.\d+)?$")
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def rpc_error(
    request_id: Any,
    code: int,
    message: str,
    *,
    reason: str | None = None,
    domain: str = A2A_DOMAIN,
    metadata: dict[str, str] | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON-RPC error response; ``reason`` adds a google.rpc.ErrorInfo detail in ``data``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if reason is not None:
        error["data"] = [{"@type": ERROR_INFO, "reason": reason, "domain": domain, "metadata": metadata or {}}]
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status, headers=headers)


def invalid_params(request_id: Any, violations: list[tuple[str, str]]) -> JSONResponse:
    """-32602 with a google.rpc.BadRequest listing each (field, description)."""
    error = {
        "code": -32602,
        "message": "Invalid params: " + "; ".join(f"{f}: {d}" for f, d in violations),
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": f, "description": d} for f, d in violations],
            }
        ],
    }
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


def requested_extensions(headers: list[str]) -> list[str]:
    """The URIs of every ``A2A-Extensions`` header, comma-split and stripped, in order, without repeats."""
    seen: dict[str, None] = {}
    for header in headers:
        for uri in header.split(","):
            if uri.strip():
                seen[uri.strip()] = None
    return list(seen)


class SendCheck(Protocol):
    """A send's own refusals (:class:`~.sendchecks.SendChecks` is the daemon's)."""

    async def check(self, principal: Principal, request_id: Any, params: dict[str, Any]) -> Response | None:
        """The refusal of the send (``params`` may be completed in place), or ``None``."""


class Interceptor(Protocol):
    """What the daemon answers itself rather than the SDK (:class:`~.intercept.Intercept` is the daemon's)."""

    async def intercept(
        self, principal: Principal, request_id: Any, method: str, params: dict[str, Any], activated: list[str]
    ) -> Response | object | None:
        """The answer to the request; ``None`` to pass it on to the SDK; anything else is passed on too, as the
        request's ``handoff`` (``request.state.handoff``: the call-context builder gives it to the SDK's side)."""


@dataclass(frozen=True)
class Endpoint:
    """One path the front serves (``/agents/{id}/``, or ``/`` for the default agent): ``agent`` (the id of the agent
    it serves: principals' ``agents`` patterns and a request's ``tenant`` are checked against it), ``dispatch`` (the
    SDK's JSON-RPC dispatcher of that agent), ``admission`` (whether its sends are refused: draining),
    ``check_send`` (the refusal of a send, if any; commands have their own, in order, after these) and
    ``intercept`` (what the daemon answers itself on that path: commands), ``interface_url`` (the URL its cards
    show as their JSON-RPC interface)."""

    agent: str
    dispatch: Callable[[Request], Any]
    admission: Draining
    interface_url: str
    check_send: SendCheck | None = None
    intercept: Interceptor | None = None


class Front:
    """The Starlette endpoint of every agent's path: the checks above, then the :class:`Endpoint`'s ``dispatch``
    (the SDK's dispatcher of that agent).

    ``methods`` are the JSON-RPC methods routed; ``supported_extensions`` are the URIs that can be activated. The
    principal is left in ``request.state.principal`` for the call-context builder, the interface URL in
    ``request.state.interface_url`` (the extended card's). The limits and the trusted proxies are those of the
    configuration ``identities`` holds (:attr:`settings`), so a reload that replaces it applies them; the limiter,
    the rate buckets and the identities are the daemon's, shared by every agent."""

    def __init__(
        self,
        identities: Identities,
        methods: set[str],
        *,
        supported_extensions: set[str],
        realm: str,
        spawn: Callable[..., Any] | None = None,
    ) -> None:
        self.spawn = spawn
        self.identities = identities
        self.methods = methods
        self.supported_extensions = supported_extensions
        self.realm = realm
        self.rates = RateLimits()
        # the refill is an environment variable too, so that a test on a loaded machine sees no refill mid-count
        refill = seconds("ANYAGENTD_A2A_FAILED_CREDENTIAL_REFILL", FAILED_CREDENTIAL_REFILL_SECONDS)
        self.failed = TokenBucket(FAILED_CREDENTIAL_BURST, refill)
        self._proxies: tuple[Loaded | None, list[Network]] = (None, [])
        self._unary = 0  # requests in hand that answer once (not a stream)
        self._settled = anyio.Event()
        self._settled.set()

    async def settled(self, timeout: float) -> None:
        """Return once no request the front took in is still waiting for its one answer (streams left out: the
        drain ends those), or after ``timeout`` seconds: the drain waits for this before the SDK's handlers close
        (an ``admin.drain`` ran in the front before the SDK made its task; closing the handlers first refused that
        task, and the request that asked for the drain got HTTP 500)."""
        with anyio.move_on_after(timeout):
            await self._settled.wait()

    @property
    def settings(self) -> A2ASection:
        """The ``[a2a]`` section served now: the configuration :attr:`identities` was built from, which a reload
        (SIGHUP) replaces — so ``limits`` and ``trusted_proxies`` change with it."""
        return self.identities.loaded.config.a2a

    @property
    def secrets(self) -> Secrets:
        """The credentials of the configuration served now (:attr:`identities`'; a reload replaces them): the
        metrics' scrape token among them."""
        return self.identities.loaded.secrets

    def source_of(self, request: Request) -> str:
        """The client address of ``request``: its peer, or behind a trusted proxy the address ``X-Forwarded-For``
        names (:func:`.proxies.client_address`); ``"unknown"`` without a peer."""
        peer = request.client.host if request.client else "unknown"
        loaded, proxies = self._proxies
        if loaded is not self.identities.loaded:  # parsed once per configuration
            proxies = [parse_proxy(p) for p in self.settings.trusted_proxies]
            self._proxies = (self.identities.loaded, proxies)
        return client_address(peer, request.headers.getlist("x-forwarded-for"), proxies)

    async def handle(self, request: Request, endpoint: Endpoint) -> Response:
        """The answer to the JSON-RPC ``request`` posted to ``endpoint``'s path: the first refusal of the pipeline
        (the module docstring), else what the endpoint's intercept or the SDK's dispatcher answers."""
        self._unary += 1
        self._settled = anyio.Event() if self._settled.is_set() else self._settled
        counted = True
        try:
            response = await self._handle(request, endpoint)
            if "text/event-stream" in response.headers.get("content-type", ""):
                counted = False  # a stream: the drain ends it
                self._done()
            return response
        finally:
            if counted:
                self._done()

    def _done(self) -> None:
        self._unary -= 1
        if self._unary == 0:
            self._settled.set()

    async def _handle(self, request: Request, endpoint: Endpoint) -> Response:
        request.state.rpc = True  # a POST the front answers: what the metrics count (.observe.requests)
        request.state.agent = endpoint.agent  # the access log's
        request.state.interface_url = endpoint.interface_url  # the extended card's (.calls)
        checked = await self._check(request, endpoint)
        if isinstance(checked, Response):
            source = self.source_of(request)
            log.info(
                "refused %s from %s: HTTP %d %s",
                request.headers.get("a2a-version", "-"),
                source,
                checked.status_code,
                checked.body[:160].decode("utf-8", "replace"),
            )
            return checked
        principal, activated, envelope = checked
        request.state.principal = principal
        params = envelope.get("params") or {}
        request.state.handoff = None
        answered = None
        if endpoint.intercept is not None:  # what the daemon answers itself (commands), or hands on to the SDK
            answered = await endpoint.intercept.intercept(
                principal, envelope["id"], envelope["method"], params, activated
            )
        if isinstance(answered, Response):
            response = answered
        else:
            request.state.handoff = answered
            response = await self._dispatch(request, principal, envelope, endpoint.dispatch)
        if activated:
            response.headers["A2A-Extensions"] = ", ".join(activated)
        streaming = "text/event-stream" in response.headers.get("content-type", "")
        if streaming and principal.session is not None and self.identities.sessions is not None:
            from .auth.revocable import RevocableResponse

            response = RevocableResponse(
                response,
                self.identities.sessions.revoked_event(principal.session),
                request_id=envelope["id"],
                realm=self.realm,
            )
        return response

    async def authenticate(self, request: Request, *, unless: Response | None = None) -> Principal | Response:
        """Who sent ``request``, as every credentialed route of this daemon asks it: the principal its
        ``Authorization`` (or the implicit loopback operator) names, or the refusal to answer instead.

        The failed-credential limiter comes first: a source past its allowance (:attr:`failed`, the source is
        :meth:`source_of`'s) gets 429 -31429 with ``Retry-After`` unless what it presents is valid. Then
        ``unless`` — a refusal the caller answers before identity is asked (``POST /``'s 415) — is returned if
        given. Then identity (configured bearers, then device sessions): no or a bad credential gets 401 -31401 with
        ``WWW-Authenticate: Bearer realm=…``, and a bad one counts against its source."""
        source = self.source_of(request)
        authorization = request.headers.get("authorization")
        wait = self.failed.peek(source)
        if wait > 0:  # a source past its allowance: only valid evidence is served (checked as cheaply as ever)
            try:
                principal = await self._identify(request, authorization, source)
            except Unauthenticated:
                return rpc_error(
                    None,
                    -31429,
                    "too many failed credentials from this source",
                    status=429,
                    headers={"Retry-After": str(math.ceil(wait))},
                )
            return principal if unless is None else unless
        if unless is not None:
            return unless
        try:
            return await self._identify(request, authorization, source)
        except Unauthenticated as err:
            if err.bad_credential:
                self.failed.take(source)
            return rpc_error(
                None, -31401, str(err), status=401, headers={"WWW-Authenticate": f'Bearer realm="{self.realm}"'}
            )

    async def _dispatch(
        self, request: Request, principal: Principal, envelope: dict[str, Any], dispatch: Callable[[Request], Any]
    ) -> Response:
        """The SDK's answer; a blocking ``SendMessage`` of a device session answers 401 as soon as the session is
        revoked, while the send itself goes on in the background (what the principal owns is kept)."""
        params = envelope.get("params") or {}
        configuration = params.get("configuration")
        blocking = not (isinstance(configuration, dict) and configuration.get("returnImmediately"))
        if (
            principal.session is None
            or self.identities.sessions is None
            or self.spawn is None
            or envelope["method"] != "SendMessage"
            or not blocking
        ):
            return await dispatch(request)
        from .auth.revocable import unless_revoked

        return await unless_revoked(
            lambda: dispatch(request),
            self.identities.sessions.revoked_event(principal.session),
            spawn=self.spawn,
            request_id=envelope["id"],
            realm=self.realm,
        )

    async def _check(
        self, request: Request, endpoint: Endpoint
    ) -> Response | tuple[Principal, list[str], dict[str, Any]]:
        """Every step of the pipeline in order: the first refusal, or (principal, activated extension URIs, the
        JSON-RPC envelope). A command's own refusals come after these (:mod:`.command.envelope`)."""
        settings = self.settings
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        unsupported = None
        if media_type != "application/json":
            # A2A 1.0 §5.4 ContentTypeNotSupportedError (-32005) in a 415: the TCK (JSONRPC-SSE-002) reads the code.
            unsupported = rpc_error(
                None, CONTENT_TYPE_NOT_SUPPORTED, "Content-Type must be application/json", status=415
            )
        principal = await self.authenticate(request, unless=unsupported)  # the limiter, the 415, identity, in order
        if isinstance(principal, Response):
            return principal
        request.state.principal = principal  # the access log's, from here on (.observe.requests)
        try:
            body = await read_body(request, settings.limits.body_bytes)
        except TooLarge as err:
            return body_too_large(err)
        try:
            loaded = structjson.loads(body)
        except ValueError as err:
            return rpc_error(None, -32700, f"Parse error: the body is not JSON: {err}")
        except RecursionError:
            return rpc_error(None, -32700, "Parse error: the body is not JSON: nested too deeply")
        envelope = loaded.value
        refused = _check_envelope(envelope)
        if refused is not None:
            return refused
        request_id = envelope["id"]
        request.state.rpc_method = envelope["method"]  # the metrics' method label, the access log's (.observe)
        where = structjson.beyond_double(envelope.get("params")) if loaded.overflows else None
        if where is not None:  # a Struct would hold it as inf, which no task could be stored or answered with
            return invalid_params(
                request_id,
                [(where, "a number beyond the range of a double (A2A's numbers are finite IEEE 754 doubles)")],
            )
        version = request.headers.get("a2a-version", "")
        if not _VERSION.match(version.strip()):
            shown = version or "(missing)"
            return rpc_error(
                request_id,
                -32009,
                f"A2A version {shown} is not supported; send A2A-Version: 1.0",
                reason="VERSION_NOT_SUPPORTED",
                metadata={"requested": version, "supported": "1.0"},
            )
        wait = self.rates.take(principal)
        if wait > 0:
            return rpc_error(
                request_id, -31429, "rate limit exceeded", status=429, headers={"Retry-After": str(math.ceil(wait))}
            )
        method = envelope["method"]
        if method not in self.methods:
            return rpc_error(request_id, -32601, f"Method not found: {method}")
        activated = [
            u for u in requested_extensions(request.headers.getlist("a2a-extensions")) if u in self.supported_extensions
        ]
        if not principal.may(method):
            return rpc_error(
                request_id,
                -31403,
                f"{principal.id} may not call {method}",
                status=403,
                reason="PERMISSION_DENIED",
                domain=AGENTD_DOMAIN,
            )
        if not principal.reaches(endpoint.agent):
            return rpc_error(
                request_id,
                -31403,
                f"{principal.id} may not reach agent {endpoint.agent!r}",
                status=403,
                reason="PERMISSION_DENIED",
                domain=AGENTD_DOMAIN,
                metadata={"agent": endpoint.agent},
            )
        params = envelope.get("params") or {}
        tenant = params.get("tenant")
        if isinstance(tenant, str) and tenant and tenant != endpoint.agent:
            return invalid_params(
                request_id,
                [
                    (
                        "tenant",
                        f"this URL serves agent {endpoint.agent!r}, not {tenant!r}: each agent has its own URL "
                        "(GET /agents lists them), and no card names a tenant",
                    )
                ],
            )
        command = method in SEND_METHODS and is_command(params)
        # an agent drained on its own stays drained until the restart: the operator's ops on its path (status,
        # config) still answer; while the daemon drains, every send is refused
        if method in SEND_METHODS and endpoint.admission.draining and (endpoint.admission.by_daemon or not command):
            return rpc_error(
                request_id,
                -32603,
                f"{endpoint.admission.drain_note}: no new messages",
                reason="DRAINING",
                domain=AGENTD_DOMAIN,
            )
        if method in SEND_METHODS:
            refused = message_refusal(request_id, params, settings.limits)
            if refused is None:
                refused = empty_message_refusal(request_id, params)
            if refused is not None:
                return refused
        if command:  # the access log's op (.observe.requests); the command's checks come later
            first = command_parts(params["message"])[0]
            request.state.op = first.get("op") if isinstance(first, dict) else None
        if method in SEND_METHODS and endpoint.check_send is not None and not command:
            before = json.dumps(params, sort_keys=True)
            refused = await endpoint.check_send.check(principal, request_id, params)
            if refused is not None:
                return refused
            if json.dumps(params, sort_keys=True) != before:  # the send check completed the message (contextId)
                request._json = envelope  # what the SDK's dispatcher reads (Starlette's cache of request.json())
        held = None if command else held_history(method, params, settings.limits.task_history)
        if held is not None:
            envelope["params"] = held
            request._json = envelope
        return principal, activated, envelope

    async def _identify(self, request: Request, authorization: str | None, source: str) -> Principal:
        """The caller's principal from its evidence (:meth:`.principals.Identities.authenticate`: configured bearers
        compared in constant time, then device sessions, then the implicit loopback operator — whose peer is
        ``source``, and who needs a loopback ``Host``); raises :class:`~.principals.Unauthenticated`."""
        origin = request.headers.get("origin")
        if request.scope.get("state", {}).get("same_origin") and self.settings.console_enabled():
            origin = None  # the console's own page: no other site's page can send this Origin (:func:`same_origin`)
        principal = await self.identities.authenticate(authorization, source, origin)
        if authorization is None and not request.scope.get("state", {}).get("loopback_host", True):
            raise Unauthenticated("a bearer token is required (the Host is not a loopback name)", bad_credential=False)
        return principal


def _check_envelope(envelope: Any) -> Response | None:
    if isinstance(envelope, list):
        return rpc_error(None, -32600, "Invalid Request: batch requests are not supported")
    if not isinstance(envelope, dict):
        return rpc_error(None, -32600, "Invalid Request: not a JSON-RPC object")
    request_id = envelope.get("id")
    id_ok = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    shown_id = request_id if id_ok else None
    if envelope.get("jsonrpc") != "2.0":
        return rpc_error(shown_id, -32600, "Invalid Request: 'jsonrpc' must be \"2.0\"")
    if "id" not in envelope or not id_ok:
        return rpc_error(None, -32600, "Invalid Request: an id (string or integer) is required")
    if not isinstance(envelope.get("method"), str) or not envelope["method"]:
        return rpc_error(request_id, -32600, "Invalid Request: method must be a non-empty string")
    if "params" in envelope and not isinstance(envelope["params"], dict):
        return rpc_error(request_id, -32602, "Invalid params: params must be an object")
    return None


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, lower-cased, without its port (``[::1]:8787`` → ``::1``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def loopback_host(name: str) -> bool:
    """Whether a Host name is a loopback one: ``localhost`` (and ``*.localhost``, RFC 6761), 127.0.0.0/8, ::1."""
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


class HostGate:
    """Pure ASGI layer, the DNS-rebinding guard, in front of everything (the CORS gate included): a request whose
    ``Host`` is neither a loopback name/address nor one of ``public_hosts`` (the configured public URL's host) gets
    421 with a plain body, before any parsing; a web page that rebinds its own name to 127.0.0.1 reaches nothing.
    Sets ``scope["state"]["loopback_host"]`` for the identity step (the implicit loopback operator needs it)."""

    def __init__(self, app: Any, public_hosts: set[str]) -> None:
        self.app = app
        self.public_hosts = {h.lower() for h in public_hosts}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
        name = host_name(raw)
        loopback = loopback_host(name)
        if not loopback and name not in self.public_hosts:
            log.info("refused Host %r: not loopback and not the public URL's host", raw[:80])
            await PlainTextResponse(f"Misdirected request: Host {raw[:80]!r} is not served here.\n", status_code=421)(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})["loopback_host"] = loopback
        await self.app(scope, receive, send)


def same_origin(scope: dict[str, Any], origin: str, public_origin: str | None) -> bool:
    """Whether ``origin`` is the origin of the request itself: ``scheme://Host`` of ``scope`` (its scheme, or the
    public URL's ``public_origin`` behind a proxy that ends TLS), compared without case. A browser sends it on every
    POST of a page this daemon served (the console, :mod:`.console`); the Host gate in front has already refused a
    Host that is neither loopback nor the public URL's, so no other site's page can have it."""
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
    if not host:
        return False
    wanted, host = origin.strip().lower(), host.strip().lower()
    if wanted == f"{scope.get('scheme', 'http')}://{host}":
        return True
    return public_origin is not None and wanted == public_origin.lower() and urlsplit(wanted).netloc == host


class CorsGate:
    """Pure ASGI layer: a request whose ``Origin`` is not one of ``origins`` (exact match) gets 403 with an empty
    body; an allowed origin gets ``Access-Control-Allow-Origin`` on its response and preflights are answered. A
    same-origin request (:func:`same_origin`: the console's own) passes without CORS headers and is marked
    ``scope["state"]["same_origin"]`` for the identity step."""

    def __init__(self, app: Any, origins: list[str], public_origin: str | None = None) -> None:
        self.app = app
        self.origins = set(origins)
        self.public_origin = public_origin

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
        if origin is None:
            await self.app(scope, receive, send)
            return
        if origin not in self.origins and same_origin(scope, origin, self.public_origin):
            scope.setdefault("state", {})["same_origin"] = True
            await self.app(scope, receive, send)
            return
        if origin not in self.origins:
            await Response(status_code=403)(scope, receive, send)
            return
        allow = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", b"A2A-Extensions, ETag"),
        ]
        if scope["method"] == "OPTIONS":
            headers = {k.decode(): v.decode() for k, v in allow}
            headers.update(
                {
                    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                    "Access-Control-Max-Age": "600",
                    "Access-Control-Allow-Headers": "Authorization, Content-Type, A2A-Version, A2A-Extensions",
                }
            )
            await Response(status_code=204, headers=headers)(scope, receive, send)
            return

        async def send_with_cors(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=list(message.get("headers", [])) + allow)
            await send(message)

        await self.app(scope, receive, send_with_cors)
