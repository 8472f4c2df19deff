"""The ownership rule of ``docs/commands.md#ownership``, beside :func:`anyagentd.ops.permits`:
:func:`anyagentd.ops.owns` (whose run, subagent, conversation or task a principal may name) and
:func:`anyagentd.ops.owner_scope` (the same rule as a store's filter). Pure, no I/O."""

from __future__ import annotations

import itertools

import pytest

from anyagentd.ops import OPERATOR, Principal, owner_scope, owns

ALICE = Principal("user:alice", "user", grants=("*",))
BOB = Principal("user:bob", "user")
BOT = Principal("agent:bot", "agent")
OWNERS = ["operator", "user:alice", "user:bob", "agent:bot", None]


@pytest.mark.parametrize("owner", OWNERS)
def test_the_operator_owns_everything(owner: str | None) -> None:
    assert owns(OPERATOR, owner)


def test_a_principal_owns_what_its_id_owns_and_nothing_else() -> None:
    assert owns(ALICE, "user:alice") and owns(BOT, "agent:bot")
    assert not owns(ALICE, "user:bob") and not owns(BOB, "user:alice") and not owns(BOT, "user:alice")
    assert not owns(ALICE, "operator")  # a grant of "*" reaches ops, not another principal's things


def test_no_owner_recorded_is_the_operators() -> None:
    assert not owns(ALICE, None) and not owns(ALICE, "")
    assert owns(OPERATOR, None, strictly=True) and owns(OPERATOR, "", strictly=True)


@pytest.mark.parametrize("owner", OWNERS)
def test_anonymous_owns_nothing(owner: str | None) -> None:
    assert not owns(None, owner) and not owns(None, owner, strictly=True)


def test_strictly_is_by_id_alone_the_operator_included() -> None:
    assert owns(OPERATOR, "operator", strictly=True)
    assert not owns(OPERATOR, "user:alice", strictly=True)
    assert owns(ALICE, "user:alice", strictly=True) and not owns(ALICE, "user:bob", strictly=True)


def test_the_scope_is_the_same_rule_as_a_filter() -> None:
    assert owner_scope(OPERATOR) is None
    assert owner_scope(ALICE) == "user:alice" and owner_scope(BOT) == "agent:bot"
    for principal, owner in itertools.product([OPERATOR, ALICE, BOB, BOT], OWNERS):
        scope = owner_scope(principal)
        assert owns(principal, owner) == (scope is None or scope == (owner or OPERATOR.id)), (principal.id, owner)
