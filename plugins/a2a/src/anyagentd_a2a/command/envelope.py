"""Recognising a command in a SendMessage and refusing it in order (``docs/commands.md``), before anything runs.

A command is one DataPart of the message whose data is ``{"agentd": {"op": NAME, ...args}}``
(``agentd-command.schema.json``, ``dataPartKey``). It runs only when the extension is *activated* (the
``A2A-Extensions`` request header names :data:`COMMAND_URI`) and *marked* (``message.extensions`` lists it).
:func:`resolve_command` works on the JSON-RPC params exactly as the client sent them (proto3 JSON), so the
checks need no SDK types, and raises :class:`CommandRefusal` for the first rule broken, in this order
(``docs/commands.md#command-refusals``):

1. EXTENSION_NOT_ACTIVATED · 2. EXTENSION_NOT_MARKED · 3. COMMAND_ENVELOPE_AMBIGUOUS · 4. COMMAND_TASK_ID ·
5. CONTENT_TYPE_NOT_SUPPORTED · 6. UNKNOWN_OP · 7. INVALID_COMMAND_ARGS · 8. PERMISSION_DENIED ·
9. INTROSPECTION_DISABLED.

Nothing is run, stored or created by this module: a refusal leaves everything as it was. A refusal that names
its op (UNKNOWN_OP of an op the table holds, INVALID_COMMAND_ARGS, PERMISSION_DENIED, INTROSPECTION_DISABLED)
carries the envelope it refused, so the audit line of an operator op says what was attempted
(:func:`attempted_arguments`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anyagentd.ops import ArgsModel, InvalidOpArguments, Op, OpTable, Principal, permits

from ..structjson import whole_numbers
from .extension import COMMAND_URI, DATA_PART_KEY, RESULT_MEDIA_TYPE

ERROR_DOMAIN = "agentd.dev"

INVALID_PARAMS = -32602
CONTENT_TYPE_NOT_SUPPORTED = -32005
UNSUPPORTED_OPERATION = -32004
PERMISSION_DENIED = -31403
TASK_NOT_FOUND = -32001


@dataclass
class CommandRefusal(Exception):
    """A command refused before it ran: a JSON-RPC error ``code`` with a google.rpc ErrorInfo ``reason`` (domain
    :data:`ERROR_DOMAIN`), a human ``message``, ``violations`` (``[(field, description)]``, sent as a
    google.rpc BadRequest) and the HTTP status the response carries (403 for PERMISSION_DENIED, else 200)."""

    code: int
    reason: str
    message: str
    violations: list[tuple[str, str]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    http_status: int = 200
    envelope: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The command envelope refused, once it was known to be the one (never sent: the audit line's)."""

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object: ``{code, message, data: [ErrorInfo, BadRequest?]}``."""
        data: list[dict[str, Any]] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": ERROR_DOMAIN,
                "metadata": dict(self.metadata),
            }
        ]
        if self.violations:
            data.append(
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": f, "description": d} for f, d in self.violations],
                }
            )
        return {"code": self.code, "message": self.message, "data": data}


@dataclass(frozen=True)
class Command:
    """A command that passed every check: the op instance, its parsed arguments and the raw envelope."""

    op: Op
    args: ArgsModel
    envelope: dict[str, Any]


def activated(header_values: Iterable[str], served: Iterable[str] = (COMMAND_URI,)) -> list[str]:
    """The extension URIs a request activates: every ``A2A-Extensions`` header value split on commas, stripped,
    kept when it exactly matches one of ``served`` (an unknown URI is not echoed). Order of first mention."""
    known = set(served)
    found: list[str] = []
    for value in header_values:
        for uri in value.split(","):
            uri = uri.strip()
            if uri in known and uri not in found:
                found.append(uri)
    return found


def command_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The message's command envelopes: the data of every DataPart that is an object with the ``agentd`` key."""
    envelopes = []
    for part in message.get("parts") or []:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and DATA_PART_KEY in data:
            envelopes.append(data[DATA_PART_KEY])
    return envelopes


def is_command(params: Mapping[str, Any]) -> bool:
    """Whether a SendMessage's params carry a command part at all (activated or not)."""
    message = params.get("message")
    return isinstance(message, dict) and bool(command_parts(message))


def resolve_command(
    params: Mapping[str, Any],
    *,
    activated_uris: Iterable[str],
    table: OpTable,
    principal: Principal | None,
    switches: Mapping[str, bool],
) -> Command | None:
    """The command a SendMessage carries, checked in order (``docs/commands.md``); ``None`` when it carries none (an
    ordinary conversation message). Raises :class:`CommandRefusal` for the first rule broken."""
    message = params.get("message")
    if not isinstance(message, dict):
        return None
    envelopes = command_parts(message)
    if not envelopes:
        return None
    if COMMAND_URI not in set(activated_uris):
        raise CommandRefusal(
            INVALID_PARAMS,
            "EXTENSION_NOT_ACTIVATED",
            f"a command needs the A2A-Extensions header to name {COMMAND_URI}",
        )
    if COMMAND_URI not in (message.get("extensions") or []):
        raise CommandRefusal(
            INVALID_PARAMS, "EXTENSION_NOT_MARKED", f"a command message must list {COMMAND_URI} in message.extensions"
        )
    if len(envelopes) > 1:
        raise CommandRefusal(
            INVALID_PARAMS,
            "COMMAND_ENVELOPE_AMBIGUOUS",
            f"a message carries one command part; this one has {len(envelopes)}",
        )
    if message.get("taskId"):
        raise CommandRefusal(INVALID_PARAMS, "COMMAND_TASK_ID", "a command does not name a taskId")
    modes = (params.get("configuration") or {}).get("acceptedOutputModes")
    if modes and RESULT_MEDIA_TYPE not in modes:
        raise CommandRefusal(
            CONTENT_TYPE_NOT_SUPPORTED,
            "CONTENT_TYPE_NOT_SUPPORTED",
            f"command results are {RESULT_MEDIA_TYPE}, which acceptedOutputModes excludes",
        )
    envelope = envelopes[0]
    try:
        return _checked(envelope, table, principal, switches)
    except CommandRefusal as refusal:
        refusal.envelope = envelope if isinstance(envelope, dict) else None
        raise


def raw_arguments(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """An envelope's arguments as sent: every key but ``op``, whole numbers as integers (a client on the a2a-sdk
    sends the envelope through a protobuf Struct: 5 arrives as 5.0, :mod:`.structjson`)."""
    return whole_numbers({k: v for k, v in envelope.items() if k != "op"})


def dumped(args: ArgsModel) -> dict[str, Any]:
    """Parsed arguments as the audit line shows them (JSON, by alias, unset optionals left out)."""
    return args.model_dump(mode="json", by_alias=True, exclude_none=True)


def attempted_arguments(op: Op, envelope: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments a command of ``op`` was sent with, whatever became of it: parsed (:func:`dumped`, as the line
    of a command that ran shows them) when they parse, else as sent (:func:`raw_arguments`); ``{}`` without an
    envelope. Pure: nothing runs."""
    if envelope is None:
        return {}
    raw = raw_arguments(envelope)
    try:
        return dumped(op.parse_args(raw))
    except InvalidOpArguments:
        return raw


def _checked(envelope: Any, table: OpTable, principal: Principal | None, switches: Mapping[str, bool]) -> Command:
    """Rules 6 to 9 on the message's one envelope."""
    op = _served_op(envelope, table, principal, switches)
    try:
        args = op.parse_args(raw_arguments(envelope))
    except InvalidOpArguments as err:
        raise CommandRefusal(
            INVALID_PARAMS,
            "INVALID_COMMAND_ARGS",
            f"invalid arguments for {op.name}",
            violations=err.violations,
            metadata={"op": op.name},
        ) from None
    if not permits(op, principal):
        raise CommandRefusal(
            PERMISSION_DENIED,
            "PERMISSION_DENIED",
            f"not permitted to run {op.name}",
            metadata={"op": op.name},
            http_status=403,
        )
    if not op.served(switches):  # only introspection ops get this far with their switch closed
        raise CommandRefusal(
            UNSUPPORTED_OPERATION,
            "INTROSPECTION_DISABLED",
            f"{op.name} needs introspection, which is disabled",
            metadata={"op": op.name},
        )
    return Command(op, args, envelope)


def _served_op(envelope: Any, table: OpTable, principal: Principal | None, switches: Mapping[str, bool]) -> Op:
    name = envelope.get("op") if isinstance(envelope, dict) else None
    if not isinstance(name, str) or not name:
        raise CommandRefusal(
            INVALID_PARAMS,
            "UNKNOWN_OP",
            "a command envelope needs a non-empty op",
            violations=[("op", "required: a non-empty string")],
        )
    op = table.get(name)
    unknown = CommandRefusal(INVALID_PARAMS, "UNKNOWN_OP", f"no op {name!r} is served here", metadata={"op": name})
    if op is None:
        raise unknown
    if op.reserved and not (principal is not None and principal.is_operator):
        raise unknown  # reserved ops do not exist for anyone but the operator
    if not op.served(switches) and not op.introspection:
        raise unknown
    return op


__all__ = [
    "COMMAND_URI",
    "Command",
    "CommandRefusal",
    "DATA_PART_KEY",
    "activated",
    "attempted_arguments",
    "command_parts",
    "dumped",
    "is_command",
    "resolve_command",
]
