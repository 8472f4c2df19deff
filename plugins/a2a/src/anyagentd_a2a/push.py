"""The HTTP client behind push notifications, made when the first notification is sent.

``httpx.AsyncClient()`` builds its TLS context (certifi's CA bundle) when it is constructed: ~25 ms of the daemon's
start for a client that a daemon whose tasks have no push config never uses (issue 17, target 4: the time to the
``listening`` line). The SDK's ``BasePushNotificationSender`` only calls ``post`` on the client it is given, so it is
given this instead.
"""

from __future__ import annotations

from typing import Any

import httpx


class OnDemandClient:
    """Stands in for ``httpx.AsyncClient(**options)``: ``post`` makes the client on its first call, then passes
    every call through; ``aclose`` closes it if it was made (and makes nothing otherwise)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._client: httpx.AsyncClient | None = None

    @property
    def made(self) -> bool:
        """Whether the real client exists (a notification was sent)."""
        return self._client is not None

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        """``httpx.AsyncClient.post``; raises what it raises (``httpx.HTTPError``…)."""
        if self._client is None:
            self._client = httpx.AsyncClient(**self._options)
        return await self._client.post(url, **kwargs)

    async def aclose(self) -> None:
        """Close the client if one was made (a later ``post`` makes a new one)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
