"""The OAuth 2.0 device authorization grant (RFC 8628), the daemon's side: codes, polling rules and approvals.

A device asks for a code pair (:meth:`DeviceGrant.authorize`), shows the user code, and polls the token endpoint
(:meth:`DeviceGrant.poll`) while an operator approves it (``auth.device.approve``) or denies it. The poll's errors
come in this order (``docs/commands.md#device-grant``): ``invalid_request`` (a parameter missing or malformed),
``unsupported_grant_type``, ``invalid_grant`` (unknown code, already used, or another client's), ``expired_token``,
``slow_down`` (polled sooner than the interval; the interval grows by 5 s), ``authorization_pending``,
``access_denied``. A code is single-use: once it has answered a token or ``access_denied`` it is spent.

Device codes are 64 hex characters; user codes ``XXXX-XXXX`` from :data:`USER_CODE_ALPHABET` (no vowels, so no
words), typed case-insensitively with spaces and dashes ignored. Pending codes are bounded per source and in all.
Pending codes live in memory (a restart asks the device to start over); sessions are durable
(:mod:`.sessions`).
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .names import NAME, RESERVED_NAMES, ApprovalRefused

if TYPE_CHECKING:  # the store (SQLAlchemy) stays out of the client, which reads GRANT_TYPE from here
    from .sessions import AuthSessions

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
INTERVAL = 5
SLOW_DOWN_STEP = 5
CLIENT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
SCOPES = ("user", "operator")
Scope = Literal["user", "operator"]


class OAuthError(Exception):
    """An RFC 6749 §5.2 error answer: ``error`` code, ``description``, and the HTTP status (400 unless said)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error, self.description, self.status = error, description, status

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


@dataclass
class _Pending:
    device_code: str
    user_code: str
    client_id: str
    scope: Scope
    peer: str | None
    requested_at: float
    expires_at: float
    interval: int = INTERVAL
    last_poll: float | None = None
    state: Literal["pending", "approved", "denied", "used"] = "pending"
    approval: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "user_code": self.user_code,
            "client_id": self.client_id,
            "scope": self.scope,
            "peer": self.peer,
            "requested_at": int(self.requested_at * 1000),
            "expires_at": int(self.expires_at * 1000),
        }


def normalize_user_code(typed: str) -> str:
    """``"bcdf ghjk"`` / ``"BCDF-GHJK"`` / ``"bcdfghjk"`` → ``"BCDF-GHJK"`` (the stored form)."""
    raw = re.sub(r"[\s-]", "", typed).upper()
    return f"{raw[:4]}-{raw[4:]}" if len(raw) == 8 else raw


class DeviceGrant:
    """Pending device codes and the rules around them.

    Takes ``sessions`` (where approved devices' tokens go), ``verification_uri`` (shown to the user),
    ``principal_ids`` (configured principal ids, which ``as`` may not take), ``lifetime`` (seconds a code lives;
    600), ``max_pending`` (in all; 64) and ``max_per_source`` (8), and ``clock`` (seconds).
    """

    def __init__(
        self,
        sessions: AuthSessions,
        *,
        verification_uri: str,
        principal_ids: set[str] | None = None,
        lifetime: float = 600,
        max_pending: int = 64,
        max_per_source: int = 8,
        clock: Any = time.monotonic,
        wall: Any = time.time,
    ) -> None:
        self.sessions = sessions
        self.verification_uri = verification_uri
        self.principal_ids = set(principal_ids or ())
        self.lifetime = lifetime
        self.max_pending = max_pending
        self.max_per_source = max_per_source
        self.clock, self.wall = clock, wall
        self._by_device: dict[str, _Pending] = {}
        self._by_user: dict[str, _Pending] = {}

    # -- the device's side -------------------------------------------------------------------------------------

    def authorize(self, client_id: str | None, scope: str | None, peer: str | None) -> dict[str, Any]:
        """``POST /oauth2/device_authorization``: a new code pair. Raises :class:`OAuthError`."""
        self._expire()
        if not client_id or not CLIENT_ID.match(client_id):
            raise OAuthError("invalid_request", "client_id must be 1-64 of A-Z a-z 0-9 . _ -")
        scope = scope or "user"
        if scope not in SCOPES:
            raise OAuthError("invalid_scope", "scope is 'user' or 'operator'")
        waiting = self._waiting()
        if len(waiting) >= self.max_pending or sum(p.peer == peer for p in waiting) >= self.max_per_source:
            raise OAuthError("slow_down", "too many sign-ins are waiting; try again later", status=429)
        wall = self.wall()
        pending = _Pending(
            secrets.token_hex(32),
            self._new_user_code(),
            client_id,
            scope,
            peer,
            wall,  # type: ignore[arg-type]
            wall + self.lifetime,
        )
        self._by_device[pending.device_code] = pending
        self._by_user[pending.user_code] = pending
        return {
            "device_code": pending.device_code,
            "user_code": pending.user_code,
            "verification_uri": self.verification_uri,
            "expires_in": int(self.lifetime),
            "interval": INTERVAL,
        }

    async def poll(self, grant_type: str | None, device_code: str | None, client_id: str | None) -> dict[str, Any]:
        """``POST /oauth2/token``: the token, or the first :class:`OAuthError` in the order of the module doc."""
        if not grant_type or not device_code or not client_id:
            raise OAuthError("invalid_request", "grant_type, device_code and client_id are required")
        if grant_type != GRANT_TYPE:
            raise OAuthError("unsupported_grant_type", f"only {GRANT_TYPE} is supported")
        pending = self._by_device.get(device_code)
        if pending is None or pending.state == "used" or pending.client_id != client_id:
            raise OAuthError("invalid_grant", "unknown or spent device code")
        if self.wall() >= pending.expires_at:
            self._forget(pending)
            raise OAuthError("expired_token", "the device code has expired; start again")
        now = self.clock()
        last, pending.last_poll = pending.last_poll, now
        if last is not None and now - last < pending.interval:
            pending.interval += SLOW_DOWN_STEP
            raise OAuthError("slow_down", f"poll at most every {pending.interval} s")
        if pending.state == "pending":
            raise OAuthError("authorization_pending", "waiting for an operator to approve this sign-in")
        if pending.state == "denied":
            pending.state = "used"
            raise OAuthError("access_denied", "the sign-in was refused")
        pending.state = "used"
        approval = pending.approval
        token, session = await self.sessions.issue(
            kind="device",
            name=approval["name"],
            principal=approval["principal"],
            role=approval["scope"],
            client_id=pending.client_id,
            scope=approval["scope"],
            approved_by=approval["approved_by"],
        )
        expires_in = None if session.expires_at is None else max(0, (session.expires_at - session.created_at) // 1000)
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "scope": approval["scope"]}
        if expires_in is not None:
            body["expires_in"] = expires_in
        return body

    # -- the operator's side -----------------------------------------------------------------------------------

    def pending(self) -> list[dict[str, Any]]:
        """``auth.device.pending``: codes waiting for a decision, oldest first."""
        return [p.to_json() for p in self._waiting()]

    async def approve(self, user_code: str, name: str, scope: str | None, approved_by: str) -> dict[str, Any]:
        """``auth.device.approve``: sign the device in as ``user:<name>``; ``scope`` may narrow, never widen, and
        defaults to ``user`` whatever the device asked (an operator grants operator scope only by saying so).
        Raises :class:`ApprovalRefused` naming the argument."""
        if not NAME.match(name) or name in RESERVED_NAMES or name in self.principal_ids:
            raise ApprovalRefused("as", f"{name!r} cannot be a device name (reserved, configured, or malformed)")
        pending = self._find(user_code)
        granted = scope or "user"  # operator scope only when the approver says so, never by default
        if granted not in SCOPES or (pending.scope == "user" and granted == "operator"):
            raise ApprovalRefused("scope", f"scope {granted!r} would widen the requested {pending.scope!r}")
        existing = name in await self.sessions.names()
        principal = f"user:{name}"
        pending.state = "approved"
        pending.approval = {"name": name, "principal": principal, "scope": granted, "approved_by": approved_by}
        return {
            "user_code": pending.user_code,
            "client_id": pending.client_id,
            "scope": granted,
            "peer": pending.peer,
            "principal": principal,
            "existing": existing,
        }

    def deny(self, user_code: str | None = None, *, every: bool = False) -> int:
        """``auth.device.deny``: refuse one pending code or all; returns how many."""
        waiting = self._waiting() if every else [self._find(user_code or "")]
        for pending in waiting:
            pending.state = "denied"
        return len(waiting)

    # -- internals ---------------------------------------------------------------------------------------------

    def _waiting(self) -> list[_Pending]:
        self._expire()
        wall = self.wall()
        return [p for p in self._by_device.values() if p.state == "pending" and wall < p.expires_at]

    def _find(self, user_code: str) -> _Pending:
        pending = self._by_user.get(normalize_user_code(user_code))
        if pending is None or pending not in self._waiting():
            raise ApprovalRefused("user_code", "no pending sign-in has this code")
        return pending

    def _new_user_code(self) -> str:
        while True:
            raw = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
            code = f"{raw[:4]}-{raw[4:]}"
            if code not in self._by_user:
                return code

    def _expire(self) -> None:
        wall = self.wall()
        for pending in list(self._by_device.values()):
            if wall >= pending.expires_at + self.lifetime:  # kept a while so a late poll reads expired_token
                self._forget(pending)

    def _forget(self, pending: _Pending) -> None:
        self._by_device.pop(pending.device_code, None)
        self._by_user.pop(pending.user_code, None)


def metadata(issuer: str) -> dict[str, Any]:
    """RFC 8414 authorization server metadata for ``GET /.well-known/oauth-authorization-server``."""
    base = issuer.rstrip("/")
    return {
        "issuer": base,
        "device_authorization_endpoint": f"{base}/oauth2/device_authorization",
        "token_endpoint": f"{base}/oauth2/token",
        "revocation_endpoint": f"{base}/oauth2/revoke",
        "grant_types_supported": [GRANT_TYPE],
        "response_types_supported": [],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": list(SCOPES),
    }


__all__ = ["ApprovalRefused", "DeviceGrant", "GRANT_TYPE", "OAuthError", "metadata", "normalize_user_code"]
