"""The child's side of a child instance: reporting a parent's subagent back to the parent
(``docs/commands.md#child-instances``).

A parent that expects reports sends its instruction with ``metadata = {"agentd": {"handle", "parent"}}`` (its
handle for this subagent, its own URL). When ``parent`` is one of this daemon's ``[[subagents.parents]]`` and the
message came from the principal that parent is here, :meth:`Parents.report_for` gives the task a
:class:`TaskReport`: the task's engine events, picked by :class:`~.streams.EventMirror`, go to the parent as
``_instance.emit {handle, stream: "events", event}`` and its end as ``_instance.result {handle, status, output}``
(status ``completed`` / ``failed`` / ``cancelled``; output the answer text, or what went wrong), each a command
sent with the official a2a-sdk client (:func:`anyagentd_a2a.client.command_with`) presenting the parent's operator
credential.

A report never holds up or fails the task it reports: :meth:`TaskReport.event` and :meth:`TaskReport.ended` queue
and return promptly, and :meth:`TaskReport.run` sends in the daemon's task group. An unreachable or refusing parent
costs one log line per task (no credential in it), and the task's later events are not sent; events past
:data:`QUEUED` waiting ones are dropped; the result is always tried.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import SecretStr

from ..config import parent_key
from .streams import STREAM, EventMirror

log = logging.getLogger("anyagentd.a2a.subagents")

QUEUED = 256
"""Events one report holds while the parent is slow; more are dropped."""

TIMEOUT = 30.0
"""Seconds one report to the parent may take."""


@dataclass(frozen=True)
class Parent:
    """One configured parent: its ``url`` (matched without a trailing slash), the ``bearer`` this daemon presents
    to it (the parent's operator credential) and the ``principal`` the parent's messages arrive as here."""

    url: str
    bearer: SecretStr
    principal: str = "operator"


class Parents:
    """The configured parents; ``spawn(fn, *args)`` runs a report's sender in the daemon's task group."""

    def __init__(self, parents: list[Parent], spawn: Callable[..., None]) -> None:
        self.parents = {parent_key(p.url): p for p in parents}
        self.spawn = spawn

    def report_for(self, owner: str, metadata: Mapping[str, Any]) -> TaskReport | None:
        """The report of a task started by ``owner`` (a principal id) with a message carrying ``metadata`` (proto3
        JSON), started; ``None`` when the message names no configured parent or did not come from it."""
        agentd = metadata.get("agentd") if isinstance(metadata, Mapping) else None
        if not isinstance(agentd, Mapping):
            return None
        handle, url = agentd.get("handle"), agentd.get("parent")
        if not isinstance(handle, str) or not handle or not isinstance(url, str):
            return None
        parent = self.parents.get(parent_key(url))
        if parent is None or parent.principal != owner:
            return None
        report = TaskReport(parent, handle)
        self.spawn(report.run)
        return report


class TaskReport:
    """One task's report to its parent (see the module doc)."""

    def __init__(self, parent: Parent, handle: str) -> None:
        self.parent = parent
        self.handle = handle
        self.mirror = EventMirror()
        self.dropped = 0
        self._queue: deque[dict[str, Any]] = deque()
        self._result: tuple[str, Any] | None = None
        self._wake = anyio.Event()
        self._stack: AsyncExitStack | None = None
        self._client: Any = None
        self._emits_off = False
        self._said = False

    # -- the task's side: queue, return promptly ---------------------------------------------------------------

    def event(self, event: Any) -> None:
        """One engine event of the task (from its conversation's pump)."""
        if self._result is None:
            self._queue_all(self.mirror.feed(event))

    def ended(self, status: str, output: Any) -> None:
        """The task ended ``status`` (completed / failed / cancelled) with ``output``; later calls are ignored."""
        if self._result is None:
            self._queue_all(self.mirror.flush())
            self._result = (status, output)
            self._wake.set()

    def _queue_all(self, items: list[dict[str, Any]]) -> None:
        for item in items:
            if len(self._queue) >= QUEUED:
                self.dropped += 1
            else:
                self._queue.append(item)
        if items:
            self._wake.set()

    # -- the sender --------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Send the queued events, then the result, in order; returns once the result was sent (or could not be)."""
        async with AsyncExitStack() as stack:
            self._stack = stack
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                while self._queue:
                    item = self._queue.popleft()
                    if not self._emits_off:
                        args = {"handle": self.handle, "stream": STREAM, "event": item}
                        self._emits_off = not await self._call("_instance.emit", args)
                if self._result is not None:
                    status, output = self._result
                    await self._call("_instance.result", {"handle": self.handle, "status": status, "output": output})
                    return

    async def _call(self, op: str, args: dict[str, Any]) -> bool:
        """One command to the parent; ``False`` (and the task's one log line) when it did not land."""
        from ..client import ClientError, command_with, connect

        try:
            with anyio.fail_after(TIMEOUT):
                if self._client is None:
                    assert self._stack is not None
                    self._client = await self._stack.enter_async_context(
                        connect(self.parent.url, self.parent.bearer.get_secret_value(), command=True, timeout=TIMEOUT)
                    )
                await command_with(self._client, op, args)
            return True
        except (ClientError, TimeoutError) as err:
            said = str(err) or f"no answer in {TIMEOUT:g} s"
        except Exception as err:  # noqa: BLE001 - a report never fails the daemon
            said = f"{type(err).__name__}: {err}"
        if not self._said:
            self._said = True
            log.warning("subagent %s: %s to the parent %s did not land (%s)", self.handle, op, self.parent.url, said)
        return False


__all__ = ["Parent", "Parents", "TaskReport"]
