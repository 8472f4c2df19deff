"""The ``anyagentd`` command line (click + rich).

``serve`` speaks the wire on stdio (stdout is protocol only); ``run`` renders one turn live for a person and asks
permission questions at the terminal; ``discover``, ``probe``, ``plugins`` report, as tables or ``--json``.
Human output goes to stderr; JSON goes to stdout. Plugins add subcommands through ``register_cli_commands``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import click
from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..errors import AnyagentError
from ..plugins import Plugins

err_console = Console(stderr=True)

_mock_option = click.option(
    "--mock", "mock_script", metavar="SCRIPT",
    help="Script for the scripted agent `mock`: a JSON file or a shipped example name (hello, permission…).",
)  # fmt: skip


_plugins: Plugins | None = None


def _loaded_plugins() -> Plugins:
    """The process's plugin manager, loaded once (the CLI group needs it at import for plugin subcommands)."""
    global _plugins
    if _plugins is None:
        _plugins = Plugins()
    return _plugins


def _runtime(mock_script: str | None) -> Any:
    from ..runtime import Runtime

    return Runtime(mock_script=mock_script, plugins=_loaded_plugins())


def _print_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable_python(value), indent=2))


def _fail(err: AnyagentError) -> None:
    err_console.print(f"[bold red]{err.kind}[/]: {err.message}")
    for key, value in err.fields.items():
        if value not in ("", [], None, err.message):
            shown = value if isinstance(value, str) else json.dumps(to_jsonable_python(value))
            err_console.print(f"  {key}: {shown}", markup=False)
    sys.exit(1)


@click.group()
@click.version_option(__version__, prog_name="anyagentd")
def main() -> None:
    """Drive the coding agents on this machine behind one event model."""


@main.command()
@_mock_option
def serve(mock_script: str | None) -> None:
    """Speak the JSON-lines wire on stdin/stdout (see anyagent-wire.schema.json)."""
    from ..wire import serve_stdio

    try:
        signum = anyio.run(serve_stdio, _runtime(mock_script))
    except AnyagentError as err:
        _fail(err)
    sys.stderr.flush()
    # os._exit: a worker thread may still be blocked reading stdin, and nothing is left to flush.
    os._exit(128 + signum if signum else 0)


@main.command()
@_mock_option
@click.option("--json", "as_json", is_flag=True, help="Print the DiscoveryReport as JSON.")
def discover(mock_script: str | None, as_json: bool) -> None:
    """List the installed agents (never launches one) and the known ones that are missing."""

    async def go() -> Any:
        async with _runtime(mock_script) as rt:
            return await rt.discover()

    try:
        report = anyio.run(go)
    except AnyagentError as err:
        _fail(err)
    if as_json:
        _print_json(report)
        return
    table = Table("id", "name", "source", "executable", title="Installed agents")
    for agent in report.agents:
        table.add_row(agent.id, agent.name, agent.source, agent.executable_path)
    err_console.print(table)
    for missing in report.missing:
        err_console.print(f"[yellow]missing[/] {missing.id} ({missing.name}): {missing.install_hint}")
    for diag in report.diagnostics:
        err_console.print(f"[dim]{diag.level}[/] {diag.message}")


@main.command()
@click.argument("agent")
@_mock_option
@click.option("--json", "as_json", is_flag=True, help="Print the AgentDetails as JSON.")
def probe(agent: str, mock_script: str | None, as_json: bool) -> None:
    """Show what AGENT is and can do: version, login, capabilities, options, slash commands."""

    async def go() -> Any:
        async with _runtime(mock_script) as rt:
            return await rt.probe(agent)

    try:
        details = anyio.run(go)
    except AnyagentError as err:
        _fail(err)
    if as_json:
        _print_json(details)
        return
    auth = details.auth if isinstance(details.auth, str) else details.auth.TAG
    err_console.print(f"[bold]{agent}[/] version {details.version or '?'}, auth: {auth}")
    err_console.print("capabilities: " + (", ".join(details.capabilities.features) or "none"))
    err_console.print("MCP transports: " + (", ".join(details.capabilities.mcp_transports) or "none"))
    if details.config_options:
        table = Table("option", "kind", "current", "live", title="Options")
        for option in details.config_options:
            kind = option.kind if isinstance(option.kind, str) else "Select: " + ", ".join(
                c.value for c in option.kind.choices
            )
            table.add_row(option.id, kind, str(option.current), "yes" if option.live else "creation-only")
        err_console.print(table)
    for command in details.commands:
        err_console.print(f"/{command.name}  [dim]{command.description}[/]")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the plugins as JSON.")
def plugins(as_json: bool) -> None:
    """List the installed plugins, the hooks they implement and the agents they drive."""
    manager = _loaded_plugins()
    adapters = manager.adapters()
    ops_by_plugin: dict[str, list[str]] = {}
    for op_name, plugin_name in manager.op_origins().items():
        ops_by_plugin.setdefault(plugin_name, []).append(op_name)
    if as_json:
        rows = []
        for record in manager.records:
            row = record.as_json()
            row["adapters"] = [
                {"name": name, "agents": [p.id for p in cls.profiles] or [name]}
                for name, cls in adapters.items() if cls.__module__.startswith(record.module.rsplit(".", 1)[0])
            ]  # fmt: skip
            row["ops"] = sorted(ops_by_plugin.get(record.name, []))
            rows.append(row)
        _print_json(rows)
        return
    table = Table("plugin", "distribution", "version", "hooks", title="Plugins")
    for record in manager.records:
        table.add_row(record.name, record.distribution or "-", record.version or "-", ", ".join(record.hooks))
    err_console.print(table)
    for name, cls in adapters.items():
        agents = ", ".join(p.id for p in cls.profiles) or name
        err_console.print(f"adapter [bold]{name}[/] drives: {agents}")
    for plugin_name, op_names in ops_by_plugin.items():
        err_console.print(f"plugin [bold]{plugin_name}[/] serves ops: {', '.join(sorted(op_names))}")


@main.command()
@click.argument("agent")
@click.argument("prompt")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The session's working directory.")  # fmt: skip
@click.option("--auto-approve", is_flag=True, help="Allow every permission request once without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print every event as a JSON line on stdout too.")
@_mock_option
def run(agent: str, prompt: str, directory: Path, auto_approve: bool, as_json: bool, mock_script: str | None) -> None:
    """Run one turn of PROMPT with AGENT, rendered live; permission questions are asked at the terminal."""
    from .render import Terminated, run_turn

    try:
        ok = anyio.run(run_turn, _runtime(mock_script), agent, prompt, directory, auto_approve, as_json)
    except AnyagentError as err:
        _fail(err)
    except Terminated as stop:
        err_console.print("\n[yellow]terminated[/]: the session was closed")
        sys.stderr.flush()
        os._exit(128 + stop.signum)
    except KeyboardInterrupt:
        # A prompt may be blocked reading the terminal in a worker thread: leave at once, as a shell expects.
        err_console.print("[yellow]interrupted[/]")
        sys.stderr.flush()
        os._exit(130)
    except EOFError:
        err_console.print("[red]no answer: standard input ended[/] (answer at a terminal, pipe answers, or use --auto-approve)")
        sys.stderr.flush()
        os._exit(1)
    sys.exit(0 if ok else 1)


def _add_builtin_commands() -> None:
    from .mcp import mcp

    main.add_command(mcp)


_add_builtin_commands()
try:
    _loaded_plugins().add_cli_commands(main)
except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the CLI down
    err_console.print(f"[yellow]warning[/]: plugin CLI commands not loaded: {exc}")
