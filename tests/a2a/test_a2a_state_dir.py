"""One daemon per state dir (``anyagentd_a2a.statedir``), against real ``anyagentd a2a`` processes: a second daemon
on a state dir in use refuses to start with one line naming the holder's pid and changes nothing of the first's
work; a kill -9 leaves no stale lock; a state dir that cannot be created is one line naming it, not "cannot
listen"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from a2a_helpers import ANYAGENTD, SLOW, wait_state


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ANYAGENTD, "a2a", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def busy_daemon(a2a_daemon: Any, tmp_path: Path) -> tuple[Path, Path, Any, dict[str, Any]]:
    """A daemon on ``tmp_path/state`` with a turn running: (its slow script, the state dir, the daemon, the task)."""
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    state = tmp_path / "state"
    first = a2a_daemon(mock=str(script), state_dir=state)
    running = first.send_text("long", configuration={"returnImmediately": True})
    wait_state(first, running["id"], "TASK_STATE_WORKING")
    return script, state, first, running


def test_a_second_daemon_on_a_task_database_in_use_refuses_and_changes_nothing(a2a_daemon: Any, tmp_path: Path) -> None:
    """``a2a.store`` naming another daemon's database (its default one in its state dir, or a shared file): the
    second start is refused with one line naming the holder, whatever state dir it has."""
    script, state, first, running = busy_daemon(a2a_daemon, tmp_path)
    link = tmp_path / "link"
    link.symlink_to(state)
    (tmp_path / "hard").mkdir()
    os.link(state / "a2a.db", tmp_path / "hard" / "a2a.db")  # a hard link: another name, the same inode
    for database in (state / "a2a.db", link / "a2a.db", tmp_path / "hard" / "a2a.db"):  # every name of the file
        config = tmp_path / "shared.toml"
        config.write_text(f'[a2a]\nstore = "sqlite+aiosqlite:///{database}"\n')
        second = run_cli(
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            str(tmp_path / "other"),
            "--mock",
            str(script),
            "--config",
            str(config),
        )
        assert second.returncode == 1 and second.stdout == "", second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert f"the task database {database.resolve()} is in use by another anyagentd a2a" in lines[0], lines
        if database.parent.resolve() == state.resolve():  # beside the holder's own name: its pid is read there
            assert f"(pid {first.process.pid})" in lines[0], lines
    got = first.rpc("GetTask", {"id": running["id"]}).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_WORKING"
    assert not any("marked" in line and "FAILED" in line for line in first.stderr)
    # two daemons sharing one database file by their configuration: the second is refused as well
    shared = tmp_path / "shared.db"
    config = tmp_path / "both.toml"
    config.write_text(f'[a2a]\nstore = "sqlite+aiosqlite:///{shared}"\n')
    one = a2a_daemon("--config", str(config), mock=str(script), state_dir=tmp_path / "one")
    two = run_cli(
        "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "two"), "--mock", str(script), "--config", str(config)
    )
    assert two.returncode == 1 and f"(pid {one.process.pid})" in two.stderr, two.stderr


def test_a_second_daemon_on_a_state_dir_in_use_refuses_and_changes_nothing(a2a_daemon: Any, tmp_path: Path) -> None:
    script, state, first, running = busy_daemon(a2a_daemon, tmp_path)

    second = run_cli("--listen", "127.0.0.1:0", "--state-dir", str(state), "--mock", str(script))
    assert second.returncode == 1 and second.stdout == ""  # never announced a listener
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"the state dir {state.resolve()} is in use by another anyagentd a2a (pid {first.process.pid})" in lines[0]
    # the first daemon's running task was not taken for a dead process's: still WORKING, nothing marked FAILED
    got = first.rpc("GetTask", {"id": running["id"]}).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_WORKING"
    assert not any("marked" in line and "FAILED" in line for line in first.stderr)

    # the kernel drops the lock with its holder, whatever the way it ends: a restart after kill -9 starts
    first.signal(signal.SIGKILL)
    first.wait()
    again = a2a_daemon(mock=str(script), state_dir=state)
    failed = again.rpc("GetTask", {"id": running["id"]}).json()["result"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"  # now it really was a dead process's
    assert (state / "daemon.lock").read_text().strip() == str(again.process.pid)


def test_a_state_dir_that_cannot_be_created_is_one_line_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_cli("--listen", "127.0.0.1:0", "--state-dir", str(blocker / "state"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"anyagentd a2a: cannot use the state dir {blocker / 'state'}: Not a directory"
    ], result.stderr
    assert "cannot listen" not in result.stderr


def test_the_lock_is_not_inherited_by_the_agents_the_daemon_spawns(tmp_path: Path) -> None:
    """The lock's descriptor is close-on-exec: an agent process left behind by a killed daemon (its own session, as
    agents run) must not keep the state dir locked."""
    from anyagentd_a2a.statedir import StateDirUnusable, hold

    with hold(tmp_path) as lock:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, start_new_session=True
        )
        assert lock.read_text().strip() == str(os.getpid())
        try:
            with hold(tmp_path):
                raise AssertionError("a second hold of a held state dir succeeded")
        except StateDirUnusable as err:
            assert "is in use by another anyagentd a2a (pid" in str(err)
    try:
        with hold(tmp_path):  # the holder let go; the child, still running, holds nothing
            assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_a_new_state_dir_is_the_daemons_alone(a2a_daemon: Any, tmp_path: Path) -> None:
    """The state dir holds resume tokens, tasks and received files: one the daemon creates is mode 0700 whatever
    the umask (an existing one keeps the mode its operator gave it)."""
    state = tmp_path / "deep" / "state"
    old = os.umask(0o022)
    try:
        a2a_daemon(state_dir=state)
    finally:
        os.umask(old)
    assert (state.stat().st_mode & 0o777) == 0o700
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o750)
    kept.chmod(0o750)
    a2a_daemon(state_dir=kept)
    assert (kept.stat().st_mode & 0o777) == 0o750
