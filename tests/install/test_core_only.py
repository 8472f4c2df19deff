"""Core alone (``pip install ./core`` in a fresh venv) carries no HTTP stack and still serves the wire and runs
``mock`` (issue: a slimmer core). The testing distribution, the adapters and every other plugin are absent."""

from __future__ import annotations

import json
import subprocess
import sys
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
    proc = subprocess.Popen([exe, "serve", "--mock", "hello"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
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
    run = subprocess.run([exe, "run", "mock", "hi", "--mock", "hello", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert run.returncode == 0, run.stderr
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "serve" in help_text and "model-server" not in help_text
