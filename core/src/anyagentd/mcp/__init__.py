"""MCP transports as plugins: the interface a transport plugin implements and the forwarding helpers adapters use.

- :class:`~anyagentd.mcp.interface.McpTransportPlugin`: one MCP transport (``Stdio``, ``Http``, ``Sse``),
  registered by its plugin distribution through the ``register_mcp_transports`` hook; it validates a server's
  connection and checks it against the real server (``initialize`` + ``tools/list``);
  :class:`~anyagentd.mcp.interface.UrlTransport` is the base of the URL ones (``Http``, ``Sse``).
- :func:`~anyagentd.mcp.forwarding.render_mcp_servers`: turn the ``mcp_servers`` of ``open`` into an agent's own
  format, refusing transports that are not installed or that the agent cannot take.
"""

from .forwarding import Renderers, effective_transports, install_hint, render_mcp_servers
from .interface import TRANSPORT_ORDER, McpToolInfo, McpTransportPlugin, UrlTransport

__all__ = [
    "McpTransportPlugin",
    "McpToolInfo",
    "Renderers",
    "TRANSPORT_ORDER",
    "effective_transports",
    "install_hint",
    "render_mcp_servers",
    "UrlTransport",
]
