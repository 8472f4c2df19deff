"""Who is calling: principals, identity from request evidence, method patterns, and the two rate limiters.

Behaviour from ``docs/commands.md#principals-and-roles``: roles operator, user, agent; principal ids ``operator`` or
``<role>:<id>``. Evidence order: a bearer (the operator bearer, compared in constant time, then each principal's,
then a device-session token's session; an unknown bearer is refused and never falls through) → the implicit
operator, only when the listener is loopback, no credential of any kind is configured, the peer is loopback and no
``Origin`` header came (the front passes none for a same-origin request of the daemon's own console page,
:func:`.front.same_origin`) → else nobody (401).
"""

from __future__ import annotations

import fnmatch
import hmac
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anyagentd.ops import Principal as CorePrincipal

from .config import Loaded, Rate, is_loopback, split_host_port

if TYPE_CHECKING:
    from .auth.sessions import AuthSessions


@dataclass(frozen=True)
class Principal(CorePrincipal):
    """An authenticated caller: core's :class:`~anyagentd.ops.Principal` (``id``, the owner of its tasks and
    conversations; ``role``; ``grants``, the op patterns the command extension checks) plus what the listener
    checks itself: ``methods`` (A2A method-name patterns it may call, ``*`` by default) and its ``rate``;
    ``session`` is the sid of the device session it signed in with (``None`` for configured credentials);
    ``agents``: patterns of the agent ids it may reach (``*`` by default, and for a device session)."""

    methods: tuple[str, ...] = ("*",)
    rate: Rate | None = None
    session: str | None = None
    agents: tuple[str, ...] = ("*",)

    def may(self, method: str) -> bool:
        """Whether a ``methods`` pattern (``fnmatch``, case-sensitive) covers the A2A ``method``; the operator may
        call anything."""
        return self.is_operator or any(fnmatch.fnmatchcase(method, g) for g in self.methods)

    def reaches(self, agent_id: str) -> bool:
        """Whether an ``agents`` pattern (``fnmatch``, case-sensitive) covers the agent ``agent_id``; the operator
        reaches every agent."""
        return self.is_operator or any(fnmatch.fnmatchcase(agent_id, p) for p in self.agents)


OPERATOR = Principal("operator", "operator")
SCRAPER = Principal("metrics", "user", methods=())
"""Who presented the scrape token (``[a2a.metrics] token``, :mod:`.observe.metrics`), as the access log names it:
``metrics`` — no ``<role>:`` prefix, so no configured principal or device session can bear the id. It may call
no method and holds no grant: the token serves ``GET /metrics`` and nothing else."""


class Unauthenticated(Exception):
    """No acceptable credential; ``bad_credential`` says a credential was presented and failed (it counts against
    the failed-credential limiter)."""

    def __init__(self, message: str, *, bad_credential: bool) -> None:
        super().__init__(message)
        self.bad_credential = bad_credential


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (stripped), or ``None``."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


@dataclass
class Identities:
    """Resolves a request's principal from the configuration's credentials and, when the device grant is on,
    from ``sessions`` (see the module docstring)."""

    loaded: Loaded
    sessions: AuthSessions | None = None
    _bearers: list[tuple[bytes, Principal]] = field(default_factory=list)

    def __post_init__(self) -> None:
        secrets = self.loaded.secrets
        if secrets.operator is not None:
            self._bearers.append((secrets.operator.get_secret_value().encode(), OPERATOR))
        for section in self.loaded.config.a2a.principals:
            principal = Principal(
                f"{section.role}:{section.id}",
                section.role,
                tuple(section.grants),
                tuple(section.methods),
                section.rate,
                agents=tuple(section.agents),
            )
            self._bearers.append((secrets.principals[section.id].get_secret_value().encode(), principal))
        host, _ = split_host_port(self.loaded.config.a2a.listen)
        self._loopback_listener = is_loopback(host)

    async def authenticate(self, authorization: str | None, peer: str | None, origin: str | None) -> Principal:
        """:meth:`identify`, then a bearer no configured credential matched is looked up as a device-session
        token: its live session's principal. Raises :class:`Unauthenticated` (an unknown or revoked session
        token is a bad credential like any unknown bearer)."""
        try:
            return self.identify(authorization, peer, origin)
        except Unauthenticated as err:
            if not err.bad_credential:
                raise
            found = await self.session_principal(authorization)
            if found is None:
                raise
            return found

    async def session_principal(self, authorization: str | None) -> Principal | None:
        """The principal of the live device session whose token ``authorization`` carries, or ``None`` (no
        device grant, not a session token, unknown, revoked or expired): ``user:<name>``, its role from the
        session's scope, no op grants, every method, the session's sid."""
        token = bearer_of(authorization)
        if self.sessions is None or token is None:
            return None
        session = await self.sessions.lookup(token)  # answers None for a token without the session prefix
        if session is None:
            return None
        return Principal(session.principal, session.role, (), session=session.sid)  # type: ignore[arg-type]

    def identify(self, authorization: str | None, peer: str | None, origin: str | None) -> Principal:
        """The principal for these request facts from the configured credentials alone; raises
        :class:`Unauthenticated`."""
        if authorization is not None:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>'", bad_credential=True)
            presented = token.strip().encode()
            found = None
            for bearer, principal in self._bearers:  # compare with every one: no early exit to time
                if hmac.compare_digest(bearer, presented):
                    found = principal
            if found is None:
                raise Unauthenticated("unknown bearer token", bad_credential=True)
            return found
        if (
            self._loopback_listener
            and not self.loaded.credentialed
            and origin is None
            and peer is not None
            and is_loopback(peer)
        ):
            return OPERATOR
        raise Unauthenticated("a bearer token is required", bad_credential=False)


class TokenBucket:
    """Per-key token buckets: ``capacity`` tokens refilled at ``capacity / seconds`` per second (monotonic clock).

    ``take(key)`` spends one token and returns 0.0, or returns the seconds until one is available (spending none).
    ``peek(key)`` is the same without spending. Keys idle long enough to be full again are forgotten.
    """

    def __init__(self, capacity: int, seconds: float, clock=time.monotonic) -> None:
        self.capacity = capacity
        self.rate = capacity / seconds
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def _level(self, key: str) -> float:
        now = self._clock()
        tokens, at = self._buckets.get(key, (float(self.capacity), now))
        return min(float(self.capacity), tokens + (now - at) * self.rate)

    def peek(self, key: str) -> float:
        level = self._level(key)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.rate

    def take(self, key: str) -> float:
        level = self._level(key)
        if level < 1.0:
            return (1.0 - level) / self.rate
        self._buckets[key] = (level - 1.0, self._clock())
        if len(self._buckets) > 4096:
            self._forget_full()
        return 0.0

    def _forget_full(self) -> None:
        for key in [k for k in self._buckets if self._level(k) >= self.capacity]:
            del self._buckets[key]


class RateLimits:
    """One bucket per principal, built from its configured ``rate`` (the operator is not limited)."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}

    def take(self, principal: Principal) -> float:
        if principal.rate is None:
            return 0.0
        bucket = self._buckets.get(principal.id)
        if bucket is None:
            bucket = self._buckets[principal.id] = TokenBucket(principal.rate.requests, principal.rate.seconds)
        return bucket.take(principal.id)


FAILED_CREDENTIAL_BURST = 20
"""Bad credentials a source may present before it is refused without checking (429)."""
FAILED_CREDENTIAL_REFILL_SECONDS = 60.0
"""Seconds over which a source's failed-credential allowance refills completely."""
