"""``anyagentd model-server``: serve a script of model turns on loopback for real agent CLIs to talk to.

Starts :class:`anyagentd_testing.model_server.ModelServer` and, once it listens, gives the environment that points
Claude Code, Codex and the ACP agents at it (from :mod:`anyagentd_testing.agents`) as ``export`` lines a shell can
``eval``: on stderr for a person, on stdout with ``--print-env``, in a file with ``--env-out FILE``; the URL alone
goes to ``--url-out FILE``. ``--detach`` serves in the background once everything is written (the exports then
name its pid in ``ANYAGENTD_MODEL_SERVER_PID``), so ``eval "$(anyagentd model-server --script turns.json
--detach)"`` is one line of a shell script. Without it, serves until Ctrl-C.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import click

from anyagentd.hard_exit import hard_exit

ACP_APPROVAL_ARGS = ["-c", "approval_policy=untrusted", "-c", "sandbox_mode=workspace-write"]
"""What codex-acp needs beyond the provider flags to ask before it writes (``docs/agents/acp.md#codex-acp-and-bwrap``)."""

URL_ENV = "ANYAGENTD_MODEL_SERVER_URL"
PID_ENV = "ANYAGENTD_MODEL_SERVER_PID"


def environment(url: str) -> dict[str, str]:
    """The variables that point every pinned agent CLI at the model server at ``url``: Claude Code's
    (``claude_env``), Codex's key (``codex_env``), the provider flags for Codex (``ANYAGENTD_CODEX_ARGS``) and
    codex-acp (``ANYAGENTD_CODEX_ACP_ARGS``, with an approval policy and sandbox that ask before writing), and the
    server's URL, and opencode's (``opencode_env``: its Anthropic provider in ``OPENCODE_CONFIG_CONTENT``).
    ``HOME`` is left to the caller (use a throwaway one)."""
    from .agents import claude_env, codex_args, codex_env, opencode_env

    env = {URL_ENV: url, **claude_env(url), **codex_env(), **opencode_env(url)}
    env["ANYAGENTD_CODEX_ARGS"] = shlex.join(codex_args(url))
    env["ANYAGENTD_CODEX_ACP_ARGS"] = shlex.join([*codex_args(url), *ACP_APPROVAL_ARGS])
    return env


def export_lines(env: dict[str, str], path_prefix: Path | None) -> list[str]:
    """``export NAME=value`` lines (values shell-quoted); ``path_prefix`` is put first on ``PATH`` (Codex's
    bundled ``bwrap``, which Codex and codex-acp need for their sandbox)."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    if path_prefix is not None:
        lines.append(f'export PATH={shlex.quote(str(path_prefix))}:"$PATH"')
    return lines


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` so a reader never sees a partial file (a shell may be waiting for it to appear)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


@click.command("model-server", short_help="Serve a scripted model for the real agent CLIs.")
@click.option(
    "--script",
    "script_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON script of model turns ({"turns": [...], "side_reply": "..."}).',
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="Port (0: a free one).")
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append every request received to this JSONL file.",
)
@click.option("--print-env", is_flag=True, help="Print the export lines on stdout once listening (for eval).")
@click.option(
    "--env-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the export lines to this file once listening (for `. FILE`).",
)
@click.option(
    "--url-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the server's URL (http://127.0.0.1:PORT) to this file once listening.",
)
@click.option(
    "--detach",
    is_flag=True,
    help=f"Serve in the background once listening; implies --print-env, the exports add {PID_ENV}.",
)
def model_server(
    script_path: Path,
    host: str,
    port: int,
    log_path: Path | None,
    print_env: bool,
    env_out: Path | None,
    url_out: Path | None,
    detach: bool,
) -> None:
    """Serve a scripted model endpoint (Anthropic Messages + OpenAI Responses) until Ctrl-C (or killed)."""
    from rich.console import Console

    from anyagentd_testing.model_server import ModelServer

    try:
        server = ModelServer(script_path, host=host, port=port, log_path=log_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--script") from exc
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if detach:
        _detach(server, script_path, console, env_out, url_out)
        return
    try:
        server.start()
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc
    lines = _announce(server, script_path, console, env_out, url_out, log_path)
    if print_env:
        click.echo("\n".join(lines))
        sys.stdout.flush()
    console.print("\nServing; Ctrl-C to stop.")
    try:
        while server.running:
            time.sleep(0.5)
        raise click.ClickException("the model server stopped unexpectedly")
    except KeyboardInterrupt:
        console.print("Stopping.")
    finally:
        server.stop()


def _announce(
    server: Any,
    script_path: Path,
    console: Any,
    env_out: Path | None,
    url_out: Path | None,
    log_path: Path | None,
    detached_pid: int | None = None,
) -> list[str]:
    """Write the files and print the banner on stderr (with the exports, unless detached: the shell evaluates
    those); returns the export lines."""
    from .agents import codex_resources_dir

    extra = {PID_ENV: str(detached_pid)} if detached_pid is not None else {}
    lines = export_lines({**environment(server.url), **extra}, codex_resources_dir())
    if env_out is not None:
        _write_atomically(env_out, "\n".join(lines) + "\n")
    if url_out is not None:
        _write_atomically(url_out, server.url + "\n")
    turns = len(server.script.turns)
    console.print(
        f"[bold]Scripted model server[/bold] at [cyan]{server.url}[/cyan] "
        f"({turns} turn{'' if turns == 1 else 's'} from {script_path})"
    )
    if detached_pid is not None:
        console.print(f"serving in the background: {PID_ENV}={detached_pid} (kill it to stop)", markup=False)
        return lines
    if log_path is not None:
        console.print(f"Logging requests to {log_path}")
    console.print("\n[bold]Environment[/bold] for Claude Code, Codex and the ACP agents (use a fresh HOME per run):")
    for line in lines:
        console.print(f"  {line}", markup=False)
    return lines


def _detach(server: Any, script_path: Path, console: Any, env_out: Path | None, url_out: Path | None) -> None:
    """Fork; the child starts the server, writes the files, hands the export lines to the parent and serves with
    its standard streams on /dev/null; the parent prints them on stdout and exits (1 if the child failed)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:  # the parent: what the child reports, then leave
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            report = reader.read()
        try:
            message = json.loads(report)
        except ValueError:
            raise click.ClickException("the model server did not start") from None
        if "error" in message:
            raise click.ClickException(message["error"])
        click.echo("\n".join(message["lines"]))
        return
    os.close(read_end)
    os.setsid()  # not killed with the shell's job; `kill $ANYAGENTD_MODEL_SERVER_PID` stops it
    try:
        server.start()
        lines = _announce(server, script_path, console, env_out, url_out, None, os.getpid())
        payload = {"lines": lines}
    except OSError as exc:
        payload = {"error": f"cannot listen: {exc}"}
    with os.fdopen(write_end, "wb") as writer:
        writer.write(json.dumps(payload).encode())
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if "error" in payload:
        hard_exit(1)
    try:
        while server.running:
            time.sleep(0.5)
    finally:
        server.stop()
        hard_exit(0)
