"""The device authorization grant's rules (RFC 8628) on a real SQLite session table: code formats, the token
endpoint's error order, slow_down, single use, approval names and scope, denial, revocation, hashed storage. The
whole grant over HTTP against a real daemon is in tests/a2a_command/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from anyagentd_a2a.auth.device import GRANT_TYPE, ApprovalRefused, DeviceGrant, OAuthError, normalize_user_code
from anyagentd_a2a.auth.sessions import AuthSessions

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


STORE_URL: dict[str, str] = {}
"""The device sessions' database of the running test (:func:`_sessions_on_each_database`)."""


@pytest.fixture(autouse=True)
def _sessions_on_each_database(database_url: str) -> Iterator[None]:
    """Every test here runs once with the device sessions on SQLite, once on PostgreSQL (``database_url``)."""
    STORE_URL["url"] = database_url
    yield
    STORE_URL.clear()


async def grant_for(tmp: Path, clock: Clock | None = None, **kwargs: Any) -> tuple[DeviceGrant, AuthSessions]:
    engine = create_async_engine(STORE_URL["url"])
    sessions = await AuthSessions(engine).open()
    clock = clock or Clock()
    grant = DeviceGrant(
        sessions,
        verification_uri="http://127.0.0.1:1/device",
        principal_ids={"alice"},
        clock=clock,
        wall=clock,
        **kwargs,
    )
    return grant, sessions


async def poll(grant: DeviceGrant, code: str, client: str = "cli", grant_type: str = GRANT_TYPE) -> str:
    try:
        await grant.poll(grant_type, code, client)
    except OAuthError as err:
        return err.error
    return "token"


async def test_code_formats(tmp_path: Path) -> None:
    grant, _ = await grant_for(tmp_path)
    pair = grant.authorize("cli", None, "127.0.0.1")
    assert re.fullmatch(r"[0-9a-f]{64}", pair["device_code"])
    assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", pair["user_code"])
    assert pair["interval"] == 5 and pair["expires_in"] == 600
    assert normalize_user_code(" bcdf ghjk") == "BCDF-GHJK" == normalize_user_code("bcdf-ghjk")
    with pytest.raises(OAuthError, match="invalid_request"):
        grant.authorize("bad id!", None, None)
    with pytest.raises(OAuthError, match="invalid_scope"):
        grant.authorize("cli", "admin", None)


async def test_the_token_endpoint_errors_in_order_then_single_use(tmp_path: Path) -> None:
    clock = Clock()
    grant, sessions = await grant_for(tmp_path, clock)
    pair = grant.authorize("cli", "user", "10.0.0.9")
    code = pair["device_code"]
    assert await poll(grant, "", "cli") == "invalid_request"
    assert await poll(grant, code, grant_type="password") == "unsupported_grant_type"
    assert await poll(grant, "f" * 64) == "invalid_grant"
    assert await poll(grant, code, client="other") == "invalid_grant"
    assert await poll(grant, code) == "authorization_pending"
    clock.now += 1
    assert await poll(grant, code) == "slow_down"  # polled early: the interval grows to 10 s
    clock.now += 6
    assert await poll(grant, code) == "slow_down"
    with pytest.raises(ApprovalRefused) as bad_name:
        await grant.approve(pair["user_code"], "operator", None, "operator")
    assert bad_name.value.field == "as"
    with pytest.raises(ApprovalRefused):
        await grant.approve(pair["user_code"], "alice", None, "operator")  # a configured principal id
    with pytest.raises(ApprovalRefused) as widen:
        await grant.approve(pair["user_code"], "bob", "operator", "operator")
    assert widen.value.field == "scope"
    approved = await grant.approve(pair["user_code"].lower().replace("-", " "), "bob", None, "operator")
    assert approved == {
        "user_code": pair["user_code"],
        "client_id": "cli",
        "scope": "user",
        "peer": "10.0.0.9",
        "principal": "user:bob",
        "existing": False,
    }
    clock.now += 16
    body = await grant.poll(GRANT_TYPE, code, "cli")
    assert body["token_type"] == "Bearer" and body["scope"] == "user" and body["expires_in"] > 0
    token = body["access_token"]
    assert await poll(grant, code) == "invalid_grant", "a device code is single-use"
    session = await sessions.lookup(token)
    assert session is not None and session.principal == "user:bob" and session.role == "user"
    # only the hash is stored
    async with sessions.engine.connect() as conn:
        rows = (await conn.execute(text("select * from agentd_auth_sessions"))).all()
    assert token not in repr(rows)
    second = grant.authorize("cli", None, None)
    again = await grant.approve(second["user_code"], "bob", None, "operator")
    assert again["existing"] is True


async def test_expiry_denial_and_bounds(tmp_path: Path) -> None:
    clock = Clock()
    grant, _ = await grant_for(tmp_path, clock, lifetime=30, max_pending=3, max_per_source=2)
    first = grant.authorize("cli", None, "a")
    grant.authorize("cli", None, "a")
    with pytest.raises(OAuthError) as per_source:
        grant.authorize("cli", None, "a")
    assert per_source.value.status == 429
    denied = grant.authorize("cli", None, "b")
    with pytest.raises(OAuthError):
        grant.authorize("cli", None, "c")  # 3 in all
    assert len(grant.pending()) == 3
    assert grant.deny(denied["user_code"]) == 1
    assert await poll(grant, denied["device_code"]) == "access_denied"
    assert await poll(grant, denied["device_code"]) == "invalid_grant"
    clock.now += 31
    assert await poll(grant, first["device_code"]) == "expired_token"
    assert grant.deny(every=True) == 0


async def test_revocation_is_immediate(tmp_path: Path) -> None:
    grant, sessions = await grant_for(tmp_path)
    token, session = await sessions.issue(
        kind="device",
        name="bob",
        principal="user:bob",
        role="user",
        client_id="cli",
        scope="user",
        approved_by="operator",
    )
    token2, _ = await sessions.issue(
        kind="device",
        name="bob",
        principal="user:bob",
        role="user",
        client_id="cli",
        scope="user",
        approved_by="operator",
    )
    event = sessions.revoked_event(session.sid)
    assert [s.sid for s in await sessions.list()] == [session.sid, _.sid]
    assert await sessions.revoke(sid=session.sid) == 1
    assert event.is_set()
    assert await sessions.lookup(token) is None and await sessions.lookup(token2) is not None
    assert await sessions.revoke(name="bob") == 1
    assert await sessions.lookup(token2) is None
    assert await sessions.revoke(every=True) == 0
    assert await sessions.lookup("agd_" + "x" * 43) is None and await sessions.lookup("not-ours") is None


async def test_operator_scope_only_when_the_approver_grants_it(tmp_path: Path) -> None:
    grant, sessions = await grant_for(tmp_path)
    asked = grant.authorize("cli", "operator", None)
    approved = await grant.approve(asked["user_code"], "mallory", None, "operator")
    assert approved["scope"] == "user", "a device asking for operator scope gets user unless the approver says so"
    again = grant.authorize("cli", "operator", None)
    assert (await grant.approve(again["user_code"], "root-ish", "operator", "operator"))["scope"] == "operator"
