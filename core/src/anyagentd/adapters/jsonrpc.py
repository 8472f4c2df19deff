"""A small JSON-RPC 2.0 channel over an agent process's stdio (or any ``write(obj)``), ids tracked per direction.

For adapters whose agent speaks JSON-RPC 2.0 as JSON lines (Codex's app-server; an HTTP agent's RPC the same way
over another ``write``): the reader feeds each frame to :func:`classify` and responses to
:meth:`RpcChannel.resolve`; the channel sends requests and notifications and answers the agent's requests.

Our requests get ids 1, 2, 3… from :class:`RpcChannel`; the agent numbers *its* requests on its own, so the same
id may be in flight both ways at once. A frame is classified by shape, never by id alone:

- ``method`` + ``id`` → a server request (answered with :meth:`RpcChannel.reply` / :meth:`RpcChannel.reply_error`);
- ``method`` without ``id`` → a notification;
- ``id`` + ``result``/``error`` without ``method`` → the response to one of *our* requests.

A response is delivered to whoever waits for it (:meth:`RpcChannel.request`) or to a callback registered with
:meth:`RpcChannel.send` — callbacks run inside the stdout pump, so what they report keeps the order of the
frames (e.g. ``turn/start``'s result → TurnAck before the turn's first notification).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .process import InputClosed

Callback = Callable[[Any, "RpcError | None"], Awaitable[None]]
"""Gets a response's ``result`` (arbitrary JSON, ``None`` with an error) and its error."""

# `Any` below is JSON: a request's ``params``, a response's ``result``, an error's ``data`` (what the protocol puts
# there); a frame is a decoded JSON object.


class RpcError(Exception):
    """An error response (or a lost connection: ``code`` ``None``); ``data`` its JSON ``data``."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data


def classify(frame: object) -> str:
    """``"request"``, ``"notification"``, ``"response"`` or ``"invalid"``."""
    if not isinstance(frame, dict):
        return "invalid"
    if isinstance(frame.get("method"), str):
        return "request" if "id" in frame and frame["id"] is not None else "notification"
    if "id" in frame and ("result" in frame or "error" in frame):
        return "response"
    return "invalid"


class _Waiter:
    __slots__ = ("callback", "error", "event", "method", "result")

    def __init__(self, method: str, callback: Callback | None) -> None:
        self.method = method
        self.event = anyio.Event()
        self.result: Any = None
        self.error: RpcError | None = None
        self.callback = callback


class RpcChannel:
    """Our side of the connection. ``write`` sends one JSON object as a line (``AgentProcess.write_json``)."""

    def __init__(self, write: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[int, _Waiter] = {}
        self._closed: str | None = None

    async def send(self, method: str, params: Any = None, *, callback: Callback | None = None) -> int:
        """Send a request; its response goes to ``callback(result, error)`` (run by the pump) if given.
        Returns the id. Raises :class:`~anyagentd.adapters.process.InputClosed` when the agent's input is gone
        (or the channel was closed: the agent's output ended)."""
        if self._closed is not None:
            raise InputClosed(f"the channel is closed: {self._closed}")
        request_id = next(self._ids)
        self._pending[request_id] = _Waiter(method, callback)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        try:
            await self._write(frame)
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return request_id

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; raises :class:`RpcError` or ``TimeoutError``."""
        return await self.wait(await self.send(method, params), timeout=timeout)

    async def wait(self, request_id: int, *, timeout: float | None = None) -> Any:
        """Wait for the result of a request :meth:`send` sent without a callback (several can be in flight: send
        them all, then wait for each). Raises :class:`RpcError`, ``TimeoutError``, ``KeyError`` for an id that is not
        pending."""
        waiter = self._pending[request_id]
        try:
            if timeout is None:
                await waiter.event.wait()
            else:
                with anyio.fail_after(timeout):
                    await waiter.event.wait()
        finally:
            self._pending.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    async def notify(self, method: str, params: Any = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        await self._write(frame)

    async def reply(self, request_id: object, result: Any) -> None:
        """Answer a server request (its id, as the server sent it)."""
        await self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def reply_error(self, request_id: object, code: int, message: str) -> None:
        await self._write({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    async def resolve(self, frame: dict[str, Any]) -> bool:
        """Deliver a response frame; ``False`` if no request of ours has its id."""
        request_id = frame.get("id")
        if not isinstance(request_id, int):
            return False
        waiter = self._pending.get(request_id)
        if waiter is None or waiter.event.is_set():
            return False
        if "error" in frame and frame["error"] is not None:
            err: dict[str, Any] = (
                frame["error"] if isinstance(frame["error"], dict) else {"message": str(frame["error"])}
            )
            waiter.error = RpcError(str(err.get("message") or "error"), err.get("code"), err.get("data"))
        else:
            waiter.result = frame.get("result")
        if waiter.callback is not None:
            self._pending.pop(request_id, None)
            await waiter.callback(waiter.result, waiter.error)
        waiter.event.set()
        return True

    async def close(self, reason: str) -> None:
        """Fail every request still unanswered (the server's output ended). An answer that came before stays for
        :meth:`wait` to collect."""
        self._closed = reason
        for request_id, waiter in list(self._pending.items()):
            if waiter.event.is_set():
                continue
            waiter.error = RpcError(reason)
            if waiter.callback is not None:
                self._pending.pop(request_id, None)
                with contextlib.suppress(Exception):  # the connection is going away
                    await waiter.callback(None, waiter.error)
            waiter.event.set()


__all__ = ["RpcChannel", "RpcError", "classify"]
