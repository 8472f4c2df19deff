"""anyagentd plugin of the testing distribution: adds ``anyagentd model-server`` to the CLI.

Registered through the ``anyagentd`` entry-point group (``testing``), like any third-party plugin; the command's
module (and its starlette/uvicorn imports) load only when the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anyagentd.hookspecs import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def register_cli_commands(cli: click.Group) -> None:
    from .cli import model_server

    cli.add_command(model_server)
