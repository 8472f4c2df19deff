"""A child agent process, as every subprocess adapter drives it: line-oriented stdio in its own process group.

:class:`AgentProcess` starts an argv with ``anyio.open_process`` in a new session (``start_new_session=True``,
so the child leads its own process group), and offers:

- :meth:`AgentProcess.lines`: stdout split on ``\\n``, decoded as UTF-8 (invalid bytes replaced). A line longer
  than ``max_line_bytes`` (64 MiB by default) is skipped up to its newline and reported as one
  :class:`OversizedLine` item instead of crashing the reader or growing memory without bound;
- :meth:`AgentProcess.write_line` / :meth:`AgentProcess.write_json`: one ``\\n``-terminated line on stdin,
  serialized by one writer lock so concurrent writers never interleave;
- :meth:`AgentProcess.stderr_tail`: the last lines the child wrote on stderr (at most 40 lines and 8 KiB),
  collected by a background reader so a chatty child never blocks on a full stderr pipe;
- :meth:`AgentProcess.wait`: the exit status formatted like Rust's ``ExitStatus`` Display
  (``"exit status: 3"``, ``"signal: 9 (SIGKILL)"``), which the wire carries in ``ProcessExited.status``;
- :meth:`AgentProcess.terminate`: close stdin, give the child ``grace`` seconds to exit, SIGTERM the whole
  process group, wait again, then SIGKILL the group. npm wrappers (``node cli.js`` spawning a native binary)
  do not forward signals, so signalling the group is what leaves nothing running. Then (and after
  :meth:`AgentProcess.kill`) the rest of the agent's lineage is swept: what left the group (commands run in a
  session of their own, orphans of a crashed agent) is found through :mod:`.lineage` and SIGKILLed;
- :meth:`AgentProcess.running`: the pids of the agent's tree still running (itself, its group, its lineage);
- :meth:`AgentProcess.start` reports each process it starts to :mod:`.spawns`: a session's engine records those its
  adapter starts while connecting, and kills what of them an adapter's ``close`` left running
  (``docs/engine.md#close``);
- on Linux the agent gets SIGKILL when anyagentd dies, however it dies (a parent-death signal), a guardian process
  kills what the agent left outside its group then, and anyagentd is a child subreaper, so the agent's orphans
  stay its children until reaped (see :mod:`.lineage`).

:class:`Background` runs tasks that must outlive the call that started them (a connection's stdout pump is
started by ``connect`` and stopped by ``close``, possibly from another task); it works on anyio's asyncio and
trio backends.

:func:`json_frames` reads a line-delimited JSON protocol from :meth:`AgentProcess.lines` (oversized and non-JSON
lines become diagnostics); :func:`cli_version` runs ``<executable> --version`` once per executable path and
modification time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .. import text
from ..errors import SpawnFailed
from ..model import diagnostic
from . import lineage, spawns

if TYPE_CHECKING:
    import asyncio

    from .interface import AdapterLink

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest stdout line accepted, in bytes (64 MiB); longer lines are skipped and reported as OversizedLine."""

STDERR_TAIL_LINES = 40
"""How many of the last stderr lines :meth:`AgentProcess.stderr_tail` keeps."""

STDERR_TAIL_BYTES = 8 * 1024
"""Upper bound of :meth:`AgentProcess.stderr_tail`'s text, in bytes (8 KiB); older lines are dropped first."""

CLOSE_STEP = 2.0
"""Seconds :meth:`AgentProcess.terminate` waits after each step (stdin closed, SIGTERM) before escalating, by
default and in :meth:`ProcessConnection.close <anyagentd.adapters.connection.ProcessConnection.close>`: both steps
fit within the engine's ``close_grace`` (5 s), after which the engine kills what is left."""

_READ_CHUNK = 64 * 1024


class InputClosed(ConnectionError):
    """Writing to an agent whose stdin is closed (it exited, or we closed it): the one error
    :meth:`AgentProcess.write_line` raises for it. A ``ConnectionError`` (an ``OSError``), as the ``acp`` library's
    transports raise."""


@dataclass(frozen=True)
class OversizedLine:
    """A stdout line that exceeded the limit: it was discarded. ``size`` is its length in bytes (at least the
    limit; counted up to its newline)."""

    size: int


def format_exit_status(returncode: int | None) -> str:
    """Render a ``Popen``-style return code like Rust's ``ExitStatus`` Display.

    ``0`` → ``"exit status: 0"``, ``3`` → ``"exit status: 3"``, ``-9`` (killed by signal 9) →
    ``"signal: 9 (SIGKILL)"``; ``None`` (still running / unknown) → ``"unknown"``.
    """
    if returncode is None:
        return "unknown"
    if returncode >= 0:
        return f"exit status: {returncode}"
    signum = -returncode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"signal: {signum}"
    return f"signal: {signum} ({name})"


class _StderrRing:
    """The last stderr lines, bounded by count and total bytes."""

    def __init__(self, max_lines: int = STDERR_TAIL_LINES, max_bytes: int = STDERR_TAIL_BYTES) -> None:
        self._lines: deque[str] = deque()
        self._bytes = 0
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._partial = b""

    def feed(self, data: bytes) -> None:
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        if len(self._partial) > self._max_bytes:  # a newline-less flood: keep its end only
            self._partial = self._partial[-self._max_bytes :]
        for raw in complete:
            self._push(raw)

    def flush(self) -> None:
        if self._partial:
            self._push(self._partial)
            self._partial = b""

    def _push(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if len(line.encode()) > self._max_bytes:
            line = line[-self._max_bytes :]
        self._lines.append(line)
        self._bytes += len(line.encode()) + 1
        while self._lines and (len(self._lines) > self._max_lines or self._bytes > self._max_bytes):
            self._bytes -= len(self._lines.popleft().encode()) + 1

    def text(self) -> str:
        lines = list(self._lines)
        if self._partial:
            lines.append(self._partial.decode("utf-8", "replace"))
        return "\n".join(lines)


class AgentProcess:
    """One running agent process. Create with :meth:`start`.

    Attributes: ``argv`` (the command line), ``pid``, ``mark`` (its :data:`.lineage.LINEAGE_ENV` value, which
    every process it starts inherits). The stderr reader runs in a :class:`Background` owned by the process;
    :meth:`terminate` and :meth:`kill` stop it.
    """

    def __init__(
        self, process: anyio.abc.Process, argv: list[str], max_line_bytes: int, mark: str | None = None
    ) -> None:
        self._process = process
        self.argv = argv
        self.pid: int = process.pid
        self.mark = mark
        _LEADERS.add(self.pid)
        self._max_line = max_line_bytes
        self._write_lock = anyio.Lock()
        self._stderr = _StderrRing()
        self._stderr_done = anyio.Event()
        self._background = Background()
        self._stdin_closed = False
        self._status: str | None = None
        self._wait_lock = anyio.Lock()
        self._background.spawn(self._read_stderr, name=f"stderr of {os.path.basename(argv[0])}")

    @classmethod
    async def start(
        cls,
        argv: list[str],
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> AgentProcess:
        """Start ``argv`` in ``cwd`` with ``env`` (``None``: ours) plus its lineage mark, pipes on
        stdin/stdout/stderr, in a new process group, bound to die with this process (Linux). Raises
        :class:`SpawnFailed` (missing executable, bad cwd, permission denied...)."""
        if cwd is not None and not os.path.isdir(cwd):
            raise SpawnFailed(f"working directory {cwd!r} does not exist")
        mark = lineage.new_mark()
        env = {**(os.environ if env is None else env), lineage.LINEAGE_ENV: mark}
        lineage.become_subreaper()
        try:
            process = await _open_process(argv, cwd=cwd, env=env)
        except (OSError, ValueError) as exc:
            raise SpawnFailed(f"{argv[0]}: {exc}") from exc
        lineage.guard(mark)
        started = cls(process, list(argv), max_line_bytes, mark)
        spawns.record(started)  # the session connecting owns it (Session.connect)
        return started

    @property
    def max_line_bytes(self) -> int:
        """The longest stdout line :meth:`lines` yields as text (bytes); longer ones are ``OversizedLine``."""
        return self._max_line

    # -- stdout ---------------------------------------------------------------------------------------------

    async def lines(self) -> AsyncIterator[str | OversizedLine]:
        """Yield stdout lines (without the ``\\n``; a trailing ``\\r`` is kept) until EOF.

        A line over the limit is yielded as :class:`OversizedLine` once, after its newline (or EOF). Only one
        consumer may iterate. A final line without ``\\n`` is yielded at EOF.
        """
        stdout = self._process.stdout
        assert stdout is not None
        buffer = bytearray()
        skipping = 0  # > 0: bytes of an oversized line discarded so far
        while True:
            try:
                chunk = await stdout.receive(_READ_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                if newline < 0:
                    rest = chunk[start:]
                    if skipping:
                        skipping += len(rest)
                    elif len(buffer) + len(rest) > self._max_line:
                        skipping = len(buffer) + len(rest)
                        buffer.clear()
                    else:
                        buffer += rest
                    break
                piece = chunk[start:newline]
                start = newline + 1
                if skipping:
                    size, skipping = skipping + len(piece), 0
                    yield OversizedLine(size)
                elif len(buffer) + len(piece) > self._max_line:
                    size = len(buffer) + len(piece)
                    buffer.clear()
                    yield OversizedLine(size)
                else:
                    buffer += piece
                    line = buffer.decode("utf-8", "replace")
                    buffer.clear()
                    yield line
        if skipping:
            yield OversizedLine(skipping)
        elif buffer:
            yield buffer.decode("utf-8", "replace")

    # -- stdin ----------------------------------------------------------------------------------------------

    async def write_line(self, line: str) -> None:
        """Write ``line`` plus ``\\n`` to stdin as one unit. Raises :class:`InputClosed` when the child's stdin is
        gone."""
        if "\n" in line:
            raise ValueError("a protocol line must not contain a newline")
        stdin = self._process.stdin
        assert stdin is not None
        async with self._write_lock:
            if self._stdin_closed:
                raise InputClosed("the agent's input is closed")
            try:
                await stdin.send(line.encode() + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise InputClosed("the agent's input is closed") from exc

    async def write_json(self, obj: Any) -> None:
        """Write ``obj`` (a JSON value) as one compact JSON line (UTF-8, non-ASCII kept)."""
        await self.write_line(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))

    async def close_stdin(self) -> None:
        """Close the child's stdin (EOF); idempotent, never raises."""
        async with self._write_lock:
            if self._stdin_closed:
                return
            self._stdin_closed = True
            stdin = self._process.stdin
            if stdin is not None:
                try:
                    await stdin.aclose()
                except Exception:  # noqa: BLE001 - already broken is fine
                    pass

    # -- stderr ---------------------------------------------------------------------------------------------

    async def _read_stderr(self) -> None:
        stderr = self._process.stderr
        try:
            if stderr is None:
                return
            while True:
                try:
                    chunk = await stderr.receive(_READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                self._stderr.feed(chunk)
        finally:
            self._stderr.flush()
            self._stderr_done.set()

    def stderr_tail(self) -> str:
        """The last stderr lines (at most 40 lines / 8 KiB), ``\\n``-joined, without a trailing newline."""
        return self._stderr.text()

    async def stderr_drained(self, timeout: float = 1.0) -> None:
        """Wait up to ``timeout`` seconds for the stderr reader to reach EOF (so the tail is complete)."""
        with anyio.move_on_after(timeout):
            await self._stderr_done.wait()

    # -- lifecycle ------------------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The ``Popen``-style return code once the child has been reaped, else ``None``."""
        return self._process.returncode

    def running(self) -> list[int]:
        """The pids of this agent's tree still running, sorted (empty once all of it is gone): the agent itself until
        it exits, its process group, its descendants and the processes carrying its mark (:func:`.lineage.lineage`,
        read from ``/proc``); zombies are not running. Where there is no ``/proc`` (macOS, BSD): the agent's pid
        while it has not been reaped or its process group has a member."""
        table = lineage.processes()
        if not table:
            try:
                os.killpg(self.pid, 0)
                alive = True
            except (ProcessLookupError, PermissionError):
                alive = self._process.returncode is None
            return [self.pid] if alive else []
        found = lineage.lineage(self.pid, self.mark, table)
        if self._process.returncode is None and table.get(self.pid, ("Z",))[0] != "Z":
            found.add(self.pid)
        return sorted(found)

    async def wait(self) -> str:
        """Wait for the child to exit; return its status like ``"exit status: 3"`` or ``"signal: 9 (SIGKILL)"``."""
        async with self._wait_lock:
            if self._status is None:
                code = await self._process.wait()
                self._status = format_exit_status(code)
        return self._status

    async def _wait_for(self, seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            await self.wait()
            return True
        return False

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)  # the child leads its group (start_new_session=True)
        except (ProcessLookupError, PermissionError):
            pass
        try:  # the leader itself, in case it moved to another group
            if self._process.returncode is None:
                os.kill(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    async def terminate(self, grace: float = CLOSE_STEP) -> str:
        """Stop the child and its process group; return its exit status.

        Steps: close stdin, wait ``grace`` seconds; SIGTERM the group, wait ``grace`` seconds; SIGKILL the group
        and reap. After the leader exited, the group still gets SIGTERM then SIGKILL so no helper it started
        (npm wrappers, MCP servers, shells) is left running. Shielded from cancellation; idempotent.
        """
        with anyio.CancelScope(shield=True):
            seen = lineage.lineage(self.pid, self.mark)  # while the tree is whole: parents still known
            await self.close_stdin()
            exited = await self._wait_for(grace)
            if not exited:
                self._signal_group(signal.SIGTERM)
                exited = await self._wait_for(grace)
            if not exited:
                self._signal_group(signal.SIGKILL)
                await self.wait()
            self._sweep_group()
            await self.sweep_lineage(seen)
            await self.stderr_drained(0.5)
            await self._background.aclose()
            status = await self.wait()
            await self._release()
            return status
        # a CancelScope's exit may swallow (its own cancellation); this shielded one has no deadline to cancel it
        raise AssertionError("unreachable")  # pragma: no cover

    async def kill(self) -> str:
        """SIGKILL the process group (and the rest of the lineage) at once and reap the child; return its exit
        status."""
        with anyio.CancelScope(shield=True):
            seen = lineage.lineage(self.pid, self.mark)
            self._signal_group(signal.SIGKILL)
            status = await self.wait()
            await self.sweep_lineage(seen)
            await self.close_stdin()
            await self.stderr_drained(0.5)
            await self._background.aclose()
            await self._release()
            return status
        # a CancelScope's exit may swallow (its own cancellation); this shielded one has no deadline to cancel it
        raise AssertionError("unreachable")  # pragma: no cover

    async def _release(self) -> None:
        # Close the process's pipes now, inside the event loop: left to the garbage collector they would be
        # closed after the loop ("Event loop is closed" at exit).
        try:
            await self._process.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def sweep_lineage(self, seen: set[int] | None = None) -> None:
        """SIGKILL what is left of the agent's lineage (``seen`` earlier, or found now) and reap what of it
        re-parented to this process, plus orphaned zombies. Call once the leader has exited."""
        found = (seen or set()) | lineage.lineage(self.pid, self.mark)
        killed = lineage.kill_lineage(found)
        await lineage.reap([*killed, *lineage.orphaned_zombies(_LEADERS)], exclude=_LEADERS)
        _LEADERS.discard(self.pid)
        if self.mark:
            lineage.guard(self.mark, register=False)

    def _sweep_group(self) -> None:
        """SIGKILL whatever is left in the (already leaderless) group: a leader that exited on EOF may have
        left children behind."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


_LEADERS: set[int] = set()
"""Pids of the agent processes asyncio waits for: never reaped by the lineage sweep."""


async def _open_process(argv: list[str], *, cwd: str | None, env: dict[str, str]) -> anyio.abc.Process:
    # anyio.open_process has no preexec_fn; its backend takes Popen's keywords, and the parent-death signal
    # has to be set in the child (between fork and exec).
    preexec = lineage.die_with_parent()
    kwargs: dict[str, Any] = dict(
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True
    )
    if preexec is not None:
        prefix = lineage.die_with_parent_prefix(argv[0], env.get("PATH"))
        if prefix is not None:  # the same signal set by `setpriv` before it execs the agent: no fork of this process
            return await anyio.open_process([*prefix, *argv], **kwargs)
        try:
            from anyio._core._eventloop import get_async_backend
        except ImportError:  # a future anyio: spawn without the parent-death signal
            pass
        else:
            return await get_async_backend().open_process(argv, preexec_fn=preexec, **kwargs)
    return await anyio.open_process(argv, **kwargs)


# ------------------------------------------------------------------------------------------------ background


class Background:
    """Tasks not bound to the caller's task group: started by one call (``connect``), stopped by another
    (``close``). Each task runs in its own cancel scope; :meth:`aclose` cancels them all and waits.

    An exception escaping a task is stored in ``errors`` (never propagated: the owner reports failures itself).
    """

    def __init__(self) -> None:
        self._tasks: list[list[Any]] = []  # [cancel scope, done event, task id]
        self.errors: list[BaseException] = []
        self._closed = False

    def spawn(self, func: Callable[[], Awaitable[object]], *, name: str | None = None) -> None:
        """Start ``func()`` now in the background."""
        if self._closed:
            raise RuntimeError("Background is closed")
        scope = anyio.CancelScope()
        done = anyio.Event()
        entry: list[Any] = [scope, done, None]
        self._tasks.append(entry)

        async def runner() -> None:
            entry[2] = anyio.get_current_task().id
            try:
                with scope:
                    await func()
            except Exception as exc:  # noqa: BLE001 - kept for the owner
                self.errors.append(exc)
            finally:
                done.set()

        loop = _asyncio_loop()
        if loop is not None:
            task = loop.create_task(runner(), name=name)
            _STRONG_REFS.add(task)
            task.add_done_callback(_STRONG_REFS.discard)
        else:
            import trio

            trio.lowlevel.spawn_system_task(runner, name=name)

    async def aclose(self) -> None:
        """Cancel every task and wait until all have finished. Idempotent; callable from one of the tasks
        (that one is not waited for)."""
        self._closed = True
        me = anyio.get_current_task().id
        for scope, _, _ in self._tasks:
            scope.cancel()
        for _, done, task_id in self._tasks:
            if task_id != me:
                await done.wait()


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_STRONG_REFS: set[asyncio.Task[None]] = set()


async def json_frames(process: AgentProcess, link: AdapterLink, *, agent: str, raw_key: str) -> AsyncIterator[Any]:
    """The JSON values (arbitrary JSON, as decoded) of ``process``'s stdout lines, for an agent speaking line-delimited JSON, with lone surrogates
    replaced by U+FFFD (:func:`anyagentd.text.loads`); ``agent`` names it in diagnostics, reported through ``link``
    (an :class:`~anyagentd.adapters.interface.AdapterLink`).

    Blank lines are skipped; a line over the size limit is reported as a ``Warning`` diagnostic, a line that is
    not JSON as an ``Info`` diagnostic carrying its first 4096 characters in ``extensions[raw_key]``, and reading
    goes on. Ends at EOF."""
    async for line in process.lines():
        if isinstance(line, OversizedLine):
            await link.emit(
                diagnostic("Warning", f"skipped a {line.size}-byte {agent} line (limit {process.max_line_bytes} bytes)")
            )
            continue
        if not line.strip():
            continue
        try:
            frame = text.loads(line)  # lone surrogates become U+FFFD here, so every event stays writable
        except ValueError:
            await link.emit(
                diagnostic("Info", f"{agent} wrote a line that is not JSON"), extensions={raw_key: line[:4096]}
            )
            continue
        yield frame


_VERSION_CACHE: dict[tuple[str, float], str | None] = {}


async def cli_version(executable: str, *, timeout: float = 15.0) -> str | None:
    """The first semver-looking token (``\\d+.\\d+.\\d+`` and what follows up to whitespace) of
    ``executable --version``: ``"2.1.197 (Claude Code)"`` → ``"2.1.197"``, ``"codex-cli 0.171.0"`` → ``"0.171.0"``.

    Cached per executable path and modification time (an upgrade in place is seen, a probe per session costs
    nothing); ``None`` when the file is missing, cannot be run, prints no version, or takes over ``timeout``
    seconds (the ``None`` is cached too)."""
    try:
        key = (executable, os.stat(executable).st_mtime)
    except OSError:
        return None
    if key in _VERSION_CACHE:
        return _VERSION_CACHE[key]
    version = None
    try:
        with anyio.fail_after(timeout):
            result = await anyio.run_process([executable, "--version"], check=False)
        match = re.search(r"\d+\.\d+\.\d+\S*", result.stdout.decode(errors="replace"))
        version = match.group(0) if match else None
    except (OSError, TimeoutError):
        version = None
    _VERSION_CACHE[key] = version
    return version
