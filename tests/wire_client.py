"""A test client for the real ``anyagentd serve`` process: frames in, lines out, every line checked.

Each line read from the server's stdout is parsed and validated when the test takes it (and, at :meth:`close`,
every line still unread): against the schema's ``Line``, its ``ok`` payload against the definition its command
returns, its error body against ``ErrorBody``, and against the wire's ordering guarantees (hello first; the
``ok`` to ``open`` before any line of that session; per-session ``sequence`` strictly increasing; a session error
at most once; ``closed`` once and last). A violation raises ``AssertionError`` in the test.

A reader thread moves raw lines into a queue, so reads take a timeout and a slow test does not throttle the
server; :meth:`paused` stops that thread so the server's stdout pipe fills (a stalled consumer).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from wire_schema import validate_def, validate_line

DEFAULT_TIMEOUT = 10.0

# What the ok reply of each command carries (a schema definition, or a JSON type for the others).
OK_PAYLOAD = {
    "discover": "DiscoveryReport",
    "probe": "AgentDetails",
    "plan_usage": "PlanUsage",
    "open": "SessionInfo",
    "info": "SessionInfo",
    "prompt": "Delivery",
    "generate": str,
    "dequeue": None,
    "answer": None,
    "configure": None,
    "rollback": None,
    "compact": None,
    "cancel": None,
    "close": None,
}
LINE_SHAPES = ({"hello"}, {"id", "ok"}, {"id", "error"}, {"event"}, {"session", "error"}, {"closed"})
_EOF = object()


def serve_command(*args: str) -> list[str]:
    """The argv of ``anyagentd serve ARGS`` run with this interpreter."""
    return [sys.executable, "-m", "anyagentd.cli", "serve", *args]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without any ``ANYAGENTD_*`` setting of the machine, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANYAGENTD_")}
    base.update(env or {})
    return base


class WireClient:
    """Spawns ``anyagentd serve ARGS`` (``python -m anyagentd.cli``; the machine's ``ANYAGENTD_*`` settings are
    dropped, login-shell discovery is off unless ``env`` turns it on) and talks to it. Use as a context manager
    or call :meth:`close`. ``lines`` holds every line read so far, validated, in server order."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            serve_command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env({"ANYAGENTD_NO_LOGIN_SHELL": "1", **(env or {})}),
            cwd=cwd,
            start_new_session=True,
        )
        self.lines: list[dict[str, Any]] = []  # every line read so far, validated, in order
        self.raw_lines: list[bytes] = []  # the same lines as the server wrote them
        self.sent: dict[int, dict[str, Any]] = {}  # id -> frame
        self.opened: dict[str, int] = {}  # session id -> index in lines of its open ok reply
        self._raw: queue.Queue[Any] = queue.Queue()
        self._pending: deque[dict[str, Any]] = deque()  # read, validated, not yet handed to the test
        self._eof = False
        self._next_id = 0
        self._replied: set[int] = set()
        self._last_seq: dict[str, int] = {}
        self._session_error: set[str] = set()
        self._closed: dict[str, int] = {}  # session id -> index of its closed line
        self._gate = threading.Event()
        self._gate.set()
        self._stderr: list[bytes] = []
        self._reader = threading.Thread(target=self._read_stdout, name="wire-stdout", daemon=True)
        self._err_reader = threading.Thread(target=self._read_stderr, name="wire-stderr", daemon=True)
        self._reader.start()
        self._err_reader.start()

    # ------------------------------------------------------------------------------------------ threads

    def _read_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            self._gate.wait()
            raw = stdout.readline()
            if not raw:
                break
            self._raw.put(raw)
        self._raw.put(_EOF)

    def _read_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        for chunk in iter(lambda: stderr.read1(65536), b""):
            self._stderr.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop reading stdout (the server's pipe fills up) for the duration of the block."""
        self._gate.clear()
        try:
            yield
        finally:
            self._gate.set()

    # ------------------------------------------------------------------------------------------ writing

    def send_raw(self, data: str | bytes) -> None:
        """Write raw input (a newline is added when missing)."""
        if isinstance(data, str):
            data = data.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        try:  # remember a readable id, so its reply is recognised
            frame = json.loads(data)
        except (ValueError, RecursionError):
            frame = None
        if isinstance(frame, dict) and type(frame.get("id")) is int:
            self.sent.setdefault(frame["id"], frame)
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, cmd: str, **fields: Any) -> int:
        """Send ``{"id": <fresh>, "cmd": cmd, **fields}``; returns the id."""
        self._next_id += 1
        while self._next_id in self.sent:
            self._next_id += 1
        frame = {"id": self._next_id, "cmd": cmd, **fields}
        self.sent[self._next_id] = frame
        self.send_raw(json.dumps(frame))
        return self._next_id

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()

    # ------------------------------------------------------------------------------------------ reading

    def _pull(self, deadline: float) -> dict[str, Any]:
        """Take the next raw line from the reader, validate it, record it."""
        if self._eof:
            raise AssertionError(f"the server closed its stdout; stderr:\n{self.stderr[-3000:]}")
        try:
            raw = self._raw.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(
                f"no line from the server in time (returncode {self.proc.poll()}); stderr:\n{self.stderr[-3000:]}"
            ) from None
        if raw is _EOF:
            self._eof = True
            raise AssertionError(f"the server closed its stdout; stderr:\n{self.stderr[-3000:]}")
        return self._accept(raw)

    def _accept(self, raw: bytes) -> dict[str, Any]:
        assert raw.endswith(b"\n"), f"line not newline-terminated: {raw[:200]!r}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise AssertionError(f"not a JSON line on the wire: {raw[:300]!r} ({err})") from None
        assert isinstance(obj, dict), f"a line is a JSON object: {obj!r}"
        validate_line(obj)
        self._check(obj, len(self.lines))
        self.lines.append(obj)
        self.raw_lines.append(raw)
        return obj

    def _check(self, obj: dict[str, Any], index: int) -> None:
        keys = set(obj)
        assert keys in LINE_SHAPES, f"line has an unexpected shape {sorted(keys)}: {obj}"
        if index == 0:
            assert keys == {"hello"}, f"the first line must be hello, got {obj}"
            validate_def("Hello", obj["hello"])
            return
        assert keys != {"hello"}, f"hello written twice: {obj}"
        if "error" in obj:
            validate_def("ErrorBody", obj["error"])
        if "id" in obj:
            frame_id = obj["id"]
            if frame_id is None:
                return
            assert frame_id in self.sent, f"reply to an id never sent: {obj}"
            assert frame_id not in self._replied, f"second reply to id {frame_id}: {obj}"
            self._replied.add(frame_id)
            cmd = self.sent[frame_id].get("cmd")
            if "ok" in obj and cmd in OK_PAYLOAD:
                expected = OK_PAYLOAD[cmd]
                if expected is None:
                    assert obj["ok"] is None, f"{cmd} replies ok null, got {obj}"
                elif expected is str:
                    assert isinstance(obj["ok"], str), f"{cmd} replies ok <string>, got {obj}"
                else:
                    validate_def(expected, obj["ok"])
                if cmd == "open":
                    session = obj["ok"]["id"]
                    assert session not in self.opened, f"session id {session} opened twice"
                    self.opened[session] = index
            return
        if "event" in obj:
            event = obj["event"]
            session = event["session_id"]
            self._check_session_line(session, obj)
            last = self._last_seq.get(session, 0)
            assert event["sequence"] > last, f"{session}: sequence {event['sequence']} after {last}"
            self._last_seq[session] = event["sequence"]
            return
        session = obj["session"] if "session" in obj else obj["closed"]
        self._check_session_line(session, obj)
        if "session" in obj:
            assert session not in self._session_error, f"second session error for {session}: {obj}"
            self._session_error.add(session)
        else:
            self._closed[session] = index

    def _check_session_line(self, session: str, obj: dict[str, Any]) -> None:
        assert session in self.opened, f"line of session {session} before its open ok reply: {obj}"
        assert session not in self._closed, f"line of session {session} after its closed line: {obj}"

    def next_line(self, timeout: float | None = None) -> dict[str, Any]:
        """The next line not yet handed out (in server order)."""
        if self._pending:
            return self._pending.popleft()
        return self._pull(time.monotonic() + (timeout or self.timeout))

    def _take(self, match: Callable[[dict[str, Any]], bool], timeout: float | None) -> dict[str, Any]:
        for i, line in enumerate(self._pending):
            if match(line):
                del self._pending[i]
                return line
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            line = self._pull(deadline)
            if match(line):
                return line
            self._pending.append(line)

    def reply(self, frame_id: int | None, timeout: float | None = None) -> dict[str, Any]:
        """The reply line (``{"id", "ok"}`` or ``{"id", "error"}``) to ``frame_id``; other lines stay queued.
        ``frame_id=None`` takes the next error reply with a null id."""
        return self._take(lambda l: "id" in l and l["id"] == frame_id, timeout)

    def request(self, cmd: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send a command and wait for its reply line."""
        return self.reply(self.send(cmd, **fields), timeout)

    def ok(self, cmd: str, timeout: float | None = None, **fields: Any) -> Any:
        """Send a command; its ``ok`` value (fails the test on an error reply)."""
        line = self.request(cmd, timeout, **fields)
        assert "ok" in line, f"{cmd} {fields} failed: {line}"
        return line["ok"]

    def error(self, cmd: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send a command that must fail; its error body."""
        line = self.request(cmd, timeout, **fields)
        assert "error" in line, f"{cmd} {fields} should have failed: {line}"
        return line["error"]

    def events(
        self, session: str, until: Callable[[dict[str, Any]], bool] | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """The lines of ``session`` (``{"event"}``, ``{"session", "error"}``, ``{"closed"}``) up to and including
        the first one ``until`` accepts (default: the ``closed`` line). Other lines stay queued."""
        until = until or (lambda l: l.get("closed") == session)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            line = self._take(lambda l: session_of(l) == session, max(0.01, deadline - time.monotonic()))
            out.append(line)
            if until(line):
                return out

    def drain(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Read to EOF (the server must close its stdout in time); returns every line not yet handed out (they
        stay available to :meth:`reply` and :meth:`events`)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self._eof:
            try:
                self._pending.append(self._pull(deadline))
            except AssertionError:
                if self._eof:
                    break
                raise
        return list(self._pending)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the server to exit (reading every remaining line); its return code. On exit 0, every opened
        session must have written its ``closed`` line."""
        self.drain(timeout)
        code = self.proc.wait(timeout or self.timeout)
        if code == 0:
            unclosed = sorted(set(self.opened) - set(self._closed))
            assert not unclosed, f"sessions never closed before a clean exit: {unclosed}"
        return code

    def close(self, timeout: float = 10.0) -> None:
        """End the server (EOF, then kill after ``timeout``) and validate whatever it still wrote."""
        self._gate.set()
        try:
            self.close_stdin()
        except (BrokenPipeError, OSError):
            pass
        killed = False
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            killed = True
        self._reader.join(5)
        self._err_reader.join(5)
        while not self._eof:
            try:
                raw = self._raw.get_nowait()
            except queue.Empty:
                break
            if raw is _EOF:
                self._eof = True
            elif not (killed and not raw.endswith(b"\n")):  # a kill may cut the last line
                self._pending.append(self._accept(raw))
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def session_of(line: dict[str, Any]) -> str | None:
    """The session a line belongs to (events, session errors, closed), else ``None``."""
    if "event" in line:
        return line["event"]["session_id"]
    if "closed" in line:
        return line["closed"]
    if "session" in line:
        return line["session"]
    return None


def kind_tag(event_line: dict[str, Any]) -> str:
    """The tag of an event line's kind: ``"TextDelta"``, ``"ContextCompacted"``…"""
    kind = event_line["event"]["kind"]
    return kind if isinstance(kind, str) else next(iter(kind))
