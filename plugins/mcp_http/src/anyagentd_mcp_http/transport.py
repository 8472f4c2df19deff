"""The ``Http`` transport: an MCP server at a streamable-HTTP URL."""

from __future__ import annotations

from typing import Any, ClassVar

from anyagentd.mcp.interface import McpToolInfo, UrlTransport
from anyagentd.mcp.sdk import list_tools
from anyagentd.model import McpServer


class HttpTransport(UrlTransport):
    """``{"Http": {"url", "headers"}}``: ``url`` an http(s) URL with a host, ``headers`` string to string.
    ``check`` connects with the SDK's ``streamable_http_client``, sending ``headers``."""

    PLUGIN_NAME: ClassVar[str] = "mcp-http"
    transport: ClassVar[Any] = "Http"

    async def check(self, server: McpServer, *, timeout: float = 10.0) -> list[McpToolInfo]:
        self.validate(server)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        conn: Any = server.connection
        client = create_mcp_http_client(headers=dict(conn.headers), timeout=httpx2.Timeout(timeout))
        async with client:
            return await list_tools(
                server.name, lambda: streamable_http_client(conn.url, http_client=client), timeout=timeout
            )


TRANSPORT = HttpTransport()
