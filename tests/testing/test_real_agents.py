"""End to end: the REAL pinned agent CLIs (tests/agents/package.json) against the scripted model server.

These fail (not skip) when the CLIs are not installed: CI installs them with ``npm install`` in tests/agents.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from anyagentd_testing.agents import (
    AgentNotInstalledError,
    agent_bin,
    agents_dir,
    claude_env,
    clean_environ,
    codex_args,
    codex_env,
    codex_resources_dir,
)

TIMEOUT = 60.0
"""Seconds a real CLI run may take before it is killed (a run normally takes 1-3 s)."""


def run_agent(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run an agent CLI in its own process group with stdin at EOF; kill the whole group on timeout.

    The npm wrappers spawn native binaries and do not forward signals, hence the group.
    """
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{argv[0]} did not finish within {timeout} s\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def frames(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.timeout(TIMEOUT + 30)
def test_claude_print_mode_writes_a_file(model_server, tmp_path):
    claude = agent_bin("claude", start=__file__)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    srv = model_server(
        {
            "turns": [
                {
                    "text": "I'll create the file.",
                    "tool": {
                        "name": "Write",
                        "input": {"file_path": "{{cwd}}/hello.txt", "content": "hello from the script\n"},
                    },
                },
                {"text": "Done: hello.txt is written."},
            ]
        }
    )
    argv = [
        str(claude),
        "-p",
        "Create hello.txt",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ]
    done = run_agent(argv, cwd=work, env=clean_environ(claude_env(srv.url, home)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "hello.txt").read_text() == "hello from the script\n"
    result = frames(done.stdout)[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"]
    assert result["result"] == "Done: hello.txt is written."
    assert [r["turn"] for r in srv.main_requests()] == [0, 1]
    assert srv.side_requests() == []
    assert srv.main_requests()[0]["cwd"] == str(work.resolve())


@pytest.mark.timeout(TIMEOUT + 30)
def test_codex_exec_runs_a_command(model_server, tmp_path):
    codex = agent_bin("codex", start=__file__)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    srv = model_server(
        {
            "turns": [
                {
                    "text": "Running a command.",
                    "tool": {"name": "exec_command", "input": {"cmd": "printf 'made by codex\\n' > {{cwd}}/codex.txt"}},
                },
                {"text": "Done: codex.txt exists."},
            ]
        }
    )
    argv = [
        str(codex),
        "exec",
        "--json",
        "--skip-git-repo-check",
        *codex_args(srv.url),
        "--sandbox",
        "workspace-write",
        "Create codex.txt",
    ]
    done = run_agent(argv, cwd=work, env=clean_environ(codex_env(home)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "codex.txt").read_text() == "made by codex\n"
    events = frames(done.stdout)
    assert events[-1]["type"] == "turn.completed"
    messages = [
        e["item"]["text"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages[-1] == "Done: codex.txt exists."
    commands = [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"]
    assert commands and commands[0]["exit_code"] == 0
    assert [r["turn"] for r in srv.main_requests()] == [0, 1]
    assert srv.main_requests()[0]["cwd"] == str(work.resolve())


def test_agent_bin_missing_fails_with_instructions(monkeypatch, tmp_path):
    monkeypatch.setenv("ANYAGENTD_TEST_AGENTS_DIR", str(tmp_path))
    with pytest.raises(AgentNotInstalledError, match="ANYAGENTD_TEST_AGENTS_DIR"):
        agent_bin("claude")
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert agent_bin("claude") == fake
    monkeypatch.delenv("ANYAGENTD_TEST_AGENTS_DIR")
    assert agents_dir(__file__) == Path(__file__).resolve().parents[1] / "agents" / "node_modules" / ".bin"


def test_environment_helpers():
    env = claude_env("http://127.0.0.1:1234/", "/tmp/h")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1234" and env["HOME"] == "/tmp/h"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0" and env["IS_SANDBOX"] == "1"
    assert "HOME" not in claude_env("http://x") and "HOME" not in codex_env()
    args = codex_args("http://127.0.0.1:1234")
    assert args[::2] == ["-c"] * (len(args) // 2)
    assert "model_providers.mock.base_url=http://127.0.0.1:1234/v1" in args and "features.plugins=false" in args
    cleaned = clean_environ(
        {"HOME": "/h"}, base={"PATH": "/bin", "ANTHROPIC_AUTH_TOKEN": "x", "CLAUDECODE": "1", "OPENAI_BASE_URL": "y"}
    )
    assert cleaned == {"PATH": "/bin", "HOME": "/h"}


def test_codex_resources_dir_has_the_bundled_bwrap():
    resources = codex_resources_dir(__file__)
    assert resources is not None and (resources / "bwrap").is_file()
