"""The wire's commands are one table, ``anyagentd.wire.COMMANDS`` (name, frame model, handler), and it is the
schema's list (issue 30: the names were kept four times by hand — the ``Frame`` union, a ``COMMANDS`` tuple, a
name → class dict and an ``isinstance`` chain in the dispatch).

Like the op table against the command schema (``anyagentd.ops.registry.seed_mismatches``), the table is held to
``anyagent-wire.schema.json``'s ``Frame``: the same commands in the same order, and each frame model's fields
(beside ``id``) the schema's properties, its required fields the schema's required ones. This is a test rather
than a start-up check: reading the schema would cost ``anyagentd serve`` its start (``bench/bench_wire.py``)."""

from __future__ import annotations

import pytest
from wire_schema import DEFINITIONS

from anyagentd import wire
from anyagentd.ops.registry import schema_properties

SCHEMA_FRAMES = {branch["properties"]["cmd"]["const"]: branch for branch in DEFINITIONS["Frame"]["oneOf"]}


def test_the_table_is_the_schemas_commands_in_its_order() -> None:
    assert list(wire.COMMANDS) == list(SCHEMA_FRAMES)
    assert all(name == command.name for name, command in wire.COMMANDS.items())


@pytest.mark.parametrize("name", list(SCHEMA_FRAMES))
def test_each_frame_model_has_the_schemas_fields(name: str) -> None:
    branch = SCHEMA_FRAMES[name]
    props, required = schema_properties(wire.COMMANDS[name].frame)
    assert props - {"id"} == set(branch["properties"])
    assert required - {"id"} == set(branch["required"])
    assert "id" in required and DEFINITIONS["Frame"]["required"] == ["id"]


def test_every_handler_of_the_server_is_in_the_table() -> None:
    handlers = {value for key, value in vars(wire.WireServer).items() if key.startswith("cmd_")}
    assert handlers == {command.handler for command in wire.COMMANDS.values()}
    assert len(handlers) == len(wire.COMMANDS)  # one handler each


def test_the_frame_union_is_the_tables_frames() -> None:
    mapping = wire.FRAME.json_schema()["discriminator"]["mapping"]
    assert mapping == {name: f"#/$defs/{command.frame.__name__}" for name, command in wire.COMMANDS.items()}


def test_a_frame_whose_cmd_is_not_its_name_is_refused_at_import() -> None:
    with pytest.raises(TypeError, match="'info'"):
        wire._table(wire.WireCommand("info", wire.Close, wire.WireServer.cmd_info))
    with pytest.raises(TypeError, match="listed twice"):
        wire._table(*[wire.WireCommand("info", wire.Info, wire.WireServer.cmd_info)] * 2)
