"""Recognising commands and refusing them in the reference's order (anyagentd_a2a.command.envelope), on the JSON
params exactly as a client sends them. The end-to-end refusals over HTTP are in test_command_a2a.py."""

from __future__ import annotations

from typing import Any

import pytest

from anyagentd.ops import OPERATOR, OpTable, Principal
from anyagentd_a2a.command.envelope import (
    COMMAND_URI,
    CommandRefusal,
    activated,
    is_command,
    resolve_command,
)
from anyagentd_a2a.ops import admin, inspect, status

TABLE = OpTable(
    {
        "status": status.Status,
        "plan.get": inspect.PlanGet,
        "conversation.get": inspect.ConversationGet,
        "debug.events": inspect.DebugEvents,
        "admin.pause": admin.Pause,
    }
)
ALICE = Principal("user:alice", "user", ("*",))


def params(
    *envelopes: dict[str, Any],
    marked: bool = True,
    task_id: str | None = None,
    modes: list[str] | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"data": {"agentd": e}, "mediaType": "application/json"} for e in envelopes]
    if text is not None:
        parts.append({"text": text})
    message: dict[str, Any] = {"messageId": "m1", "role": "ROLE_USER", "parts": parts}
    if marked:
        message["extensions"] = [COMMAND_URI]
    if task_id:
        message["taskId"] = task_id
    out: dict[str, Any] = {"message": message}
    if modes is not None:
        out["configuration"] = {"acceptedOutputModes": modes}
    return out


def refuse(
    p: dict[str, Any],
    *,
    uris: tuple[str, ...] = (COMMAND_URI,),
    principal: Principal | None = ALICE,
    switches: dict[str, bool] | None = None,
) -> CommandRefusal:
    with pytest.raises(CommandRefusal) as caught:
        resolve_command(p, activated_uris=list(uris), table=TABLE, principal=principal, switches=switches or {})
    return caught.value


def test_activation_is_an_exact_comma_split_match() -> None:
    assert activated([f" {COMMAND_URI} , https://other.example/x"]) == [COMMAND_URI]
    assert activated([COMMAND_URI + "/v2", "https://agentd.dev/a2a/ext/command "]) == [COMMAND_URI]
    assert activated(["https://agentd.dev/a2a/ext/COMMAND"]) == []
    assert activated([]) == []


def test_an_ordinary_message_is_not_a_command() -> None:
    plain = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}, {"data": {"x": 1}}]}}
    assert not is_command(plain)
    assert resolve_command(plain, activated_uris=[], table=TABLE, principal=ALICE, switches={}) is None


def test_refusals_come_in_the_reference_order() -> None:
    # Each case breaks every later rule too, so only the order decides which reason comes back.
    worst = params({"op": "debug.events", "bogus": 1}, {"op": ""}, marked=False, task_id="t1", modes=["text/plain"])
    assert refuse(worst, uris=[]).reason == "EXTENSION_NOT_ACTIVATED"
    assert refuse(worst).reason == "EXTENSION_NOT_MARKED"
    two = params({"op": "debug.events", "bogus": 1}, {"op": ""}, task_id="t1", modes=["text/plain"])
    assert refuse(two).reason == "COMMAND_ENVELOPE_AMBIGUOUS"
    one = params({"op": "debug.events", "bogus": 1}, task_id="t1", modes=["text/plain"])
    assert refuse(one).reason == "COMMAND_TASK_ID"
    assert (
        refuse(params({"op": "debug.events", "bogus": 1}, modes=["text/plain"])).reason == "CONTENT_TYPE_NOT_SUPPORTED"
    )
    assert refuse(params({"op": "nope"})).reason == "UNKNOWN_OP"
    bad_args = refuse(params({"op": "debug.events", "bogus": 1, "limit": "5"}))
    assert bad_args.reason == "INVALID_COMMAND_ARGS" and bad_args.code == -32602
    assert dict(bad_args.violations) == {"bogus": "unknown argument", "limit": "Input should be a valid integer"}
    denied = refuse(params({"op": "debug.events"}))
    assert (denied.reason, denied.code, denied.http_status) == ("PERMISSION_DENIED", -31403, 403)
    closed = refuse(params({"op": "debug.events"}), principal=OPERATOR)
    assert (closed.reason, closed.code) == ("INTROSPECTION_DISABLED", -32004)


def test_the_codes_and_error_data() -> None:
    refusal = refuse(params({"op": "status"}, modes=["text/plain"]))
    assert refusal.code == -32005
    error = refuse(params({"op": "plan.get", "id": 3})).error()
    assert error["code"] == -32602
    info, bad_request = error["data"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" and info["reason"] == "INVALID_COMMAND_ARGS"
    assert bad_request["fieldViolations"] == [{"field": "id", "description": "Input should be a valid string"}]


def test_closed_switch_ops_are_unknown_unless_introspection() -> None:
    assert refuse(params({"op": "conversation.get", "id": "c"}), principal=OPERATOR).reason == "INTROSPECTION_DISABLED"
    served = resolve_command(
        params({"op": "conversation.get", "id": "c"}),
        activated_uris=[COMMAND_URI],
        table=TABLE,
        principal=ALICE,
        switches={"introspection": True},
    )
    assert served is not None and served.op.name == "conversation.get" and served.args.limit == 200


def test_operator_ops_and_accepted_commands() -> None:
    assert refuse(params({"op": "admin.pause"})).reason == "PERMISSION_DENIED"  # a user with "*" too
    command = resolve_command(
        params({"op": "admin.pause", "reason": "lunch"}, modes=["application/json"]),
        activated_uris=[COMMAND_URI],
        table=TABLE,
        principal=OPERATOR,
        switches={},
    )
    assert command is not None and command.args.reason == "lunch"
    assert refuse(params({"op": "status"}), principal=None).reason == "PERMISSION_DENIED"
