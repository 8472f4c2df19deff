"""The op plugin interface: one command-extension op, what it needs from the face that serves it, what it returns.

An op is one ``{"agentd": {"op": NAME, ...args}}`` command of the A2A command extension
(``schema/agentd-command.schema.json``: ``$defs/envelopes/<op>`` its envelope, ``$defs/ops/<op>`` and
``$defs/reserved/<op>`` its reply kind, arguments and result). Op families are plugins: a module registers its
:class:`Op` subclasses through the ``register_ops`` hook, built-ins exactly like third-party ones. Core knows no
HTTP and no JSON-RPC: the face (``anyagentd-a2a``) parses the envelope, checks the order of refusals, builds an
:class:`OpContext` and calls :meth:`Op.run`; it maps the :class:`OpError` kinds below onto its own error codes.

- :class:`Principal` is who asks (``operator``, ``user:<id>``, ``agent:<id>``) with their grants.
- :class:`OpContext` is what an op gets besides its arguments: the principal, the runtime, the face's object.
- :class:`Op` declares name, reply kind, reserved flag, permission floor, configuration switch, the argument
  and result models, and ``run``. Authorization itself is :func:`anyagentd.ops.registry.permits` (pure).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from ..runtime import Runtime

Reply = Literal["message", "task"]
"""How an op answers (the schema's ``reply``): a Message carrying the result, or a Task with a result artifact."""

Role = Literal["operator", "user", "agent"]
"""Roles of ``docs/commands.md#principals-and-roles``; anonymous callers name nobody and reach no op."""

Floor = Literal["named", "user_or_agent", "user", "grant", "operator"]
"""Who may call an op (``docs/commands.md#ops-and-floors``), from widest to narrowest:

- ``named``: any named principal (operator, user, agent);
- ``user_or_agent``: role user or agent, or anyone holding a matching grant;
- ``user``: role user, or a matching grant;
- ``grant``: only a matching grant;
- ``operator``: the operator alone; grants never reach these (checked before grants).

The operator passes every floor.
"""


class ArgsModel(BaseModel):
    """Base for an op's argument model: unknown arguments are refused (never ignored) and values are strict
    (``"1"`` is not an integer), as ``docs/commands.md#arguments`` asks for INVALID_COMMAND_ARGS."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)  # built on first use


class NoArgs(ArgsModel):
    """The arguments of an op that takes none (``status``, ``config``, …)."""


class ResultModel(BaseModel):
    """Base for an op's result model; ``model_dump(mode="json", exclude_none=...)`` is what the face sends."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use

    def reply_metadata(self) -> dict[str, Any] | None:
        """What the face sends beside the result, for what the seed schema's result has no field for (the A2A face:
        the reply message's ``metadata``); ``None``, the default, sends nothing."""
        return None


# ------------------------------------------------------------------------------------------------ errors


class OpError(Exception):
    """Base of what an op raises to refuse or fail; ``reason`` is the google.rpc ErrorInfo reason the face puts
    in the error's ``data``, ``message`` the human text. Nothing an op refused may have changed anything."""

    reason: ClassVar[str] = "OP_FAILED"

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


class TargetNotFound(OpError):
    """The run, subagent or conversation named does not exist *for this caller*: the same answer whether it
    does not exist or belongs to someone else (``docs/commands.md#ownership``). The A2A face answers -32001."""

    reason = "NOT_FOUND"


class InvalidOpArguments(OpError):
    """Arguments that do not fit the op: ``violations`` is ``[(field, description), ...]``, one per miss
    (google.rpc BadRequest fieldViolations). The A2A face answers -32602 INVALID_COMMAND_ARGS."""

    reason = "INVALID_COMMAND_ARGS"

    def __init__(self, message: str, violations: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.violations = violations


class InvalidOpState(OpError):
    """A well-formed request the target's state refuses (pausing a terminal run, sending to a subagent that
    is not warm). The A2A face answers -32602 with this reason."""

    reason = "INVALID_STATE"


class OpNotPermitted(OpError):
    """The caller may not do this (an op checking more than its floor, e.g. ``workflow.run`` of a workflow the
    caller may not run, whether or not it exists). The A2A face answers -31403 PERMISSION_DENIED."""

    reason = "PERMISSION_DENIED"


# ------------------------------------------------------------------------------------------------ progress

ProgressState = Literal["working", "input_required", "completed", "failed", "cancelled", "rejected"]


@dataclass(frozen=True)
class Progress:
    """One step of a long-running ``task`` op (``workflow.run``): the face shows ``state`` as the task's state
    (``working``/``input_required`` keep it open; the other four end it), ``text`` as a status message for a
    person, ``data`` as a DataPart for a program, and ``result`` (with ``completed``) as the result artifact."""

    state: ProgressState
    text: str | None = None
    data: dict[str, Any] | None = None
    result: BaseModel | None = None

    @property
    def terminal(self) -> bool:
        return self.state in ("completed", "failed", "cancelled", "rejected")


# ------------------------------------------------------------------------------------------------ context


@dataclass(frozen=True)
class Principal:
    """Who runs an op: ``id`` is ``operator`` or ``<role>:<name>`` (``user:alice``), ``grants`` the configured
    patterns (``*``, ``workflow.*``, ``workflow.run:<glob>``)."""

    id: str
    role: Role
    grants: tuple[str, ...] = ()

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"


OPERATOR = Principal("operator", "operator")


@dataclass(frozen=True)
class OpContext:
    """What an op's :meth:`Op.run` gets besides its arguments.

    ``principal`` asks; ``runtime`` is the engine's :class:`~anyagentd.runtime.Runtime` (sessions, their
    projections, admission); ``face`` is the serving face's own object (the A2A daemon: its configuration,
    stores, log ring), typed by the face; ``task_id`` is the task a ``task`` op completes (``None`` for a
    ``message`` op); ``switches`` are the configuration switches in force (see :attr:`Op.switch`).
    """

    principal: Principal
    runtime: Runtime | None
    face: Any = (
        None  # `Any`: the face's own type, which core does not know (an op writes `face: MyFace = context.face`)
    )
    task_id: str | None = None
    switches: Mapping[str, bool] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ the op


class Op(ABC):
    """One command-extension op, registered through ``register_ops``.

    Class attributes:

    - ``name``: the op (``status``, ``admin.set``); unique across every installed plugin.
    - ``reply``: ``message`` or ``task`` (the schema's ``reply``).
    - ``reserved``: a reserved op (``_instance.*``): operator only, never listed on a card.
    - ``floor``: who may call it (:data:`Floor`).
    - ``switch``: the configuration switch that must be on for the op to be served (``introspection``,
      ``device_grant``, ``tcp_listener``), or ``None`` for always.
    - ``introspection``: a closed switch answers INTROSPECTION_DISABLED instead of UNKNOWN_OP.
    - ``args``: the :class:`ArgsModel` its arguments parse into (everything but ``op``).
    - ``result``: the :class:`ResultModel` of its result (a ``pydantic.RootModel`` where the schema allows any
      JSON, e.g. a run's output), or ``None`` for an op whose result schema is ``false`` (a task op completing
      without an artifact).
    - ``description``: one line for cards and ``anyagentd plugins``.

    An op in the seed schema must match it (reply kind, reserved flag, argument and result property names);
    :class:`~anyagentd.ops.registry.OpTable` checks that at start-up. The face makes one instance per op
    class when it starts; :meth:`run` may keep no per-request state on it.
    """

    name: ClassVar[str]
    reply: ClassVar[Reply]
    floor: ClassVar[Floor]
    args: ClassVar[type[ArgsModel]] = NoArgs
    result: ClassVar[type[BaseModel] | None] = None
    reserved: ClassVar[bool] = False
    switch: ClassVar[str | None] = None
    introspection: ClassVar[bool] = False
    description: ClassVar[str] = ""

    def served(self, switches: Mapping[str, bool]) -> bool:
        """Whether the op is served under ``switches`` (the face's configuration switches by name). Default:
        always when :attr:`switch` is ``None``, else when that switch is on."""
        return self.switch is None or bool(switches.get(self.switch, False))

    def parse_args(self, raw: Mapping[str, Any]) -> ArgsModel:
        """The envelope's arguments (``op`` removed) as :attr:`args`. Raises :class:`InvalidOpArguments` with one
        violation per miss: unknown arguments, missing ones, wrong types (strict: no coercion)."""
        try:
            return self.args.model_validate(dict(raw))
        except ValidationError as err:
            violations = [(".".join(str(p) for p in e["loc"]) or "<args>", _describe(e)) for e in err.errors()]
            raise InvalidOpArguments(f"invalid arguments for {self.name}", violations) from None

    @abstractmethod
    async def run(self, context: OpContext, args: Any) -> BaseModel | None | AsyncIterator[Progress]:
        # `args: Any`: each op takes its own :attr:`args` model (an override typed `args: MyArgs`, which a base typed
        # `ArgsModel` would make an unsound override to checkers).
        """Do the op for ``context.principal`` and return its result (an instance of :attr:`result`, or
        ``None`` when :attr:`result` is ``None``). A long-running ``task`` op returns an async iterator of
        :class:`Progress` instead, ending with a terminal one; the face keeps the task open until then. Raises
        an :class:`OpError` to refuse or fail; a refusal must leave everything as it was."""


def _describe(error: ErrorDetails) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown argument"
    if kind == "missing":
        return "required"
    return str(error.get("msg", "invalid"))


__all__ = [
    "ArgsModel",
    "Floor",
    "InvalidOpArguments",
    "InvalidOpState",
    "NoArgs",
    "OPERATOR",
    "Op",
    "OpContext",
    "OpError",
    "OpNotPermitted",
    "Principal",
    "Progress",
    "ProgressState",
    "Reply",
    "ResultModel",
    "Role",
    "TargetNotFound",
]
