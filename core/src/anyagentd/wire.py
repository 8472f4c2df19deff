"""The JSON-lines wire (``anyagentd serve``): commands on stdin, lines on stdout, per ``anyagent-wire.schema.json``.

Behaviour from ``docs/wire.md#guarantees``: the hello line first; commands run concurrently and reply by id; the
``ok`` reply to ``open`` is written before any event of that session; per-session events keep ``sequence`` order;
a failed session writes ``{"session", "error"}`` then ``{"closed"}``; every opened session writes ``closed``
exactly once, last; an unparseable line gets ``BadFrame`` (with its id when readable) and the loop goes on; EOF on
stdin closes every session, drains the writer and returns. One writer task writes every line, so lines never
interleave; every line is compact JSON (no spaces), as ``docs/wire.md#guarantees`` says.

Hardening against careless or hostile clients: frames are strict JSON (no ``NaN``, no BOM, UTF-8 without encoded or
escaped lone surrogates) with strict types, a wrong one is ``BadFrame`` naming the field; unknown fields are
ignored by every command; an input line longer than :attr:`WireSettings.max_line_bytes` is refused unread; the
server stops reading commands while more than :attr:`WireSettings.output_bound_bytes` of its output is unwritten,
or while :attr:`WireSettings.max_commands` commands are running, so memory stays bounded whatever a client
writes; an event that cannot be written as JSON fails its own session (``ProtocolFailed``), never the writer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, BinaryIO, Literal, NamedTuple, Union

import anyio
from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from .adapters.process import OversizedLine
from .errors import AnyagentError, BadFrame, ProtocolFailed, SessionClosed, UnknownSession
from .hard_exit import hard_exit
from .model import AgentRef, Answer, ConfigValue, RollbackScope, SessionOptions, kind_tag, new_list
from .runtime import Runtime
from .stdio import ProtocolOutput, claim_stdout, hello_line
from .text import clip, find_surrogate, sanitize
from .wire_lines import event_line as event_line  # re-exported: the wire's line of one event
from .wire_lines import event_lines
from .wire_settings import WireSettings

# ------------------------------------------------------------------------------------------------ settings


# ------------------------------------------------------------------------------------------------ commands


class _Cmd(BaseModel):
    # Unknown fields are ignored, as ``docs/wire.md#unknown-fields`` says: a client that sends a
    # newer optional field still works. The id must be a JSON integer (no "6" or true coerced into one).
    model_config = ConfigDict(extra="ignore", defer_build=True)
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

    # like every frame (SessionOptions itself forbids unknown fields)
    model_config = ConfigDict(extra="ignore", defer_build=True)
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
    attachments: list[str] = Field(default_factory=new_list)


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


# The commands are listed once, in :data:`COMMANDS` (after the server, whose handlers it names).


def parse_frame(line: str | bytes) -> Any:
    """One input line → a command model. Raises :class:`BadFrame` (with ``frame_id`` set to the line's numeric
    ``id`` when it has one) for a line that is not strict JSON in UTF-8 (``NaN``/``Infinity``, a BOM, encoded or
    escaped lone surrogates, absurd numbers or nesting), a missing or unknown ``cmd``, or fields that do not fit it
    (types are strict: no ``"2"`` for 2, no 0/1 for a boolean). Details are clipped to a few hundred bytes."""
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        data = json.loads(text, parse_constant=_refuse_constant)
    except UnicodeDecodeError as err:
        raise _bad(None, "not a UTF-8 line", f"byte {err.start}: {err.reason}") from None
    except (ValueError, RecursionError) as err:  # bad JSON, NaN, a BOM, a 5000-digit number, absurd nesting
        raise _bad(None, "not a JSON line", str(err) or type(err).__name__) from None
    frame_id = data.get("id") if isinstance(data, dict) else None
    if not (isinstance(frame_id, int) and not isinstance(frame_id, bool) and 0 <= frame_id < 2**64):
        frame_id = None
    if not isinstance(data, dict):
        raise _bad(None, "a frame is a JSON object", f"got {type(data).__name__}")
    if "\\u" in text and (where := find_surrogate(data)) is not None:
        raise _bad(frame_id, "not valid Unicode", f"{where}: a lone surrogate escape")
    cmd = data.get("cmd")
    command = COMMANDS.get(cmd) if isinstance(cmd, str) else None  # a list or an object is no key (nor a command)
    if command is None:
        raise _bad(frame_id, "unknown command", f"cmd {clip(repr(cmd), 60)} is not one of {', '.join(COMMANDS)}")
    try:
        # The frame's own class, not the union of all: the first `open` builds the schema of `open` only (issue 17).
        return command.frame.model_validate(data, strict=True)
    except ValidationError as err:
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or cmd}: {e['msg']}" for e in err.errors())
        raise _bad(frame_id, f"invalid {cmd} frame", detail) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _bad(frame_id: int | None, message: str, detail: str) -> BadFrame:
    err = BadFrame(clip(detail), message)
    err.frame_id = frame_id  # type: ignore[attr-defined]
    return err


def oversized_frame(line: OversizedLine, limit: int) -> BadFrame:
    """The ``BadFrame`` for an input line over ``limit`` bytes (its id unread: ``null``)."""
    return _bad(
        None, "line too long", f"a {line.size}-byte line exceeds the {limit}-byte limit (ANYAGENTD_WIRE_MAX_LINE_BYTES)"
    )


# ------------------------------------------------------------------------------------------------ lines

# Event lines are wire_lines.py's (event_line, event_lines: pydantic's serializer's bytes, a flood formatted by hand).


def _dumps(obj: Any) -> bytes:
    """One compact JSON line. Text that cannot be encoded (a lone surrogate in a path or a message) is written with
    U+FFFD in its place rather than failing the line."""
    text = json.dumps(to_jsonable_python(obj), ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return sanitize(text).encode() + b"\n"


def ok_line(frame_id: int, value: Any) -> bytes:
    return _dumps({"id": frame_id, "ok": value})


def error_line(frame_id: int | None, error: AnyagentError) -> bytes:
    return _dumps({"id": frame_id, "error": error.body()})


def session_error_line(session_id: str, error: AnyagentError) -> bytes:
    return _dumps({"session": session_id, "error": error.body()})


def closed_line(session_id: str) -> bytes:
    return _dumps({"closed": session_id})


# ------------------------------------------------------------------------------------------------ server

BATCH = 256
"""Events of one session written together when several are waiting (fewer syscalls on a flood)."""

EVENT_SLOTS = 16
"""Entries the output queue may hold before a session's next event batch waits for the writer."""


class _Outbox:
    """The lines waiting for the writer, in the order they were queued.

    Replies are queued at once, so a command finishes (and frees what it holds) even while the app does not read;
    what bounds them is the reader, which reads no command while :attr:`bytes` is over the bound. Event batches
    wait while ``slots`` entries are queued: what a stalled app leaves unread then piles up in the sessions' own
    bounded queues, where the engine notices it (``ConsumerLagged``).

    Whoever waits for a change waits on one event, made by the first waiter after the last change: a change with
    nobody waiting makes none (when every change made the next one: three per event batch, 1.6 us each; issue 31).
    """

    def __init__(self, slots: int) -> None:
        self.bytes = 0  # queued and not yet written
        self._lines: list[bytes] = []
        self._slots = slots
        self._changed: anyio.Event | None = None  # set at the next change; None while nobody waits
        self._closed = False

    def put_nowait(self, line: bytes) -> None:
        self._lines.append(line)
        self.bytes += len(line)
        self._notify()

    async def put(self, line: bytes) -> None:
        while len(self._lines) >= self._slots:
            await self._change()
        self.put_nowait(line)

    async def take(self) -> bytes | None:
        """Everything queued, joined (the caller reports :meth:`written` after writing it); ``None`` once closed
        and empty."""
        while not self._lines:
            if self._closed:
                return None
            await self._change()
        data, self._lines = b"".join(self._lines), []
        self._notify()
        return data

    def written(self, size: int) -> None:
        self.bytes -= size
        self._notify()

    async def wait_below(self, bound: int) -> None:
        while self.bytes > bound:
            await self._change()

    def close(self) -> None:
        self._closed = True
        self._notify()

    async def _change(self) -> None:
        # Wait for the next change (the caller then looks again at what it waits for).
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()


class WireServer:
    """Serves one connection: reads frames from ``read_line`` (an async callable returning one line as bytes, an
    :class:`OversizedLine` for a line it skipped, or ``b""`` at EOF) and writes lines with ``write`` (an async
    callable taking bytes, one or more whole lines). ``settings`` defaults to :meth:`WireSettings.from_env`;
    ``greeted``: the hello line was already written (by :func:`~anyagentd.stdio.claim_stdout`), so it is not
    written again. Use :func:`serve_stdio` for stdin/stdout."""

    def __init__(
        self,
        runtime: Runtime,
        read_line: Callable[[], Awaitable[bytes | OversizedLine]],
        write: Callable[[bytes], Awaitable[None]],
        settings: WireSettings | None = None,
        *,
        greeted: bool = False,
    ) -> None:
        self.runtime = runtime
        self.settings = settings or WireSettings.from_env()
        self._read_line = read_line
        self._write = write
        self._out = _Outbox(EVENT_SLOTS)
        self._running = anyio.Semaphore(self.settings.max_commands)
        self._forwarded: dict[str, anyio.Event] = {}  # id of a session `open`ed here -> set once `closed` is queued
        self._reading = anyio.CancelScope()
        self._commands: anyio.abc.TaskGroup  # the running commands and the sessions' forwarders (set by run)
        self._greeted = greeted
        self.signal: int | None = None  # the signal that stopped the server, if one did

    async def run(self) -> None:
        """Serve until EOF on the input (or the output breaks); then close every session and drain."""
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._writer)
            if not self._greeted:
                self._out.put_nowait(hello_line())
            async with anyio.create_task_group() as self._commands:
                with self._reading:
                    await self._read_frames()
                await self.runtime.aclose()
            self._out.close()

    def stop(self) -> None:
        """Stop reading (as if the input ended): every session is closed, the writer drains, :meth:`run` returns."""
        self._reading.cancel()

    async def _read_frames(self) -> None:
        while True:
            # Backpressure: while the app does not read what we write, read none of what it writes. Replies
            # then wait in its pipe to us, not in our memory.
            await self._out.wait_below(self.settings.output_bound_bytes)
            line = await self._read_line()
            if not line:
                return
            try:
                if isinstance(line, OversizedLine):
                    raise oversized_frame(line, self.settings.max_line_bytes)
                if not line.strip():
                    continue
                frame = parse_frame(line)
            except BadFrame as err:
                self._out.put_nowait(error_line(err.frame_id, err))
                continue
            await self._running.acquire()  # released when the command has its reply
            self._commands.start_soon(self._command, frame)

    async def _writer(self) -> None:
        try:
            while (data := await self._out.take()) is not None:
                await self._write(data)
                self._out.written(len(data))
        except OSError:
            # The app is gone (stdout broken): nothing can be delivered any more. Shut every agent down as EOF
            # would (agents run in their own process groups and would outlive us), then leave.
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.runtime.settings.close_grace + 5):
                await self.runtime.aclose()
            hard_exit(0)

    async def _command(self, frame: Any) -> None:
        try:
            line = await self._reply(frame)
        finally:
            self._running.release()
        if line is not None:
            self._out.put_nowait(line)

    async def _reply(self, frame: Any) -> bytes | None:
        """The reply line to ``frame``: the ``ok`` of what its command's handler returns (``None`` when the handler
        answered itself: ``open``, whose ``ok`` comes before its events), or the error it raised."""
        try:
            result = await COMMANDS[frame.cmd].handler(self, frame)
            return None if result is _ANSWERED else ok_line(frame.id, result)
        except AnyagentError as err:
            return error_line(frame.id, err)
        except Exception as err:  # a bug (ours or a plugin's) fails this command, never the connection
            traceback.print_exc(file=sys.stderr)
            failure = ProtocolFailed(clip(f"{type(err).__name__}: {err}"), f"{frame.cmd} failed unexpectedly")
            return error_line(frame.id, failure)

    def _session(self, session_id: str) -> Any:
        """A session this connection opened with ``open``. Others (``generate``'s throwaway sessions, whose ids
        are just as predictable) are ``UnknownSession``, exactly like ids never opened."""
        if session_id not in self._forwarded:
            raise UnknownSession(session_id)
        return self.runtime.session(session_id)

    # The commands' handlers, public as COMMANDS names them (``cmd_<name>``, each with its frame): what one returns is
    # its ``ok`` reply's value.

    async def cmd_discover(self, frame: Discover) -> Any:
        return await self.runtime.discover()

    async def cmd_probe(self, frame: Probe) -> Any:
        return await self.runtime.probe(frame.agent)

    async def cmd_plan_usage(self, frame: PlanUsageCmd) -> Any:
        return await self.runtime.plan_usage(frame.agent)

    async def cmd_generate(self, frame: Generate) -> Any:
        return await self.runtime.generate(frame.agent, frame.dir, frame.prompt, **frame.options())

    async def cmd_open(self, frame: Open) -> object:
        session = await self.runtime.open(frame.agent, frame.dir, **frame.options())
        # Not session.info(): an open in flight at EOF returns a session the runtime already closed; it is still
        # announced (ok, then its events and its closed line), per guarantee (5).
        self._forwarded[session.id] = anyio.Event()
        self._out.put_nowait(ok_line(frame.id, session.snapshot()))
        self._commands.start_soon(self._forward, session)
        return _ANSWERED

    async def cmd_prompt(self, frame: Prompt) -> Any:
        return await self._session(frame.session).prompt(frame.text, frame.attachments)

    async def cmd_dequeue(self, frame: Dequeue) -> Any:
        return await self._session(frame.session).dequeue(frame.prompt)

    async def cmd_answer(self, frame: AnswerCmd) -> Any:
        return await self._session(frame.session).answer(frame.request, frame.answer)

    async def cmd_configure(self, frame: Configure) -> Any:
        return await self._session(frame.session).configure(frame.option, frame.value)

    async def cmd_rollback(self, frame: Rollback) -> Any:
        return await self._session(frame.session).rollback(frame.turns, frame.scope)

    async def cmd_compact(self, frame: Compact) -> Any:
        return await self._session(frame.session).compact()

    async def cmd_cancel(self, frame: Cancel) -> Any:
        return await self._session(frame.session).cancel(frame.clear_queue)

    async def cmd_info(self, frame: Info) -> Any:
        return self._session(frame.session).info()

    async def cmd_close(self, frame: Close) -> None:
        session = self._session(frame.session)
        if session.closed:
            raise SessionClosed()
        await session.close()
        await self._forwarded[session.id].wait()  # the reply comes after the session's `closed` line

    async def _forward(self, session: Any) -> None:
        unwritable: AnyagentError | None = None
        error: AnyagentError | None = None
        try:
            async for batch in session.event_batches(BATCH, parts=True):
                data, bad, why = event_lines(batch, session.log.model)
                if data:
                    await self._out.put(data)
                if bad is not None and unwritable is None:
                    unwritable = _unwritable(session.id, bad, why)
                    self._commands.start_soon(_fail, session, unwritable)
        except AnyagentError as err:
            error = err
        error = error or unwritable  # the session's own failure if it had one first, else ours
        if error is not None:
            await self._out.put(session_error_line(session.id, error))
        await self._out.put(closed_line(session.id))
        self._forwarded[session.id].set()


_ANSWERED = object()
"""What a handler returns that wrote its ``ok`` reply itself (``open``)."""


# ------------------------------------------------------------------------------------------------ the command table


class WireCommand(NamedTuple):
    """One wire command: its ``cmd`` ``name``; the ``frame`` model a line of it is read into (strictly, by
    :func:`parse_frame`; its ``cmd`` field is the literal ``name``); the ``handler`` that answers it, a
    :class:`WireServer` method awaited with the frame, whose result is the ``ok`` reply's value."""

    name: str
    frame: type[_Cmd]
    handler: Callable[[WireServer, Any], Awaitable[Any]]


def _table(*commands: WireCommand) -> dict[str, WireCommand]:
    """``commands`` by name, checked at import: each name once, and each frame's ``cmd`` literal its name."""
    table: dict[str, WireCommand] = {}
    for command in commands:
        literal = command.frame.model_fields["cmd"].annotation.__args__  # type: ignore[union-attr]
        if command.name in table or literal != (command.name,):
            raise TypeError(f"wire command {command.name!r}: listed twice, or its frame's cmd is {literal}")
        table[command.name] = command
    return table


COMMANDS: dict[str, WireCommand] = _table(
    WireCommand("discover", Discover, WireServer.cmd_discover),
    WireCommand("probe", Probe, WireServer.cmd_probe),
    WireCommand("plan_usage", PlanUsageCmd, WireServer.cmd_plan_usage),
    WireCommand("generate", Generate, WireServer.cmd_generate),
    WireCommand("open", Open, WireServer.cmd_open),
    WireCommand("prompt", Prompt, WireServer.cmd_prompt),
    WireCommand("dequeue", Dequeue, WireServer.cmd_dequeue),
    WireCommand("answer", AnswerCmd, WireServer.cmd_answer),
    WireCommand("configure", Configure, WireServer.cmd_configure),
    WireCommand("rollback", Rollback, WireServer.cmd_rollback),
    WireCommand("compact", Compact, WireServer.cmd_compact),
    WireCommand("cancel", Cancel, WireServer.cmd_cancel),
    WireCommand("info", Info, WireServer.cmd_info),
    WireCommand("close", Close, WireServer.cmd_close),
)
"""Every wire command by name, in the schema's order (``Frame`` in ``anyagent-wire.schema.json``; a test holds
them equal): the one list of them. :func:`parse_frame` reads a line with its command's frame model, the server
answers it with its handler (a dict lookup each), :data:`FRAME` is the union of the frames."""

_FRAME_UNION: Any = Annotated[Union[tuple(command.frame for command in COMMANDS.values())], Field(discriminator="cmd")]  # noqa: UP007  (built from the table at import: no static type)
FRAME: TypeAdapter[Any] = TypeAdapter(
    _FRAME_UNION, config=ConfigDict(defer_build=True)
)  # every frame (a line is read with its own frame model: parse_frame)


def _unwritable(session_id: str, event: Any, why: Exception | None) -> ProtocolFailed:
    tag = kind_tag(event.kind) if hasattr(event, "kind") else type(event).__name__
    where = f"event {getattr(event, 'sequence', '?')} ({tag})"
    return ProtocolFailed(
        clip(f"{where} cannot be written as JSON: {type(why).__name__}: {why}"),
        f"session {session_id} failed: its {where} cannot be written",
    )


async def _fail(session: Any, error: AnyagentError) -> None:
    # Like an agent breaking its protocol: the running turn ends Failed, the agent is shut down, and the
    # session's stream ends with `error` (the engine's own shutdown path; a session already ending keeps its end).
    await session.fail(error)


async def serve_stdio(runtime: Runtime, output: ProtocolOutput | None = None) -> int | None:
    """Serve the wire on this process's stdin/stdout.

    File descriptor 1 is kept for protocol lines only (:func:`~anyagentd.stdio.claim_stdout`; ``output`` when the
    caller claimed it already, e.g. to write the hello line before loading the engine). SIGTERM, SIGINT and SIGHUP
    stop it like EOF (every agent is shut down). Returns the signal number that stopped it, if any.
    """
    output = output or claim_stdout()
    out, nonblocking = output.fd, output.nonblocking
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

    settings = WireSettings.from_env()

    async def read_line() -> bytes | OversizedLine:
        # abandon_on_cancel: a stop (SIGTERM) must not wait for a line that may never come
        return await anyio.to_thread.run_sync(read_bounded_line, stdin, settings.max_line_bytes, abandon_on_cancel=True)

    server = WireServer(runtime, read_line, write, settings, greeted=output.greeted)

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


def read_bounded_line(stream: BinaryIO, limit: int) -> bytes | OversizedLine:
    """The next line of ``stream`` (with its newline; ``b""`` at EOF), or an :class:`OversizedLine` when it is
    longer than ``limit`` bytes: then the rest of it is read and dropped in 64 KiB pieces, never held whole.
    Blocking: run it in a worker thread."""
    line = stream.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line
    size = len(line)
    while piece := stream.readline(64 * 1024):
        size += len(piece)
        if piece.endswith(b"\n"):
            size -= 1
            break
    return OversizedLine(size)
