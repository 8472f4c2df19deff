"""The ``Sse`` transport: an MCP server on the legacy HTTP+SSE transport (a GET event stream and POSTed
messages)."""

from __future__ import annotations

from typing import Any, ClassVar

from anyagentd.mcp.interface import McpToolInfo, UrlTransport
from anyagentd.mcp.sdk import list_tools
from anyagentd.model import McpServer


class SseTransport(UrlTransport):
    """``{"Sse": {"url", "headers"}}``: ``url`` an http(s) URL with a host, ``headers`` string to string.
    ``check`` connects with the SDK's ``sse_client``, sending ``headers``."""

    PLUGIN_NAME: ClassVar[str] = "mcp-sse"
    transport: ClassVar[Any] = "Sse"

    async def check(self, server: McpServer, *, timeout: float = 10.0) -> list[McpToolInfo]:
        self.validate(server)
        from mcp.client.sse import sse_client

        conn: Any = server.connection
        return await list_tools(
            server.name,
            lambda: sse_client(conn.url, headers=dict(conn.headers), timeout=timeout, sse_read_timeout=timeout),
            timeout=timeout,
        )


TRANSPORT = SseTransport()
