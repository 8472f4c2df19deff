"""The push sender's HTTP client is made by the first notification (:mod:`anyagentd_a2a.push`, issue 17): a
daemon whose tasks have no push config never builds its TLS context. Delivery itself is tested end to end in
test_a2a_daemon.py (test_push_notifications_reach_a_loopback_receiver)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from anyagentd_a2a.push import OnDemandClient

pytestmark = pytest.mark.timeout(60)


class _Hook(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        _Hook.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_client_is_made_by_the_first_post_and_closed_by_aclose() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    _Hook.bodies = []

    async def main() -> None:
        client = OnDemandClient(timeout=5.0)
        assert not client.made
        await client.aclose()  # closing one never made makes nothing
        assert not client.made
        response = await client.post(url, json={"n": 1})
        assert response.status_code == 204 and client.made
        await client.post(url, json={"n": 2})
        await client.aclose()
        assert not client.made
        await client.post(url, json={"n": 3})  # a post after closing makes a new one
        await client.aclose()

    try:
        anyio.run(main)
    finally:
        server.shutdown()
    assert _Hook.bodies == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
