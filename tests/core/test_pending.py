"""The toolkit's table of an adapter's open server requests (``anyagentd.adapters.pending``, issue 30): open,
answer once, an unknown id refused, withdraw, cancel-all answering every open request with the adapter's shape."""

from __future__ import annotations

import anyio
import pytest

from anyagentd.adapters.pending import PendingRequests
from anyagentd.errors import InvalidRequest


def test_open_then_answer_once() -> None:
    table: PendingRequests[dict[str, str]] = PendingRequests("Codex")
    item = table.open("7", {"command": "ls"}, kind="command", agent_id=7)
    assert "7" in table and len(table) == 1 and table.get("7") is item and table["7"] is item and list(table) == ["7"]
    assert (item.id, item.agent_id, item.kind, item.data) == ("7", 7, "command", {"command": "ls"})
    answered = table.answer("7", lambda i: {"decision": "accept", "for": i.data["command"]})
    assert answered is item and answered.reply == {"decision": "accept", "for": "ls"} and answered.closed
    assert "7" not in table and len(table) == 0
    with pytest.raises(InvalidRequest, match="Codex has no pending request '7'"):
        table.answer("7")


def test_an_unknown_id_is_refused() -> None:
    table: PendingRequests[None] = PendingRequests("the ACP agent")
    table.open("a", None)
    built = []
    with pytest.raises(InvalidRequest, match="the ACP agent has no pending request 'b'"):
        table.answer("b", built.append)
    assert built == []  # no reply is built for it
    assert "a" in table  # the refusal leaves the open one alone


def test_withdraw_owes_no_reply() -> None:
    table: PendingRequests[None] = PendingRequests()
    item = table.open("r", None)
    assert table.withdraw("r") is item and item.closed and item.reply is None
    assert table.withdraw("r") is None
    with pytest.raises(InvalidRequest):
        table.answer("r")


def test_cancel_all_answers_every_open_request_with_the_adapters_shape_in_order() -> None:
    table: PendingRequests[dict[str, str]] = PendingRequests()
    table.open("q1", {"text": "?"}, kind="question", agent_id=1)
    table.open("p1", {"cmd": "ls"}, kind="permission", agent_id=2)
    table.open("p2", {"cmd": "pwd"}, kind="permission", agent_id=3)
    table.answer("p1")

    def cancel(item):  # type: ignore[no-untyped-def]
        return {"answers": {}} if item.kind == "question" else {"decision": "cancel", "for": item.data["cmd"]}

    cancelled = table.cancel_all(cancel)
    assert [(i.id, i.agent_id, i.reply) for i in cancelled] == [
        ("q1", 1, {"answers": {}}),
        ("p2", 3, {"decision": "cancel", "for": "pwd"}),
    ]
    assert len(table) == 0 and table.cancel_all(cancel) == []
    with pytest.raises(InvalidRequest):
        table.answer("q1")  # a cancelled request cannot be answered afterwards


@pytest.mark.anyio
async def test_a_waiter_gets_the_answer_or_the_cancel_reply() -> None:
    """ACP's shape: the agent's request handler waits for the answer inside its own task."""
    table: PendingRequests[None] = PendingRequests()
    answered = table.open("a", None)
    cancelled = table.open("c", None)
    got: dict[str, object] = {}

    async def wait(item) -> None:  # type: ignore[no-untyped-def]
        got[item.id] = await item.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, answered)
        tg.start_soon(wait, cancelled)
        await anyio.wait_all_tasks_blocked()
        assert got == {}
        table.answer("a", lambda item: "opt-allow")
        table.cancel_all(lambda item: "cancelled")
    assert got == {"a": "opt-allow", "c": "cancelled"}
    assert await answered.wait() == "opt-allow"  # an answered request's wait returns at once
