"""The MCP ``Sse`` transport plugin for anyagentd (validation and checks with the official MCP SDK)."""

from .transport import TRANSPORT, SseTransport

__all__ = ["TRANSPORT", "SseTransport"]
