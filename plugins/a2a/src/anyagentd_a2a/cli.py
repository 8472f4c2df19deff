"""``anyagentd a2a``: serve the configured agent over A2A, or check a configuration file; and, as subcommands,
the client side for people: ``login URL`` (the device grant), ``send URL TEXT``, ``status URL``, ``op URL OP``
(any command op), ``tasks URL`` and ``runs URL`` (listings), each with ``--token`` and ``--cacert``, and all but
``login`` (one device-grant issuer per daemon) with ``--agent ID``: that agent of the daemon, else its default one.

Exit codes of the daemon: 0 after a drain (SIGTERM/SIGINT), 2 for a configuration that cannot be served (one line
on stderr naming the key: :func:`.config.parse`, then :func:`.preflight.preflight`, whose warnings are logged), 1
when the listener cannot start (one line: the port taken, the task store unreachable, the state dir held by another
daemon or not creatable). ``--check-config FILE`` runs the same checks and serves nothing: a line per warning and
per error on stderr (``configuration error: KEY: message``), exit 2 when there is an error, else ``FILE: ok`` and
exit 0. The subcommands exit 0; 2 when a task they sent waits for
input (``send``, a task op of ``op``: its question on stdout, the command that answers it on stderr); 1 with one
line on stderr (:class:`~anyagentd_a2a.client.ClientError`: unreachable, refused, failed, bad arguments), never a
traceback; 130 when interrupted.
"""

from __future__ import annotations

import sys
from datetime import UTC
from pathlib import Path
from typing import Any, NoReturn

import click


def _config_error(err: Exception, config_path: str | None = None) -> NoReturn:
    """One line for ``err`` (a :class:`~.config.ConfigError`'s first error, and how many more
    ``--check-config`` lists when there are), exit 2."""
    more = len(getattr(err, "also", ()))
    hint = f" ({more} more: anyagentd a2a --check-config {config_path})" if more and config_path else ""
    click.echo(f"anyagentd a2a: configuration error: {err}{hint}", err=True)
    sys.exit(2)


def _preflight(loaded: Any, mock_script: str | None) -> Any:
    """:func:`.preflight.preflight` of ``loaded`` against this process's plugins (``loaded_plugins()``), with the
    ``--mock`` script (it wins over ``agent.mock_script``); a plugin set the registry refuses (two plugins
    registering one op) is one line, exit 1, as at start."""
    from anyagentd.cli import loaded_plugins
    from anyagentd.errors import AnyagentError

    from .preflight import preflight

    try:
        return preflight(loaded, loaded_plugins(), mock_script=mock_script)
    except AnyagentError as err:
        click.echo(f"anyagentd a2a: {err.kind}: {err.message}", err=True)
        sys.exit(1)


@click.group(invoke_without_command=True)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="TOML configuration ([agent] or [[agents]], [a2a]); default: the embedded mock agent on loopback.",
)
@click.option(
    "--check-config",
    "check_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Check FILE as the start does (secrets, files, directories, installed agents and MCP "
    "transports, workflow steps and commands; grants matching no op are warnings) and exit: 0 if "
    "it can be served, 2 with a line per problem naming its key.",
)
@click.option("--listen", metavar="HOST:PORT", help="Override a2a.listen; port 0 binds a free port.")
@click.option(
    "--mock",
    "mock_script",
    metavar="SCRIPT",
    help="Script for the scripted agent `mock`: a JSON file or a shipped example name.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the task database and conversation files live (default ~/.local/state/anyagentd/a2a).",
)
@click.pass_context
def a2a(
    ctx: click.Context,
    config_path: str | None,
    check_path: str | None,
    listen: str | None,
    mock_script: str | None,
    state_dir: Path | None,
) -> None:
    """Serve the configured agents over A2A 1.0 (JSON-RPC over HTTP), each at /agents/ID and the default at the
    root; or sign in to a daemon and talk to its agents (the subcommands)."""
    if ctx.invoked_subcommand is not None:
        return
    from .config import ConfigError, default_config, load, with_listen

    if check_path is not None:  # what the start checks of its configuration, errors and warnings all printed
        try:
            checked = _preflight(load(check_path), mock_script)
        except ConfigError as err:  # every key the file's types refuse, a line each
            for each in err.all:
                click.echo(f"anyagentd a2a: configuration error: {each}", err=True)
            sys.exit(2)
        for warning in checked.warnings:
            click.echo(f"anyagentd a2a: warning: {warning}", err=True)
        for error in checked.errors:
            click.echo(f"anyagentd a2a: configuration error: {error}", err=True)
        if checked.errors:
            sys.exit(2)
        click.echo(f"{check_path}: ok", err=True)
        return
    try:
        loaded = with_listen(load(config_path) if config_path else default_config(), listen)
    except ConfigError as err:
        _config_error(err, config_path)
    found = _preflight(loaded, mock_script)
    if found.errors:  # one line: the first error, and how to see the others
        more = len(found.errors) - 1
        hint = f" ({more} more: anyagentd a2a --check-config {config_path})" if more and config_path else ""
        _config_error(Exception(f"{found.errors[0]}{hint}"))
    import logging

    import anyio

    from anyagentd.cli import loaded_plugins
    from anyagentd.errors import AnyagentError

    from .daemon import Options, serve
    from .logs import setup_logging

    setup_logging()
    for warning in found.warnings:
        logging.getLogger("anyagentd.a2a.preflight").warning("configuration: %s", warning)
    from .statedir import StateDirUnusable
    from .store import StoreUnavailable

    try:
        code = _one_error(
            anyio.run,
            serve,
            loaded,
            Options(
                listen=listen,
                mock_script=mock_script,
                state_dir=state_dir,
                config_path=config_path,
                plugins=loaded_plugins(),
            ),
        )
    except ConfigError as err:
        _config_error(err)
    except (StoreUnavailable, StateDirUnusable) as err:
        click.echo(f"anyagentd a2a: {err}", err=True)
        sys.exit(1)
    except OSError as err:
        click.echo(
            f"anyagentd a2a: cannot listen on {listen or loaded.config.a2a.listen}: {err.strerror or err}", err=True
        )
        sys.exit(1)
    except AnyagentError as err:
        click.echo(f"anyagentd a2a: {err.kind}: {err.message}", err=True)
        sys.exit(1)
    sys.exit(code)


def _one_error(call: Any, *args: Any) -> Any:
    """``call(*args)``; an exception group (a start-up failure inside the daemon's task group) holding one error is
    raised as that error, so the caller's typed handlers give the person one line."""
    try:
        return call(*args)
    except BaseExceptionGroup as group:
        leaves: list[BaseException] = []
        todo: list[BaseException] = [group]
        while todo:
            item = todo.pop()
            if isinstance(item, BaseExceptionGroup):
                todo.extend(item.exceptions)
            else:
                leaves.append(item)
        if len(leaves) == 1 and isinstance(leaves[0], Exception):
            raise leaves[0] from None
        raise


# -- the client side for people -------------------------------------------------------------------------------

TOKEN_OPTION = click.option(
    "--token",
    envvar="ANYAGENTD_A2A_TOKEN",
    metavar="TOKEN",
    help="Bearer token (default: $ANYAGENTD_A2A_TOKEN, else the one `login` stored).",
)
CACERT_OPTION = click.option(
    "--cacert",
    envvar="ANYAGENTD_A2A_CACERT",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Verify the daemon's TLS certificate against the CA certificates in this PEM file "
    "only (default: $ANYAGENTD_A2A_CACERT, else the system's trust store).",
)
AGENT_OPTION = click.option(
    "--agent",
    metavar="ID",
    help="Talk to this agent of the daemon (GET URL/agents lists them); default: the daemon's default agent.",
)


def _fail(err: Exception, cacert: str | None = None) -> NoReturn:
    """One line on stderr for ``err`` (a certificate not trusted says how to trust it), exit 1."""
    from .client import UntrustedCertificate

    line = str(err)
    if isinstance(err, UntrustedCertificate):
        line += f" — checked against {cacert}" if cacert else "; give the CA that signed it with --cacert FILE"
    click.echo(f"anyagentd a2a: {line}", err=True)
    sys.exit(1)


def _interrupted() -> NoReturn:
    """Ctrl-C: one line, exit 130."""
    click.echo(
        "anyagentd a2a: interrupted (a task the daemon started goes on; see `anyagentd a2a tasks URL`)", err=True
    )
    sys.exit(130)


def _token(url: str, given: str | None) -> str | None:
    from .client import load_token

    return given or load_token(url)


def _agent_url(command: Any) -> Any:
    """The client command ``command`` with its ``url`` and ``agent`` read as :func:`.client.split_agent` reads them:
    an agent's own URL (``URL/agents/ID``) is its daemon's URL with ``--agent ID``. A URL and an ``--agent`` that
    name two agents are one line and exit 1."""
    import functools

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from .client import ClientError, split_agent

        try:
            kwargs["url"], kwargs["agent"] = split_agent(kwargs["url"], kwargs.get("agent"))
        except ClientError as err:
            _fail(err, kwargs.get("cacert"))
        return command(*args, **kwargs)

    return run


def _run(call: Any, cacert: str | None) -> Any:
    """``anyio.run(call)``; a :class:`ClientError` is one line and exit 1, Ctrl-C exit 130."""
    import anyio

    from .client import ClientError

    try:
        return anyio.run(call)
    except ClientError as err:
        _fail(err, cacert)
    except KeyboardInterrupt:
        _interrupted()


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the option ``name`` was typed on this command line (not taken from the environment or a default)."""
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def _print_json(value: Any) -> None:
    """``value`` as pretty JSON on stdout (indent 2, keys in their order, non-ASCII kept)."""
    import json

    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _stopped(ctx: click.Context, url: str, task: dict[str, Any]) -> None:
    """Say where ``task`` stopped, on stderr: ``task ID: state (contextId …)``; for one that failed, was cancelled
    or rejected, its status message (why) unless it was the text printed; for one that waits for input, also
    the command that answers it (the answers it takes; ``--agent`` kept, ``--token``/``--cacert`` kept when typed
    on this command line, the token itself never printed), then exit 2. Its question is the caller's to print, on stdout."""
    import shlex

    from .client import answer_hint, question_text, task_state, task_text

    state = task_state(task)
    shown = state.removeprefix("TASK_STATE_").lower()
    click.echo(f"task {task.get('id')}: {shown} (contextId {task.get('contextId')})", err=True)
    if state == "TASK_STATE_COMPLETED":
        return
    if state != "TASK_STATE_INPUT_REQUIRED":
        why = question_text(task)  # a task that failed or was cancelled says why in its status message
        if why and why != task_text(task):  # not already printed as the answer (a task with no response text)
            click.echo(why, err=True)
        return
    extra = ""
    if _given(ctx, "cacert"):
        extra += f" --cacert {shlex.quote(ctx.params['cacert'])}"
    if _given(ctx, "token"):
        extra += ' --token "$ANYAGENTD_A2A_TOKEN"'
    click.echo(answer_hint(url, task, extra=extra, agent=ctx.params.get("agent")), err=True)
    if _given(ctx, "token"):
        click.echo("(the token given with --token is not printed: set ANYAGENTD_A2A_TOKEN to it first)", err=True)
    sys.exit(2)


@a2a.command(short_help="Sign in with the device grant; stores the token.")
@click.argument("url")
@click.option(
    "--scope",
    type=click.Choice(["user", "operator"]),
    default="user",
    show_default=True,
    help="What to ask for; the approving operator may narrow it, never widen it.",
)
@CACERT_OPTION
def login(url: str, scope: str, cacert: str | None) -> None:
    """Sign in to the daemon at URL with the device grant: shows a code for an operator to approve, waits, and
    stores the token (0600) in the config dir."""
    from .client import ClientError, store_token
    from .client import login as run_login

    try:
        body = run_login(url, scope=scope, cacert=cacert)
    except ClientError as err:
        _fail(err, cacert)
    except KeyboardInterrupt:
        click.echo("anyagentd a2a: sign-in interrupted", err=True)
        sys.exit(130)
    path = store_token(url, body)
    click.echo(f"Signed in to {url.rstrip('/')} (scope {body.get('scope')}); token stored in {path}", err=True)


@a2a.command(short_help="Send one message; prints the answer.")
@click.argument("url")
@click.argument("text")
@click.option("--context-id", metavar="ID", help="Continue this conversation (printed on stderr after each send).")
@click.option("--task-id", metavar="ID", help="Answer this task, one that waits for input (input_required).")
@AGENT_OPTION
@TOKEN_OPTION
@CACERT_OPTION
@click.pass_context
@_agent_url
def send(
    ctx: click.Context,
    url: str,
    text: str,
    context_id: str | None,
    task_id: str | None,
    agent: str | None,
    token: str | None,
    cacert: str | None,
) -> None:
    """Send TEXT to the agent at URL as one message; prints the answer on stdout (for a task that waits for
    input, its question; for a command's task answered to its end — a workflow run's ``ask`` step — its result
    as JSON, as ``op`` prints it), the task's id, state and contextId on stderr. Exits 0 when the task completed, 2 when
    it waits for input (stderr names the command that answers it: `send URL allow --task-id ID`), 1 otherwise."""
    from .client import question_text, task_result, task_text
    from .client import send as run_send
    from .structjson import whole_numbers

    state, task = _run(
        lambda: run_send(
            url, text, _token(url, token), context_id=context_id, task_id=task_id, cacert=cacert, agent=agent
        ),
        cacert,
    )
    result = task_result(task) if state == "TASK_STATE_COMPLETED" and "op" in (task.get("metadata") or {}) else None
    if result is not None:  # a command's task answered to its end (a workflow run's ask step): its result, as `op`
        _print_json(whole_numbers(result))
    else:
        answer = question_text(task) if state == "TASK_STATE_INPUT_REQUIRED" else task_text(task)
        if answer:
            click.echo(answer)
    _stopped(ctx, url, task)
    if state != "TASK_STATE_COMPLETED":
        sys.exit(1)


@a2a.command(short_help="The status op, as JSON.")
@click.argument("url")
@AGENT_OPTION
@TOKEN_OPTION
@CACERT_OPTION
@_agent_url
def status(url: str, agent: str | None, token: str | None, cacert: str | None) -> None:
    """The daemon's ``status`` (the command extension's op) at URL (of its agent ID with --agent), as JSON on
    stdout: keys in the daemon's order, whole numbers as integers."""
    from .client import run_op

    reply = _run(lambda: run_op(url, "status", _token(url, token), cacert=cacert, agent=agent), cacert)
    _print_json(reply.result)


def _op_args(pairs: tuple[str, ...], args_json: str | None) -> dict[str, Any]:
    """The op's arguments from ``--arg KEY=VALUE`` (each VALUE parsed as JSON when it is JSON — numbers,
    true/false/null, arrays, objects, "quoted strings" — else kept as text) or ``--args JSON`` (an object), never
    both. Raises :class:`ClientError` naming what is wrong."""
    import json
    import math

    from .client import ClientError

    if pairs and args_json is not None:
        raise ClientError("give the arguments with --arg KEY=VALUE or with --args JSON, not both")
    if args_json is not None:
        try:
            args = json.loads(args_json, parse_constant=_no_constant)
        except ValueError as err:
            raise ClientError(f"--args is not JSON: {err}") from None
        if not isinstance(args, dict):
            raise ClientError(f"--args is not a JSON object: {args_json}")
    else:
        args = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ClientError(f"--arg {pair!r} is not KEY=VALUE")
            if key in args:
                raise ClientError(f"--arg {key} is given twice")
            try:
                args[key] = json.loads(value, parse_constant=_no_constant)
            except ValueError:
                args[key] = value
            if isinstance(args[key], float) and not math.isfinite(args[key]):
                args[key] = value
    if "op" in args:
        raise ClientError("`op` is not an argument: it is OP itself")
    return args


def _no_constant(name: str) -> Any:
    """``json.loads``'s ``parse_constant``: ``NaN`` and ``Infinity`` are not JSON values (they stay text)."""
    raise ValueError(f"{name} is not a JSON value")


@a2a.command("op", short_help="Run any command op; prints its result as JSON.")
@click.argument("url")
@click.argument("op_name", metavar="OP")
@click.option(
    "--arg",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help='One argument (repeatable); VALUE is parsed as JSON when it is JSON (5, true, {"a": 1}, '
    '"5"), else taken as text.',
)
@click.option("--args", "args_json", metavar="JSON", help="All the arguments as one JSON object (not with --arg).")
@AGENT_OPTION
@TOKEN_OPTION
@CACERT_OPTION
@click.pass_context
@_agent_url
def op_command(
    ctx: click.Context,
    url: str,
    op_name: str,
    pairs: tuple[str, ...],
    args_json: str | None,
    agent: str | None,
    token: str | None,
    cacert: str | None,
) -> None:
    """Run the command op OP (`status`, `workflow.run`, `run.get`, `admin.pause`, `auth.device.approve`, ...) at
    URL with its arguments: the command extension activated and the message marked for you. Prints the op's result
    as JSON on stdout (whole numbers as integers; a message op's keys in the daemon's order, while a task op's
    result is its stored artifact, whose keys keep no order; `null` for an op that has none) and exits 0. A task op (workflow.run, admin.*, ...) is followed to its end: its id and state on stderr; one that
    waits for input prints its question and the command that answers it, exit 2. A refusal (the JSON-RPC code,
    reason and message) or a task that failed is one line on stderr, exit 1."""
    from .client import ClientError, question_text, run_op, task_state

    try:
        args = _op_args(pairs, args_json)
    except ClientError as err:
        _fail(err)
    reply = _run(lambda: run_op(url, op_name, _token(url, token), args, cacert=cacert, agent=agent), cacert)
    if reply.task is None:  # a message op
        _print_json(reply.result)
        return
    task, state = reply.task, task_state(reply.task)
    if state == "TASK_STATE_COMPLETED":
        _print_json(reply.result)
        _stopped(ctx, url, task)
    elif state == "TASK_STATE_INPUT_REQUIRED":
        click.echo(question_text(task))
        _stopped(ctx, url, task)  # exits 2
    else:
        shown = state.removeprefix("TASK_STATE_").lower() or "stopped"
        _fail(ClientError(f"{op_name} {shown} (task {task.get('id')}): {question_text(task) or 'no reason given'}"))


def _when(timestamp: str | None) -> str:
    """An RFC 3339 timestamp as ``YYYY-MM-DD HH:MM:SSZ`` (UTC, whole seconds); ``-`` without one."""
    from datetime import datetime

    if not timestamp:
        return "-"
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return timestamp
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """``rows`` as a rich table on stdout; as wide as it needs when stdout is not a terminal (ids never cut)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*row)
    console = Console(width=None if sys.stdout.isatty() else 1000, highlight=False)
    console.print(table)


@a2a.command(short_help="List your tasks.")
@click.argument("url")
@click.option("--context", "context_id", metavar="ID", help="Only the tasks of this conversation (contextId).")
@click.option(
    "--state",
    metavar="STATE",
    help="Only the tasks in this state (A2A's TASK_STATE_ names, lowercased "
    "and without the prefix: working, input_required, completed, ...).",
)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print the tasks (A2A Task JSON, no history) as a JSON array.")
@AGENT_OPTION
@TOKEN_OPTION
@CACERT_OPTION
@_agent_url
def tasks(
    url: str,
    context_id: str | None,
    state: str | None,
    limit: int,
    as_json: bool,
    agent: str | None,
    token: str | None,
    cacert: str | None,
) -> None:
    """List your tasks at URL (ListTasks; the operator sees everyone's; with --agent, that agent's tasks), newest
    first: id, context, state and last update, as a table on stdout, or JSON with --json."""
    from .client import ClientError, list_tasks, task_state
    from .tasks.state import labels  # the states' owner (imported here: a2a.types is heavy for every CLI start)

    wanted = None
    if state is not None:
        key = state.strip().lower().removeprefix("task_state_").replace("-", "_")
        if key not in labels():
            _fail(ClientError(f"--state {state!r} is not a task state: {', '.join(labels())}"))
        wanted = f"TASK_STATE_{key.upper()}"
    found = _run(
        lambda: list_tasks(
            url, _token(url, token), context_id=context_id, state=wanted, limit=limit, cacert=cacert, agent=agent
        ),
        cacert,
    )
    if as_json:
        _print_json(found)
        return
    if not found:
        click.echo("no tasks", err=True)
        return
    _table(
        "Tasks",
        ["id", "context", "state", "updated"],
        [
            [
                str(t.get("id")),
                str(t.get("contextId")),
                task_state(t).removeprefix("TASK_STATE_").lower(),
                _when(t.get("status", {}).get("timestamp")),
            ]
            for t in found
        ],
    )


@a2a.command(short_help="List the workflow runs.")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the runs ({run, workflow, status, output, error}) as JSON")
@AGENT_OPTION
@TOKEN_OPTION
@CACERT_OPTION
@_agent_url
def runs(url: str, as_json: bool, agent: str | None, token: str | None, cacert: str | None) -> None:
    """List the workflow runs at URL that you started (the operator: every run) — the ``workflow.status`` op: run
    id, workflow, status and error, as a table on stdout, or JSON with --json (outputs included)."""
    from .client import list_runs

    found = _run(lambda: list_runs(url, _token(url, token), cacert=cacert, agent=agent), cacert)
    if as_json:
        _print_json(found)
        return
    if not found:
        click.echo("no runs", err=True)
        return
    _table(
        "Workflow runs",
        ["run", "workflow", "status", "error"],
        [[str(r.get("run")), str(r.get("workflow")), str(r.get("status")), str(r.get("error") or "-")] for r in found],
    )
