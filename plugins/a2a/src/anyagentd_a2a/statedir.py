"""The daemon's hold on its state dir and its task database: one ``anyagentd a2a`` per state dir, and per database.

Two daemons on one state dir, or on one task database (``a2a.store`` naming another daemon's ``a2a.db``), would
each take the other's live tasks for a dead process's (start-up marks the tasks it finds running FAILED) and write
one database from two sets of conversations. :func:`hold` takes an exclusive ``flock(2)`` on ``<state
dir>/daemon.lock`` for the daemon's lifetime and writes its pid there; :func:`hold_database` takes one on a SQLite
task database file itself (the default one in the state dir too, so a second daemon naming it as its ``a2a.store``
is refused, by whatever path or link), its pid in ``<database file>.lock``. A second daemon refuses to start with
one line naming the holder's pid. The kernel drops a lock when the holder's process ends however it ends (kill -9
included), so a restart after a crash is never refused by a stale file. A PostgreSQL store is not locked here: one daemon per database is the
operator's to keep (docs/operating.md).
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
def _locked(path: Path, what: str, retry: str, *, pid_file: Path | None = None) -> Iterator[Path]:
    """Hold an exclusive ``flock(2)`` on the file ``path`` (created mode 0600 if missing; close-on-exec: an agent
    the daemon spawns never inherits it; a symlink at ``path`` is refused, never followed) with this process's pid
    written to it — or, when ``pid_file`` is given, to that file, ``path`` left as it is — until the block ends.
    Raises :class:`StateDirUnusable` — "``what`` is in use by another anyagentd a2a (pid N); ``retry``" — when
    another process holds it, and "cannot use ``what``: the OS's reason" when it cannot be opened or written."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise StateDirUnusable(f"cannot use {what}: {err.strerror or err}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirUnusable(
                f"{what} is in use by another anyagentd a2a ({_holder(pid_file or path)}); {retry}"
            ) from None
        try:
            if pid_file is None:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            else:
                written = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    os.write(written, f"{os.getpid()}\n".encode())
                finally:
                    os.close(written)
        except OSError as err:
            raise StateDirUnusable(f"cannot use {what}: {err.strerror or err}") from None
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextmanager
def hold_database(database: Path) -> Iterator[Path]:
    """Hold the lock of the SQLite task database ``database`` until the block ends: an ``flock(2)`` on the database
    file itself (created empty if missing: SQLite takes an empty file as a new database), so every name of the
    file — a symlink, a hard link — is the same lock; the holder's pid in ``<database>.lock`` beside it. flock
    locks are apart from the POSIX locks SQLite takes (Linux), and this descriptor is closed only when the daemon
    ends, after its engine. Yields the database's path. Raises :class:`StateDirUnusable` ("the task database … is
    in use by another anyagentd a2a (pid N)") when another daemon holds it."""
    with _locked(
        database,
        f"the task database {database}",
        "stop it or give this one another a2a.store",
        pid_file=database.with_name(database.name + ".lock"),
    ) as path:
        yield path


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
    except OSError as err:
        raise StateDirUnusable(f"cannot use the state dir {state_dir}: {err.strerror or err}") from None
    with _locked(
        state_dir / LOCK_NAME, f"the state dir {state_dir}", "stop it or give this one another --state-dir"
    ) as path:
        yield path


__all__ = ["LOCK_NAME", "StateDirUnusable", "hold", "hold_database"]
