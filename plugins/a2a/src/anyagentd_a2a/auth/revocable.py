"""A response that ends when its device session is revoked: the listener wraps every streamed answer to a caller
signed in with a device-session token, so an open stream (``SubscribeToTask``, ``SendStreamingMessage``) closes as
soon as ``auth.sessions.revoke`` (or ``POST /oauth2/revoke``) sets the session's event.

A pure ASGI wrapper (not ``BaseHTTPMiddleware``, which buffers and breaks SSE): the wrapped response runs beside a
watcher of the event; when the event is set first the response is cancelled and the stream is ended cleanly with
one last SSE frame holding a JSON-RPC error (-31401, the session was revoked), or, when nothing was sent yet, a 401
answer. What the stream was about is untouched (the SDK keeps consuming a task whose subscriber went away).
:func:`unless_revoked` does the same for a blocked unary call: 401 at once, the call left to finish unawaited.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import JSONResponse, Response

REVOKED_CODE = -31401
REVOKED_MESSAGE = "the session was revoked"


class RevocableResponse(Response):
    """``inner`` (any Starlette response) that ends when ``revoked`` is set; ``request_id`` is the JSON-RPC id its
    closing error names, ``realm`` the ``WWW-Authenticate`` realm of a 401."""

    def __init__(self, inner: Response, revoked: anyio.Event, *, request_id: Any, realm: str) -> None:
        self.inner = inner
        self.revoked = revoked
        self.request_id = request_id
        self.realm = realm
        self.background = None

    @property
    def headers(self) -> Any:  # the front adds A2A-Extensions to the response it answers with
        return self.inner.headers

    @property
    def status_code(self) -> int:  # type: ignore[override]
        return self.inner.status_code

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = ended = False
        streaming = "text/event-stream" in self.inner.headers.get("content-type", "")

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = True
            await send(message)

        cut = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal cut
                await self.revoked.wait()
                cut = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            await self.inner(scope, receive, tracked)
            tg.cancel_scope.cancel()
        if not cut or ended:
            return
        error = {"jsonrpc": "2.0", "id": self.request_id, "error": {"code": REVOKED_CODE, "message": REVOKED_MESSAGE}}
        if not started:
            await revoked_answer(self.request_id, self.realm)(scope, receive, send)
        elif streaming:
            frame = f"data: {json.dumps(error)}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def revoked_answer(request_id: Any, realm: str) -> JSONResponse:
    """401 with the JSON-RPC error -31401 (the session was revoked)."""
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": REVOKED_CODE, "message": REVOKED_MESSAGE}}
    return JSONResponse(error, status_code=401, headers={"WWW-Authenticate": f'Bearer realm="{realm}"'})


async def unless_revoked(
    call: Callable[[], Awaitable[Response]],
    revoked: anyio.Event,
    *,
    spawn: Callable[..., Any],
    request_id: Any,
    realm: str,
) -> Response:
    """``await call()`` (a blocked call, e.g. a unary send waiting for its task), unless ``revoked`` is set first:
    then 401 at once. The call runs on ``spawn`` (the daemon's task group) and is never cancelled, so what it was
    doing (the task) goes on; an answer nobody waits for any more is dropped."""
    finished = anyio.Event()
    outcome: dict[str, Any] = {}

    async def run() -> None:
        try:
            outcome["response"] = await call()
        except Exception as err:  # noqa: BLE001 - handed back to the waiting request, if any
            outcome["error"] = err
        finally:
            finished.set()

    spawn(run)
    async with anyio.create_task_group() as tg:

        async def first(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(first, finished)
        tg.start_soon(first, revoked)
    if not finished.is_set():
        return revoked_answer(request_id, realm)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["response"]


__all__ = ["REVOKED_CODE", "RevocableResponse", "revoked_answer", "unless_revoked"]
