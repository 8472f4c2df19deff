"""Entry point of ``anyagentd-a2a``: adds the ``anyagentd a2a`` command through ``register_cli_commands``.

Importing this module imports only click (already loaded by the CLI); the daemon's modules load when the command
runs, so ``anyagentd serve`` never pays for the HTTP stack.
"""

from __future__ import annotations

from typing import Any

from anyagentd.hookspecs import hookimpl


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import a2a

    cli.add_command(a2a)
