"""The message transport the ``acp`` library's JSON-RPC connection runs on: anyagentd's :class:`AgentProcess`.

The library's own stdio transport reads with an ``asyncio.StreamReader`` whose limit overrun ends in a crash or an
unbounded buffer, drops non-JSON lines silently, and hands every ``session/update`` to its own task (so updates
can be processed out of order). :class:`ProcessTransport` instead:

- reads lines with :meth:`AgentProcess.lines` (a line over ``max_line_bytes`` is skipped and reported as a
  Warning diagnostic; a line that is not a JSON object is an Info diagnostic);
- passes each message to ``intercept`` first: the connection handles ``session/update`` notifications there,
  inline and in order (so every update before a prompt's response is reported before its turn ends);
- at EOF calls ``on_eof`` (which reports the exit) and returns ``None`` (the library then fails pending
  requests with ``ConnectionError``);
- writes one compact JSON line per message; a closed pipe raises ``ConnectionError``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from anyagentd.adapters.process import AgentProcess, OversizedLine

Intercept = Callable[[dict[str, Any]], Awaitable[bool]]
Diagnose = Callable[[str, str, Any], Awaitable[None]]


class ProcessTransport:
    """An ``acp`` message transport over an agent process's stdin/stdout (see the module doc).

    ``intercept(message) -> bool``: True when it consumed the message. ``diagnose(level, message, raw)``:
    report a diagnostic. ``on_eof()``: stdout ended.
    """

    def __init__(self, process: AgentProcess, *, intercept: Intercept, diagnose: Diagnose,
                 on_eof: Callable[[], Awaitable[None]]) -> None:  # fmt: skip
        self.process = process
        self._intercept = intercept
        self._diagnose = diagnose
        self._on_eof = on_eof
        self._lines = process.lines().__aiter__()
        self._eof = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write ``message`` as one line; a closed pipe raises ``InputClosed`` (a ``ConnectionError``)."""
        await self.process.write_json(message)

    async def receive(self) -> dict[str, Any] | None:
        while not self._eof:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                self._eof = True
                await self._on_eof()
                return None
            if isinstance(line, OversizedLine):
                await self._diagnose("Warning", f"skipped a {line.size}-byte line from the ACP agent "
                                                f"(limit {self.process.max_line_bytes} bytes)", None)  # fmt: skip
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                await self._diagnose("Info", "the ACP agent wrote a line that is not JSON", line[:4096])
                continue
            if not isinstance(message, dict):
                await self._diagnose("Info", "the ACP agent wrote a JSON line that is not a message", message)
                continue
            if await self._intercept(message):
                continue
            return message
        return None

    async def close(self) -> None:
        """Nothing to do: the connection owns the process and stops it."""
