"""The op registry (``register_ops``, :mod:`anyagentd.ops`): duplicate refusal, the seed-schema check, strict
argument parsing, the authorization rule of ``docs/commands.md#authorization``, card listings, and ``anyagentd plugins``
naming the ops of an installed third-party op distribution (tests/plugins/acme_ops)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from typing import Annotated, Any

import anyio
import pytest
from pydantic import AliasChoices, AliasPath, ConfigDict, Field, RootModel
from pydantic.json_schema import SkipJsonSchema
from wire_client import child_env

from anyagentd.errors import InvalidConfiguration
from anyagentd.hookspecs import hookimpl
from anyagentd.ops import (
    OPERATOR,
    ArgsModel,
    InvalidOpArguments,
    NoArgs,
    Op,
    OpContext,
    OpTable,
    Principal,
    ResultModel,
    command_schema,
    grant_matches,
    permits,
    seed_mismatches,
)
from anyagentd.ops.registry import schema_properties
from anyagentd.plugins import Plugins

pytestmark = pytest.mark.timeout(60)


class PlanArgs(ArgsModel):
    id: Annotated[str, Field(min_length=1)] | None = None


class PlanResult(ResultModel):
    conversation: str
    plan: dict[str, Any] | None
    progress: str | None


class PlanGet(Op):
    name = "plan.get"
    reply = "message"
    floor = "user"
    args = PlanArgs
    result = PlanResult

    async def run(self, context: OpContext, args: PlanArgs) -> PlanResult:
        return PlanResult(conversation=args.id or "root", plan=None, progress=None)


class Drain(Op):
    name = "admin.drain"
    reply = "task"
    floor = "operator"

    class Args(ArgsModel):
        reason: str | None = None

    class Result(ResultModel):
        ok: bool
        state: str
        reason: str | None

    args, result = Args, Result

    async def run(self, context: OpContext, args: Any) -> Any:
        return self.Result(ok=True, state="draining", reason=args.reason)


class InstanceResult(Op):
    name = "_instance.result"
    reply = "task"
    floor = "operator"
    reserved = True

    class Args(ArgsModel):
        handle: str
        status: Any = None
        output: Any = None

    args = Args

    async def run(self, context: OpContext, args: Any) -> None:
        return None


class Trace(Op):
    name = "acme.trace"
    reply = "message"
    floor = "operator"
    switch = "introspection"
    introspection = True

    async def run(self, context: OpContext, args: Any) -> None:  # pragma: no cover - never run here
        return None


def _plugin(*ops: type[Op]) -> types.SimpleNamespace:
    def register_ops(register: Any) -> None:
        for op in ops:
            register(op)

    return types.SimpleNamespace(register_ops=hookimpl(register_ops))


# ------------------------------------------------------------------------------------------------ registry


def test_ops_are_collected_by_name_with_their_plugin() -> None:
    plugins = Plugins(load_entry_points=False)
    plugins.register(_plugin(PlanGet), name="plans")
    plugins.register(_plugin(Drain), name="admin")
    assert plugins.ops() == {"plan.get": PlanGet, "admin.drain": Drain}
    assert plugins.op_origins() == {"plan.get": "plans", "admin.drain": "admin"}
    table = plugins.op_table()
    assert isinstance(table["plan.get"], PlanGet) and set(table) == {"plan.get", "admin.drain"}


def test_duplicate_op_names_are_refused_naming_both_plugins() -> None:
    class OtherPlanGet(PlanGet):
        pass

    plugins = Plugins(load_entry_points=False)
    plugins.register(_plugin(PlanGet), name="first")
    plugins.register(_plugin(OtherPlanGet), name="second")
    with pytest.raises(InvalidConfiguration, match=r"'plan.get' is registered by both 'first' and 'second'"):
        plugins.ops()


def test_an_op_without_a_name_is_refused() -> None:
    class Nameless(Op):
        reply = "message"
        floor = "named"

        async def run(self, context: OpContext, args: Any) -> None:
            return None

    plugins = Plugins(load_entry_points=False)
    plugins.register(_plugin(Nameless), name="broken")
    with pytest.raises(InvalidConfiguration, match="has no name"):
        plugins.ops()


def test_seed_ops_must_match_the_schema() -> None:
    assert seed_mismatches(PlanGet) == []
    assert seed_mismatches(Drain) == []
    assert seed_mismatches(InstanceResult) == []

    class WrongReply(PlanGet):
        reply = "task"

    class WrongArgs(PlanGet):
        class Args(ArgsModel):
            conversation: str

        args = Args

    class MissingResult(PlanGet):
        result = None

    class NotReserved(InstanceResult):
        reserved = False

    assert any("reply is 'task'" in p for p in seed_mismatches(WrongReply))
    problems = seed_mismatches(WrongArgs)
    assert any("extra ['conversation']" in p and "missing ['id']" in p for p in problems), problems
    assert any("required arguments" in p for p in problems)
    assert any("must declare its result" in p for p in seed_mismatches(MissingResult))
    assert any("reserved is False" in p for p in seed_mismatches(NotReserved))
    with pytest.raises(InvalidConfiguration, match=r"op 'plan.get' \(plugin 'x'\) does not match"):
        OpTable({"plan.get": WrongReply}, {"plan.get": "x"})


def _from_schema(model: Any) -> tuple[set[str], set[str]]:
    schema = model.model_json_schema(by_alias=True)
    return set(schema.get("properties", {})), set(schema.get("required", []))


def test_the_seed_check_reads_the_properties_the_json_schema_lists() -> None:
    """The check reads a model's fields instead of building its JSON schema (issue 17): for every installed op's
    arguments and result, and for aliases, defaults and root models, both give the same names."""

    class Aliased(ArgsModel):
        run_id: str = Field(alias="runId")
        checked: str = Field(validation_alias="checkedBy")
        limit: int = 10
        tags: list[str] = Field(default_factory=list)
        maybe: str | None

    class Whole(RootModel[dict[str, Any]]):
        pass

    class Choices(ArgsModel):  # the schema names the first choice
        conversation_id: str | None = Field(None, validation_alias=AliasChoices("id", "conversation"))
        path: int = Field(0, validation_alias=AliasPath("deep", 0))

    class Skipped(ArgsModel):  # the schema leaves the field out
        hidden: SkipJsonSchema[int] = 1
        shown: str

    class Serialized(ArgsModel):  # the schema is the serialization one: its aliases
        model_config = ConfigDict(json_schema_mode_override="serialization")
        run_id: str = Field(validation_alias="in", serialization_alias="out")

    class Extra(ArgsModel):
        model_config = ConfigDict(json_schema_extra=lambda schema: schema["properties"].pop("dropped"))
        dropped: int = 0
        kept: int = 0

    models = [Aliased, Whole, Choices, Skipped, Serialized, Extra, PlanArgs, PlanResult, NoArgs]
    for op in Plugins().ops().values():
        models += [op.args] + ([op.result] if op.result is not None else [])
    assert len(models) > 20  # the installed ops were found
    for model in models:
        assert schema_properties(model) == _from_schema(model), model
    assert schema_properties(Aliased) == (
        {"runId", "checkedBy", "limit", "tags", "maybe"},
        {"runId", "checkedBy", "maybe"},
    )
    assert schema_properties(Choices)[0] == {"id", "path"}  # AliasPath: the schema keeps the field name
    assert schema_properties(Skipped) == ({"shown"}, {"shown"})
    assert schema_properties(Serialized)[0] == {"out"} and schema_properties(Extra)[0] == {"kept"}


def test_an_op_whose_arguments_take_alias_choices_still_matches_the_seed() -> None:
    # The seed's plan.get takes "id"; an op reading it through AliasChoices matched before the fields were read.
    class ChoiceArgs(ArgsModel):
        conversation_id: Annotated[str, Field(min_length=1)] | None = Field(
            None, validation_alias=AliasChoices("id", "conversation")
        )

    class AltPlanGet(PlanGet):
        args = ChoiceArgs

    assert seed_mismatches(AltPlanGet) == []
    assert "plan.get" in OpTable({"plan.get": AltPlanGet}, {"plan.get": "alt"})


def test_a_result_of_any_shape_is_a_root_model() -> None:
    class RunArgs(ArgsModel):
        workflow: str
        inputs: dict[str, Any] | None = None

    class RunOutput(RootModel[Any]):
        pass

    class WorkflowRun(Op):
        name = "workflow.run"
        reply = "task"
        floor = "user_or_agent"
        args = RunArgs
        result = RunOutput

        async def run(self, context: OpContext, args: Any) -> None:
            return None

    class BadRun(WorkflowRun):
        args = NoArgs

    assert seed_mismatches(WorkflowRun) == []
    assert any("missing ['workflow']" in p for p in seed_mismatches(BadRun))


def test_third_party_ops_bring_their_own_schema() -> None:
    class Custom(Op):
        name = "acme.custom"
        reply = "message"
        floor = "named"

        async def run(self, context: OpContext, args: Any) -> None:
            return None

    assert seed_mismatches(Custom) == []


def test_arguments_are_strict_and_unknown_ones_refused() -> None:
    op = PlanGet()
    assert op.parse_args({"id": "c1"}) == PlanArgs(id="c1")
    assert op.parse_args({}) == PlanArgs()
    with pytest.raises(InvalidOpArguments) as caught:
        op.parse_args({"id": 7, "color": "red"})
    fields = dict(caught.value.violations)
    assert set(fields) == {"id", "color"}
    assert fields["color"] == "unknown argument"
    with pytest.raises(InvalidOpArguments) as missing:
        InstanceResult().parse_args({})
    assert missing.value.violations == [("handle", "required")]


def test_run_returns_the_result_model() -> None:
    context = OpContext(principal=Principal("user:alice", "user"), runtime=None)
    result = anyio.run(PlanGet().run, context, PlanArgs(id="c9"))
    assert result == PlanResult(conversation="c9", plan=None, progress=None)


# ------------------------------------------------------------------------------------------------ authorization


ALICE_ALL = Principal("user:alice", "user", ("*",))
BOT = Principal("agent:bot", "agent")
NOBODY = Principal("user:bob", "user")


def test_operator_floor_is_decided_before_grants() -> None:
    assert permits(Drain, OPERATOR)
    assert not permits(Drain, ALICE_ALL), "a user with every grant reaches no operator op"
    assert not permits(InstanceResult, ALICE_ALL), "reserved ops are operator only"
    assert not permits(PlanGet, None), "anonymous runs nothing"


def test_floors_and_grants() -> None:
    assert permits(PlanGet, NOBODY)  # floor user: the role suffices
    assert not permits(PlanGet, BOT)  # an agent needs a grant
    assert permits(PlanGet, Principal("agent:bot", "agent", ("plan.*",)))
    assert permits(PlanGet, Principal("agent:bot", "agent", ("plan.get",)))
    assert not permits(PlanGet, Principal("agent:bot", "agent", ("workflow.*",)))


def test_target_scoped_grants() -> None:
    assert grant_matches("workflow.run:fix-*", "workflow.run", "fix-and-review")
    assert not grant_matches("workflow.run:fix-*", "workflow.run", "deploy")
    assert grant_matches("workflow.run:fix-*", "workflow.run")  # the floor check, before the target is known
    assert not grant_matches("workflow.run:fix-*", "workflow.status")
    assert grant_matches("workflow.*", "workflow.signal", "any")
    assert grant_matches("*", "status")


def test_cards_list_served_unreserved_ops() -> None:
    table = OpTable(
        {"plan.get": PlanGet, "admin.drain": Drain, "_instance.result": InstanceResult, "acme.trace": Trace}
    )
    assert table.listed({}) == [("admin.drain", "task"), ("plan.get", "message")]
    assert table.listed({"introspection": True}) == [
        ("acme.trace", "message"),
        ("admin.drain", "task"),
        ("plan.get", "message"),
    ]
    assert table.listed({"introspection": True}, NOBODY) == [("plan.get", "message")]
    assert ("_instance.result", "task") not in table.listed({}, OPERATOR)


def test_the_vendored_schema_is_the_seed() -> None:
    schema = command_schema()
    assert schema["$id"] == "https://agentd.dev/a2a/ext/command/schema.json"
    assert len(schema["$defs"]["envelopes"]["$defs"]) == 26  # 24 ops and 2 reserved


# ------------------------------------------------------------------------------------------------ installed


def test_plugins_command_lists_a_third_party_op_family() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=child_env(None),
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["acme_ops"]["ops"] == ["acme.echo", "acme.touch"]
    assert rows["acme_ops"]["distribution"] == "anyagentd-acme-ops"
    assert rows["mock"]["ops"] == []
    human = subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", "plugins"],
        capture_output=True,
        text=True,
        env={**child_env(None), "COLUMNS": "200"},
        timeout=30,
    )
    assert "plugin acme_ops serves ops: acme.echo, acme.touch" in human.stderr


def test_the_installed_op_table_builds() -> None:
    table = Plugins().op_table()
    assert {"acme.echo", "acme.touch"} <= set(table)
    echo = table["acme.echo"]
    context = OpContext(principal=BOT, runtime=None)
    result = anyio.run(echo.run, context, echo.parse_args({"text": "hi", "times": 2}))
    assert result.model_dump() == {"text": "hi hi", "principal": "agent:bot"}


def test_hook_specs_are_typed_without_any() -> None:
    import inspect

    from anyagentd import hookspecs

    specs = [obj for obj in vars(hookspecs).values() if callable(obj) and hasattr(obj, "anyagentd_spec")]
    assert {spec.__name__ for spec in specs} >= {"register_ops", "register_adapters", "session_opened"}
    assert not hasattr(hookspecs, "register_commands"), "the untyped register_commands hook is gone"
    for spec in specs:
        for name, param in inspect.signature(spec).parameters.items():
            annotation = str(param.annotation)
            assert annotation != str(inspect.Parameter.empty), f"{spec.__name__}({name}) is not annotated"
            assert "Any" not in annotation, f"{spec.__name__}({name}: {annotation}) uses Any"
