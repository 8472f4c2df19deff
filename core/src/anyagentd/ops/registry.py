"""The op table: every installed op resolved once at start-up, checked against the seed schema, dispatched by name.

The face builds one :class:`OpTable` from ``Plugins.ops()`` when it starts; a request looks its op up with a dict
lookup (nothing per request goes through pluggy). :func:`permits` is the authorization rule of
``docs/commands.md#authorization``, pure: operator-floor and reserved ops are decided before any grant is looked at, so a user holding
``["*"]`` reaches none of them. :func:`owns` is its ownership rule (``docs/commands.md#ownership``): whose run,
subagent or conversation a principal may name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..errors import InvalidConfiguration
from .interface import OPERATOR, Op, Principal, Reply

if TYPE_CHECKING:
    from pydantic import BaseModel

SCHEMA_FILE = "agentd-command.schema.json"


@cache
def command_schema() -> dict[str, Any]:
    """The vendored seed schema of the command extension (``anyagentd/schema/agentd-command.schema.json``), as
    decoded JSON."""
    text = (resources.files("anyagentd") / "schema" / SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def grant_matches(grant: str, op: str, target: str | None = None) -> bool:
    """Whether one grant pattern admits ``op`` (on ``target``, e.g. the workflow of ``workflow.run``).

    Patterns: ``*`` (every op a grant can reach), ``workflow.*`` (a family), ``plan.get`` (one op), and
    ``workflow.run:<glob>`` (one op on matching targets). A target-scoped grant admits the op when no target is
    given yet (the floor check before arguments are known); the op then checks its own target with it.
    """
    pattern, _, target_glob = grant.partition(":")
    if not fnmatchcase(op, pattern):
        return False
    return not target_glob or target is None or fnmatchcase(target, target_glob)


def permits(op: Op | type[Op], principal: Principal | None, target: str | None = None) -> bool:
    """Whether ``principal`` may run ``op`` (on ``target``) under the op's floor and the principal's grants.

    The operator may run everything; reserved and operator-floor ops nobody else; ``named`` ops every named
    principal; ``user_or_agent`` / ``user`` ops those roles; otherwise a matching grant decides. ``None``
    (anonymous) may run nothing.
    """
    if principal is None:
        return False
    if principal.is_operator:
        return True
    if op.reserved or op.floor == "operator":
        return False
    if op.floor == "named":
        return True
    if op.floor == "user_or_agent" and principal.role in ("user", "agent"):
        return True
    if op.floor == "user" and principal.role == "user":
        return True
    return any(grant_matches(grant, op.name, target) for grant in principal.grants)


def owns(principal: Principal | None, owner_id: str | None, *, strictly: bool = False) -> bool:
    """Whether ``principal`` owns what the principal ``owner_id`` owns (a run, a subagent, a conversation or a task,
    keyed by its principal's id; ``None``, no owner recorded, is the operator's): the operator owns everything,
    another principal what its own id owns, anonymous (``None``) nothing. ``strictly``: by id alone, the operator
    included — what is the principal's *own* among everything it sees (a bare contextId is the caller's own
    conversation before another principal's).

    The ownership rule of ``docs/commands.md#ownership`` (an op acts only on what its caller owns; the operator on
    any), decided here once beside :func:`permits` — one question ``(principal, what it names) -> bool`` in the
    manner of datasette's ``allowed(actor, action, resource)`` — rather than by each caller. :func:`owner_scope` is
    the same rule as a store's filter.
    """
    if principal is None:
        return False
    if principal.is_operator and not strictly:
        return True
    return principal.id == (owner_id or OPERATOR.id)


def owner_scope(principal: Principal) -> str | None:
    """The owner id whose things ``principal`` sees, as a store or manager filters by it (``principal=``,
    ``owner=``): ``None`` (every owner's) for the operator, its own id for anyone else — :func:`owns` as a filter
    (``owns(principal, x)`` exactly when the scope is ``None`` or ``x``)."""
    return None if principal.is_operator else principal.id


def seed_mismatches(op: type[Op], schema: Mapping[str, Any] | None = None) -> list[str]:
    """How ``op`` differs from its definition in the seed schema (empty when it matches, or when the schema does
    not define it: a third-party op brings its own). Compared: the reply kind and reserved flag
    (``$defs/ops`` / ``$defs/reserved``), the argument property names and required set (from ``args``, or the
    envelope without ``op`` for ops defined only by their envelope), and the result's property names (a result
    of ``false`` means ``result = None``)."""
    defs = (schema or command_schema())["$defs"]
    entry = defs["ops"].get(op.name) or defs["reserved"].get(op.name)
    envelope = defs["envelopes"]["$defs"].get(op.name)
    if entry is None and envelope is None:
        return []
    problems: list[str] = []
    if entry is not None:
        if entry.get("reply") != op.reply:
            problems.append(f"reply is {op.reply!r}, the schema says {entry.get('reply')!r}")
        if (op.name in defs["reserved"]) != op.reserved:
            problems.append(f"reserved is {op.reserved}, the schema says {op.name in defs['reserved']}")
        args = entry.get("args", {})
        expected_props, expected_required = set(args.get("properties", {})), set(args.get("required", []))
    else:
        expected_props = set(envelope.get("properties", {})) - {"op"}
        expected_required = set(envelope.get("required", [])) - {"op"}
    props, required = schema_properties(op.args)
    if props != expected_props:
        problems.append(_diff("arguments", props, expected_props))
    if required != expected_required:
        problems.append(_diff("required arguments", required, expected_required))
    if entry is not None and "result" in entry:
        result = entry["result"]
        if result is False:
            if op.result is not None:
                problems.append("the schema's result is false: the op must have result = None")
        elif op.result is None:
            problems.append("the schema defines a result: the op must declare its result model")
        elif isinstance(result, dict) and "properties" in result:
            got = schema_properties(op.result)[0]
            if got != set(result["properties"]):
                problems.append(_diff("result properties", got, set(result["properties"])))
    return problems


def schema_properties(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    """The property names and the required ones of ``model``'s JSON schema (validation mode, by alias), for a
    pydantic model class.

    A plain model's are read from ``model_fields``: building the schema itself cost the A2A daemon ~25 ms of its
    start for its ops (issue 17, target 4). Anything that makes the schema's names differ from the fields' (a root
    model, an ``AliasChoices``/``AliasPath`` validation alias, a field left out with ``SkipJsonSchema``, a schema
    mode override, a model-level ``json_schema_extra`` or a custom ``__get_pydantic_json_schema__``) sends the model
    to the schema itself."""
    if not _plain(model):
        schema = model.model_json_schema(by_alias=True)
        return set(schema.get("properties", {})), set(schema.get("required", []))
    props: set[str] = set()
    required: set[str] = set()
    for name, field in model.model_fields.items():
        alias = field.validation_alias  # a string or None here (see _plain)
        key = alias if isinstance(alias, str) and alias else field.alias or name
        props.add(key)
        if field.is_required():
            required.add(key)
    return props, required


def _plain(model: type[BaseModel]) -> bool:
    """Whether ``model``'s JSON schema properties are its fields' validation names (see :func:`schema_properties`)."""
    from pydantic import BaseModel, RootModel
    from pydantic.json_schema import SkipJsonSchema

    if issubclass(model, RootModel) or model.model_config.get("json_schema_mode_override") is not None:
        return False
    if model.model_config.get("json_schema_extra") is not None:
        return False
    if getattr(model.__get_pydantic_json_schema__, "__func__", None) is not getattr(
        BaseModel.__get_pydantic_json_schema__, "__func__", None
    ):
        return False
    for field in model.model_fields.values():
        if field.validation_alias is not None and not isinstance(field.validation_alias, str):
            return False
        if any(isinstance(meta, SkipJsonSchema) for meta in field.metadata):
            return False
    return True


def _diff(what: str, got: set[str], expected: set[str]) -> str:
    extra, missing = sorted(got - expected), sorted(expected - got)
    parts = ([f"extra {extra}"] if extra else []) + ([f"missing {missing}"] if missing else [])
    return f"{what}: {', '.join(parts)}"


class OpTable(Mapping[str, Op]):
    """Every installed op by name, one instance each; built once when a face starts.

    Takes ``ops`` (name → class, as ``Plugins.ops()`` returns) and ``origins`` (name → the plugin that
    registered it, for messages and listings). Raises ``InvalidConfiguration`` naming the op and its plugin when
    an op in the seed schema does not match it (:func:`seed_mismatches`).
    """

    def __init__(self, ops: Mapping[str, type[Op]], origins: Mapping[str, str] | None = None) -> None:
        self.origins = dict(origins or {})
        for name, cls in ops.items():
            problems = seed_mismatches(cls)
            if problems:
                where = f" (plugin {self.origins[name]!r})" if name in self.origins else ""
                raise InvalidConfiguration(
                    f"op {name!r}{where} does not match the command schema: {'; '.join(problems)}"
                )
        self._ops: dict[str, Op] = {name: cls() for name, cls in ops.items()}

    def __getitem__(self, name: str) -> Op:
        return self._ops[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def listed(self, switches: Mapping[str, bool], principal: Principal | None = None) -> list[tuple[str, Reply]]:
        """``[(op, reply)]`` for a card: the ops served under ``switches``, reserved ones never; with a
        ``principal`` (the extended card) only those it may run. Sorted by name."""
        return [
            (name, op.reply)
            for name, op in sorted(self._ops.items())
            if not op.reserved and op.served(switches) and (principal is None or permits(op, principal))
        ]


__all__ = ["OpTable", "command_schema", "grant_matches", "permits", "seed_mismatches"]
