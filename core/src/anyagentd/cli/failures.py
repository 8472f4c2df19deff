"""How the CLI reports a typed error to a person: one line, its fields, a hint, and an exit code per kind.

Never a traceback. Errors raised inside a task group arrive wrapped in an ``ExceptionGroup``;
:func:`unwrap` finds the error a person should see. :data:`EXIT_CODES` is the documented table (README,
"Exit codes").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..errors import AnyagentError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.console import Console

EXIT_TURN_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_NO_ANSWER = 10
EXIT_OTHER = 11
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[str, int] = {
    "InvalidConfiguration": EXIT_USAGE,
    "InvalidRequest": EXIT_USAGE,
    "NotInstalled": 3,
    "AuthRequired": 4,
    "SpawnFailed": 5,
    "HandshakeTimeout": 5,
    "ProcessExited": 6,
    "ProtocolFailed": 7,
    "ConsumerLagged": 8,
    "UnsupportedFeature": 9,
    "ResumeFailed": 9,
}
"""Error kind → exit status. 0: the turn completed; 1: it ended otherwise (Failed, Cancelled…); 2: bad usage
(click's own errors too); 10: no answer, standard input ended; 11: any other typed error; 130: Ctrl-C; 128+N:
signal N."""

STDERR_TAIL_LINES = 12
"""Lines of an exited agent's stderr shown under the error."""


class NoAnswer(Exception):
    """Standard input ended while a question was waiting for its answer."""


def exit_code(err: AnyagentError | NoAnswer) -> int:
    """The exit status for ``err`` (see :data:`EXIT_CODES`)."""
    if isinstance(err, NoAnswer):
        return EXIT_NO_ANSWER
    return EXIT_CODES.get(err.kind, EXIT_OTHER)


def unwrap(exc: BaseException) -> BaseException:
    """The error a person should see in ``exc``: the first typed error (or EOF, Ctrl-C) inside nested exception
    groups, else ``exc`` itself."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = [unwrap(inner) for inner in exc.exceptions]
    for wanted in (AnyagentError, NoAnswer, EOFError, KeyboardInterrupt):
        for leaf in leaves:
            if isinstance(leaf, wanted):
                return leaf
    return leaves[0] if len(leaves) == 1 else exc


def _login_lines(methods: Iterable[object]) -> list[str]:
    # `methods`: LoginMethod models, or their JSON when the error came from a wire ErrorBody
    lines = []
    for method in methods:
        from pydantic_core import to_jsonable_python

        body = to_jsonable_python(method)
        if isinstance(body, dict) and "Terminal" in body:
            terminal = body["Terminal"]
            env = " ".join(f"{k}=…" for k in terminal.get("env", {}))  # values may be secrets
            command = " ".join(terminal.get("command", []))
            lines.append(
                f"run `{(env + ' ' if env else '') + command}`"
                + (f" ({terminal['description']})" if terminal.get("description") else "")
            )
        elif isinstance(body, dict) and "EnvVar" in body:
            lines.append(f"set {body['EnvVar'].get('name')}")
        else:
            lines.append(json.dumps(body))
    return lines


def hint(err: AnyagentError | NoAnswer) -> str | None:
    """A next step for a person who met ``err``, where one helps."""
    if isinstance(err, NoAnswer):
        return "answer at a terminal, pipe the answers in, or use --auto-approve"
    kind = err.kind
    if kind == "NotInstalled":
        return "`anyagentd discover` lists the agents found and what to install for the others"
    if kind == "AuthRequired":
        return "log in with the agent's own CLI (above), then run again"
    if kind == "ConsumerLagged":
        return "the reader fell behind the agent; ANYAGENTD_EVENT_BOUND=N lets more events wait"
    if kind == "HandshakeTimeout":
        return "ANYAGENTD_HANDSHAKE_TIMEOUT=SECONDS gives the agent longer to start"
    if kind in ("ProcessExited", "SpawnFailed", "ProtocolFailed"):
        return "--verbose logs what the engine saw"
    return None


def report(console: Console, err: AnyagentError | NoAnswer) -> int:
    """Print ``err`` for a person (``Kind: message``, then its fields and a hint, indented); returns its exit
    status. Secrets stay out: login environment values are elided."""
    from pydantic_core import to_jsonable_python
    from rich.markup import escape

    if isinstance(err, NoAnswer):
        console.print(f"[bold red]no answer[/]: {escape(str(err))}", soft_wrap=True)
    else:
        console.print(f"[bold red]{err.kind}[/]: {escape(err.message)}", soft_wrap=True, highlight=False)
        for key, value in err.fields.items():
            if value in ("", [], None, {}) or value == err.message:
                continue
            if key == "login":
                for line in _login_lines(value):
                    console.print(f"  login: {line}", markup=False, soft_wrap=True)
            elif key == "stderr":
                tail = str(value).rstrip().splitlines()[-STDERR_TAIL_LINES:]
                console.print("  stderr:", markup=False)
                for line in tail:
                    console.print(f"    {line}", markup=False, soft_wrap=True)
            elif key == "detail" and str(value) in err.message:
                continue
            else:
                shown = value if isinstance(value, str) else json.dumps(to_jsonable_python(value))
                console.print(f"  {key}: {shown}", markup=False, soft_wrap=True)
    advice = hint(err)
    if advice:
        console.print(f"  [dim]hint: {escape(advice)}[/]", soft_wrap=True)
    return exit_code(err)
