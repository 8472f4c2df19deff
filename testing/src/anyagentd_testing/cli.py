"""``anyagentd model-server``: serve a script of model turns on loopback for real agent CLIs to talk to.

Starts :class:`anyagentd_testing.model_server.ModelServer`, prints its URL and the environment variables
and flags that point Claude Code and Codex at it (from :mod:`anyagentd_testing.agents`) to stderr, then
serves until Ctrl-C. Handy to reproduce by hand what the end-to-end tests do.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click


@click.command("model-server")
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
def model_server(script_path: Path, host: str, port: int, log_path: Path | None) -> None:
    """Serve a scripted model endpoint (Anthropic Messages + OpenAI Responses) until Ctrl-C."""
    from rich.console import Console

    from anyagentd_testing.agents import claude_env, codex_args, codex_env
    from anyagentd_testing.model_server import ModelServer

    try:
        server = ModelServer(script_path, host=host, port=port, log_path=log_path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--script") from exc
    try:
        server.start()
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    turns = len(server.script.turns)
    plural = "" if turns == 1 else "s"
    console.print(
        f"[bold]Scripted model server[/bold] at [cyan]{server.url}[/cyan] ({turns} turn{plural} from {script_path})"
    )
    if log_path is not None:
        console.print(f"Logging requests to {log_path}")
    console.print("\n[bold]Claude Code[/bold] (use a fresh HOME per run):")
    for name, value in claude_env(server.url).items():
        console.print(f"  export {name}={shlex.quote(value)}", markup=False)
    console.print(
        "  claude -p 'PROMPT' --output-format stream-json --verbose --permission-mode bypassPermissions", markup=False
    )
    console.print("\n[bold]Codex[/bold] (use a fresh HOME per run; also for `codex app-server` and `codex-acp`):")
    for name, value in codex_env().items():
        console.print(f"  export {name}={shlex.quote(value)}", markup=False)
    flags = " ".join(shlex.quote(a) for a in codex_args(server.url))
    console.print(f"  codex exec --json --skip-git-repo-check {flags} 'PROMPT' </dev/null", markup=False)
    console.print("\nServing; Ctrl-C to stop.")

    try:
        while server.running:
            time.sleep(0.5)
        raise click.ClickException("the model server stopped unexpectedly")
    except KeyboardInterrupt:
        console.print("Stopping.")
    finally:
        server.stop()
