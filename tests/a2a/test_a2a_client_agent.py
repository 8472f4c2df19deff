"""``anyagentd a2a send|status|op|tasks|runs URL --agent ID``: the client talks to one agent of a daemon that serves
several (issue 27), at ``URL/agents/ID`` (its card under it, its JSON-RPC endpoint at it), and without ``--agent``
to the root (the daemon's default agent) as before. An id that is no agent id is one line, exit 1, nothing sent;
a daemon that serves no such agent (its HTTP 404 ``AGENT_NOT_FOUND``, to the card's GET or to a POST) is one line,
``no agent 'x' at URL (its agents: a, b)``, exit 1; the token stored for the daemon's URL is the one presented to
every agent of it (one device-grant issuer); the answer hint keeps ``--agent``.

The CLI tests run the real ``anyagentd a2a`` against a small real HTTP server (uvicorn on 127.0.0.1, in a thread)
that answers as the daemon's agent routes do. The tests at the bottom (``test_daemon_*``) run it against a real
daemon serving two mock agents; they need the daemon side of issue 27 and are skipped until it lands."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD

pytestmark = pytest.mark.timeout(180)

AGENTS = ["a", "b"]
"""The agents the fake daemon lists."""
GONE = "gone"
"""An agent whose card the fake daemon still serves but whose endpoint answers 404 AGENT_NOT_FOUND (it went away
between the card and the request)."""
CLIENT_COMMANDS = ["send", "status", "op", "tasks", "runs"]


# -- client.agent_url, AgentNotFound, answer_hint: no daemon --------------------------------------------------------


def test_agent_url_is_the_agents_sub_path_of_the_daemon() -> None:
    from anyagentd_a2a.client import agent_url

    assert agent_url("http://127.0.0.1:8080", "b") == "http://127.0.0.1:8080/agents/b"
    assert agent_url("http://127.0.0.1:8080/", "codex-2") == "http://127.0.0.1:8080/agents/codex-2"
    assert agent_url("https://host/base/", "0") == "https://host/base/agents/0"
    assert agent_url("http://h", "a" * 32) == "http://h/agents/" + "a" * 32
    for url in ("http://127.0.0.1:8080", "http://127.0.0.1:8080/", "https://host/base/"):
        assert agent_url(url, None) == url  # the daemon's default agent: the root, exactly as given


@pytest.mark.parametrize(
    "bad", ["", "B", "Claude", "-a", "a_b", "a/b", "../x", "a b", "a\n", "a" * 33, "é", "a.b", "a?x=1", "%2e"]
)
def test_agent_url_refuses_what_is_no_agent_id_in_one_line(bad: str) -> None:
    from anyagentd_a2a.client import BadAgentId, ClientError, agent_url

    with pytest.raises(BadAgentId) as refused:
        agent_url("http://127.0.0.1:8080/", bad)
    assert isinstance(refused.value, ClientError)
    line = str(refused.value)
    assert "\n" not in line and repr(bad) in line and "is not an agent id" in line, line
    assert "GET http://127.0.0.1:8080/agents lists" in line, line


def test_agent_not_found_names_the_agent_the_daemon_and_its_agents() -> None:
    from anyagentd_a2a.client import AgentNotFound, ClientError, _agent_missing

    assert str(AgentNotFound("http://h:1/", "x", ["a", "b"])) == "no agent 'x' at http://h:1 (its agents: a, b)"
    assert str(AgentNotFound("http://h:1", "x")) == "no agent 'x' at http://h:1 (GET http://h:1/agents lists them)"
    assert issubclass(AgentNotFound, ClientError)
    get_body = {"error": {"reason": "AGENT_NOT_FOUND", "message": "m", "agent": "x", "agents": ["a", "b"]}}
    assert str(_agent_missing("http://h:1", "x", get_body)) == "no agent 'x' at http://h:1 (its agents: a, b)"
    post_body = rpc_agent_not_found("x")
    found = _agent_missing("http://h:1", "x", post_body)
    assert found is not None and found.agent == "x" and found.agents is None
    # anything else is not this error
    for other in (None, [], {"error": "x"}, {"error": {"code": -32001, "message": "task not found"}}, "text"):
        assert _agent_missing("http://h:1", "x", other) is None


def test_the_answer_hint_keeps_the_agent() -> None:
    from anyagentd_a2a.client import answer_hint

    task = {
        "id": "t-1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {
                "role": "ROLE_AGENT",
                "parts": [{"data": {"request": {"Permission": {"options": ["AllowOnce", "DenyOnce"]}}}}],
            },
        },
    }
    hint = answer_hint("http://h:1/", task, agent="b", extra=" --cacert ca.pem")
    assert hint == "answer (allow or deny): anyagentd a2a send http://h:1 allow --task-id t-1 --agent b --cacert ca.pem"
    assert shlex.split(hint.split(": ", 1)[1])[-5:] == ["t-1", "--agent", "b", "--cacert", "ca.pem"]
    assert "--agent" not in answer_hint("http://h:1/", task)  # the default agent: as before


# -- a small real HTTP server answering as a many-agent daemon's routes do -----------------------------------------


def rpc_agent_not_found(agent: str) -> dict[str, Any]:
    """The JSON-RPC body of the daemon's 404 to a POST for an agent it does not serve."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -31404,
            "message": f"no agent {agent!r} is served here; GET /agents lists them",
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "AGENT_NOT_FOUND",
                    "domain": "agentd.dev",
                    "metadata": {"agent": agent},
                }
            ],
        },
    }


def card(base: str, agent: str) -> dict[str, Any]:
    """A minimal A2A 1.0 card for ``agent`` with its JSON-RPC interface at ``base/agents/agent/``."""
    return {
        "name": agent,
        "description": f"agent {agent}",
        "version": "1.0",
        "supportedInterfaces": [
            {"url": f"{base}/agents/{agent}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


class FakeDaemon:
    """A starlette app under a real uvicorn on 127.0.0.1 (a thread): ``GET /agents`` lists :data:`AGENTS`; the
    card of :data:`GONE` is served, its endpoint answers 404 AGENT_NOT_FOUND; every other ``/agents/...`` path is
    the daemon's 404 AGENT_NOT_FOUND (the GET's JSON, or the POST's JSON-RPC error). ``requests``: (method, path,
    Authorization header) of each request, in order."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.requests: list[tuple[str, str, str | None]] = []
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

        async def listing(request: Request) -> JSONResponse:
            self._seen(request)
            listed = [
                {"id": a, "name": "mock", "default": a == AGENTS[0], "url": f"{self.url}/agents/{a}/"} for a in AGENTS
            ]
            return JSONResponse({"default": AGENTS[0], "agents": listed})

        async def agent_path(request: Request) -> JSONResponse:
            self._seen(request)
            agent = request.path_params["agent"]
            rest = request.path_params.get("rest", "")
            if request.method == "GET" and agent == GONE and rest == ".well-known/agent-card.json":
                return JSONResponse(card(self.url, GONE))
            if request.method == "POST":
                return JSONResponse(rpc_agent_not_found(agent), status_code=404)
            message = f"no agent {agent!r} is served here; GET /agents lists them"
            error = {"reason": "AGENT_NOT_FOUND", "message": message, "agent": agent, "agents": AGENTS}
            return JSONResponse({"error": error}, status_code=404)

        async def anything(request: Request) -> JSONResponse:
            self._seen(request)
            return JSONResponse({"error": "not here"}, status_code=500)

        methods = ["GET", "POST"]
        self.app = Starlette(
            routes=[
                Route("/agents", listing, methods=["GET"]),
                Route("/agents/{agent}", agent_path, methods=methods),
                Route("/agents/{agent}/{rest:path}", agent_path, methods=methods),
                Route("/{rest:path}", anything, methods=methods),
            ]
        )

    def _seen(self, request: Any) -> None:
        self.requests.append((request.method, request.url.path, request.headers.get("authorization")))

    def run(self) -> Iterator[FakeDaemon]:
        import uvicorn

        server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error", lifespan="off")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the fake daemon did not start"
            time.sleep(0.02)
        try:
            yield self
        finally:
            server.should_exit = True
            thread.join(10)


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    yield from FakeDaemon().run()


def client_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A person's shell: no token or CA variable of ours, a config dir of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANYAGENTD_A2A_TOKEN", "ANYAGENTD_A2A_CACERT")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "COLUMNS": "200", **extra}


def cli(tmp_path: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``anyagentd a2a ARGS`` as a person runs it."""
    return subprocess.run(
        [ANYAGENTD, "a2a", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=client_env(tmp_path),
        cwd=tmp_path,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """Assert ``done`` failed as the CLI must (exit 1, nothing on stdout, one line on stderr, no traceback); returns
    the line without its ``anyagentd a2a: `` prefix."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anyagentd a2a: ") and "Traceback" not in done.stderr, lines
    return lines[0].removeprefix("anyagentd a2a: ")


def argv(command: str, url: str, *more: str) -> list[str]:
    """``command URL`` with the positional arguments it needs (``send``: a text, ``op``: an op)."""
    needed = {"send": ["hi"], "op": ["status"]}.get(command, [])
    return [command, url, *needed, *more]


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
def test_an_agent_the_daemon_does_not_serve_is_one_line_naming_its_agents(
    command: str, fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    line = one_line(cli(tmp_path, *argv(command, fake_daemon.url + "/", "--agent", "nope")))
    assert line == f"no agent 'nope' at {fake_daemon.url} (its agents: a, b)"
    method, path, _ = fake_daemon.requests[0]
    assert (method, path) == ("GET", "/agents/nope/.well-known/agent-card.json")  # the agent's card, under its path
    assert all(p.startswith("/agents/nope") for _, p, _ in fake_daemon.requests), fake_daemon.requests


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
def test_an_agent_gone_after_its_card_is_one_line_naming_its_agents(
    command: str, fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    """The card read, the POST to the card's endpoint answered 404 AGENT_NOT_FOUND (a JSON-RPC error that lists
    no agents): the same one line, the agents read from ``GET /agents``."""
    line = one_line(cli(tmp_path, *argv(command, fake_daemon.url, "--agent", GONE)))
    assert line == f"no agent '{GONE}' at {fake_daemon.url} (its agents: a, b)"
    seen = [(m, p) for m, p, _ in fake_daemon.requests]
    assert seen[0] == ("GET", f"/agents/{GONE}/.well-known/agent-card.json")
    assert ("POST", f"/agents/{GONE}/") in seen and seen[-1] == ("GET", "/agents"), seen


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
@pytest.mark.parametrize("bad", ["Nope", "a/../b", "-x"])
def test_an_id_that_is_no_agent_id_is_one_line_and_sends_nothing(
    command: str, bad: str, fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    line = one_line(cli(tmp_path, *argv(command, fake_daemon.url, f"--agent={bad}")))
    assert line.startswith(f"{bad!r} is not an agent id"), line
    assert fake_daemon.requests == []


def test_the_token_stored_for_the_daemon_is_presented_to_its_agents(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    """One device-grant issuer per daemon: ``login URL`` stores the token under the daemon's URL, and every agent of
    it is talked to with that token."""
    store = tmp_path / "xdg" / "anyagentd" / "credentials.json"
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({fake_daemon.url: {"access_token": "stored-t0ken"}}))
    one_line(cli(tmp_path, "status", fake_daemon.url + "/", "--agent", "nope"))
    assert fake_daemon.requests[0][1:] == ("/agents/nope/.well-known/agent-card.json", "Bearer stored-t0ken")


def test_every_client_subcommand_but_login_has_the_agent_option(tmp_path: Path) -> None:
    for command in [*CLIENT_COMMANDS, "login"]:
        shown = cli(tmp_path, command, "--help")
        assert shown.returncode == 0, shown.stderr
        flat = " ".join(shown.stdout.split())
        if command == "login":  # one device-grant issuer per daemon: signing in names no agent
            assert "--agent" not in flat
        else:
            assert (
                "--agent ID Talk to this agent of the daemon (GET URL/agents lists them); default: the daemon's default agent."
                in flat
            ), flat


# -- against a real daemon serving two agents (needs the daemon side of issue 27) ----------------------------------

OPERATOR = "op-secret-ag27"
TWO_AGENTS = """
[a2a]
bearer = "{{secret:OP_T}}"

[[agents]]
id = "a"
name = "mock"
mock_script = "hello"

[[agents]]
id = "b"
name = "mock"
mock_script = "model-option"
"""
HELLO = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
MODEL_OPTION = "Answering with the configured model."


@pytest.fixture
def two_agents(a2a_daemon: Any) -> Any:
    return a2a_daemon(config=TWO_AGENTS, env={"OP_T": OPERATOR})


def operator_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, *args, "--token", OPERATOR)


def test_daemon_send_to_an_agent_gets_that_agents_answer(two_agents: Any, tmp_path: Path) -> None:
    to_b = operator_cli(tmp_path, "send", two_agents.url, "hi", "--agent", "b")
    assert to_b.returncode == 0, to_b.stderr
    assert to_b.stdout.strip() == MODEL_OPTION
    to_a = operator_cli(tmp_path, "send", two_agents.url, "hi", "--agent", "a")
    assert to_a.returncode == 0 and to_a.stdout.strip() == HELLO, to_a.stderr
    default = operator_cli(tmp_path, "send", two_agents.url, "hi")  # no --agent: the root, the default agent (a)
    assert default.returncode == 0 and default.stdout.strip() == HELLO, default.stderr


def test_daemon_status_of_one_agent(two_agents: Any, tmp_path: Path) -> None:
    assert operator_cli(tmp_path, "send", two_agents.url, "hi", "--agent", "a").returncode == 0
    shown = operator_cli(tmp_path, "status", two_agents.url, "--agent", "a")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert len(status["conversations"]) == 1, status  # a's conversation, nothing of b's
    other = json.loads(operator_cli(tmp_path, "status", two_agents.url, "--agent", "b").stdout)
    assert other["conversations"] == [], other


def test_daemon_tasks_of_one_agent_list_only_its_tasks(two_agents: Any, tmp_path: Path) -> None:
    sent = {}
    for agent in ("a", "b", "b"):
        done = operator_cli(tmp_path, "send", two_agents.url, "hi", "--agent", agent)
        assert done.returncode == 0, done.stderr
        task_id = done.stderr.split()[1].rstrip(":")  # "task ID: completed (contextId ...)"
        sent.setdefault(agent, []).append(task_id)
    listed = operator_cli(tmp_path, "tasks", two_agents.url, "--agent", "b", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(t["id"] for t in json.loads(listed.stdout)) == sorted(sent["b"])
    of_a = json.loads(operator_cli(tmp_path, "tasks", two_agents.url, "--agent", "a", "--json").stdout)
    assert [t["id"] for t in of_a] == sent["a"]


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
def test_daemon_an_agent_it_does_not_serve_is_one_line(command: str, two_agents: Any, tmp_path: Path) -> None:
    line = one_line(cli(tmp_path, *argv(command, two_agents.url, "--agent", "nope", "--token", OPERATOR)))
    assert line == f"no agent 'nope' at {two_agents.url.rstrip('/')} (its agents: a, b)"


def test_daemon_the_answer_hint_names_the_agent_and_pasted_answers_it(a2a_daemon: Any, tmp_path: Path) -> None:
    config = TWO_AGENTS.replace('id = "b"', 'id = "p"').replace('"model-option"', '"permission"')
    daemon = a2a_daemon(config=config, env={"OP_T": OPERATOR})
    asked = subprocess.run(
        [ANYAGENTD, "a2a", "send", daemon.url, "write it", "--agent", "p"],
        capture_output=True,
        text=True,
        timeout=90,
        env=client_env(tmp_path, ANYAGENTD_A2A_TOKEN=OPERATOR),
        cwd=tmp_path,
    )
    assert asked.returncode == 2, asked.stderr
    hint = next(l for l in asked.stderr.splitlines() if l.startswith("answer (")).split("): ", 1)[1]
    assert hint.endswith(" --agent p"), hint
    answered = subprocess.run(
        ["bash", "-c", hint.replace("anyagentd", shlex.quote(ANYAGENTD), 1)],
        capture_output=True,
        text=True,
        timeout=90,
        env=client_env(tmp_path, ANYAGENTD_A2A_TOKEN=OPERATOR),
        cwd=tmp_path,
    )
    assert answered.returncode == 0 and "You allowed it." in answered.stdout, answered.stderr
