"""The MCP ``Stdio`` transport plugin for anyagentd (validation and checks with the official MCP SDK)."""

from .transport import TRANSPORT, StdioTransport

__all__ = ["TRANSPORT", "StdioTransport"]
