"""The MCP ``Http`` transport plugin for anyagentd (validation and checks with the official MCP SDK)."""

from .transport import TRANSPORT, HttpTransport

__all__ = ["TRANSPORT", "HttpTransport"]
