"""``/readyz`` sees a SQLite store that cannot serve (issue 26): a second connection holding the database's write
lock — what a send would wait on — makes a real daemon answer 503 ``store unavailable``, and 200 once it is let
go; the probe itself never keeps the lock."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)


def wait_ready(url: str, status: int, timeout: float = 30.0) -> httpx.Response:
    """Poll ``url``'s ``/readyz`` until it answers ``status`` (fails with the last answer when none does in time)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(url + "/readyz", timeout=30)
        if answer.status_code == status:
            return answer
        assert time.monotonic() < deadline, (answer.status_code, answer.text)
        time.sleep(0.05)


def wait_log(daemon: Any, text: str, timeout: float = 30.0) -> str:
    """The first stderr line of ``daemon`` with ``text`` (its reader thread may lag the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        hit = next((line for line in list(daemon.stderr) if text in line), None)
        if hit is not None:
            return hit
        assert time.monotonic() < deadline, f"no log line with {text!r}: {''.join(daemon.stderr)[-2000:]}"
        time.sleep(0.05)


def test_readyz_is_503_while_another_connection_holds_the_write_lock(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(mock="hello", state_dir=tmp_path / "state")
    daemon.send_text("hi")  # the task table has a row
    assert wait_ready(daemon.url, 200).json() == {"status": "ok"}
    holder = sqlite3.connect(daemon.state_dir / "a2a.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("DELETE FROM tasks")  # as the reviewer's repro: a writer stuck mid-transaction
        answer = httpx.get(daemon.url + "/readyz", timeout=30)
        assert (answer.status_code, answer.json()) == (503, {"status": "store unavailable"})
        assert answer.headers["cache-control"] == "no-store"
        wait_log(daemon, "database is locked")  # the log line says why
    finally:
        holder.close()  # its transaction rolls back
    assert wait_ready(daemon.url, 200).json() == {"status": "ok"}
    # the probe took and gave back the lock: a writer gets it at once after a probe
    writer = sqlite3.connect(daemon.state_dir / "a2a.db", isolation_level=None, timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("ROLLBACK")
    finally:
        writer.close()
    daemon.send_text("again")  # and the daemon serves
