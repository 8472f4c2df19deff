"""``anyagentd a2a``: serve the configured agent over A2A, or check a configuration file; and, as subcommands,
the client side for people: ``login URL`` (the device grant), ``send URL TEXT`` and ``status URL``.

Exit codes of the daemon: 0 after a drain (SIGTERM/SIGINT), 2 for a configuration that cannot be served (one line
on stderr naming the key), 1 when the listener cannot start (one line: the port taken, the task store unreachable,
the state dir held by another daemon or not creatable). The subcommands exit 0, or 1 with one line on stderr
(:class:`~anyagentd_a2a.client.ClientError`), never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


def _config_error(err: Exception) -> None:
    click.echo(f"anyagentd a2a: configuration error: {err}", err=True)
    sys.exit(2)


@click.group(invoke_without_command=True)
@click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="TOML configuration ([agent], [a2a]); default: the embedded mock agent on loopback.")
@click.option("--check-config", "check_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="Validate FILE (secrets included) and exit: 0 if it can be served, 2 naming the bad key.")
@click.option("--listen", metavar="HOST:PORT", help="Override a2a.listen; port 0 binds a free port.")
@click.option("--mock", "mock_script", metavar="SCRIPT",
              help="Script for the scripted agent `mock`: a JSON file or a shipped example name.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the task database and conversation files live (default ~/.local/state/anyagentd/a2a).")
@click.pass_context
def a2a(ctx: click.Context, config_path: str | None, check_path: str | None, listen: str | None,
        mock_script: str | None, state_dir: Path | None) -> None:  # fmt: skip
    """Serve the configured agent over A2A 1.0 (JSON-RPC over HTTP); or sign in to one and talk to it (the
    subcommands)."""
    if ctx.invoked_subcommand is not None:
        return
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
    from anyagentd.cli import loaded_plugins
    from anyagentd.errors import AnyagentError

    from .daemon import Options, serve
    from .statedir import StateDirUnusable
    from .store import StoreUnavailable

    try:
        code = anyio.run(serve, loaded, Options(listen=listen, mock_script=mock_script, state_dir=state_dir,
                                                config_path=config_path, plugins=loaded_plugins()))
    except ConfigError as err:
        _config_error(err)
    except (StoreUnavailable, StateDirUnusable) as err:
        click.echo(f"anyagentd a2a: {err}", err=True)
        sys.exit(1)
    except OSError as err:
        click.echo(f"anyagentd a2a: cannot listen on {listen or loaded.config.a2a.listen}: {err.strerror or err}",
                   err=True)  # fmt: skip
        sys.exit(1)
    except AnyagentError as err:
        click.echo(f"anyagentd a2a: {err.kind}: {err.message}", err=True)
        sys.exit(1)
    sys.exit(code)


# -- the client side for people -------------------------------------------------------------------------------

TOKEN_OPTION = click.option("--token", envvar="ANYAGENTD_A2A_TOKEN", metavar="TOKEN",
                            help="Bearer token (default: $ANYAGENTD_A2A_TOKEN, else the one `login` stored).")


def _fail(err: Exception) -> None:
    click.echo(f"anyagentd a2a: {err}", err=True)
    sys.exit(1)


def _token(url: str, given: str | None) -> str | None:
    from .client import load_token

    return given or load_token(url)


@a2a.command()
@click.argument("url")
@click.option("--scope", type=click.Choice(["user", "operator"]), default="user", show_default=True,
              help="What to ask for; the approving operator may narrow it, never widen it.")
def login(url: str, scope: str) -> None:
    """Sign in to the daemon at URL with the device grant: shows a code for an operator to approve, waits, and
    stores the token (0600) in the config dir."""
    from .client import ClientError, login as run_login, store_token

    try:
        body = run_login(url, scope=scope)
    except ClientError as err:
        _fail(err)
    except KeyboardInterrupt:
        click.echo("anyagentd a2a: sign-in interrupted", err=True)
        sys.exit(130)
    path = store_token(url, body)
    click.echo(f"Signed in to {url.rstrip('/')} (scope {body.get('scope')}); token stored in {path}", err=True)


@a2a.command()
@click.argument("url")
@click.argument("text")
@click.option("--context-id", metavar="ID", help="Continue this conversation (printed on stderr after each send).")
@click.option("--task-id", metavar="ID", help="Answer this task, one that waits for input (input_required).")
@TOKEN_OPTION
def send(url: str, text: str, context_id: str | None, task_id: str | None, token: str | None) -> None:
    """Send TEXT to the agent at URL as one message; prints the answer on stdout (for a task that waits for
    input, its question), the task's id, state and contextId on stderr. Exits 0 when the task completed, 2 when
    it waits for input (answer with ``--task-id``), 1 otherwise."""
    import anyio

    from .client import ClientError, question_text, send as run_send, task_text

    try:
        state, task = anyio.run(lambda: run_send(url, text, _token(url, token), context_id=context_id,
                                                 task_id=task_id))
    except ClientError as err:
        _fail(err)
    waiting = state == "TASK_STATE_INPUT_REQUIRED"
    answer = question_text(task) if waiting else task_text(task)
    if answer:
        click.echo(answer)
    shown = state.removeprefix("TASK_STATE_").lower()
    click.echo(f"task {task.get('id')}: {shown} (contextId {task.get('contextId')})", err=True)
    if waiting:
        click.echo(f"answer with: anyagentd a2a send {url} ANSWER --task-id {task.get('id')}", err=True)
        sys.exit(2)
    if state != "TASK_STATE_COMPLETED":
        sys.exit(1)


@a2a.command()
@click.argument("url")
@TOKEN_OPTION
def status(url: str, token: str | None) -> None:
    """The daemon's ``status`` (the command extension's op) at URL, as JSON on stdout."""
    import json

    import anyio

    from .client import ClientError, command

    try:
        result = anyio.run(lambda: command(url, "status", _token(url, token)))
    except ClientError as err:
        _fail(err)
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))
