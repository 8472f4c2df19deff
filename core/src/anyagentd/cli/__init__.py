"""The ``anyagentd`` command line (click + rich).

``serve`` speaks the wire on stdio (stdout is protocol only); ``run`` renders one turn live for a person and asks
permission questions at the terminal, ``chat`` holds a conversation (:mod:`.conversation` drives both);
``discover``, ``probe``, ``plugins`` report, as tables or ``--json``. Human output goes to stderr; JSON goes to
stdout; a typed error is one line with an exit status per kind (:mod:`.failures`). Plugins add subcommands through
``register_cli_commands``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from .. import __version__, startup
from ..errors import AnyagentError
from ..hard_exit import hard_exit
from .failures import EXIT_INTERRUPTED, NoAnswer, report, unwrap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rich.console import Console

    from ..model import AgentDetails, ConfigValue, DiscoveryReport
    from ..plugins import Plugins
    from ..runtime import Runtime

F = TypeVar("F", bound="Callable[..., object]")

# Importing this module (what every command pays before it runs) loads click and nothing heavy: rich, anyio,
# pydantic, the engine and the plugins load when a command needs them (`serve` writes its hello line first).
_err_console: Console | None = None


def _console() -> Console:
    """The stderr console for people (rich, made on first use)."""
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True)
    return _err_console


log = logging.getLogger("anyagentd.cli")

_mock_option = click.option(
    "--mock",
    "mock_script",
    metavar="SCRIPT",
    help="Script for the scripted agent `mock`: a JSON file or a shipped example name (hello, permission…).",
)


_plugins: Plugins | None = None


def loaded_plugins() -> Plugins:
    """The process's plugin manager, loaded once: the CLI group loads it to find plugins' subcommands, and a
    subcommand that runs a :class:`~anyagentd.runtime.Runtime` (``anyagentd a2a``) passes it on rather than
    loading the entry points a second time."""
    global _plugins
    if _plugins is None:
        from ..plugins import Plugins

        _plugins = Plugins()
    return _plugins


def _runtime(mock_script: str | None) -> Runtime:
    from ..runtime import Runtime

    return Runtime(mock_script=mock_script, plugins=loaded_plugins())


def _print_json(value: object) -> None:
    from pydantic_core import to_jsonable_python

    click.echo(json.dumps(to_jsonable_python(value), indent=2))


def _fail(err: AnyagentError) -> NoReturn:
    sys.exit(report(_console(), err))


def _run_for_a_person(fn: Callable[..., Awaitable[int]], *args: object) -> NoReturn:
    """``anyio.run(fn, *args)`` for an interactive command, which returns its exit status; any typed error is one
    reported line (never a traceback, even from inside a task group), Ctrl-C exits 130."""
    import anyio

    try:
        code = anyio.run(fn, *args)
    except BaseException as exc:  # noqa: BLE001 - sorted below; anything untyped is re-raised
        err = unwrap(exc)
        if isinstance(err, (AnyagentError, NoAnswer)):
            code = report(_console(), err)
        elif isinstance(err, EOFError):
            code = report(_console(), NoAnswer("standard input ended"))
        elif isinstance(err, KeyboardInterrupt):
            _console().print("[yellow]interrupted[/]")
            code = EXIT_INTERRUPTED
        else:
            raise
    sys.exit(code)  # the thread that may still wait on stdin is a daemon: it does not hold the exit


def _log_level(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        logging.basicConfig(
            level=value.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    return value


def _verbose(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        _log_level(ctx, param, "DEBUG")
    return value


class _Commands(click.Group):
    """The ``anyagentd`` group: plugins' subcommands (``register_cli_commands``) are added the first time a
    command that is not built in is looked up, or the commands are listed (``--help``), so a built-in command
    (``serve``, ``run``…) does not pay for loading every plugin before it starts. A plugin that fails to load
    leaves a warning on stderr, never a broken CLI."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if self._plugins_added:
            return
        self._plugins_added = True
        try:
            loaded_plugins().add_cli_commands(self)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the CLI down
            _console().print(f"[yellow]warning[/]: plugin CLI commands not loaded: {exc}")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._add_plugin_commands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        return super().list_commands(ctx)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="anyagentd")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_verbose,
    help="Log what the engine sees (every event) to stderr; same as --log-level debug.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    expose_value=False,
    is_eager=True,
    callback=_log_level,
    help="Log at this level to stderr.",
)
def main() -> None:
    """Drive the coding agents on this machine behind one event model.

    Start with `anyagentd discover`, then `anyagentd run AGENT "PROMPT"` or `anyagentd chat AGENT`.
    Shell completion: eval "$(_ANYAGENTD_COMPLETE=bash_source anyagentd)" (zsh_source, fish_source)."""


@main.command(short_help="Speak the JSON-lines wire on stdin/stdout.")
@_mock_option
def serve(mock_script: str | None) -> None:
    """Speak the JSON-lines wire on stdin/stdout (see anyagent-wire.schema.json)."""
    from ..stdio import claim_stdout
    from ..wire_settings import WireSettings

    try:
        WireSettings.from_env()  # a bad bound is refused before anything is written
    except AnyagentError as err:
        _fail(err)
    # The hello goes out before the engine and the plugins load: a client sees the server alive at once, and the
    # commands it sends meanwhile wait in the pipe until the server reads them.
    try:
        output = claim_stdout(greet=True)
    except OSError:
        hard_exit(0)  # no one to speak to
    import anyio

    from ..wire import serve_stdio

    try:
        runtime = _runtime(mock_script)
        # What start-up built (modules, schemas, plugins) lives as long as the process: out of the collector's
        # sight, a flood's full collections no longer walk it (about 7 % more events/s, bench/README.md).
        startup.done()
        signum = anyio.run(serve_stdio, runtime, output)
    except AnyagentError as err:
        _fail(err)
    sys.stderr.flush()
    # hard_exit (os._exit): a worker thread may still be blocked reading stdin, and nothing is left to flush.
    hard_exit(128 + signum if signum else 0)


@main.command(short_help="List the agents found and what is missing.")
@_mock_option
@click.option("--json", "as_json", is_flag=True, help="Print the DiscoveryReport as JSON.")
def discover(mock_script: str | None, as_json: bool) -> None:
    """List the installed agents (never launches one) and the known ones that are missing."""

    import anyio
    from rich.markup import escape
    from rich.table import Table

    async def go() -> DiscoveryReport:
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
    _console().print(table)
    for missing in report.missing:
        _console().print(
            f"[yellow]missing[/] {missing.id} ({missing.name}): {missing.install_hint}",
            soft_wrap=True,
            markup=True,
            highlight=False,
        )
    for diag in report.diagnostics:
        if "adapter not installed" in diag.message:
            _console().print(diag.message, soft_wrap=True, markup=False, highlight=False)
        else:
            _console().print(f"[dim]{diag.level}[/] {escape(diag.message)}", soft_wrap=True, highlight=False)
    first = next((a.id for a in report.agents if a.id != "mock"), "mock")
    _console().print(
        f'[dim]next: anyagentd probe {first} · anyagentd run {first} "PROMPT" · anyagentd chat {first}[/]',
        soft_wrap=True,
        highlight=False,
    )


@main.command(short_help="Show an agent's version, login, capabilities, options.")
@click.argument("agent")
@_mock_option
@click.option("--json", "as_json", is_flag=True, help="Print the AgentDetails as JSON.")
def probe(agent: str, mock_script: str | None, as_json: bool) -> None:
    """Show what AGENT is and can do: version, login, capabilities, options, slash commands."""

    import anyio
    from rich.table import Table

    async def go() -> AgentDetails:
        async with _runtime(mock_script) as rt:
            return await rt.probe(agent)

    try:
        details = anyio.run(go)
    except AnyagentError as err:
        _fail(err)
    if as_json:
        _print_json(details)
        return
    from ..model import kind_tag
    from .render import show_value

    auth = kind_tag(details.auth)
    _console().print(f"[bold]{agent}[/] version {details.version or '?'}, auth: {auth}")
    _console().print("capabilities: " + (", ".join(details.capabilities.features) or "none"))
    _console().print("MCP transports: " + (", ".join(details.capabilities.mcp_transports) or "none"))
    if details.config_options:
        table = Table("option", "kind", "current", "live", title="Options")
        for option in details.config_options:
            kind = (
                option.kind
                if isinstance(option.kind, str)
                else "Select: " + ", ".join(c.value for c in option.kind.choices)
            )
            current = "-" if option.current is None else show_value(option.current)
            table.add_row(option.id, kind, current, "yes" if option.live else "creation-only")
        _console().print(table)
        _console().print(
            f'[dim]set them with: anyagentd run {agent} "PROMPT" --option ID=VALUE (--model VALUE); '
            "live ones in chat too: /option ID=VALUE[/]",
            soft_wrap=True,
            highlight=False,
        )
    for command in details.commands:
        _console().print(f"/{command.name}  [dim]{command.description}[/]")


@main.command(short_help="List the plugins and the agents they drive.")
@click.option("--json", "as_json", is_flag=True, help="Print the plugins as JSON.")
def plugins(as_json: bool) -> None:
    """List the installed plugins, the hooks they implement and the agents they drive."""
    from rich.table import Table

    manager = loaded_plugins()
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
                for name, cls in adapters.items()
                if cls.__module__.startswith(record.module.rsplit(".", 1)[0])
            ]
            row["ops"] = sorted(ops_by_plugin.get(record.name, []))
            rows.append(row)
        _print_json(rows)
        return
    table = Table("plugin", "distribution", "version", "hooks", title="Plugins")
    for record in manager.records:
        table.add_row(record.name, record.distribution or "-", record.version or "-", ", ".join(record.hooks))
    _console().print(table)
    for name, cls in adapters.items():
        agents = ", ".join(p.id for p in cls.profiles) or name
        _console().print(f"adapter [bold]{name}[/] drives: {agents}")
    for plugin_name, op_names in ops_by_plugin.items():
        _console().print(f"plugin [bold]{plugin_name}[/] serves ops: {', '.join(sorted(op_names))}")


def _session_options(fn: F) -> F:
    """The options ``run`` and ``chat`` share: where, how permissions are answered, resume/fork, configuration."""
    options = [
        click.option(
            "--dir",
            "directory",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("."),
            show_default=True,
            help="The session's working directory.",
        ),
        click.option("--auto-approve", is_flag=True, help="Allow every permission request once without asking."),
        click.option(
            "--resume",
            "resume",
            metavar="TOKEN",
            help="Continue the session with this resume token (printed after a turn, /info in chat).",
        ),
        click.option("--fork", is_flag=True, help="With --resume: start a new session from that one's history."),
        click.option("--model", metavar="VALUE", help="Set the model option (see `anyagentd probe AGENT`)."),
        click.option(
            "-o",
            "--option",
            "option_values",
            metavar="KEY=VALUE",
            multiple=True,
            help="Set an option `anyagentd probe AGENT` lists (repeatable; true/false for Boolean).",
        ),
        _mock_option,
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _configure(
    model: str | None, option_values: tuple[str, ...], resume: str | None, fork: bool
) -> dict[str, ConfigValue]:
    """The ``configure`` of ``open`` from ``--model`` and ``--option``; checks ``--fork`` has ``--resume``."""
    from .render import parse_value

    if fork and not resume:
        raise click.UsageError("--fork needs --resume TOKEN (the session to fork)")
    configure: dict[str, ConfigValue] = {}
    for item in option_values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        configure[key.strip()] = parse_value(value)
    if model:
        configure["model"] = model
    return configure


async def _converse(
    runtime: Runtime,
    agent: str,
    prompt: str | None,
    *,
    chat: bool,
    directory: Path,
    auto_approve: bool,
    as_json: bool,
    resume: str | None,
    fork: bool,
    configure: dict[str, ConfigValue],
) -> int:
    from .conversation import Conversation

    log.info(
        "opening %s in %s (resume=%s, fork=%s, configure=%s)",
        agent,
        directory.resolve(),
        resume,
        fork,
        sorted(configure),
    )
    async with runtime:
        session = await runtime.open(
            agent,
            directory.resolve(),
            permission_mode="AutoApprove" if auto_approve else None,
            resume=None if fork else resume,
            fork=resume if fork else None,
            configure=configure,
        )
        startup.done()  # the session is open: what follows is the conversation, not the start
        log.info(
            "session %s: %s at %s (%s), version %s",
            session.id,
            session.installation.id,
            session.installation.executable_path,
            session.installation.source,
            session.info().details.version,
        )
        mode = ", permissions allowed automatically" if auto_approve else ""
        how = f", forked from {resume}" if fork else f", resuming {resume}" if resume else ""
        _console().print(
            f"[dim]session {session.id} with {session.installation.name} in {directory.resolve()}{how}{mode}[/]",
            soft_wrap=True,
            highlight=False,
        )
        if session.installation.id == "mock":
            _console().print("[dim]the scripted agent plays a script: it changes no file and calls no model[/]")
        if chat:
            _console().print("[dim]/help for commands; Ctrl-C cancels a turn, twice quits; Ctrl-D quits[/]")
        conversation = Conversation(session, _console(), chat=chat, as_json=as_json)
        code = await conversation.run(prompt)
        if conversation.resume_token and code in (0, 1):
            _console().print(
                f"[dim]continue it with: anyagentd chat {agent} --resume {conversation.resume_token}[/]",
                soft_wrap=True,
                highlight=False,
            )
        return code


@main.command(short_help="Run one turn of PROMPT with AGENT, live.")
@click.argument("agent")
@click.argument("prompt")
@_session_options
@click.option("--json", "as_json", is_flag=True, help="Print every event as a JSON line on stdout too.")
def run(
    agent: str,
    prompt: str,
    directory: Path,
    auto_approve: bool,
    resume: str | None,
    fork: bool,
    model: str | None,
    option_values: tuple[str, ...],
    mock_script: str | None,
    as_json: bool,
) -> None:
    """Run one turn of PROMPT with AGENT, rendered live; permission questions are asked at the terminal.

    Exit status: 0 the turn completed, 1 it ended otherwise, 2 bad usage or configuration, 3 not installed,
    4 login needed, 5 could not start, 6 the agent exited, 7 protocol failure, 8 the reader lagged,
    9 unsupported, 10 no answer (stdin ended), 11 another error, 130 Ctrl-C."""
    configure = _configure(model, option_values, resume, fork)
    _run_for_a_person(
        lambda: _converse(
            _runtime(mock_script),
            agent,
            prompt,
            chat=False,
            directory=directory,
            auto_approve=auto_approve,
            as_json=as_json,
            resume=resume,
            fork=fork,
            configure=configure,
        )
    )


@main.command(short_help="Talk with AGENT, turn after turn, in one session.")
@click.argument("agent")
@_session_options
def chat(
    agent: str,
    directory: Path,
    auto_approve: bool,
    resume: str | None,
    fork: bool,
    model: str | None,
    option_values: tuple[str, ...],
    mock_script: str | None,
) -> None:
    """Talk with AGENT turn after turn in one session (/help inside for commands).

    A prompt typed while a turn runs steers it or waits in the queue; Ctrl-C cancels the running turn, a second
    Ctrl-C quits, Ctrl-D (end of input) quits once the running turn ended. Exit status as for `run`."""
    configure = _configure(model, option_values, resume, fork)
    _run_for_a_person(
        lambda: _converse(
            _runtime(mock_script),
            agent,
            None,
            chat=True,
            directory=directory,
            auto_approve=auto_approve,
            as_json=False,
            resume=resume,
            fork=fork,
            configure=configure,
        )
    )


def _add_builtin_commands() -> None:
    from .mcp import mcp

    main.add_command(mcp)


_add_builtin_commands()
