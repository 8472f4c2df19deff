"""The MCP transport plugin interface.

A transport plugin (``anyagentd-mcp-stdio``, ``anyagentd-mcp-http``, ``anyagentd-mcp-sse``) registers one
:class:`McpTransportPlugin` *instance* through the ``register_mcp_transports`` hook::

    @hookimpl
    def register_mcp_transports(register):
        register(StdioTransport())

``transport`` is the connection's tag it handles (``"Stdio"``, ``"Http"``, ``"Sse"``); only servers whose
transport has an installed plugin are forwarded to agents. ``validate`` checks a server's connection without
touching the network or spawning anything; ``check`` connects with the official MCP SDK, initializes and lists
the tools, bounded by a timeout. :class:`UrlTransport` is the base of the URL transports (``Http``, ``Sse``),
which validate alike and differ only in the SDK client ``check`` connects with.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast
from urllib.parse import urlsplit

from ..errors import InvalidConfiguration

if TYPE_CHECKING:
    from ..model import Http, McpServer, McpTransport, Sse

TRANSPORT_ORDER: tuple[str, ...] = ("Stdio", "Http", "Sse")
"""Every transport tag of the model, in the order capabilities list them."""


@dataclass(frozen=True)
class McpToolInfo:
    """One tool a server lists: its ``name`` and ``description`` (empty when the server gives none)."""

    name: str
    description: str = ""


class McpTransportPlugin(ABC):
    """One MCP transport, as a plugin provides it.

    Class attributes: ``PLUGIN_NAME`` (the plugin's name, e.g. ``"mcp-stdio"``), ``transport`` (the
    ``McpConnection`` tag it handles). ``validate`` raises ``InvalidConfiguration`` naming the server and the
    field; ``check`` raises ``SpawnFailed`` (the command cannot be started), ``ProtocolFailed`` (connection
    refused, not an MCP server, timeout) or ``InvalidConfiguration`` (from ``validate``).
    """

    PLUGIN_NAME: ClassVar[str]
    transport: ClassVar[McpTransport]

    @abstractmethod
    def validate(self, server: McpServer) -> None:
        """Check the server's connection (no network, nothing spawned); raise ``InvalidConfiguration``."""

    @abstractmethod
    async def check(self, server: McpServer, *, timeout: float = 10.0) -> list[McpToolInfo]:
        """Connect to the server, initialize and list its tools within ``timeout`` seconds."""

    # -- helpers for implementations ----------------------------------------------------------------------

    def _connection(self, server: McpServer) -> object:
        conn = server.connection
        if getattr(conn, "TAG", None) != self.transport:
            raise InvalidConfiguration(
                f"MCP server {server.name!r}: transport {getattr(conn, 'TAG', conn)!r} is not {self.transport}"
            )
        return conn

    @staticmethod
    def invalid(server: McpServer, field: str, problem: str) -> InvalidConfiguration:
        """An ``InvalidConfiguration`` naming the server and the field."""
        return InvalidConfiguration(
            f"MCP server {server.name!r}: {field} {problem}", f"MCP server {server.name!r}: {field} {problem}"
        )

    @classmethod
    def validate_name(cls, server: McpServer) -> None:
        if not isinstance(server.name, str) or not server.name.strip():
            raise cls.invalid(server, "name", "must be a non-empty string")

    @classmethod
    def validate_url(cls, server: McpServer, url: object, field: str = "url") -> None:
        """``url`` must be an ``http``/``https`` URL with a host."""
        if not isinstance(url, str) or not url.strip():
            raise cls.invalid(server, field, "must be a non-empty http(s) URL")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError as err:
            raise cls.invalid(server, field, f"{url!r} is not a valid URL ({err})") from None
        if parts.scheme not in ("http", "https"):
            raise cls.invalid(server, field, f"{url!r} must use http or https")
        if not parts.hostname:
            raise cls.invalid(server, field, f"{url!r} has no host")

    @classmethod
    def validate_str_map(cls, server: McpServer, mapping: object, field: str) -> None:
        """``mapping`` must map non-empty string keys to string values."""
        if not isinstance(mapping, dict):
            raise cls.invalid(server, field, "must be an object of strings")
        for key, value in mapping.items():
            if not isinstance(key, str) or not key:
                raise cls.invalid(server, field, f"has a key that is not a non-empty string ({key!r})")
            if not isinstance(value, str):
                raise cls.invalid(server, f"{field}.{key}", f"must be a string, not {type(value).__name__}")


class UrlTransport(McpTransportPlugin):
    """A transport whose connection is ``{"url", "headers"}`` (``Http``, ``Sse``): ``validate`` requires ``url`` an
    http(s) URL with a host and ``headers`` string to string; subclasses set ``PLUGIN_NAME`` and ``transport`` and
    implement ``check`` with their SDK client (call ``validate`` first)."""

    def validate(self, server: McpServer) -> None:
        self.validate_name(server)
        conn = cast("Http | Sse", self._connection(server))  # the connection of this transport's tag
        self.validate_url(server, conn.url)
        self.validate_str_map(server, conn.headers, "headers")
