"""The message transport the ``acp`` library's JSON-RPC connection runs on: anyagentd's :class:`AgentProcess`.

The library's own stdio transport reads with an ``asyncio.StreamReader`` whose limit overrun ends in a crash or an
unbounded buffer, drops non-JSON lines silently, and hands every ``session/update`` to its own task (so updates
can be processed out of order). :class:`ProcessTransport` instead:

- reads JSON lines with the toolkit's :func:`~anyagentd.adapters.process.json_frames` (a line over
  ``max_line_bytes`` is skipped and reported as a Warning diagnostic, a line that is not JSON as an Info one); a
  JSON value that is not an object is an Info diagnostic too;
- passes each message to ``intercept`` first: the connection handles ``session/update`` notifications there,
  inline and in order (so every update before a prompt's response is reported before its turn ends);
- at EOF calls ``on_eof`` (which reports the exit) and returns ``None`` (the library then fails pending
  requests with ``ConnectionError``);
- writes one compact JSON line per message; a closed pipe raises ``ConnectionError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from anyagentd.adapters.process import AgentProcess, json_frames
from anyagentd.model import diagnostic

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink

Intercept = Callable[[dict[str, Any]], Awaitable[bool]]
"""Takes a JSON-RPC message (a decoded JSON object); True when it consumed it."""


class ProcessTransport:
    """An ``acp`` message transport over an agent process's stdin/stdout (see the module doc).

    ``link``: the connection's :class:`~anyagentd.adapters.interface.AdapterLink`, for the diagnostics of
    :func:`~anyagentd.adapters.process.json_frames` (raw lines under ``extensions[raw_key]``).
    ``intercept(message) -> bool``: True when it consumed the message. ``on_eof()``: stdout ended.
    """

    def __init__(
        self,
        process: AgentProcess,
        link: AdapterLink,
        *,
        raw_key: str,
        intercept: Intercept,
        on_eof: Callable[[], Awaitable[None]],
    ) -> None:
        self.process = process
        self._link = link
        self._raw_key = raw_key
        self._intercept = intercept
        self._on_eof = on_eof
        self._frames = json_frames(process, link, agent="ACP agent", raw_key=raw_key).__aiter__()
        self._eof = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write ``message`` as one line; a closed pipe raises ``InputClosed`` (a ``ConnectionError``)."""
        await self.process.write_json(message)

    async def receive(self) -> dict[str, Any] | None:
        while not self._eof:
            try:
                message = await self._frames.__anext__()
            except StopAsyncIteration:
                self._eof = True
                await self._on_eof()
                return None
            if not isinstance(message, dict):
                await self._link.emit(
                    diagnostic("Info", "the ACP agent wrote a JSON line that is not a message"),
                    extensions={self._raw_key: message},
                )
                continue
            if await self._intercept(message):
                continue
            return message
        return None

    async def close(self) -> None:
        """Nothing to do: the connection owns the process and stops it."""
