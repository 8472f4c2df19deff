"""``anyagentd a2a``: serve the configured agent over A2A, or check a configuration file.

Exit codes: 0 after a drain (SIGTERM/SIGINT), 2 for a configuration that cannot be served (one line on stderr
naming the key), 1 when the listener cannot start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


def _config_error(err: Exception) -> None:
    click.echo(f"anyagentd a2a: configuration error: {err}", err=True)
    sys.exit(2)


@click.command()
@click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="TOML configuration ([agent], [a2a]); default: the embedded mock agent on loopback.")
@click.option("--check-config", "check_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="Validate FILE (secrets included) and exit: 0 if it can be served, 2 naming the bad key.")
@click.option("--listen", metavar="HOST:PORT", help="Override a2a.listen; port 0 binds a free port.")
@click.option("--mock", "mock_script", metavar="SCRIPT",
              help="Script for the scripted agent `mock`: a JSON file or a shipped example name.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the task database and conversation files live (default ~/.local/state/anyagentd/a2a).")
def a2a(config_path: str | None, check_path: str | None, listen: str | None, mock_script: str | None,
        state_dir: Path | None) -> None:  # fmt: skip
    """Serve the configured agent over A2A 1.0 (JSON-RPC over HTTP)."""
    from .config import ConfigError, default_config, load, with_listen

    if check_path is not None:
        try:
            load(check_path)
        except ConfigError as err:
            _config_error(err)
        click.echo(f"{check_path}: ok", err=True)
        return
    try:
        loaded = with_listen(load(config_path) if config_path else default_config(), listen)
    except ConfigError as err:
        _config_error(err)
    import anyio
    from anyagentd.errors import AnyagentError

    from .daemon import Options, serve

    try:
        code = anyio.run(serve, loaded, Options(listen=listen, mock_script=mock_script, state_dir=state_dir,
                                                config_path=config_path))
    except ConfigError as err:
        _config_error(err)
    except OSError as err:
        click.echo(f"anyagentd a2a: cannot listen on {listen or loaded.config.a2a.listen}: {err.strerror or err}",
                   err=True)  # fmt: skip
        sys.exit(1)
    except AnyagentError as err:
        click.echo(f"anyagentd a2a: {err.kind}: {err.message}", err=True)
        sys.exit(1)
    sys.exit(code)
