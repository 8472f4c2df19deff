"""End to end: the REAL pinned opencode (tests/agents/node_modules/.bin/opencode, ``opencode serve``: an HTTP API
with server-sent events) against the scripted model server's Anthropic API, through the conformance suite.

Fails (never skips) when the CLI is missing: ``agent_bin`` raises. The CLI is found through
``ANYAGENTD_OPENCODE_BIN``; its provider settings come from ``opencode_env`` (``OPENCODE_CONFIG_CONTENT``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from anyagentd_testing.agents import agent_bin, clean_environ, opencode_env
from anyagentd_testing.conformance import Conformance

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def opencode(scripted_agent: Callable[..., Any]) -> Callable[..., Any]:
    """``opencode(script)`` starts a model server with ``script`` and points this process's environment at it."""
    binary = str(agent_bin("opencode", start=__file__))
    return scripted_agent(lambda url, home: clean_environ({**opencode_env(url, home), "ANYAGENTD_OPENCODE_BIN": binary}))


class TestConformance(Conformance):
    """The adapter contract (anyagentd_testing.conformance) against the real ``opencode serve``."""

    agent = "opencode"
    version = "1.18.33"
    features = frozenset({"Permissions", "Resume"})

    @pytest.fixture
    def scripted(self, opencode: Any) -> Any:
        return opencode

    def write_tool(self, name: str) -> dict[str, Any]:
        return {"name": "write", "input": {"filePath": "{{cwd}}/" + name, "content": "hi\n"}}

    def check_permission(self, request: Any) -> None:
        assert request.tool.kind == "Edit"
