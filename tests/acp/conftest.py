"""Fixtures of the ACP adapter tests: the environments that run the real pinned ACP agents
against a scripted model server (helpers are in ``acp_support``; ``work`` comes from the anyagentd pytest plugin)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp_support import CODEX_ACP_FLAGS

from anyagentd_testing.agents import (
    agent_bin,
    claude_env,
    clean_environ,
    codex_args,
    codex_env,
    codex_resources_dir,
)


@pytest.fixture
def codex_acp(scripted_agent: Callable[..., Any]) -> Callable[..., Any]:
    """``codex_acp(script)``: a model server playing ``script``, and this process's environment set so the
    ``codex-acp`` catalog agent runs against it: ``ANYAGENTD_CODEX_ACP_BIN``, the provider ``-c`` flags plus
    ``approval_policy=untrusted`` / ``sandbox_mode=workspace-write`` in ``ANYAGENTD_CODEX_ACP_ARGS``, Codex's
    bundled ``bwrap`` on PATH, a fresh HOME. Returns the server."""
    binary = str(agent_bin("codex-acp"))
    resources = codex_resources_dir()
    assert resources is not None, "Codex's bundled bwrap (codex-resources) is missing: npm install in tests/agents"

    def environment(url: str, home: Path) -> dict[str, str]:
        env = clean_environ(codex_env(home))
        env["PATH"] = f"{resources}{os.pathsep}{env.get('PATH', '')}"
        env["ANYAGENTD_CODEX_ACP_BIN"] = binary
        env["ANYAGENTD_CODEX_ACP_ARGS"] = shlex.join([*codex_args(url), *CODEX_ACP_FLAGS])
        env["ANYAGENTD_NO_LOGIN_SHELL"] = "1"
        return env

    return scripted_agent(environment)


@pytest.fixture
def claude_acp(scripted_agent: Callable[..., Any]) -> Callable[..., Any]:
    """``claude_acp(script)``: a model server playing ``script`` and the Claude environment (``claude_env``,
    IS_SANDBOX=1, a fresh HOME) plus ``ANYAGENTD_CLAUDE_ACP_BIN``. Returns the server."""
    binary = str(agent_bin("claude-agent-acp"))
    extra = {"ANYAGENTD_CLAUDE_ACP_BIN": binary, "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    return scripted_agent(lambda url, home: clean_environ({**claude_env(url, home), **extra}))
