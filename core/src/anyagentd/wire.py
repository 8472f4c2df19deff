"""The JSON-lines wire (``anyagentd serve``): commands on stdin, lines on stdout, per ``anyagent-wire.schema.json``.

Behaviour from ``anyagent-semantics.md`` §1: the hello line first; commands run concurrently and reply by id; the
``ok`` reply to ``open`` is written before any event of that session; per-session events keep ``sequence`` order;
a failed session writes ``{"session", "error"}`` then ``{"closed"}``; every opened session writes ``closed``
exactly once, last; an unparseable line gets ``BadFrame`` (with its id when readable) and the loop goes on; EOF on
stdin closes every session, drains the writer and returns. One writer task writes every line, so lines never
interleave.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Union

import anyio
from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from . import PROTOCOL, __version__
from .errors import AnyagentError, BadFrame, ProtocolFailed, SessionClosed, UnknownSession
from .model import AgentRef, Answer, ConfigValue, RollbackScope, SessionOptions
from .runtime import Runtime

# ------------------------------------------------------------------------------------------------ commands


class _Cmd(BaseModel):
    # Unknown fields are ignored, as the reference sidecar's flattened serde frames do: a client that sends a
    # newer optional field still works. The id must be a JSON integer (no "6" or true coerced into one).
    model_config = ConfigDict(extra="ignore")
    id: StrictInt = Field(ge=0, lt=2**64)


class _SessionCmd(_Cmd):
    session: str


class Discover(_Cmd):
    cmd: Literal["discover"]


class Probe(_Cmd):
    cmd: Literal["probe"]
    agent: AgentRef


class PlanUsageCmd(_Cmd):
    cmd: Literal["plan_usage"]
    agent: AgentRef


class Open(_Cmd, SessionOptions):
    """``open``: the agent plus the ``SessionOptions`` fields, flattened into the frame."""

    cmd: Literal["open"]
    agent: AgentRef

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude={"id", "cmd", "agent", "dir"})


class Generate(Open):
    cmd: Literal["generate"]  # type: ignore[assignment]
    prompt: str

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude={"id", "cmd", "agent", "dir", "prompt"})


class Prompt(_SessionCmd):
    cmd: Literal["prompt"]
    text: str
    attachments: list[str] = Field(default_factory=list)


class Dequeue(_SessionCmd):
    cmd: Literal["dequeue"]
    prompt: str


class AnswerCmd(_SessionCmd):
    cmd: Literal["answer"]
    request: str
    answer: Answer


class Configure(_SessionCmd):
    cmd: Literal["configure"]
    option: str
    value: ConfigValue


class Rollback(_SessionCmd):
    cmd: Literal["rollback"]
    turns: int = Field(ge=1, lt=2**32)
    scope: RollbackScope


class Compact(_SessionCmd):
    cmd: Literal["compact"]


class Cancel(_SessionCmd):
    cmd: Literal["cancel"]
    clear_queue: bool = False


class Info(_SessionCmd):
    cmd: Literal["info"]


class Close(_SessionCmd):
    cmd: Literal["close"]


Frame = Annotated[
    Union[Discover, Probe, PlanUsageCmd, Generate, Open, Prompt, Dequeue, AnswerCmd, Configure, Rollback,  # noqa: UP007
          Compact, Cancel, Info, Close],  # fmt: skip
    Field(discriminator="cmd"),
]
FRAME = TypeAdapter(Frame)
COMMANDS = ("discover", "probe", "plan_usage", "generate", "open", "prompt", "dequeue", "answer", "configure",
            "rollback", "compact", "cancel", "info", "close")  # fmt: skip


def parse_frame(line: str | bytes) -> Any:
    """One input line → a command model. Raises :class:`BadFrame` (with ``frame_id`` set to the line's numeric
    ``id`` when it has one) for bad JSON, a missing or unknown ``cmd``, or fields that do not fit it."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as err:  # bad JSON or UTF-8, a 5000-digit number, absurd nesting
        raise _bad(None, "not a JSON line", str(err) or type(err).__name__) from None
    frame_id = data.get("id") if isinstance(data, dict) else None
    if not (isinstance(frame_id, int) and not isinstance(frame_id, bool) and 0 <= frame_id < 2**64):
        frame_id = None
    if not isinstance(data, dict):
        raise _bad(None, "a frame is a JSON object", f"got {type(data).__name__}")
    if data.get("cmd") not in COMMANDS:
        raise _bad(frame_id, "unknown command", f"cmd {data.get('cmd')!r} is not one of {', '.join(COMMANDS)}")
    try:
        return FRAME.validate_python(data)
    except ValidationError as err:
        detail = "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or e['loc'][0]}: {e['msg']}" for e in err.errors())
        raise _bad(frame_id, f"invalid {data['cmd']} frame", detail) from None


def _bad(frame_id: int | None, message: str, detail: str) -> BadFrame:
    err = BadFrame(detail, message)
    err.frame_id = frame_id  # type: ignore[attr-defined]
    return err


# ------------------------------------------------------------------------------------------------ lines


def hello_line() -> bytes:
    return json.dumps({"hello": {"protocol": PROTOCOL, "anyagent": __version__}}).encode() + b"\n"


def ok_line(frame_id: int, value: Any) -> bytes:
    return json.dumps({"id": frame_id, "ok": to_jsonable_python(value)}).encode() + b"\n"


def error_line(frame_id: int | None, error: AnyagentError) -> bytes:
    return json.dumps({"id": frame_id, "error": to_jsonable_python(error.body())}).encode() + b"\n"


def event_line(event: Any) -> bytes:
    return b'{"event":' + event.__pydantic_serializer__.to_json(event) + b"}\n"


def session_error_line(session_id: str, error: AnyagentError) -> bytes:
    return json.dumps({"session": session_id, "error": to_jsonable_python(error.body())}).encode() + b"\n"


def closed_line(session_id: str) -> bytes:
    return json.dumps({"closed": session_id}).encode() + b"\n"


# ------------------------------------------------------------------------------------------------ server

BATCH = 256
"""Events of one session written together when several are waiting (fewer syscalls on a flood)."""


class WireServer:
    """Serves one connection: reads frames from ``read_line`` and writes lines with ``write`` (an async callable
    taking bytes, one or more whole lines). Use :func:`serve_stdio` for stdin/stdout."""

    def __init__(self, runtime: Runtime, read_line: Callable[[], Awaitable[bytes]],
                 write: Callable[[bytes], Awaitable[None]]) -> None:  # fmt: skip
        self.runtime = runtime
        self._read_line = read_line
        self._write = write
        # Few slots: what a stalled app leaves unread must pile up in the sessions' bounded queues, where the
        # engine notices it (each slot holds one line or one batch of at most BATCH events).
        self._send, self._recv = anyio.create_memory_object_stream[bytes](16)
        self._forwarded: dict[str, anyio.Event] = {}
        self._reading = anyio.CancelScope()
        self.signal: int | None = None  # the signal that stopped the server, if one did  # session id -> set once its `closed` line is queued

    async def run(self) -> None:
        """Serve until EOF on the input (or the output breaks); then close every session and drain."""
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._writer)
            await self._send.send(hello_line())
            async with anyio.create_task_group() as commands:
                with self._reading:
                    await self._read_frames(commands)
                await self.runtime.aclose()
            await self._send.aclose()

    def stop(self) -> None:
        """Stop reading (as if the input ended): every session is closed, the writer drains, :meth:`run` returns."""
        self._reading.cancel()

    async def _read_frames(self, commands: anyio.abc.TaskGroup) -> None:
        while line := await self._read_line():
            if not line.strip():
                continue
            try:
                frame = parse_frame(line)
            except BadFrame as err:
                await self._send.send(error_line(err.frame_id, err))  # type: ignore[attr-defined]
                continue
            commands.start_soon(self._command, frame, commands)

    async def _writer(self) -> None:
        try:
            async for line in self._recv:
                chunks = [line]
                while len(chunks) < 4096:
                    try:
                        chunks.append(self._recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await self._write(b"".join(chunks))
        except OSError:
            # The app is gone (stdout broken): nothing can be delivered any more. Shut every agent down as EOF
            # would (agents run in their own process groups and would outlive us), then leave.
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.runtime.settings.close_grace + 5):
                await self.runtime.aclose()
            os._exit(0)

    async def _command(self, frame: Any, commands: anyio.abc.TaskGroup) -> None:
        try:
            if type(frame) is Open:  # not Generate, which subclasses Open
                session = await self.runtime.open(frame.agent, frame.dir, **frame.options())
                # Not session.info(): an open in flight at EOF returns a session the runtime already closed; it
                # is still announced (ok, then its events and its closed line), per guarantee (5).
                self._forwarded[session.id] = anyio.Event()
                await self._send.send(ok_line(frame.id, session._snapshot()))
                commands.start_soon(self._forward, session)
                return
            result = await self._dispatch(frame)
        except AnyagentError as err:
            await self._send.send(error_line(frame.id, err))
            return
        except Exception as err:  # a bug (ours or a plugin's) fails this command, never the connection
            traceback.print_exc(file=sys.stderr)
            failure = ProtocolFailed(f"{type(err).__name__}: {err}", f"{frame.cmd} failed unexpectedly")
            await self._send.send(error_line(frame.id, failure))
            return
        await self._send.send(ok_line(frame.id, result))

    async def _dispatch(self, frame: Any) -> Any:
        rt = self.runtime
        if isinstance(frame, Discover):
            return await rt.discover()
        if isinstance(frame, Probe):
            return await rt.probe(frame.agent)
        if isinstance(frame, PlanUsageCmd):
            return await rt.plan_usage(frame.agent)
        if isinstance(frame, Generate):
            return await rt.generate(frame.agent, frame.dir, frame.prompt, **frame.options())
        session = rt.session(frame.session)
        if isinstance(frame, Prompt):
            return await session.prompt(frame.text, frame.attachments)
        if isinstance(frame, Dequeue):
            return await session.dequeue(frame.prompt)
        if isinstance(frame, AnswerCmd):
            return await session.answer(frame.request, frame.answer)
        if isinstance(frame, Configure):
            return await session.configure(frame.option, frame.value)
        if isinstance(frame, Rollback):
            return await session.rollback(frame.turns, frame.scope)
        if isinstance(frame, Compact):
            return await session.compact()
        if isinstance(frame, Cancel):
            return await session.cancel(frame.clear_queue)
        if isinstance(frame, Info):
            return session.info()
        if isinstance(frame, Close):
            if session.closed:
                raise SessionClosed()
            await session.close()
            await self._forwarded[session.id].wait()  # the reply comes after the session's `closed` line
            return None
        raise UnknownSession(getattr(frame, "session", "?"))

    async def _forward(self, session: Any) -> None:
        try:
            async for batch in session.event_batches(BATCH):
                await self._send.send(b"".join(map(event_line, batch)))
        except AnyagentError as err:
            await self._send.send(session_error_line(session.id, err))
        await self._send.send(closed_line(session.id))
        self._forwarded[session.id].set()


async def serve_stdio(runtime: Runtime) -> int | None:
    """Serve the wire on this process's stdin/stdout.

    File descriptor 1 is kept for protocol lines only: the real stdout is duplicated for the writer and fd 1 is
    pointed at stderr, so stray prints and agents that inherit fd 1 cannot corrupt the protocol. SIGTERM, SIGINT
    and SIGHUP stop it like EOF (every agent is shut down). Returns the signal number that stopped it, if any.
    """
    sys.stdout.flush()
    out, nonblocking = _protocol_fd()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    stdin = sys.stdin.buffer

    async def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            if not nonblocking:
                view = view[await anyio.to_thread.run_sync(os.write, out, view) :]
                continue
            try:
                view = view[os.write(out, view) :]
            except BlockingIOError:
                await anyio.wait_writable(out)

    async def read_line() -> bytes:
        # abandon_on_cancel: a stop (SIGTERM) must not wait for a line that may never come
        return await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)

    server = WireServer(runtime, read_line, write)

    async def stop_on_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                server.signal = signum
                server.stop()  # like EOF: every session closes (its agent is shut down), then we leave
                return

    async with runtime, anyio.create_task_group() as tg:
        tg.start_soon(stop_on_signal)
        await server.run()
        tg.cancel_scope.cancel()
    return server.signal


def _protocol_fd() -> tuple[int, bool]:
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
