"""``anyagentd run`` and ``chat`` with the real pinned Claude Code: resume and fork by the printed token, and
``chat`` over two turns of one Claude session, against the scripted model server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anyagentd_testing.agents import agent_bin, claude_env, clean_environ

pytestmark = pytest.mark.timeout(180)

TOKEN = re.compile(r"continue it with: anyagentd chat claude --resume (\S+)")


def cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def claude(model_server: Any, tmp_path: Path) -> Any:
    """``claude(script)``: a model server playing ``script`` and the environment for a CLI child running the
    pinned Claude Code against it (a fresh HOME). Returns (server, env)."""

    def start(script: dict[str, Any]) -> tuple[Any, dict[str, str]]:
        server = model_server(script)
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        env = clean_environ(claude_env(server.url, home))
        env.update(
            {
                "ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude")),
                "ANYAGENTD_NO_LOGIN_SHELL": "1",
                "NO_COLOR": "1",
                "COLUMNS": "200",
            }
        )
        return server, env

    return start


def request_text(entry: dict[str, Any]) -> str:
    return json.dumps(entry["body"].get("messages", []), ensure_ascii=False)


def test_run_prints_a_token_that_resume_and_fork_continue(claude: Any, tmp_path: Path) -> None:
    server, env = claude({"turns": [{"text": "first answer"}, {"text": "second answer"}, {"text": "forked answer"}]})
    first = cli("run", "claude", "remember the word pelican", "--dir", str(tmp_path), env=env)
    assert first.returncode == 0, first.stderr
    token = TOKEN.search(first.stderr).group(1)
    resumed = cli("run", "claude", "which word?", "--dir", str(tmp_path), "--resume", token, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {token}" in resumed.stderr and "second answer" in resumed.stderr
    assert "pelican" in request_text(server.main_requests()[-1])  # the first turn was in the resumed history
    forked = cli("run", "claude", "and now?", "--dir", str(tmp_path), "--resume", token, "--fork", env=env)
    assert forked.returncode == 0, forked.stderr
    assert f"forked from {token}" in forked.stderr and "forked answer" in forked.stderr
    assert "pelican" in request_text(server.main_requests()[-1])
    assert TOKEN.search(forked.stderr).group(1) != token  # a new session


def test_chat_runs_two_turns_in_one_claude_session(claude: Any, tmp_path: Path) -> None:
    server, env = claude({"turns": [{"text": "reply-alpha"}, {"text": "reply-beta"}]})
    result = cli("chat", "claude", "--dir", str(tmp_path), env=env, stdin="say alpha\nsay beta\n/info\n")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("■ Completed") == 2
    assert result.stderr.index("reply-alpha") < result.stderr.index("reply-beta")
    assert "resume token:" in result.stderr and "Traceback" not in result.stderr
    assert "say alpha" in request_text(server.main_requests()[-1])  # one session: turn 2 carries turn 1


def test_a_cli_that_cannot_start_is_spawn_failed(tmp_path: Path) -> None:
    broken = tmp_path / "claude"
    broken.write_text("#!/bin/sh\necho 'fatal: config broken' >&2\nexit 3\n")
    broken.chmod(0o755)
    env = clean_environ(
        {"ANYAGENTD_CLAUDE_BIN": str(broken), "ANYAGENTD_NO_LOGIN_SHELL": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    )
    result = cli("run", "claude", "hi", "--dir", str(tmp_path), env=env)
    assert result.returncode == 5, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("SpawnFailed: ")]
    assert "exit status: 3" in line and "fatal: config broken" in line
