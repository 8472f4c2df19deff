"""The ``Stdio`` transport: an MCP server the agent starts as a command and talks to over stdin/stdout."""

from __future__ import annotations

import os
import tempfile
from typing import Any, ClassVar

from anyagentd.mcp.interface import McpToolInfo, McpTransportPlugin
from anyagentd.mcp.sdk import list_tools
from anyagentd.model import McpServer


class StdioTransport(McpTransportPlugin):
    """``{"Stdio": {"command", "args", "env"}}``: ``command`` non-empty, ``args`` strings, ``env`` string to
    string. ``check`` runs the command (with our environment plus ``env``, as agents do) through the SDK's
    ``stdio_client``; its stderr tail is part of a failure's reason."""

    PLUGIN_NAME: ClassVar[str] = "mcp-stdio"
    transport: ClassVar[Any] = "Stdio"

    def validate(self, server: McpServer) -> None:
        self.validate_name(server)
        conn: Any = self._connection(server)
        if not isinstance(conn.command, str) or not conn.command.strip():
            raise self.invalid(server, "command", "must be a non-empty string")
        if "\0" in conn.command:
            raise self.invalid(server, "command", "contains a NUL byte")
        if not isinstance(conn.args, list):
            raise self.invalid(server, "args", "must be a list of strings")
        for i, arg in enumerate(conn.args):
            if not isinstance(arg, str):
                raise self.invalid(server, f"args[{i}]", f"must be a string, not {type(arg).__name__}")
            if "\0" in arg:
                raise self.invalid(server, f"args[{i}]", "contains a NUL byte")
        self.validate_str_map(server, conn.env, "env")

    async def check(self, server: McpServer, *, timeout: float = 10.0) -> list[McpToolInfo]:
        self.validate(server)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        conn: Any = server.connection
        params = StdioServerParameters(command=conn.command, args=list(conn.args), env={**os.environ, **conn.env})
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:

            def stderr() -> str:
                try:
                    errlog.flush()
                    errlog.seek(0)
                    return errlog.read()[-4000:]
                except (OSError, ValueError):
                    return ""

            return await list_tools(
                server.name,
                lambda: stdio_client(params, errlog=errlog),
                timeout=timeout,
                spawn_errors=(OSError, ValueError),
                stderr=stderr,
            )


TRANSPORT = StdioTransport()
