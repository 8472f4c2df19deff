"""``anyagentd mcp``: MCP server tools.

``anyagentd mcp check SERVER.json [--timeout S] [--json]`` reads one ``McpServer`` object (``{"name": ...,
"connection": {"Stdio": {...}} | {"Http": {...}} | {"Sse": {...}}}``) or a list of them, connects to each with its
installed transport plugin (the official MCP SDK: ``initialize`` then ``tools/list``) and prints a table of each
server's tools, or the reason it failed. Exits 1 when any server fails (2 for an unreadable file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..model import McpServer


@click.group("mcp")
def mcp() -> None:
    """Check MCP servers with the installed MCP transport plugins."""


def _load(path: Path) -> list[McpServer]:
    from pydantic import ValidationError

    from ..model import McpServer

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise click.ClickException(f"{path}: not a readable JSON file ({err})") from None
    items = data if isinstance(data, list) else [data]
    servers = []
    for i, item in enumerate(items):
        try:
            servers.append(McpServer.model_validate(item))
        except ValidationError as err:
            where = f"{path}" + (f"[{i}]" if isinstance(data, list) else "")
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise click.ClickException(f"{where}: not an McpServer: {loc}: {first['msg']}") from None
    if not servers:
        raise click.ClickException(f"{path}: no MCP server in the file")
    return servers


@mcp.command("check")
@click.argument("server_file", metavar="SERVER.json", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds each server has to start, initialize and list its tools.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def check(server_file: Path, timeout: float, as_json: bool) -> None:
    """Connect to the MCP server(s) in SERVER.json and list their tools."""
    from rich.console import Console
    from rich.table import Table

    from ..errors import AnyagentError, UnsupportedFeature
    from ..mcp.forwarding import install_hint
    from ..plugins import Plugins

    console = Console(stderr=True)
    try:
        servers = _load(server_file)
    except click.ClickException as err:
        console.print(f"[bold red]error[/]: {err.message}")
        sys.exit(2)
    transports = Plugins().mcp_transports()

    async def one(server: McpServer) -> dict[str, Any]:  # the server's result, as JSON
        tag = server.connection.TAG
        result: dict[str, Any] = {"server": server.name, "transport": tag, "ok": False, "tools": []}
        plugin = transports.get(tag)
        try:
            if plugin is None:
                raise UnsupportedFeature(f"MCP transport {tag} is not installed ({install_hint(tag)})")
            tools = await plugin.check(server, timeout=timeout)
        except AnyagentError as err:
            result["error"] = err.body()
            return result
        result["ok"] = True
        result["tools"] = [{"name": t.name, "description": t.description} for t in tools]
        return result

    async def run() -> list[dict[str, Any]]:
        return [await one(server) for server in servers]

    import anyio

    results = anyio.run(run)
    for result in results:
        title = f"{result['server']} ({result['transport']})"
        if result["ok"]:
            table = Table(title=f"{title}: {len(result['tools'])} tool(s)", title_justify="left")
            table.add_column("Tool", style="bold")
            table.add_column("Description")
            for tool in result["tools"]:
                table.add_row(tool["name"], tool["description"].strip().splitlines()[0] if tool["description"] else "")
            console.print(table)
        else:
            error = result["error"]
            console.print(f"[bold red]{title} failed[/] [red]{error['kind']}[/]: {error['message']}")
    if as_json:
        click.echo(json.dumps(results, indent=2))
    sys.exit(0 if all(r["ok"] for r in results) else 1)
