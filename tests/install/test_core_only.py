"""Core alone (``pip install ./core`` in a fresh venv) carries no HTTP stack and still serves the wire and runs
``mock`` (issue: a slimmer core). The testing distribution, the adapters and every other plugin are absent."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only ``./core`` installed (dependencies from the package index)."""
    env_dir = tmp_path_factory.mktemp("core-only") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT / "core")], check=True, timeout=540)
    return env_dir


def test_core_pulls_no_http_server(core_venv: Path) -> None:
    python = str(core_venv / "bin" / "python")
    for module in ("starlette", "uvicorn", "anyagentd_testing", "jsonschema"):
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
        assert probe.returncode != 0, f"{module} is importable with core alone"
        assert "ModuleNotFoundError" in probe.stderr


def test_core_alone_serves_the_wire(core_venv: Path, tmp_path: Path) -> None:
    exe = str(core_venv / "bin" / "anyagentd")
    proc = subprocess.Popen([exe, "serve", "--mock", "hello"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(frame: dict) -> None:
        proc.stdin.write(json.dumps(frame) + "\n")
        proc.stdin.flush()

    assert "hello" in json.loads(proc.stdout.readline())
    send({"id": 1, "cmd": "open", "agent": "mock", "dir": str(tmp_path)})
    assert json.loads(proc.stdout.readline())["ok"]["id"] == "s1"  # the open's reply comes before any event
    send({"id": 2, "cmd": "prompt", "session": "s1", "text": "hi"})
    tags = []
    for line in proc.stdout:
        message = json.loads(line)
        if "event" in message:
            kind = message["event"]["kind"]
            tags.append(kind if isinstance(kind, str) else next(iter(kind)))
            if tags[-1] == "TurnEnded":
                break
    proc.stdin.close()
    assert proc.wait(timeout=20) == 0
    assert tags[0] == "TurnStarted" and "TextDelta" in tags and tags[-1] == "TurnEnded"


def test_core_alone_runs_mock_and_has_no_model_server(core_venv: Path, tmp_path: Path) -> None:
    exe = str(core_venv / "bin" / "anyagentd")
    run = subprocess.run(
        [exe, "run", "mock", "hi", "--mock", "hello", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "serve" in help_text and "model-server" not in help_text


@pytest.fixture(scope="module")
def core_venv_editable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only ``-e ./core`` installed, as the README's quick start does."""
    env_dir = tmp_path_factory.mktemp("core-editable") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT / "core")], check=True, timeout=540)
    return env_dir


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr, result.stderr


def test_core_alone_names_the_adapters_to_install(core_venv: Path, tmp_path: Path) -> None:
    """An installed core (not this checkout) names the published distributions."""
    exe = str(core_venv / "bin" / "anyagentd")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANYAGENTD_NO_LOGIN_SHELL": "1", "COLUMNS": "200"}
    found = subprocess.run([exe, "discover"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    for line in (
        "claude (Claude Code): adapter not installed — pip install anyagentd-claude",
        "codex (Codex): adapter not installed — pip install anyagentd-codex",
        "codex-acp (Codex (ACP)): adapter not installed — pip install anyagentd-acp",
        "claude-acp (Claude Code (ACP)): adapter not installed — pip install anyagentd-acp",
        "gemini (Gemini CLI): adapter not installed — pip install anyagentd-acp",
    ):
        assert line in found.stderr
    run = subprocess.run(
        [exe, "run", "claude", "hi", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 3
    _no_traceback(run)
    assert "NotInstalled: the adapter for 'claude' is not installed; install it with: pip install anyagentd-claude" in (
        run.stderr
    )
    server = tmp_path / "server.json"
    stdio = {"Stdio": {"command": "true", "args": [], "env": {}}}
    server.write_text(json.dumps({"name": "files", "connection": stdio}))
    check = subprocess.run(
        [exe, "mcp", "check", str(server)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )
    assert check.returncode == 1
    assert "MCP transport Stdio is not installed (pip install anyagentd-mcp-stdio)" in check.stderr


def test_core_from_this_checkout_names_what_the_readme_installs(core_venv_editable: Path, tmp_path: Path) -> None:
    exe = str(core_venv_editable / "bin" / "anyagentd")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANYAGENTD_NO_LOGIN_SHELL": "1", "COLUMNS": "200"}
    found = subprocess.run([exe, "discover"], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert found.returncode == 0, found.stderr
    assert (
        "claude (Claude Code): adapter not installed — pip install -e ./adapters/claude (published as anyagentd-claude)"
    ) in found.stderr
    assert "gemini (Gemini CLI): adapter not installed — pip install -e ./adapters/acp_generic" in found.stderr
    run = subprocess.run(
        [exe, "run", "codex", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 3
    _no_traceback(run)
    assert "install it with: pip install -e ./adapters/codex (published as anyagentd-codex)" in run.stderr
    server = tmp_path / "server.json"
    http = {"Http": {"url": "http://127.0.0.1:9/", "headers": {}}}
    server.write_text(json.dumps({"name": "web", "connection": http}))
    check = subprocess.run(
        [exe, "mcp", "check", str(server)], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )
    hint = "pip install -e ./plugins/mcp_http (published as anyagentd-mcp-http)"
    assert f"MCP transport Http is not installed ({hint})" in check.stderr
