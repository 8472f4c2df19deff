"""One session driven for a person at a terminal: ``anyagentd run`` (one turn) and ``anyagentd chat`` (a prompt
loop).

Four tasks share the session: the event reader (``Session.event_batches``, rendered by :class:`TurnRenderer`, so
the reader never falls behind the agent), the frame ticker, the line reader (standard input, read by a daemon
thread) and the signal watcher. A typed line answers the open request if there is one; in ``chat`` it is
otherwise a prompt (started, steered or queued by the engine) or a slash command. Ctrl-C cancels the running turn;
a second Ctrl-C quits (queued prompts still run after a cancel; ``/cancel all`` drops them). SIGTERM and SIGHUP
close the session, then quit.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from rich.console import Console
from rich.markup import escape

from ..errors import AnyagentError
from ..model import Queued, kind_tag
from .failures import EXIT_INTERRUPTED, EXIT_TURN_NOT_COMPLETED, NoAnswer, report
from .render import PendingAnswer, TurnRenderer, parse_value, show_value, stop_label

if TYPE_CHECKING:
    from ..engine.session import Session
    from ..model import Event

log = logging.getLogger("anyagentd.cli")

CHAT_HELP = """\
Type a prompt and Enter; while a turn runs, a new prompt steers it (when the agent can) or waits in the queue;
while a question waits, a line answers it.
  /cancel [all]      cancel the running turn (all: and the queued prompts); Ctrl-C cancels too, twice quits
  /model [VALUE]     show or set the model          /mode [VALUE]   show or set the mode
  /option KEY=VALUE  set any live option            /info           the session: agent, options, resume token
  /help              this text                      /exit           quit (Ctrl-D too)
Other /commands the agent advertises are sent to it as prompts."""


class LineReader:
    """Lines from a file descriptor (default: standard input), read on demand by a daemon thread (so a read still
    pending at exit never holds the process). :meth:`next` returns a line without its newline, or None at EOF.

    A line is read only when :meth:`next` asks for it, byte by byte, as a shell's ``read`` does: input meant for
    later commands of a script (answers piped into several ``anyagentd run``) stays in the pipe."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self._send: MemoryObjectSendStream[str | None]
        self._recv: MemoryObjectReceiveStream[str | None]
        self._send, self._recv = anyio.create_memory_object_stream[str | None](math.inf)
        self._wanted = threading.Semaphore(0)
        self._asked = False
        self._eof = False

    def start(self) -> None:
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._read, args=(token,), name="anyagentd stdin", daemon=True).start()

    def _read_line(self) -> str | None:
        data = bytearray()
        while True:
            try:
                byte = os.read(self.fd, 1)
            except OSError:
                byte = b""
            if not byte:
                return data.decode(errors="replace") if data else None
            if byte == b"\n":
                return data.rstrip(b"\r").decode(errors="replace")
            data += byte

    def _read(self, token: anyio.lowlevel.EventLoopToken) -> None:
        while True:
            self._wanted.acquire()
            line = self._read_line()
            try:
                anyio.from_thread.run_sync(self._send.send_nowait, line, token=token)
            except Exception:  # noqa: BLE001 - the event loop has ended: nobody is listening
                return
            if line is None:
                return

    async def next(self) -> str | None:
        if self._eof:
            return None
        if not self._asked:
            self._asked = True
            self._wanted.release()
        line = await self._recv.receive()
        self._asked = False
        self._eof = line is None
        return line


class Conversation:
    """Drives ``session`` for a person: ``chat=False`` runs the first prompt's turn to its end (``run``),
    ``chat=True`` takes prompts and commands until EOF, ``/exit`` or a second Ctrl-C.

    :meth:`run` returns the exit status: 0 (run: the turn completed; chat: a normal exit), 1 (run: the turn ended
    otherwise), 130 after Ctrl-C, 128+N after signal N, or the status of the typed error that ended it
    (:mod:`.failures`), already reported."""

    def __init__(
        self, session: Session, console: Console, *, chat: bool, as_json: bool = False, stdin: LineReader | None = None
    ) -> None:
        self.session = session
        self.console = console
        self.chat = chat
        self.as_json = as_json
        self.lines = stdin or LineReader()
        self.renderer = TurnRenderer(console)
        self.requests: deque[PendingAnswer] = deque()
        self.our_turn: str | None = None  # run: the turn of the first prompt
        self.code: int | None = None
        self.error: AnyagentError | NoAnswer | None = None
        self.interrupted = False  # a Ctrl-C since the last typed line
        self.eof = False
        self.stopped = anyio.Event()
        self._request_opened = anyio.Event()
        self.resume_token: str | None = session.info().resume_token
        self.configuration = dict(session.info().configuration.options)  # to show only changes
        self.echo = not os.isatty(self.lines.fd)  # piped answers are shown, so the transcript reads as typed

    # --------------------------------------------------------------------------------------------- main

    async def run(self, first_prompt: str | None) -> int:
        self.lines.start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._guard, self._events)
            tg.start_soon(self._guard, self._ticker)
            tg.start_soon(self._guard, self._read_lines)
            tg.start_soon(self._guard, self._signals)
            if first_prompt is not None:
                await self._guard(self._deliver, first_prompt, True)
            elif self.chat:
                self._idle_prompt()
            await self.stopped.wait()
            tg.cancel_scope.cancel()
        self.renderer.flush()
        if self.error is not None:
            self.console.print()
            code = report(self.console, self.error)
            return self.code if self.code is not None and self.code >= 128 else code
        return 0 if self.code is None else self.code

    async def _guard(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run one task; a typed error (or EOF at a question) ends the conversation with it."""
        try:
            await fn(*args)
        except (AnyagentError, NoAnswer) as err:
            if self.error is None:
                self.error = err
            self.stopped.set()

    async def _finish(self, code: int) -> None:
        """Close the session and end with ``code`` once the event reader has read its last event (and the error
        that ended the session, if one did)."""
        if self.code is None:
            self.code = code
        with anyio.CancelScope(shield=True):
            await self.session.close()

    # --------------------------------------------------------------------------------------------- events

    async def _events(self) -> None:
        async for batch in self.session.event_batches():
            if self.as_json:
                self.renderer.flush()
                sys.stdout.write("".join(json.dumps(e.model_dump(mode="json")) + "\n" for e in batch))
                sys.stdout.flush()
            for event in batch:
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("event %s", json.dumps(event.model_dump(mode="json")["kind"])[:300])
                if self.code is not None and not self.chat:
                    continue  # what the agent says after our turn is not this command's output
                self.renderer.show(event)
                await self._react(event)
            self.renderer.tick()
        self.stopped.set()

    async def _react(self, event: Event) -> None:
        kind: Any = event.kind  # dispatched on its tag below (each branch reads its tag's kind)
        tag = kind_tag(kind)
        if tag == "RequestOpened":
            self.renderer.flush()
            self.requests.append(PendingAnswer(kind.value, self.console))
            self._request_opened.set()
            if len(self.requests) == 1:
                self.requests[0].show()
                if self.eof:
                    raise NoAnswer("standard input ended")
        elif tag == "RequestClosed":
            closed = next((r for r in self.requests if r.id == kind.request_id), None)
            if closed is not None:
                first = closed is self.requests[0]
                self.requests.remove(closed)
                if first:
                    self.console.print()
                    if self.requests:
                        self.requests[0].show()
        elif tag == "SessionUpdated":
            self.resume_token = kind.value.resume_token or self.resume_token
            options = kind.value.configuration.options
            if self.chat and options != self.configuration:
                shown = ", ".join(f"{k}={show_value(v)}" for k, v in options.items())
                self.console.print(f"[dim]configuration: {escape(shown)}[/]", soft_wrap=True)
            self.configuration = dict(options)
        elif tag == "TurnEnded":
            ours = event.turn_info is not None and event.turn_info.id == self.our_turn
            if not self.chat and ours:
                completed = stop_label(kind.stop) == "Completed"
                code = EXIT_INTERRUPTED if self.interrupted else 0 if completed else EXIT_TURN_NOT_COMPLETED
                await self._finish(code)
            elif self.chat and self.session.status == "Idle":
                if self.eof:
                    await self._finish(EXIT_INTERRUPTED if self.interrupted else 0)
                else:
                    self._idle_prompt()

    async def _ticker(self) -> None:
        while True:
            await anyio.sleep(self.renderer.frame)
            self.renderer.tick()

    # --------------------------------------------------------------------------------------------- input

    def _idle_prompt(self) -> None:
        self.console.print("[bold]›[/] ", end="")

    async def _read_lines(self) -> None:
        while True:
            while not self.chat and not self.requests:  # run reads a line only to answer a question
                self._request_opened = anyio.Event()
                await self._request_opened.wait()
            line = await self.lines.next()
            if line is None:
                await self._on_eof()
                return
            self.interrupted = False
            if self.echo and (self.requests or self.session.status == "Idle"):
                self.console.print(line, markup=False, highlight=False)
            if self.requests:
                answer = self.requests[0].feed(line)
                if answer is not None:
                    request = self.requests.popleft()
                    try:
                        await self.session.answer(request.id, answer)
                    except AnyagentError as err:  # e.g. the request was closed meanwhile: say so, go on
                        if self.session.closed:
                            raise
                        report(self.console, err)
                    if self.requests:
                        self.requests[0].show()
            elif self.chat:
                await self._command(line)

    async def _on_eof(self) -> None:
        self.eof = True
        if self.requests:
            raise NoAnswer("standard input ended")
        if self.chat and self.session.status == "Idle":
            self.console.print()
            await self._finish(0)

    async def _deliver(self, text: str, first: bool = False) -> None:
        delivery = await self.session.prompt(text)
        kind = delivery.kind
        if first:
            self.our_turn = getattr(kind, "turn_id", None)
        elif isinstance(kind, Queued):
            self.console.print(f"[dim]queued ({kind.position} ahead of it, after the running turn)[/]")
        elif kind.TAG == "Steered":
            self.console.print("[dim]steered into the running turn[/]")

    async def _command(self, line: str) -> None:
        self.renderer.flush()
        text = line.strip()
        if not text:
            if self.session.status == "Idle":
                self._idle_prompt()
            return
        try:
            if text.startswith("/"):
                await self._slash(text)
            else:
                await self._deliver(text)
        except AnyagentError as err:
            report(self.console, err)
            if self.session.closed:
                raise
            if self.session.status == "Idle":
                self._idle_prompt()

    async def _slash(self, text: str) -> None:
        name, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        if name in ("exit", "quit"):
            await self._finish(0)
            return
        if name == "help":
            self.console.print(CHAT_HELP, markup=False)
        elif name == "cancel":
            await self.session.cancel(clear_queue=rest == "all")
        elif name in ("model", "mode"):
            await self._option(name, rest)
        elif name == "option":
            key, sep, value = rest.partition("=")
            if not sep or not key.strip():
                self.console.print("[red]usage: /option KEY=VALUE[/]")
            else:
                await self._option(key.strip(), value)
        elif name == "info":
            self._info()
        elif any(c.name == name for c in self.session.info().details.commands):
            await self._deliver(text)
            return
        else:
            self.console.print(f"[red]unknown command /{escape(name)}[/] (/help lists them)")
        if self.session.status == "Idle":
            self._idle_prompt()

    async def _option(self, option: str, value: str) -> None:
        info = self.session.info()
        if not value:
            spec = info.details.option(option)
            current = info.configuration.options.get(option, spec.current if spec else None)
            if spec is None:
                self.console.print(f"[red]{escape(info.agent.name)} has no option {option!r}[/]")
                return
            choices = "" if isinstance(spec.kind, str) else " (" + ", ".join(c.value for c in spec.kind.choices) + ")"
            self.console.print(f"{option} = {show_value(current)}{choices}", markup=False)
            return
        await self.session.configure(option, parse_value(value))

    def _info(self) -> None:
        info = self.session.info()
        agent = info.agent
        self.console.print(
            f"[bold]{escape(agent.name)}[/] ({agent.id}) session {info.id}, {info.status}", soft_wrap=True
        )
        for option in info.details.config_options:
            current = info.configuration.options.get(option.id, option.current)
            live = "" if option.live else " [dim](creation-only)[/]"
            self.console.print(f"  {option.id} = {escape(show_value(current))}{live}")
        if info.resume_token:
            self.console.print(f"  resume token: {info.resume_token}  [dim](--resume it later)[/]")

    # --------------------------------------------------------------------------------------------- signals

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum != signal.SIGINT:
                    self.renderer.flush()
                    await self._finish(128 + signum)
                    self.console.print("\n[yellow]terminated[/]: the session was closed")
                    return
                await self._interrupt()

    async def _interrupt(self) -> None:
        self.renderer.flush()
        if self.interrupted:
            self.console.print("\n[yellow]interrupted[/]")
            self.code = EXIT_INTERRUPTED
            self.stopped.set()  # leaving the runtime closes the session
            return
        self.interrupted = True
        if self.session.status != "Idle":
            self.console.print("\n[yellow]cancelling the turn[/] [dim](queued prompts run next; Ctrl-C again quits)[/]")
            await self.session.cancel()
        elif self.chat:
            self.console.print("\n[dim](Ctrl-C again or Ctrl-D to quit)[/]")
            self._idle_prompt()
