"""The daemon's hold on its state dir: one ``anyagentd a2a`` per state dir.

Two daemons on one state dir would each take the other's live tasks for a dead process's (start-up marks the
tasks it finds running FAILED) and write one database from two sets of conversations. :func:`hold` takes an
exclusive ``flock(2)`` on ``<state dir>/daemon.lock`` for the daemon's lifetime and writes its pid there; a second
daemon refuses to start with one line naming the holder's pid. The kernel drops the lock when the holder's process
ends however it ends (kill -9 included), so a restart after a crash is never refused by a stale file.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = "daemon.lock"
"""The lock file's name inside the state dir; it holds the pid of the daemon holding it."""


class StateDirUnusable(Exception):
    """The state dir cannot be used: another daemon holds it, or it cannot be created or written. ``str()`` is one
    line for a person, naming the directory (and the holder's pid when another daemon holds it)."""


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return "another process"
    return f"pid {pid}" if pid.isdigit() else "another process"


@contextmanager
def hold(state_dir: Path) -> Iterator[Path]:
    """Create ``state_dir`` (parents too; the state dir itself mode 0700, as it holds the task database, resume
    tokens and received files — an existing one keeps its mode) and hold its lock until the block ends; yields the
    lock file's path.

    Raises :class:`StateDirUnusable` when another process holds the lock ("… is in use by another anyagentd a2a
    (pid N)") or when the directory cannot be created or the lock file written (the OS's reason, e.g. "Not a
    directory" for a path under a file)."""
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise StateDirUnusable(f"cannot use the state dir {state_dir}: {err.strerror or err}") from None
    path = state_dir / LOCK_NAME
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirUnusable(f"the state dir {state_dir} is in use by another anyagentd a2a "
                                   f"({_holder(path)}); stop it or give this one another --state-dir") from None  # fmt: skip
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = ["LOCK_NAME", "StateDirUnusable", "hold"]
