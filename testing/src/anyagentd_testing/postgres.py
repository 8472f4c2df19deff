"""A real PostgreSQL server on loopback for tests: Debian's ``postgresql`` package (installed by ``.ci/run``), one
server per test session (per xdist worker), a fresh database per test.

:func:`start` runs ``initdb`` into a new directory and ``postgres`` on a free port of 127.0.0.1 (its socket in that
directory too), trusting local connections; the server runs as the ``postgres`` system user when the tests run as
root (PostgreSQL refuses to run as root). It returns once the server accepts connections. :meth:`Server.database`
creates a database and returns its SQLAlchemy URL (``postgresql+asyncpg://…``). Nothing is skipped: without the
binaries, :func:`start` raises saying what to install.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

STARTUP = 60.0
"""Seconds the server may take to accept connections (a loaded CI machine)."""


def _binary(name: str) -> str:
    """The path of PostgreSQL's ``name`` (``initdb``, ``postgres``): on PATH, else Debian's versioned directory."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed: `apt-get install postgresql` (.ci/run does)")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop_server(process: subprocess.Popen[bytes], directory: Path) -> None:
    """End a test server: SIGTERM, SIGKILL after 30 s; then remove its ``directory``."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Server:
    """A running server: ``port`` on 127.0.0.1, its ``directory`` (data and socket), ``process``."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    def database(self) -> str:
        """A new, empty database; its SQLAlchemy URL (asyncpg driver, user ``postgres``, no password)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        _psql(self, f"CREATE DATABASE {name}")
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        stop_server(self.process, self.directory)


def _as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` system user when we are root (PostgreSQL will not run as root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _psql(server: Server, sql: str) -> None:
    psql = _binary("psql")
    subprocess.run(
        [psql, "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "-d", "postgres", "-qc", sql],
        check=True,
        capture_output=True,
        timeout=60,
    )


def start() -> Server:
    """Start a server (see the module docstring). Raises ``RuntimeError`` when PostgreSQL is not installed or does
    not accept connections within :data:`STARTUP` seconds (its log in the message)."""
    initdb, postgres = _binary("initdb"), _binary("postgres")
    directory = Path(tempfile.mkdtemp(prefix="anyagentd-pg-"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
    data = directory / "data"
    subprocess.run(
        _as_server_user([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]),
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = _free_port()
    log = directory / "server.log"
    settings = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    argv = [postgres, "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(directory), *settings]
    with open(log, "wb") as out:
        process = subprocess.Popen(_as_server_user(argv), stdout=out, stderr=subprocess.STDOUT)
    server = Server(port, directory, process)
    deadline = time.monotonic() + STARTUP
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited ({process.returncode}): {log.read_text(errors='replace')[-2000:]}")
        try:
            _psql(server, "SELECT 1")
            return server
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"postgres did not accept connections in {STARTUP:.0f} s") from None
            time.sleep(0.1)  # not yet accepting: the condition is polled, never assumed after a delay
