"""One daemon, several agents (issue 27): each agent's card and endpoint under ``/agents/{id}/``, the default's at
the root too, ``GET /agents``, a stock a2a-sdk client given only an agent's card URL, and nothing of one agent's
tasks, conversations, pushes or status visible through another's path."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a_helpers import COMMAND_URI, command_message, push_receiver, wait_state

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def script(path: Path, text: str, turns: int = 4) -> str:
    """A mock script file answering ``text`` on each of ``turns`` turns; returns its path."""
    turn = [
        {"Emit": {"TextDelta": {"message_id": "m1", "text": text}}},
        {"Emit": {"MessageEnded": {"message_id": "m1"}}},
        {"End": {"Completed": {"source": "Protocol"}}},
    ]
    path.write_text(json.dumps({"turns": [turn] * turns}))
    return str(path)


def two_agents(tmp_path: Path, extra: str = "", *, a: str = "", b: str = "") -> str:
    """A configuration serving agents ``a`` (answers "I am A") and ``b`` (answers "I am B", the default)."""
    return f"""
[[agents]]
id = "a"
name = "mock"
mock_script = "{script(tmp_path / "a.json", "I am A")}"
description = "Agent A"
{a}

[[agents]]
id = "b"
name = "mock"
mock_script = "{script(tmp_path / "b.json", "I am B")}"
default = true
skills = [{{ id = "review", name = "Review", description = "Reviews code", tags = ["code"] }}]
{b}
{extra}
"""


def op_result(daemon: Any, op: str, agent: str | None = None, token: str | None = None, **args: Any) -> Any:
    """What the op ``op`` sent (as ``token``'s principal: the loopback operator without one) to ``agent``'s path
    (the root: None) answers: a message op's result document, a task op's task."""
    body = daemon.rpc(
        "SendMessage",
        {"message": command_message(op, **args)},
        agent=agent,
        token=token,
        headers={"A2A-Extensions": COMMAND_URI},
    )
    assert body.status_code == 200, body.text
    body = body.json()
    assert "result" in body, body
    if "task" in body["result"]:
        return body["result"]["task"]
    return body["result"]["message"]["parts"][0]["data"]


def answer_of(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def test_the_agents_are_listed_each_with_its_card_and_the_root_serves_the_default(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    listing = httpx.get(daemon.url + "/agents").json()
    assert listing["default"] == "b"
    rows = {r["id"]: r for r in listing["agents"]}
    assert list(rows) == ["a", "b"]
    assert rows["a"] == {
        "id": "a",
        "name": "mock",
        "description": "Agent A",
        "default": False,
        "state": "serving",
        "url": daemon.url + "/agents/a",
        "card": daemon.url + "/agents/a/.well-known/agent-card.json",
    }
    for agent_id, row in rows.items():
        card = httpx.get(row["card"]).json()
        assert card["name"] == f"anyagentd {agent_id}"
        (interface,) = card["supportedInterfaces"]
        assert interface["url"] == daemon.url + f"/agents/{agent_id}"
        assert "tenant" not in interface
    assert httpx.get(rows["b"]["card"]).json()["skills"][0]["id"] == "review"
    root = httpx.get(daemon.url + "/.well-known/agent-card.json").json()
    assert root["name"] == "anyagentd b" and root["supportedInterfaces"][0]["url"] == daemon.url
    # the root and the default's path are one agent: a task made at one is read at the other
    task = daemon.send_text("hi")
    assert answer_of(wait_state(daemon, task["id"], "TASK_STATE_COMPLETED")) == "I am B"
    got = daemon.rpc("GetTask", {"id": task["id"]}, agent="b").json()
    assert got["result"]["id"] == task["id"]


def test_an_unknown_agent_is_a_404_naming_it(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    got = httpx.get(daemon.url + "/agents/nope/.well-known/agent-card.json")
    assert got.status_code == 404
    assert got.json()["error"]["reason"] == "AGENT_NOT_FOUND" and got.json()["error"]["agents"] == ["a", "b"]
    posted = daemon.rpc("GetTask", {"id": str(uuid.uuid4())}, agent="nope")
    assert posted.status_code == 404
    error = posted.json()["error"]
    assert error["code"] == -31404 and "'nope'" in error["message"]
    assert error["data"][0]["reason"] == "AGENT_NOT_FOUND" and error["data"][0]["metadata"]["agent"] == "nope"


async def test_a_stock_client_given_an_agents_card_url_talks_to_that_agent(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    async with httpx.AsyncClient(timeout=60) as http:
        for agent_id, expected in (("a", "I am A"), ("b", "I am B")):
            card_url = f"{daemon.url}/agents/{agent_id}/.well-known/agent-card.json"
            card = await A2ACardResolver(http, card_url).get_agent_card(relative_card_path="/")
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="who are you?")])
            responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
            task = responses[-1].task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert "".join(p.text for p in task.artifacts[0].parts) == expected
            # the base URL works as well (the SDK's resolver appends the well-known path)
            by_url = await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(
                f"{daemon.url}/agents/{agent_id}"
            )
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="again")])
            events = [r async for r in by_url.send_message(SendMessageRequest(message=message))]
            assert any(expected in str(e) for e in events)


def test_tasks_conversations_and_status_are_scoped_to_the_agents_path(a2a_daemon: Any, tmp_path: Path) -> None:
    principals = '[a2a]\nbearer = "{{secret:OP}}"\n[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE}}"\n'
    daemon = a2a_daemon(config=two_agents(tmp_path, principals), env={"ALICE": "alice-token", "OP": "op-token"})
    on_a = daemon.send_text("hi", agent="a", context_id="ctx-1", token="alice-token")
    wait_state(daemon, on_a["id"], "TASK_STATE_COMPLETED", token="alice-token", agent="a")
    on_b = daemon.send_text("hi", agent="b", context_id="ctx-1", token="alice-token")
    done_b = wait_state(daemon, on_b["id"], "TASK_STATE_COMPLETED", token="alice-token")
    assert answer_of(done_b) == "I am B"  # the same contextId on b is b's own conversation
    for token in ("alice-token", "op-token"):  # the user and the operator
        listed_a = daemon.rpc("ListTasks", {}, agent="a", token=token).json()["result"]["tasks"]
        listed_b = daemon.rpc("ListTasks", {}, agent="b", token=token).json()["result"]["tasks"]
        assert [t["id"] for t in listed_a] == [on_a["id"]]
        assert [t["id"] for t in listed_b] == [on_b["id"]]
        # another agent's task is not found through this agent's path
        assert daemon.rpc("GetTask", {"id": on_a["id"]}, agent="b", token=token).json()["error"]["code"] == -32001
    result = op_result(daemon, "status", "b", token="op-token")
    assert [(c["id"], c["turns"]) for c in result["conversations"]] == [("user:alice/ctx-1", 1)]
    agents = {row["id"]: row for row in result["values"]["agents"]}  # the operator's daemon-wide listing
    assert set(agents) == {"a", "b"} and agents["b"]["default"] and not agents["a"]["default"]


def test_a_tenant_other_than_the_paths_agent_is_refused(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    refused = daemon.rpc("ListTasks", {"tenant": "a"}, agent="b").json()
    assert refused["error"]["code"] == -32602 and "tenant" in refused["error"]["message"]
    assert "result" in daemon.rpc("ListTasks", {"tenant": "b"}, agent="b").json()


def test_a_push_config_on_one_agent_cannot_reach_another_agents_task(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path, "[a2a.push]\nallow_private = true\n"))
    with push_receiver() as server:
        task = daemon.send_text("hi", agent="a", configuration={"returnImmediately": True})
        config = {"taskId": task["id"], "url": f"http://127.0.0.1:{server.server_port}/hook"}
        refused = daemon.rpc("CreateTaskPushNotificationConfig", config, agent="b").json()
        assert refused["error"]["code"] == -32001, refused
        made = daemon.rpc("CreateTaskPushNotificationConfig", config, agent="a").json()
        assert "result" in made, made
        wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", agent="a")
        got = daemon.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}, agent="b").json()
        assert got["error"]["code"] == -32001


def test_a_principal_limited_to_one_agent_is_refused_on_another_and_nothing_is_created(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    config = two_agents(
        tmp_path,
        '[a2a]\nbearer = "{{secret:OP}}"\n'
        '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE}}"\nagents = ["b"]\n'
        '[[a2a.principals]]\nid = "bob"\nbearer = "{{secret:BOB}}"\n',
    )
    daemon = a2a_daemon(config=config, env={"ALICE": "alice-token", "BOB": "bob-token", "OP": "op-token"})
    message = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    refused = daemon.rpc("SendMessage", message, agent="a", token="alice-token")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == -31403 and error["data"][0]["reason"] == "PERMISSION_DENIED"
    assert error["data"][0]["metadata"] == {"agent": "a"}
    nothing = daemon.rpc("ListTasks", {}, agent="a", token="op-token").json()["result"]
    assert nothing.get("tasks", []) == []  # nothing created
    assert daemon.rpc("GetExtendedAgentCard", {}, agent="a", token="alice-token").status_code == 403
    own = daemon.send_text("hi", agent="b", token="alice-token")
    bobs = daemon.send_text("hi", agent="b", token="bob-token")
    wait_state(daemon, own["id"], "TASK_STATE_COMPLETED", token="alice-token")
    listed = daemon.rpc("ListTasks", {}, agent="b", token="alice-token").json()["result"]["tasks"]
    assert [t["id"] for t in listed] == [own["id"]]
    assert daemon.rpc("GetTask", {"id": bobs["id"]}, agent="b", token="alice-token").json()["error"]["code"] == -32001
    assert daemon.send_text("hi", agent="a", token="bob-token")["id"]  # bob reaches every agent
    assert daemon.rpc("GetExtendedAgentCard", {}, agent="b", token="alice-token").status_code == 200


def test_pause_and_drain_act_on_the_paths_agent_and_the_root_on_every_agent(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    op = op_result
    op(daemon, "admin.pause", "a", reason="maintenance")
    held = daemon.send_text("hi", agent="a", configuration={"returnImmediately": True})
    served = daemon.send_text("hi", agent="b")
    assert answer_of(wait_state(daemon, served["id"], "TASK_STATE_COMPLETED")) == "I am B"
    assert daemon.rpc("GetTask", {"id": held["id"]}, agent="a").json()["result"]["status"]["state"] == (
        "TASK_STATE_SUBMITTED"
    )
    assert {r["id"]: r["state"] for r in httpx.get(daemon.url + "/agents").json()["agents"]} == {
        "a": "paused",
        "b": "serving",
    }
    op(daemon, "admin.resume", "a")
    assert answer_of(wait_state(daemon, held["id"], "TASK_STATE_COMPLETED", agent="a")) == "I am A"
    op(daemon, "admin.drain", "a", reason="retire a")
    refused = daemon.rpc(
        "SendMessage", {"message": {"messageId": "m9", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}, agent="a"
    ).json()
    assert refused["error"]["data"][0]["reason"] == "DRAINING"
    assert refused["error"]["message"] == "agent 'a' is draining: no new messages"
    still = daemon.send_text("hi", agent="b")
    wait_state(daemon, still["id"], "TASK_STATE_COMPLETED")
    assert daemon.process.poll() is None
    op(daemon, "admin.drain", "b", reason="retire b")  # the last agent drained: the daemon drains and exits 0
    assert daemon.wait() == 0


def test_the_root_pause_holds_every_agent(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    op_result(daemon, "admin.pause", reason="all")
    states = {r["id"]: r["state"] for r in httpx.get(daemon.url + "/agents").json()["agents"]}
    assert states == {"a": "paused", "b": "paused"}
    op_result(daemon, "admin.resume")
    task = daemon.send_text("hi", agent="a")
    assert answer_of(wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", agent="a")) == "I am A"
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0


def test_tasks_stay_on_their_agents_across_a_restart(a2a_daemon: Any, tmp_path: Path) -> None:
    config = two_agents(tmp_path)
    first = a2a_daemon(config=config)
    on_a = first.send_text("hi", agent="a")
    wait_state(first, on_a["id"], "TASK_STATE_COMPLETED", agent="a")
    first.signal(signal.SIGTERM)
    assert first.wait() == 0
    second = a2a_daemon(config=config, state_dir=first.state_dir)
    assert second.rpc("GetTask", {"id": on_a["id"]}, agent="a").json()["result"]["id"] == on_a["id"]
    assert second.rpc("GetTask", {"id": on_a["id"]}, agent="b").json()["error"]["code"] == -32001


def test_the_pool_holds_per_agent_and_in_total(a2a_daemon: Any, tmp_path: Path) -> None:
    config = two_agents(tmp_path, "[a2a.pool]\nmax_live = 2\n", a="[agents.pool]\nmax_live = 1\n")
    daemon = a2a_daemon(config=config)
    for n in range(2):  # two conversations on a: its own cap of 1 keeps one live
        done = daemon.send_text("hi", agent="a", context_id=f"a-{n}")
        wait_state(daemon, done["id"], "TASK_STATE_COMPLETED", agent="a")
    for n in range(2):  # two on b: the daemon's cap of 2 holds in total
        done = daemon.send_text("hi", agent="b", context_id=f"b-{n}")
        wait_state(daemon, done["id"], "TASK_STATE_COMPLETED")
    a, b = op_result(daemon, "status", "a")["values"], op_result(daemon, "status", "b")["values"]
    assert a["maxLive"] == 1 and b["maxLive"] == 2
    assert a["liveAgents"] <= 1 and a["liveAgents"] + b["liveAgents"] <= 2
    assert a["evictions"] >= 1 and a["evictions"] + b["evictions"] >= 2


def test_admin_drain_of_an_idle_daemon_is_answered_before_the_daemon_exits(a2a_daemon: Any) -> None:
    """The op runs in the front before the SDK makes its task; a drain that closed the SDK's handlers at once (an
    idle daemon has nothing else to wait for) refused that task: the request got HTTP 500."""
    daemon = a2a_daemon(mock="hello")
    task = op_result(daemon, "admin.drain", reason="upgrade")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert daemon.wait() == 0


def test_after_one_agent_drained_the_root_pause_holds_the_others_and_its_path_still_answers_status(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    """Found by the fresh-eyes trial: the root's admin.pause answered OP_FAILED (Draining) yet paused the other
    agents; and the drained agent's path refused even the operator's status."""
    daemon = a2a_daemon(config=two_agents(tmp_path))
    op_result(daemon, "admin.drain", "a", reason="retire a")
    paused = op_result(daemon, "admin.pause", reason="all")
    assert paused["status"]["state"] == "TASK_STATE_COMPLETED", paused
    assert {r["id"]: r["state"] for r in httpx.get(daemon.url + "/agents").json()["agents"]} == {
        "a": "draining",
        "b": "paused",
    }
    resumed = op_result(daemon, "admin.resume")
    assert resumed["status"]["state"] == "TASK_STATE_COMPLETED", resumed
    status = op_result(daemon, "status", "a")
    assert status["draining"] is True and status["model"] == "mock"
    refused = daemon.rpc(
        "SendMessage", {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}, agent="a"
    ).json()
    assert refused["error"]["data"][0]["reason"] == "DRAINING"  # a conversation's send still is refused


def test_a_get_of_an_agents_endpoint_is_404_for_no_agent_and_405_for_one(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=two_agents(tmp_path))
    for path in ("/agents/nope", "/agents/nope/"):
        got = httpx.get(daemon.url + path)
        assert got.status_code == 404 and got.json()["error"]["agent"] == "nope"
    got = httpx.get(daemon.url + "/agents/a/")
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert got.json()["error"]["message"].endswith(f"{daemon.url}/agents/a/.well-known/agent-card.json")
    refused = daemon.rpc("ListTasks", {"tenant": "nope"}, agent="b").json()["error"]
    assert "/agents/nope" not in refused["message"] and "GET /agents" in refused["message"]


def test_the_client_reads_an_agents_own_url_as_its_daemon_and_that_agent(a2a_daemon: Any, tmp_path: Path) -> None:
    import subprocess

    from a2a_helpers import ANYAGENTD

    daemon = a2a_daemon(config=two_agents(tmp_path))
    sent = subprocess.run(
        [ANYAGENTD, "a2a", "send", f"{daemon.url}/agents/a", "hi"], capture_output=True, text=True, timeout=60
    )
    assert sent.returncode == 0 and sent.stdout.strip() == "I am A", sent.stderr
    both = subprocess.run(
        [ANYAGENTD, "a2a", "send", f"{daemon.url}/agents/a/", "hi", "--agent", "b"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert both.returncode == 1 and len(both.stderr.strip().splitlines()) == 1
    assert "'a'" in both.stderr and "'b'" in both.stderr
    missing = subprocess.run(
        [ANYAGENTD, "a2a", "status", f"{daemon.url}/agents/zzz"], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"anyagentd a2a: no agent 'zzz' at {daemon.url} (its agents: a, b)"
