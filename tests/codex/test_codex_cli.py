"""``anyagentd run codex`` with the real pinned Codex CLI and no login: ``AuthRequired`` is one line with the
login command and exit status 4, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from anyagentd_testing.agents import agent_bin, clean_environ, codex_env

pytestmark = pytest.mark.timeout(120)


def test_logged_out_codex_is_one_line_with_the_login_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    binary = str(agent_bin("codex"))
    env = clean_environ(codex_env(home))  # the default OpenAI provider, and no login in the fresh HOME
    env.update({"ANYAGENTD_CODEX_BIN": binary, "ANYAGENTD_NO_LOGIN_SHELL": "1", "NO_COLOR": "1", "COLUMNS": "200"})
    result = subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", "run", "codex", "hi", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    err = result.stderr
    assert result.returncode == 4, err
    assert "Traceback" not in err and "ExceptionGroup" not in err
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("AuthRequired: "))
    assert f"  login: run `{binary} login`" in lines[start + 1 :][0]
    assert any(line.startswith("  hint: log in") for line in lines[start + 1 :])
