"""The identity step with device sessions, in process on a real SQLite session table: configured bearers first, a
session token next (its principal: ``user:<name>``, role from the scope, no grants, its sid), an unknown, revoked or
malformed one a bad credential like any unknown bearer; no device grant, no session lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from anyagentd_a2a.auth.sessions import AuthSessions
from anyagentd_a2a.config import parse
from anyagentd_a2a.principals import OPERATOR, Identities, Unauthenticated

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_session_tokens_after_the_configured_bearers(tmp_path: Path, database_url: str) -> None:
    engine = create_async_engine(database_url)  # SQLite, then PostgreSQL
    sessions = await AuthSessions(engine).open()
    user, _ = await sessions.issue(
        kind="device",
        name="dev",
        principal="user:dev",
        role="user",
        client_id="cli",
        scope="user",
        approved_by="operator",
    )
    admin, admin_row = await sessions.issue(
        kind="device",
        name="ops",
        principal="user:ops",
        role="operator",
        client_id="cli",
        scope="operator",
        approved_by="operator",
    )
    loaded = parse({"a2a": {"bearer": "{{secret:OP}}", "device_grant": {"enabled": True}}}, env={"OP": "op"})
    ids = Identities(loaded, sessions)
    assert await ids.authenticate("Bearer op", "10.0.0.1", None) is OPERATOR
    dev = await ids.authenticate(f"Bearer {user}", "10.0.0.1", None)
    assert (dev.id, dev.role, dev.grants, dev.is_operator) == ("user:dev", "user", (), False)
    assert dev.may("SendMessage") and dev.session is not None
    ops = await ids.authenticate(f"bearer  {admin} ", "10.0.0.1", None)
    assert (ops.id, ops.is_operator, ops.session) == ("user:ops", True, admin_row.sid)
    await sessions.revoke(name="dev")
    for header in (f"Bearer {user}", "Bearer agd_unknown", "Bearer nope", f"Basic {admin}"):
        with pytest.raises(Unauthenticated) as err:
            await ids.authenticate(header, "10.0.0.1", None)
        assert err.value.bad_credential
    assert await ids.session_principal(f"Bearer {user}") is None
    without = Identities(loaded)  # no device grant: a session token is just an unknown bearer
    with pytest.raises(Unauthenticated):
        await without.authenticate(f"Bearer {admin}", "10.0.0.1", None)
    await engine.dispose()
