"""Adapters registered by name and imported when first used (issue 17).

A plugin's ``register_adapters`` runs whenever a :class:`~anyagentd.runtime.Runtime` is built (``serve``, ``run
mock``, ``discover``), and registering a class means importing its module and what that imports (the toolkit's
process and connection helpers, HTTP clients). :func:`lazy_adapter` registers instead a stand-in
:class:`AgentAdapter` subclass that knows the adapter's ``PLUGIN_NAME``, catalog ``profiles`` and ``acp_ref`` (what
the catalog, ``discover``, ``plugins`` and install hints read) and imports the real class, named ``"module:Class"``,
the first time a session, probe or plan query needs it. The registry, ``Runtime.adapters`` and the ``plugins``
listing see an ordinary adapter class; the engine never sees the stand-in's cost after the first use (one
attribute hop per ``connect``).

The real class must declare what the stand-in declared; it is checked when the class loads
(``InvalidConfiguration`` naming both), as is an import failure. A stand-in has no pinned installations: an adapter
that pins some (the mock) registers its class itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InvalidConfiguration
from .interface import AdapterLink, AgentAdapter, AgentConnection
from .profile import AgentProfile

if TYPE_CHECKING:
    from ..mcp.forwarding import Renderers
    from ..mcp.interface import McpTransportPlugin
    from ..model import AgentDetails, AgentInstallation, McpServer, PlanUsage, SessionOptions


def lazy_adapter(
    target: str, *, name: str, profiles: Iterable[AgentProfile] = (), acp_ref: bool = False
) -> type[AgentAdapter]:
    """A stand-in class for the adapter ``target`` (``"package.module:ClassName"``), to pass to ``register`` in
    ``register_adapters``: its ``PLUGIN_NAME`` is ``name``, its ``profiles`` and ``acp_ref`` as given. Nothing is
    imported until the adapter is used. Raises ``ValueError`` for a ``target`` without ``:``."""
    module, _, qualname = target.partition(":")
    if not module or not qualname:
        raise ValueError(f"lazy adapter target {target!r} is not 'module:Class'")
    namespace = {
        "PLUGIN_NAME": name,
        "profiles": tuple(profiles),
        "acp_ref": acp_ref,
        "target": target,
        "__module__": module,
        "__qualname__": f"lazy({qualname})",
    }
    return type(f"lazy({qualname})", (LazyAdapter,), namespace)


class LazyAdapter(AgentAdapter):
    """The stand-in :func:`lazy_adapter` makes: an instance holds the caller's ``config`` and ``mcp_transports``
    and builds the real adapter from them on first use; every adapter method and attribute is the real one's."""

    target: ClassVar[str]
    _class: ClassVar[type[AgentAdapter] | None] = None

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self._adapter: AgentAdapter | None = None
        self._transports: dict[str, McpTransportPlugin] = {}

    @classmethod
    def load(cls) -> type[AgentAdapter]:
        """The real class, imported once. Raises ``InvalidConfiguration`` when it cannot be imported or does not
        declare the stand-in's ``PLUGIN_NAME``, ``profiles`` and ``acp_ref`` (or pins installations)."""
        if cls._class is None:
            module, _, qualname = cls.target.partition(":")
            try:
                found: Any = importlib.import_module(module)  # then the attributes of `qualname`, whatever they are
                for part in qualname.split("."):
                    found = getattr(found, part)
            except (ImportError, AttributeError) as err:
                raise InvalidConfiguration(f"adapter {cls.PLUGIN_NAME!r}: cannot load {cls.target}: {err}") from None
            problem = _mismatch(cls, found)
            if problem:
                raise InvalidConfiguration(
                    f"adapter {cls.PLUGIN_NAME!r} was registered lazily as {cls.target}, but {problem}"
                )
            cls._class = found
        return cls._class

    @property
    def adapter(self) -> AgentAdapter:
        """The real adapter instance (built, and its class imported, by the first use)."""
        if self._adapter is None:
            adapter = self.load()(self.config)
            adapter.mcp_transports = self._transports
            self._adapter = adapter
        return self._adapter

    @property
    def mcp_transports(self) -> dict[str, McpTransportPlugin]:
        return self._transports

    @mcp_transports.setter
    def mcp_transports(self, value: dict[str, McpTransportPlugin]) -> None:
        self._transports = value
        if self._adapter is not None:
            self._adapter.mcp_transports = value

    @property
    def report_buffer(self) -> int | None:  # type: ignore[override]  # read from the real adapter, never set here
        return self.adapter.report_buffer

    @property
    def handshake_timeout(self) -> float:
        return self.adapter.handshake_timeout

    def render_mcp(self, servers: Sequence[McpServer], renderers: Renderers) -> list[tuple[McpServer, Any]]:
        return self.adapter.render_mcp(servers, renderers)

    def effective_mcp_transports(self, supported: Iterable[str]) -> list[str]:
        return self.adapter.effective_mcp_transports(supported)

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        return await self.adapter.probe(installation)

    async def plan_usage(self, installation: AgentInstallation) -> PlanUsage:
        return await self.adapter.plan_usage(installation)

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        return await self.adapter.connect(installation, options, link, no_tools=no_tools)

    def __getattr__(self, name: str) -> Any:  # `Any`: whatever the real adapter has under that name
        # What only the real class has (e.g. Codex's ``codex_home``); private names are never forwarded, so a
        # half-built stand-in does not recurse into ``adapter``.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.adapter, name)


def _mismatch(stand_in: type[LazyAdapter], found: object) -> str | None:
    """What the loaded ``found`` contradicts in ``stand_in``'s declaration, or None."""
    if not isinstance(found, type) or not issubclass(found, AgentAdapter) or issubclass(found, LazyAdapter):
        return f"{found!r} is not an AgentAdapter class"
    if getattr(found, "PLUGIN_NAME", None) != stand_in.PLUGIN_NAME:
        return f"its PLUGIN_NAME is {getattr(found, 'PLUGIN_NAME', None)!r}"
    if tuple(found.profiles) != stand_in.profiles:
        return f"its profiles are {[p.id for p in found.profiles]} (registered: {[p.id for p in stand_in.profiles]})"
    if found.acp_ref != stand_in.acp_ref:
        return f"its acp_ref is {found.acp_ref}"
    if found.pinned_installations is not AgentAdapter.pinned_installations:
        return "it pins installations (register the class itself)"
    return None
