"""Claude Code's control protocol over stream-json (``docs/agents/claude.md#control-protocol``).

Both directions send ``{"type": "control_request", "request_id": ID, "request": {"subtype": ...}}`` and answer
``{"type": "control_response", "response": {"subtype": "success"|"error", "request_id": ID,
"response"|"error": ...}}``.

- :class:`ControlChannel`: our requests to the CLI (``initialize``, ``interrupt``, ``set_permission_mode``,
  ``set_model``, ``rewind_conversation``, ``rewind_files``, ``get_binary_version``) and the matching of its
  responses. Responses to ids we never sent are ignored (with ``--replay-user-messages`` the CLI echoes our own
  ``control_response`` lines back on stdout).
- :func:`success` / :func:`failure`: our answer frames to the CLI's own requests (its ``can_use_tool`` requests
  are :mod:`.permissions`').
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from anyagentd.errors import ProtocolFailed


class ControlError(ProtocolFailed):
    """The CLI answered a control request with ``subtype: "error"``; ``detail`` is its error text."""


class _Pending:
    __slots__ = ("done", "response", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.response: Any = None
        self.error: str | None = None


class ControlChannel:
    """Outgoing control requests and their responses.

    ``write`` sends one JSON frame to the CLI's stdin (the process's ``write_json``). Request ids are
    ``anyagentd-<n>``. A request's ``fields`` and a response's payload are JSON (``Any`` below).
    """

    def __init__(self, write: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._closed: str | None = None

    async def send(self, subtype: str, **fields: Any) -> str:
        """Send a control request; return its id without waiting (see :meth:`wait`)."""
        request_id = f"anyagentd-{next(self._ids)}"
        self._pending[request_id] = _Pending()
        try:
            await self._write(
                {"type": "control_request", "request_id": request_id, "request": {"subtype": subtype, **fields}}
            )
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return request_id

    async def wait(self, request_id: str, timeout: float | None = None) -> Any:
        """Wait for the response to ``request_id``; return its ``response`` payload (``None`` when empty).

        Raises :class:`ControlError` for an error response, ``TimeoutError`` after ``timeout`` seconds, and
        ``ProtocolFailed`` when the CLI's output ended first.
        """
        pending = self._pending.get(request_id)
        if pending is None:
            raise KeyError(request_id)
        try:
            with anyio.fail_after(timeout):
                await pending.done.wait()
        finally:
            if pending.done.is_set():
                self._pending.pop(request_id, None)
        if pending.error is not None:
            raise ControlError(pending.error)
        return pending.response

    async def request(self, subtype: str, timeout: float | None = None, **fields: Any) -> Any:
        """Send a control request and wait for its response (see :meth:`wait`)."""
        return await self.wait(await self.send(subtype, **fields), timeout)

    def resolve(self, frame: dict[str, Any]) -> bool:
        """Feed a ``control_response`` frame; ``True`` when it answered one of our requests."""
        response = frame.get("response") or {}
        pending = self._pending.get(str(response.get("request_id")))
        if pending is None or pending.done.is_set():
            return False
        if response.get("subtype") == "error":
            pending.error = str(response.get("error") or "control request failed")
        else:
            pending.response = response.get("response")
        pending.done.set()
        return True

    def close(self, reason: str) -> None:
        """Fail every pending request (the CLI's output ended)."""
        self._closed = reason
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = reason
                pending.done.set()


def success(request_id: str, response: Any = None) -> dict[str, Any]:
    """Our ``control_response`` frame answering the CLI's request ``request_id`` with success."""
    body: dict[str, Any] = {"subtype": "success", "request_id": request_id}
    if response is not None:
        body["response"] = response
    return {"type": "control_response", "response": body}


def failure(request_id: str, error: str) -> dict[str, Any]:
    """Our ``control_response`` frame answering the CLI's request ``request_id`` with an error."""
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": error}}
