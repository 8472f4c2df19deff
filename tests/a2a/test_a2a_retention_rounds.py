"""Issue 26: ``[a2a.retention]``'s rounds — an age or interval past 100 years is refused naming its key (it would
overflow the cutoff), each store is pruned on its own (one that fails leaves the others pruned) and a SIGHUP that
shortens ``interval`` applies without waiting out the old one. Real daemons on real SQLite files; every wait is
for a log line or a row, never for time."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD, wait_state

pytestmark = pytest.mark.timeout(120)

OP = "op-token-rounds"
ENV = {"OP": OP}
BASE = '[a2a]\nbearer = "{{secret:OP}}"\n[a2a.device_grant]\nenabled = true\n'
LONG_AGO_MS = 1_000_000_000_000  # 2001-09-09: older than any age


def wait_for(holds: Any, what: str, timeout: float = 30.0) -> Any:
    """``holds()``'s first true value, polled (fails naming ``what`` when none comes in time)."""
    deadline = time.monotonic() + timeout
    while not (value := holds()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return value


def lines(daemon: Any, text: str) -> list[str]:
    return [line for line in list(daemon.stderr) if text in line]


@pytest.mark.parametrize("key", ["tasks", "runs", "sessions", "subagents", "interval"])
def test_an_age_past_100_years_is_refused_naming_its_key(tmp_path: Path, key: str) -> None:
    config = tmp_path / "retention.toml"
    for value, ok in (('"99999999999999999d"', False), ('"36501d"', False), ('"36500d"', True)):
        config.write_text(f"[a2a.retention]\n{key} = {value}\n")
        checked = subprocess.run(
            [ANYAGENTD, "a2a", "--check-config", str(config)], capture_output=True, text=True, timeout=60, check=False
        )
        if ok:
            assert checked.returncode == 0, checked
            continue
        assert checked.returncode == 2, checked
        assert f"a2a.retention.{key}" in checked.stderr and "100 years" in checked.stderr, checked.stderr
        assert "Traceback" not in checked.stderr
        if value == '"36501d"':  # the start refuses what the check refuses
            started = subprocess.run(
                [
                    ANYAGENTD,
                    "a2a",
                    "--config",
                    str(config),
                    "--listen",
                    "127.0.0.1:0",
                    "--state-dir",
                    str(tmp_path / "state"),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert started.returncode == 2 and f"a2a.retention.{key}" in started.stderr, started
            assert "100 years" in started.stderr and "Traceback" not in started.stderr


def test_a_store_whose_prune_fails_leaves_the_others_pruned(a2a_daemon: Any, tmp_path: Path) -> None:
    config = BASE + '[a2a.retention]\ntasks = "1d"\nsessions = "1d"\ninterval = "1s"\n'
    daemon = a2a_daemon(config=config, env=ENV, state_dir=tmp_path / "state", mock="hello")
    task = daemon.send_text("hi", token=OP)
    wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", token=OP)
    with sqlite3.connect(daemon.state_dir / "a2a.db") as conn:  # one transaction: a round sees all or none of it
        conn.execute("UPDATE tasks SET last_updated = '2001-01-01 00:00:00.000000'")
        keep = "CREATE TRIGGER keep_tasks BEFORE DELETE ON tasks BEGIN SELECT RAISE(ABORT, 'tasks are kept'); END"
        conn.execute(keep)  # the tasks' DELETE fails, as a driver error would
        for sid, expires, revoked in (("expired", LONG_AGO_MS, 0), ("revoked", None, 1), ("live", None, 0)):
            conn.execute(
                "INSERT INTO agentd_auth_sessions (sid, token_hash, kind, name, principal, role, "
                "client_id, scope, created_at, expires_at, approved_by, revoked) VALUES (?, ?, 'device', "
                "NULL, 'user:bob', 'user', 'cli', 'user', ?, ?, 'operator', ?)",
                (sid, sid * 8, LONG_AGO_MS, expires, revoked),
            )
    failed = wait_for(lambda: lines(daemon, "retention: pruning the tasks failed"), "no failed tasks' prune")
    assert "tasks are kept" in failed[0]

    def sessions() -> list[tuple[str]]:
        with sqlite3.connect(daemon.state_dir / "a2a.db") as conn:
            return conn.execute("SELECT sid FROM agentd_auth_sessions ORDER BY sid").fetchall()

    wait_for(lambda: sessions() == [("live",)], "the ended sessions were not pruned")
    got = daemon.rpc("GetTask", {"id": task["id"]}, token=OP).json()
    assert got["result"]["id"] == task["id"], "the task the trigger kept is still served"
    assert not lines(daemon, "retention: the prune failed")


def test_a_sighup_that_shortens_the_interval_applies_without_waiting_out_the_old(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    path = tmp_path / "retention.toml"
    path.write_text(BASE + '[a2a.retention]\ninterval = "1h"\n')
    daemon = a2a_daemon("--config", str(path), env=ENV, state_dir=tmp_path / "state")
    wait_for(lambda: lines(daemon, "retention pruned"), "no prune at start")
    path.write_text(BASE + '[a2a.retention]\ninterval = "1s"\n')
    daemon.signal(signal.SIGHUP)
    wait_for(lambda: lines(daemon, "SIGHUP: configuration reloaded"), "the configuration was not reloaded")
    wait_for(lambda: len(lines(daemon, "retention pruned")) >= 3, "the new interval did not apply", timeout=15)


def test_a_conversation_whose_tasks_were_pruned_is_forgotten_from_memory_unless_in_use(a2a_daemon: Any) -> None:
    """The daemon's memory is bounded by retention as its database is: once a conversation's tasks are all pruned
    and nothing of it is in use, ``status`` no longer lists it; one whose agent session is open stays."""
    from test_a2a_commands import command, result_of

    config = BASE + '[a2a.pool]\nmax_live = 1\n[a2a.retention]\ntasks = "1s"\ninterval = "1s"\n'
    daemon = a2a_daemon(config=config, env=ENV, mock="hello")

    def listed() -> set[str]:
        return {c["id"] for c in result_of(command(daemon, "status", token=OP), "status")["conversations"]}

    assert daemon.send_text("hi", token=OP, context_id="old")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert listed() == {"old"}
    # a second conversation takes the pool's one place: the first one's session is closed (the mock never resumes)
    assert daemon.send_text("hi", token=OP, context_id="new")["status"]["state"] == "TASK_STATE_COMPLETED"
    wait_for(lambda: listed() == {"new"}, "the first conversation forgotten once its task was pruned")
    with sqlite3.connect(daemon.state_dir / "a2a.db") as conn:
        assert conn.execute("select count(*) from tasks where context_id = 'old'").fetchone()[0] == 0
    # the one whose session is open stays listed through more rounds, though its task went too
    rounds = len(lines(daemon, "retention pruned"))
    wait_for(lambda: len(lines(daemon, "retention pruned")) >= rounds + 2, "two more prune rounds")
    assert listed() == {"new"}
    # a message to the forgotten conversation starts it again
    assert daemon.send_text("again", token=OP, context_id="old")["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "old" in listed()
