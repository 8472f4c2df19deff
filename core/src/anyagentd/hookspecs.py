"""The hook specifications plugins implement (pluggy project name ``anyagentd``).

Hooks *register* things; nothing on a per-event path goes through pluggy. A plugin is a module (or object) with
``@hookimpl`` functions, found through the ``anyagentd`` entry-point group. Every hook here is documented in the
README's "Writing a plugin" section; ``tests/core/test_plugins.py`` fails when one is not. Every parameter is
typed (the types are imported only for type checkers, so loading this module stays cheap).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from .adapters.interface import AgentAdapter
    from .mcp.interface import McpTransportPlugin
    from .model import SessionInfo
    from .ops.interface import Op
    from .runtime import Runtime

hookspec = pluggy.HookspecMarker("anyagentd")
hookimpl = pluggy.HookimplMarker("anyagentd")


@hookspec
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    """Register agent adapters: call ``register(AdapterClass)`` for each ``AgentAdapter`` subclass.

    The class's ``PLUGIN_NAME`` names it and its ``profiles`` are the catalog entries it drives; a profile id
    registered twice is refused with ``InvalidConfiguration``. ``register(lazy_adapter("pkg.adapter:MyAdapter",
    name=..., profiles=...))`` (:mod:`anyagentd.adapters.lazy`) registers an adapter whose module is imported only
    when a session, probe or plan query first uses it, as the first-party adapters do.
    """


@hookspec
def register_mcp_transports(register: Callable[[McpTransportPlugin | type[McpTransportPlugin]], None]) -> None:
    """Register MCP transports: call ``register(transport)`` with an ``anyagentd.mcp.McpTransportPlugin`` instance
    (or class) for each transport (``Stdio``, ``Http``, ``Sse``) the plugin provides; a transport registered twice
    is refused with ``InvalidConfiguration``. Adapters forward only servers whose transport is registered."""


@hookspec
def register_ops(register: Callable[[type[Op]], None]) -> None:
    """Register command-extension ops: call ``register(OpClass)`` for each ``anyagentd.ops.Op`` subclass.

    The class's ``name`` is the op (``status``, ``admin.set``); an op name registered twice is refused with
    ``InvalidConfiguration``, and an op the seed schema defines must match it (``anyagentd.ops.OpTable``).
    """


@hookspec
def register_cli_commands(cli: click.Group) -> None:
    """Add subcommands to the ``anyagentd`` CLI group (``cli.add_command(...)`` or ``@cli.command()``)."""


@hookspec
def runtime_started(runtime: Runtime) -> None:
    """Called once when a ``Runtime`` has started (after plugins loaded), with the runtime."""


@hookspec
def session_opened(info: SessionInfo) -> None:
    """Called once per session after ``open`` succeeded, with its ``SessionInfo``. Not called per event."""


@hookspec
def session_closed(session_id: str) -> None:
    """Called once per session after its stream ended and the agent was shut down."""
