"""Signed-in sessions: bearer tokens issued by the device grant, stored only as hashes, revocable at once.

A token is ``agd_`` + 43 URL-safe characters (256 random bits); the store keeps its SHA-256 and never the token.
:meth:`AuthSessions.lookup` maps a presented bearer to its live session (the identity step of the listener asks it
after the configured bearers); :meth:`AuthSessions.revoke` ends sessions at once and sets the event every open
stream of that session waits on (:meth:`AuthSessions.revoked_event`), so those streams close and later calls get
401. Revoking never touches what the principal owns.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import BigInteger, Boolean, String, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

TOKEN_PREFIX = "agd_"


class _Base(DeclarativeBase):
    pass


class SessionRow(_Base):
    __tablename__ = "agentd_auth_sessions"

    sid: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(String(64), index=True, nullable=True)
    principal: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    client_id: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    approved_by: Mapped[str] = mapped_column(String(128))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


@dataclass(frozen=True)
class AuthSession:
    """One signed-in session as ``auth.sessions`` lists it (epoch ms)."""

    sid: str
    kind: str
    name: str | None
    principal: str
    role: str
    client_id: str
    scope: str
    created_at: int
    expires_at: int | None
    approved_by: str

    def to_json(self) -> dict[str, Any]:
        row = {
            "sid": self.sid,
            "kind": self.kind,
            "principal": self.principal,
            "role": self.role,
            "client_id": self.client_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "approved_by": self.approved_by,
        }
        if self.name is not None:
            row["name"] = self.name
        return row


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def now_ms() -> int:
    return int(time.time() * 1000)


class AuthSessions:
    """The session table on the daemon's database engine (shared with the task store). Call :meth:`open` first.

    ``lifetime`` is a token's life in seconds (``None``: until revoked)."""

    def __init__(self, engine: AsyncEngine, *, lifetime: float | None = 30 * 86400) -> None:
        self.engine = engine
        self.lifetime = lifetime
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._revoked: dict[str, anyio.Event] = {}

    async def open(self) -> AuthSessions:
        async with self.engine.begin() as conn:
            await conn.run_sync(_Base.metadata.create_all)
        return self

    async def issue(
        self, *, kind: str, name: str | None, principal: str, role: str, client_id: str, scope: str, approved_by: str
    ) -> tuple[str, AuthSession]:
        """A new session; returns ``(token, session)``. The token is shown once and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = now_ms()
        expires = None if self.lifetime is None else created + int(self.lifetime * 1000)
        row = SessionRow(
            sid=secrets.token_hex(8),
            token_hash=token_hash(token),
            kind=kind,
            name=name,
            principal=principal,
            role=role,
            client_id=client_id,
            scope=scope,
            created_at=created,
            expires_at=expires,
            approved_by=approved_by,
        )
        async with self._sessions() as db, db.begin():
            db.add(row)
        return token, _session(row)

    async def lookup(self, token: str) -> AuthSession | None:
        """The live (not revoked, not expired) session of a presented bearer, or ``None``."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        async with self._sessions() as db:
            row = (
                await db.execute(select(SessionRow).where(SessionRow.token_hash == token_hash(token)))
            ).scalar_one_or_none()
        if row is None or row.revoked or (row.expires_at is not None and row.expires_at <= now_ms()):
            return None
        return _session(row)

    async def list(self) -> list[AuthSession]:
        """Live sessions, oldest first."""
        async with self._sessions() as db:
            rows = (
                (
                    await db.execute(
                        select(SessionRow).where(SessionRow.revoked.is_(False)).order_by(SessionRow.created_at)
                    )
                )
                .scalars()
                .all()
            )
        now = now_ms()
        return [_session(r) for r in rows if r.expires_at is None or r.expires_at > now]

    async def live_count(self) -> int:
        """How many sessions are live (not revoked, not expired): the sessions :meth:`list` gives, counted in one
        query. Raises what the driver raises."""
        live = (
            select(func.count())
            .select_from(SessionRow)
            .where(
                SessionRow.revoked.is_(False), or_(SessionRow.expires_at.is_(None), SessionRow.expires_at > now_ms())
            )
        )
        async with self._sessions() as db:
            return (await db.execute(live)).scalar_one()

    async def names(self) -> set[str]:
        """Names that have had a session (to tell ``existing`` on approval)."""
        async with self._sessions() as db:
            rows = (await db.execute(select(SessionRow.name).where(SessionRow.name.is_not(None)))).scalars().all()
        return set(rows)

    async def revoke(self, *, sid: str | None = None, name: str | None = None, every: bool = False) -> int:
        """End one session, every session of ``name``, or all; returns how many were live. Open streams of
        those sessions are told at once (:meth:`revoked_event`)."""
        query = select(SessionRow.sid).where(SessionRow.revoked.is_(False))
        if sid is not None:
            query = query.where(SessionRow.sid == sid)
        elif name is not None:
            query = query.where(SessionRow.name == name)
        elif not every:
            return 0
        async with self._sessions() as db, db.begin():
            sids = list((await db.execute(query)).scalars().all())
            if sids:
                await db.execute(update(SessionRow).where(SessionRow.sid.in_(sids)).values(revoked=True))
        for one in sids:
            self.revoked_event(one).set()
        return len(sids)

    async def revoke_token(self, token: str) -> str | None:
        """RFC 7009: end the session of ``token`` if it is one of ours and live; returns the principal id it
        signed in (``user:dev``), ``None`` otherwise (still a 200 to the caller)."""
        async with self._sessions() as db:
            row = (
                await db.execute(
                    select(SessionRow.sid, SessionRow.principal).where(SessionRow.token_hash == token_hash(token))
                )
            ).first()
        if row is None or await self.revoke(sid=row.sid) == 0:
            return None
        return row.principal

    async def prune(self, older_than: float) -> int:
        """Delete the sessions that expired more than ``older_than`` seconds ago, and the revoked ones issued more
        than that ago (a revocation keeps no time of its own); returns how many went. A live session is never
        touched. Raises what the driver raises."""
        cutoff = now_ms() - int(older_than * 1000)
        async with self._sessions() as db, db.begin():
            gone = await db.execute(
                delete(SessionRow).where(
                    or_(
                        SessionRow.expires_at < cutoff,
                        and_(SessionRow.revoked.is_(True), SessionRow.created_at < cutoff),
                    )
                )
            )
        return gone.rowcount

    def revoked_event(self, sid: str) -> anyio.Event:
        """The event set when session ``sid`` is revoked (a stream under it waits on it and closes)."""
        event = self._revoked.get(sid)
        if event is None:
            event = self._revoked[sid] = anyio.Event()
        return event


def _session(row: SessionRow) -> AuthSession:
    return AuthSession(
        sid=row.sid,
        kind=row.kind,
        name=row.name,
        principal=row.principal,
        role=row.role,
        client_id=row.client_id,
        scope=row.scope,
        created_at=row.created_at,
        expires_at=row.expires_at,
        approved_by=row.approved_by,
    )


__all__ = ["AuthSession", "AuthSessions", "TOKEN_PREFIX", "token_hash"]
