"""Forwarding the ``mcp_servers`` of ``open`` to an agent in its own format.

An adapter gives one renderer per transport it can forward (transport tag → function of one ``McpServer``
returning the agent's format for it); :func:`render_mcp_servers` refuses a server whose transport has no
installed plugin or no renderer (``UnsupportedFeature``), validates it with its plugin
(``InvalidConfiguration``) and renders it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedFeature
from .interface import TRANSPORT_ORDER

if TYPE_CHECKING:
    from ..model import McpServer
    from .interface import McpTransportPlugin

Renderers = Mapping[str, Callable[["McpServer"], Any]]
"""Transport tag → a function producing the agent's own format for one server of that transport."""


def install_hint(transport: str) -> str:
    """How to install the plugin of ``transport``: ``pip install anyagentd-mcp-sse``, or from a checkout
    ``pip install -e ./plugins/mcp_sse (published as anyagentd-mcp-sse)`` (see :mod:`anyagentd.catalog`)."""
    from ..catalog import mcp_install_hint

    return mcp_install_hint(transport)


def render_mcp_servers(
    servers: Sequence[McpServer], renderers: Renderers, transports: Mapping[str, McpTransportPlugin], *, agent: str
) -> list[tuple[McpServer, Any]]:
    """Each server with its rendering for ``agent``, in order.

    Raises ``UnsupportedFeature`` when a server's transport plugin is not installed ("MCP transport Sse is not
    installed (pip install anyagentd-mcp-sse)") or ``agent`` cannot forward that transport, and the plugin's
    ``InvalidConfiguration`` for a bad server. Nothing is rendered unless every server passes.
    """
    checked: list[tuple[McpServer, Callable[[McpServer], Any]]] = []
    for server in servers:
        tag = getattr(server.connection, "TAG", None) or str(server.connection)
        plugin = transports.get(tag)
        if plugin is None:
            raise UnsupportedFeature(
                f"MCP transport {tag} is not installed ({install_hint(tag)}); needed by server {server.name!r}"
            )
        renderer = renderers.get(tag)
        if renderer is None:
            raise UnsupportedFeature(f"{agent} cannot use MCP transport {tag} (server {server.name!r})")
        plugin.validate(server)
        checked.append((server, renderer))
    return [(server, renderer(server)) for server, renderer in checked]


def effective_transports(supported: Iterable[str], transports: Mapping[str, McpTransportPlugin]) -> list[str]:
    """The transports an agent supports that have an installed plugin, in ``Stdio, Http, Sse`` order."""
    wanted = set(supported)
    return [t for t in TRANSPORT_ORDER if t in wanted and t in transports]
