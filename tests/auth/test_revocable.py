"""The revocable response in process (httpx over ASGI): a revocation before anything was sent answers 401 with the
JSON-RPC error; an unrevoked response passes through untouched. The stream cut mid-way (a real subscription ended
within ms of auth.sessions.revoke, with its closing -31401 frame) is proved on a daemon in
tests/a2a/test_a2a_device_grant.py (httpx's ASGI transport buffers whole bodies, so it cannot show a stream)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from anyagentd_a2a.auth.revocable import RevocableResponse

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Slow(Response):
    """An event stream that sends nothing for ``delay`` seconds, then one frame."""

    def __init__(self, delay: float) -> None:
        super().__init__(media_type="text/event-stream")
        self.delay = delay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await anyio.sleep(self.delay)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": b"data: {}\r\n\r\n", "more_body": False})


async def answer(revoked: anyio.Event, delay: float) -> httpx.Response:
    async def endpoint(request: Any) -> Response:
        return RevocableResponse(Slow(delay), revoked, request_id=3, realm="anyagentd")

    transport = httpx.ASGITransport(app=Starlette(routes=[Route("/", endpoint, methods=["POST"])]))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        with anyio.fail_after(10):
            return await client.post("/")


async def test_revoked_before_anything_was_sent_answers_401() -> None:
    revoked = anyio.Event()
    revoked.set()
    response = await answer(revoked, 3600)
    assert response.status_code == 401 and response.headers["www-authenticate"] == 'Bearer realm="anyagentd"'
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -31401, "message": "the session was revoked"},
    }


async def test_an_unrevoked_response_passes_through() -> None:
    response = await answer(anyio.Event(), 0.01)
    assert response.status_code == 200 and response.text == "data: {}\r\n\r\n"
    assert response.headers["content-type"].startswith("text/event-stream")
