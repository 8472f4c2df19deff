"""Reading a session's events in tests, for adapter authors: bounded waits, so a stuck agent fails the test
instead of hanging it.

- :class:`EventStream` is the one consumer of ``session.events()`` a test keeps (a session allows one): ``next``,
  ``until(tag)``, ``rest`` (to the end of the stream), and what was ``seen`` so far (``of(tag)``, ``text()``)::

      stream = EventStream(session)
      await session.prompt("hi")
      await stream.until("TurnEnded")
      assert "hello" in stream.text()

- :func:`event_tag` is an event's kind tag (``"TextDelta"``, ``"TurnEnded"``…), as a function for ``map``/keys.
- :func:`process_group_alive` / :func:`wait_process_group_gone`: whether an agent's process group (its leader's
  pid: adapters start agents in their own session) still has a member, e.g. after ``kill`` or ``close``.
- :func:`process_running` / :func:`marked_processes`: whether one pid is still running (a zombie is not), and
  which running processes carry an agent's lineage mark (``AgentProcess.mark``; Linux ``/proc``).

Only the standard library and anyio are imported, so this loads nothing heavy.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from anyagentd.model import Event

DEFAULT_TIMEOUT = 25.0
"""Seconds a single wait may take by default (a real agent CLI on a loaded machine can be slow)."""


def event_tag(event: Event) -> str:
    """``event.tag``: the kind's tag (``"TextDelta"``, ``"ContextCompacted"``…)."""
    return event.tag


class EventStream:
    """One consumer of ``session.events()`` with bounded waits; every event read is kept in ``seen``.

    ``session`` is anything with an ``events()`` async iterable (a :class:`~anyagentd.runtime.Session`);
    ``timeout`` is the default bound of each wait, in seconds. A wait that runs out raises ``TimeoutError``.
    """

    def __init__(self, session: Any, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.session = session
        self.timeout = timeout
        self._it: AsyncIterator[Event] = session.events().__aiter__()
        self.seen: list[Event] = []

    async def next(self, timeout: float | None = None) -> Event:
        """The next event (``StopAsyncIteration`` at the end of the stream; its terminal error propagates)."""
        with anyio.fail_after(self.timeout if timeout is None else timeout):
            event = await self._it.__anext__()
        self.seen.append(event)
        return event

    async def until(self, name: str, timeout: float | None = None) -> Event:
        """Read up to and including the first event tagged ``name``; ``timeout`` bounds each read and the whole."""
        timeout = self.timeout if timeout is None else timeout
        with anyio.fail_after(timeout):
            while True:
                event = await self.next(timeout)
                if event.tag == name:
                    return event

    async def rest(self, timeout: float | None = None) -> list[Event]:
        """Every remaining event until the stream ends (its terminal error, if any, propagates)."""
        out = []
        with anyio.fail_after(self.timeout if timeout is None else timeout):
            async for event in self._it:
                self.seen.append(event)
                out.append(event)
        return out

    def of(self, name: str) -> list[Event]:
        """The events seen so far tagged ``name``."""
        return [e for e in self.seen if e.tag == name]

    def text(self) -> str:
        """The text of the turns' ``TextDelta`` events seen so far (deltas outside a turn are left out)."""
        return "".join(e.kind.text for e in self.seen if e.tag == "TextDelta" and e.turn_info is not None)


def process_group_alive(pid: int) -> bool:
    """Whether the process group led by ``pid`` still has a member (signal 0 to the group)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_process_group_gone(pid: int, timeout: float = 3.0) -> None:
    """Wait until the process group ``pid`` has no member left (SIGKILL delivery is asynchronous);
    ``TimeoutError`` after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while process_group_alive(pid):
            await anyio.sleep(0.05)


def process_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (Linux: its ``/proc`` state; elsewhere: signal 0)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return data[data.rfind(b")") + 2 :].split()[0] != b"Z"


def marked_processes(mark: str) -> list[int]:
    """Running processes whose environment carries ``ANYAGENTD_AGENT_LINEAGE=mark`` (Linux; empty elsewhere)."""
    needle = f"ANYAGENTD_AGENT_LINEAGE={mark}".encode()
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0") and process_running(int(name)):
                    found.append(int(name))
        except OSError:
            continue
    return found
