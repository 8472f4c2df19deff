"""The SQLite connections of the daemon's engines (:mod:`anyagentd_a2a.sqlite_connect`): a connection terminated
while its task is cancelled — SQLAlchemy's graceful ``close()`` in a shielded task, then ``stop()`` at once —
still closes, so a shutdown mid-query never leaves the event loop waiting for ever on that close."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text

from anyagentd_a2a.sqlite_connect import connect
from anyagentd_a2a.store import engine_for

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiosqlite and SQLAlchemy's asyncio dialects


async def test_a_close_racing_a_stop_ends(tmp_path: Path) -> None:
    """The sequence of ``AsyncAdapt_terminate.terminate`` on a cancel: the close, then the stop, then the close
    awaited. With aiosqlite's own ``stop()`` the close's second stop waits on the ended worker thread for ever."""
    connection = await connect(tmp_path / "a.db", timeout=30)
    assert connection._thread.daemon
    await connection.execute("CREATE TABLE t (x)")
    closing = asyncio.ensure_future(connection.close())
    await asyncio.sleep(0)  # the close has queued its work
    stopped = connection.stop()
    with anyio.fail_after(10):  # a bound, not a wait: without the fix the close never ends
        await closing
        assert stopped is not None
        await stopped
    connection._thread.join(10)
    assert not connection._thread.is_alive()


async def test_the_engine_connects_through_it(tmp_path: Path) -> None:
    engine = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    try:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            assert type(raw.driver_connection).__module__ == "anyagentd_a2a.sqlite_connect"
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 30000
    finally:
        await engine.dispose()
