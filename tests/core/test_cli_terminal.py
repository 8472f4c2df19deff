"""The CLI in a real terminal (a pseudo-terminal from the stdlib ``pty`` module): ``chat`` over several turns
with a queued prompt and Ctrl-C, and typed errors from ``run`` rendered for a terminal without a traceback."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest
from wire_client import child_env

pytestmark = pytest.mark.timeout(90)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """``python -m anyagentd.cli ARGS`` on a pseudo-terminal (its controlling terminal, so ^C is SIGINT)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = child_env(
            {"ANYAGENTD_NO_LOGIN_SHELL": "1", "TERM": "xterm-256color", "COLUMNS": "200", **(env or {})}
        )
        full_env.pop("NO_COLOR", None)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            os.execve(sys.executable, [sys.executable, "-m", "anyagentd.cli", *args], full_env)
        self.raw = b""
        self.status: int | None = None

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace")).replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, needle: str, after: int = 0, timeout: float = 30) -> int:
        """Read until ``needle`` appears in the text at or after offset ``after``; returns where it ends."""
        deadline = time.monotonic() + timeout
        while (at := self.text.find(needle, after)) < 0:
            assert time.monotonic() < deadline, f"{needle!r} not seen in:\n{self.text[-3000:]}"
            assert self._read(0.2) or needle in self.text, f"exited before {needle!r}:\n{self.text[-3000:]}"
        return at + len(needle)

    def type(self, data: str) -> None:
        os.write(self.fd, data.encode())

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                break
            assert time.monotonic() < deadline, f"still running:\n{self.text[-3000:]}"
            self._read(0.1)
        while self._read(0.05) and len(self.raw) < 10_000_000:
            pass
        return self.status

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        os.close(self.fd)


@pytest.fixture
def terminal() -> object:
    opened: list[Terminal] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Terminal:
        opened.append(Terminal(*args, env=env))
        return opened[-1]

    yield start
    for term in opened:
        term.close()


def _say(text: str) -> dict[str, object]:
    return {"Emit": {"TextDelta": {"message_id": text[:8], "text": text}}}


_END = {"End": {"Completed": {"source": "Protocol"}}}
THREE_TURNS = {
    "turns": [
        [_say("first turn, thinking for a long time"), {"Sleep": 60000}, _END],
        [_say("second answer (the queued prompt)"), {"Emit": {"MessageEnded": {"message_id": "second a"}}}, _END],
        [_say("third answer"), _END],
    ]
}


def test_chat_queues_cancels_and_runs_the_next_turn(terminal: object, tmp_path: Path) -> None:
    script = tmp_path / "three.json"
    script.write_text(json.dumps(THREE_TURNS))
    term = terminal("chat", "mock", "--mock", str(script), "--dir", str(tmp_path))
    at = term.expect("› ")
    term.type("hello\r")
    at = term.expect("first turn, thinking", at)
    term.type("and then this\r")  # typed while the turn runs: the mock cannot steer, so it waits in the queue
    at = term.expect("queued (0 ahead of it", at)
    term.type("\x03")  # Ctrl-C: cancel the running turn only
    at = term.expect("cancelling the turn", at)
    at = term.expect("■ Cancelled", at)
    at = term.expect("second answer (the queued prompt)", at)  # the queued prompt ran next, in the same session
    at = term.expect("■ Completed", at)
    at = term.expect("› ", at)
    term.type("/info\r")
    at = term.expect("session s1, Idle", at)
    term.type("once more\r")
    at = term.expect("third answer", at)
    at = term.expect("■ Completed", at)
    term.type("\x03")  # idle: the first Ctrl-C only says how to quit
    at = term.expect("Ctrl-C again or Ctrl-D to quit", at)
    term.type("\x03")
    assert term.wait() == 130
    assert "Traceback" not in term.text


def test_chat_ends_at_ctrl_d(terminal: object, tmp_path: Path) -> None:
    term = terminal("chat", "mock", "--mock", "model-option", "--dir", str(tmp_path))
    at = term.expect("› ")
    term.type("/model\r")
    at = term.expect("model = small (small, large)", at)
    term.type("/model large\r")
    at = term.expect("configuration: model=large, fast=false", at)
    term.type("/nosuch\r")
    at = term.expect("unknown command /nosuch", at)
    term.type("hi\r")
    at = term.expect("■ Completed", at)
    at = term.expect("› ", at)
    term.type("\x04")  # Ctrl-D at an empty line: end of input
    assert term.wait() == 0


@pytest.mark.parametrize(
    ("args", "kind", "code"),
    [
        (("run", "nosuchagent", "hi"), "NotInstalled", 3),
        (("run", "mock", "hi", "--dir", "/nonexistent"), "InvalidConfiguration", 2),
        (("run", "mock", "hi", "--mock", "dies"), "ProcessExited", 6),
    ],
)
def test_typed_errors_in_a_terminal_are_one_line(terminal: object, args: tuple[str, ...], kind: str, code: int) -> None:
    term = terminal(*args)
    assert term.wait() == code
    text = term.text
    assert "Traceback" not in text and "ExceptionGroup" not in text and "  File " not in text, text
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{kind}: "))
    assert all(line.startswith("  ") for line in lines[start + 1 :] if line.strip()), text


def test_run_permission_at_the_terminal(terminal: object, tmp_path: Path) -> None:
    term = terminal("run", "mock", "write hello.txt", "--mock", "permission", "--dir", str(tmp_path))
    at = term.expect("Allow? (y=AllowOnce, a=AllowAlways, n=DenyOnce) [y/a/n]: ")
    term.type("n\r")
    term.expect("You denied it", at)
    assert term.wait() == 0
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_cancels_a_run_then_exits_130(terminal: object, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"turns": [[_say("working"), {"Sleep": 60000}, _END]]}))
    term = terminal("run", "mock", "go", "--mock", str(script), "--dir", str(tmp_path))
    at = term.expect("working")
    term.type("\x03")
    term.expect("■ Cancelled", at)
    assert term.wait() == 130
    assert "Traceback" not in term.text
