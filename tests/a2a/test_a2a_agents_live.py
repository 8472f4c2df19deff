"""One daemon, three agents (issue 27, "Done when" 1): ``mock`` (a mock script), the REAL pinned Claude Code and the
REAL pinned Codex behind one A2A listener on loopback, each against its own scripted model endpoint (Claude Code
speaks the Anthropic Messages API to one, Codex the Responses API to the other). The official a2a-sdk client,
given only an agent's card URL, sends a message to each, and the answer is shown to come from that agent: its
scripted text, and the request logs of the model endpoints say which CLI asked (the mock asks neither). On Claude
Code a Write tool call under ``approval = "ask"`` is a permission question (INPUT_REQUIRED), answered "allow"
through the same client: the file is written and the task completes.

Fails (never skips) when a CLI is missing: the ``claude`` fixture and :func:`agent_bin` raise."""

from __future__ import annotations

import json
import os
import shlex
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from anyagentd_testing.agents import agent_bin, codex_args, codex_env, codex_resources_dir

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

MOCK_TEXT = "I am the mock agent."
CLAUDE_TEXT = "Claude Code speaking."
CODEX_TEXT = "Codex speaking."
CLAUDE_SCRIPT = {
    "turns": [
        {"text": CLAUDE_TEXT},
        {
            "text": "Writing the file.",
            "tool": {"name": "Write", "input": {"file_path": "{{cwd}}/out.txt", "content": "hi\n"}},
        },
        {"text": "Done."},
    ]
}
CODEX_SCRIPT = {"turns": [{"text": CODEX_TEXT}]}


def mock_script(path: Path) -> str:
    """A mock script answering :data:`MOCK_TEXT` on each of its turns; returns its path."""
    turn = [
        {"Emit": {"TextDelta": {"message_id": "m1", "text": MOCK_TEXT}}},
        {"Emit": {"MessageEnded": {"message_id": "m1"}}},
        {"End": {"Completed": {"source": "Protocol"}}},
    ]
    path.write_text(json.dumps({"turns": [turn] * 4}))
    return str(path)


def three_agents(tmp_path: Path) -> str:
    """``mock`` (the default), ``claude`` (asks for permissions) and ``codex``, each in its own directory."""
    dirs = {name: tmp_path / f"{name}-work" for name in ("mock", "claude", "codex")}
    for path in dirs.values():
        path.mkdir()
    return f"""
[[agents]]
id = "mock"
name = "mock"
dir = "{dirs["mock"]}"
mock_script = "{mock_script(tmp_path / "mock.json")}"
default = true

[[agents]]
id = "claude"
name = "claude"
dir = "{dirs["claude"]}"
approval = "ask"

[[agents]]
id = "codex"
name = "codex"
dir = "{dirs["codex"]}"
approval = "auto"
"""


def codex_environment(server_url: str, home: Path) -> dict[str, str]:
    """What the daemon adds to the Claude Code environment the ``claude`` fixture made (this process's) for Codex:
    the pinned binary, its provider flags at its own scripted endpoint, its key, and its bundled ``bwrap`` on
    ``PATH`` for its sandbox. The same ``HOME`` as Claude Code's."""
    env = {
        **codex_env(home),
        "ANYAGENTD_CODEX_ARGS": shlex.join(codex_args(server_url)),
        "ANYAGENTD_CODEX_BIN": str(agent_bin("codex", start=__file__)),
    }
    resources = codex_resources_dir(start=__file__)
    if resources is not None:
        env["PATH"] = f"{resources}{os.pathsep}{os.environ['PATH']}"
    return env


def user_message(text: str, *, context_id: str = "", task_id: str = "") -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )


async def send(client: Any, message: Message) -> Any:
    """The one Task a unary send answers."""
    responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


def said(task: Any) -> str:
    """The agent's answer: the text of the task's status message (the turn's whole reply)."""
    return "".join(p.text for p in task.status.message.parts if p.text and not p.media_type)


def prompts(entry: dict[str, Any]) -> str:
    """What a logged model request carries of the conversation (Anthropic ``messages``, Responses ``input``)."""
    body = entry["body"] or {}
    return json.dumps(body.get("messages", body.get("input", [])), ensure_ascii=False)


async def test_one_daemon_serves_mock_claude_and_codex_each_reached_by_its_card_url(
    claude: Any, model_server: Any, a2a_daemon: Any, tmp_path: Path
) -> None:
    claude_server = claude(CLAUDE_SCRIPT)  # this process's environment: Claude Code's, at its own endpoint
    codex_server = model_server(CODEX_SCRIPT)
    daemon = a2a_daemon(config=three_agents(tmp_path), env=codex_environment(codex_server.url, tmp_path / "home"))
    listed = httpx.get(daemon.url + "/agents").json()
    assert [(r["id"], r["name"]) for r in listed["agents"]] == [
        ("mock", "mock"),
        ("claude", "claude"),
        ("codex", "codex"),
    ]

    def logs() -> tuple[int, int]:
        return len(claude_server.requests), len(codex_server.requests)

    async with httpx.AsyncClient(timeout=180) as http:

        async def client_of(agent_id: str) -> Any:
            """The official client made from the agent's card, found at its card URL alone."""
            card_url = f"{daemon.url}/agents/{agent_id}/.well-known/agent-card.json"
            card = await A2ACardResolver(http, card_url).get_agent_card(relative_card_path="/")
            assert card.name == f"anyagentd {agent_id}"
            assert card.supported_interfaces[0].url == f"{daemon.url}/agents/{agent_id}"
            return ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)

        mock, claude_client, codex = [await client_of(a) for a in ("mock", "claude", "codex")]

        # the mock: its scripted text, and neither model endpoint was asked anything
        before = logs()
        task = await send(mock, user_message("Who are you, mock?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert said(task) == MOCK_TEXT
        assert "".join(p.text for p in task.artifacts[0].parts) == MOCK_TEXT
        assert logs() == before

        # Codex: its endpoint got the prompt (Responses API), Claude Code's got nothing more
        claude_before = len(claude_server.requests)
        codex_main = len(codex_server.main_requests())
        task = await send(codex, user_message("Who are you, Codex?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert said(task) == CODEX_TEXT
        asked = codex_server.main_requests()[codex_main:]
        assert asked and all(r["api"] == "responses" for r in asked), asked
        assert "Who are you, Codex?" in prompts(asked[0])
        assert len(claude_server.requests) == claude_before, claude_server.requests[claude_before:]

        # Claude Code: its endpoint got the prompt (Messages API), Codex's got nothing more
        codex_before = len(codex_server.requests)
        claude_main = len(claude_server.main_requests())
        task = await send(claude_client, user_message("Who are you, Claude?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert said(task) == CLAUDE_TEXT
        asked = claude_server.main_requests()[claude_main:]
        assert asked and all(r["api"] == "anthropic" for r in asked), asked
        assert "Who are you, Claude?" in prompts(asked[-1])
        assert len(codex_server.requests) == codex_before, codex_server.requests[codex_before:]

        # a permission question on Claude Code, answered "allow" through the same client with the task's id
        out = tmp_path / "claude-work" / "out.txt"
        waiting = await send(claude_client, user_message("Write out.txt", context_id=task.context_id))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, waiting
        assert waiting.status.message.parts[0].text.startswith("Permission requested:")
        request = json.loads(waiting.status.message.parts[1].text)["kind"]["RequestOpened"]["Permission"]
        assert request["tool"]["kind"] == "Edit" and request["tool"]["diffs"][0]["new_text"] == "hi\n"
        assert not out.exists()
        done = await send(claude_client, user_message("allow", task_id=waiting.id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
        assert done.id == waiting.id and done.context_id == task.context_id
        assert said(done) == "Writing the file.Done."
        assert out.read_text() == "hi\n"
        assert not (tmp_path / "codex-work" / "out.txt").exists() and not (tmp_path / "mock-work" / "out.txt").exists()
        assert len(codex_server.requests) == codex_before, codex_server.requests[codex_before:]

    # each endpoint was asked by its own CLI only: Claude Code's (user agent claude-cli) on the Messages API, Codex's
    # on the Responses API (besides Claude Code's HEAD / probe of its endpoint)
    assert {r["api"] for r in claude_server.requests} <= {"anthropic", "models", "other"}, claude_server.requests
    assert {r["api"] for r in codex_server.requests} <= {"responses", "models"}, codex_server.requests
    assert all(r["headers"].get("user-agent", "").startswith("claude-cli/") for r in claude_server.main_requests())
    assert not any("claude" in r["headers"].get("user-agent", "") for r in codex_server.requests)
    # the tasks are each on their own agent's path
    for agent_id in ("mock", "claude", "codex"):
        tasks = daemon.rpc("ListTasks", {}, agent=agent_id).json()["result"]["tasks"]
        assert len(tasks) == {"mock": 1, "claude": 2, "codex": 1}[agent_id], (agent_id, tasks)
