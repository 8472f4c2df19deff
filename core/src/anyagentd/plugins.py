"""Finding and loading plugins, and typed access to what they register.

Plugins come from the ``anyagentd`` entry-point group (``importlib.metadata``); core's own built-ins (the
``mock`` adapter) are entry points too, so they load exactly like third-party ones. Op families (modules that only
register command-extension ops) come from the ``anyagentd.ops`` group and load the first time ops are asked for (a
face building its op table, ``anyagentd plugins``), so a command that serves no op never imports them (issue 17).
Environment, for both groups (one namespace of entry-point names):

- ``ANYAGENTD_LOAD_PLUGINS=a,b`` loads only the named entry points (empty string: none);
- ``ANYAGENTD_DISABLE_PLUGINS=a,b`` blocks the named entry points;
- ``ANYAGENTD_TRACE_PLUGINS=1`` traces every hook call and its results to stderr.

Core code never calls ``pm.hook`` directly: it goes through :class:`Plugins`' typed methods. After loading,
``check_pending()`` makes a hookimpl that matches no hookspec (a typo, a hook from a newer core) fail loudly.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from .errors import InvalidConfiguration

if TYPE_CHECKING:
    import click

    from .adapters.interface import AgentAdapter
    from .adapters.profile import AgentProfile
    from .mcp.interface import McpTransportPlugin
    from .model import SessionInfo
    from .ops.interface import Op
    from .ops.registry import OpTable
    from .runtime import Runtime

ENTRY_POINT_GROUP = "anyagentd"
OP_FAMILY_GROUP = "anyagentd.ops"
"""Entry points of op families: each module implements ``register_ops`` and no other hook."""


def _names(var: str) -> set[str] | None:
    value = os.environ.get(var)
    if value is None:
        return None
    return {n.strip() for n in value.split(",") if n.strip()}


@dataclass
class PluginRecord:
    """One loaded plugin: entry-point name, module, the distribution that ships it, and its version."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    hooks: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": self.hooks,
        }


class Plugins:
    """The plugin manager and the registries built from its hooks.

    ``Plugins()`` loads the ``anyagentd`` entry points at once and the ``anyagentd.ops`` ones on the first
    :meth:`ops` (or :attr:`records`); pass ``load_entry_points=False`` and ``register()`` plugin objects yourself
    for an isolated manager (tests, embedding). Raises ``pluggy.PluginValidationError`` from ``check_pending``
    when a loaded plugin implements a hook that does not exist, and ``InvalidConfiguration`` when an op family
    implements a hook other than ``register_ops`` (it would be missed until ops load).
    """

    def __init__(self, *, load_entry_points: bool = True, extra: list[object] | None = None) -> None:
        self.pm = pluggy.PluginManager("anyagentd")
        self.pm.add_hookspecs(hookspecs)
        self._records: list[PluginRecord] = []
        # Records whose distribution name and version are not read yet (see :meth:`_load`).
        self._unread: list[tuple[PluginRecord, importlib.metadata.Distribution]] = []
        self._op_families: list[importlib.metadata.EntryPoint] = []  # found at start, loaded by the first ops()
        if os.environ.get("ANYAGENTD_TRACE_PLUGINS"):
            self.pm.trace.root.setwriter(lambda text: sys.stderr.write(f"anyagentd plugins: {text}"))
            self.pm.enable_tracing()
        if load_entry_points:
            self._load_entry_points()
        for plugin in extra or []:
            self.register(plugin)
        self.pm.check_pending()
        self._adapters: dict[str, type[AgentAdapter]] | None = None
        self._ops: dict[str, type[Op]] | None = None
        self._op_origins: dict[str, str] = {}

    def _load_entry_points(self) -> None:
        only = _names("ANYAGENTD_LOAD_PLUGINS")
        blocked = _names("ANYAGENTD_DISABLE_PLUGINS") or set()
        seen: set[str] = set()
        installed = importlib.metadata.entry_points()  # one scan of the distributions for both groups (issue 17)
        for group in (ENTRY_POINT_GROUP, OP_FAMILY_GROUP):
            for ep in installed.select(group=group):
                if ep.name in seen or ep.name in blocked or (only is not None and ep.name not in only):
                    continue
                seen.add(ep.name)
                if group == OP_FAMILY_GROUP:
                    self._op_families.append(ep)
                else:
                    self._load(ep)

    def _load(self, ep: importlib.metadata.EntryPoint) -> None:
        # The record's distribution name and version are read when the records are (:attr:`records`): each read of
        # ``Distribution.name`` or ``.version`` parses the distribution's METADATA again, which for ten plugins was
        # ~4.5 ms of every start, `serve` included, that only `anyagentd plugins` shows (issue 31, bench/README.md).
        self.register(ep.load(), name=ep.name)
        dist = getattr(ep, "dist", None)
        if dist is not None:
            self._unread.append((self._records[-1], dist))

    def _load_op_families(self) -> None:
        """Load the ``anyagentd.ops`` entry points found at start (once), with the same checks as at start."""
        families, self._op_families = self._op_families, []
        for ep in families:
            self._load(ep)
            self.pm.check_pending()  # a misspelled hook fails as it would at start
            other = [hook for hook in self._records[-1].hooks if hook != "register_ops"]
            if other:
                raise InvalidConfiguration(
                    f"op family {ep.name!r} ({ep.value}, entry-point group {OP_FAMILY_GROUP!r}) implements "
                    f"{', '.join(other)}: an op family registers ops only; list it in {ENTRY_POINT_GROUP!r}"
                )

    @property
    def records(self) -> list[PluginRecord]:
        """Every plugin, loaded (op families included), in loading order, with its distribution's name and version
        (read here, once: one METADATA parse per plugin)."""
        self._load_op_families()
        unread, self._unread = self._unread, []
        for record, dist in unread:
            metadata = dist.metadata
            record.distribution, record.version = metadata["Name"], metadata["Version"]
        return self._records

    def register(
        self, plugin: object, *, name: str | None = None, distribution: str | None = None, version: str | None = None
    ) -> None:
        """Register a plugin object (usually a module of ``@hookimpl`` functions) under ``name``."""
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        self.pm.register(plugin, name=name)
        hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
        module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        self._records.append(PluginRecord(name, module, distribution, version, hooks))
        self._adapters = None
        self._ops = None

    # -- typed wrappers around the hooks ------------------------------------------------------------------

    def adapters(self) -> dict[str, type[AgentAdapter]]:
        """Adapter classes by ``PLUGIN_NAME``, from ``register_adapters``; cached."""
        if self._adapters is None:
            found: dict[str, type[AgentAdapter]] = {}

            def register(adapter: type[AgentAdapter]) -> None:
                found[adapter.PLUGIN_NAME] = adapter

            self.pm.hook.register_adapters(register=register)
            self._check_profiles(found)
            self._adapters = found
        return self._adapters

    @staticmethod
    def _check_profiles(adapters: dict[str, type[AgentAdapter]]) -> None:
        owners: dict[str, str] = {}
        for name, adapter in adapters.items():
            for profile in adapter.profiles:
                if profile.id in owners:
                    raise InvalidConfiguration(
                        f"catalog id {profile.id!r} is registered by both {owners[profile.id]!r} and {name!r}"
                    )
                owners[profile.id] = name

    def profiles(self) -> list[tuple[AgentProfile, type[AgentAdapter]]]:
        """Every catalog profile with the adapter class that drives it, in registration order."""
        return [(p, a) for a in self.adapters().values() for p in a.profiles]

    def mcp_transports(self) -> dict[str, McpTransportPlugin]:
        """MCP transport plugins by transport tag (``Stdio``, ``Http``, ``Sse``), from
        ``register_mcp_transports``; a class is instantiated, a transport registered twice is refused with
        ``InvalidConfiguration``."""
        found: dict[str, McpTransportPlugin] = {}

        def register(transport: McpTransportPlugin | type[McpTransportPlugin]) -> None:
            plugin = transport() if isinstance(transport, type) else transport
            tag = getattr(plugin, "transport", None)
            if not isinstance(tag, str):
                raise InvalidConfiguration(f"MCP transport plugin {plugin!r} has no transport tag")
            if tag in found:
                raise InvalidConfiguration(
                    f"MCP transport {tag} is registered by both {getattr(found[tag], 'PLUGIN_NAME', found[tag])!r}"
                    f" and {getattr(plugin, 'PLUGIN_NAME', plugin)!r}"
                )
            found[tag] = plugin

        self.pm.hook.register_mcp_transports(register=register)
        return found

    def ops(self) -> dict[str, type[Op]]:
        """Op classes by ``name``, from ``register_ops``, in registration order; cached. An op name registered
        twice (by one plugin or two) is refused with ``InvalidConfiguration`` naming both plugins. The first call
        loads the op families (``anyagentd.ops`` entry points)."""
        self._load_op_families()
        if self._ops is None:
            found: dict[str, type[Op]] = {}
            origins: dict[str, str] = {}
            # Each hookimpl is called on its own so every op is attributed to the plugin that registered it.
            for impl in self.pm.hook.register_ops.get_hookimpls():

                def register(op: type[Op], plugin: str = impl.plugin_name) -> None:
                    name = getattr(op, "name", None)
                    if not isinstance(name, str) or not name:
                        raise InvalidConfiguration(f"op class {op!r} of plugin {plugin!r} has no name")
                    if name in found:
                        raise InvalidConfiguration(
                            f"op {name!r} is registered by both {origins[name]!r} and {plugin!r}"
                        )
                    found[name] = op
                    origins[name] = plugin

                impl.function(register=register)
            self._ops, self._op_origins = found, origins
        return self._ops

    def op_origins(self) -> dict[str, str]:
        """Which plugin registered each op (op name → plugin name)."""
        self.ops()
        return dict(self._op_origins)

    def op_table(self) -> OpTable:
        """The start-up :class:`~anyagentd.ops.OpTable` of every installed op (checked against the seed
        schema; raises ``InvalidConfiguration`` on a mismatch)."""
        from .ops.registry import OpTable

        return OpTable(self.ops(), self.op_origins())

    def add_cli_commands(self, cli: click.Group) -> None:
        self.pm.hook.register_cli_commands(cli=cli)

    def runtime_started(self, runtime: Runtime) -> None:
        self.pm.hook.runtime_started(runtime=runtime)

    def session_opened(self, info: SessionInfo) -> None:
        self.pm.hook.session_opened(info=info)

    def session_closed(self, session_id: str) -> None:
        self.pm.hook.session_closed(session_id=session_id)
