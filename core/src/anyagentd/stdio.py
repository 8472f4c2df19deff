"""The protocol output of ``anyagentd serve``: stdout kept for protocol lines, and the hello line written first.

Only the standard library is imported here, so ``serve`` greets its client before the engine, pydantic and the
plugins load (issue 17: the hello within tens of milliseconds of the spawn; the commands the client sends meanwhile
wait in the pipe). :func:`claim_stdout` duplicates the real stdout for protocol lines and points file descriptor 1
at stderr, so stray prints and agents that inherit fd 1 cannot corrupt the protocol (``docs/wire.md#guarantees``).
"""

from __future__ import annotations

import json
import os
import select
import stat
import sys
from dataclasses import dataclass

from . import PROTOCOL, __version__


@dataclass
class ProtocolOutput:
    """Where protocol lines go: ``fd`` (a duplicate of the real stdout), whether it is ``nonblocking`` (then write
    it from the event loop), and whether the hello line was already written on it (``greeted``)."""

    fd: int
    nonblocking: bool
    greeted: bool = False


def hello_line() -> bytes:
    """``{"hello":{"protocol":1,"anyagent":"<version>"}}`` and a newline: compact, like every line of the wire."""
    return (
        json.dumps({"hello": {"protocol": PROTOCOL, "anyagent": __version__}}, separators=(",", ":")).encode() + b"\n"
    )


def claim_stdout(*, greet: bool = False) -> ProtocolOutput:
    """Take stdout for protocol lines (fd 1 then points at stderr); with ``greet``, write the hello line on it at
    once. Raises ``OSError`` when stdout cannot be duplicated or the hello cannot be written (the client is gone)."""
    sys.stdout.flush()
    fd, nonblocking = protocol_fd()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    out = ProtocolOutput(fd, nonblocking)
    if greet:
        write_all(out, hello_line())
        out.greeted = True
    return out


def write_all(out: ProtocolOutput, data: bytes) -> None:
    """Write ``data`` whole, blocking (waiting for a non-blocking descriptor to become writable): for the few
    lines written before the event loop runs."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(out.fd, view) :]
        except BlockingIOError:
            select.select([], [out.fd], [])


def protocol_fd() -> tuple[int, bool]:
    """A descriptor for protocol output, and whether it is non-blocking.

    Written from the event loop on a non-blocking descriptor where possible: a worker thread would have to win the
    GIL back from a busy loop before each write, stalling the writer long enough for a fast agent to overrun the
    bound. O_NONBLOCK belongs to the open file description, which stdin may share (a terminal, a socketpair), so
    a pipe or terminal is reopened as a description of its own; a socket shared with stdin, or a regular file,
    is written with blocking writes in a worker thread instead.
    """
    fd = os.dup(sys.stdout.fileno())
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        try:
            fresh = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NOCTTY)
        except OSError:
            return fd, False
        os.close(fd)
        os.set_blocking(fresh, False)
        return fresh, True
    if stat.S_ISSOCK(mode) and not os.path.sameopenfile(sys.stdin.fileno(), fd):
        os.set_blocking(fd, False)
        return fd, True
    return fd, False
