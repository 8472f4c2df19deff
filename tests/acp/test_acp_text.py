"""Text no UTF-8 encoder takes, from the REAL pinned claude-agent-acp (issue 20.1): the scripted model sends a lone
surrogate (``"\\ud83d"``, valid JSON syntax); the ACP transport decodes it as U+FFFD, so the event serializes, the
wire writes it, and a second session on the same ``anyagentd serve`` goes on. (codex-acp, like Codex, refuses such
a stream itself; see tests/codex/test_codex_text.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_support import STEP
from lone_surrogate import LONE_SCRIPT, REPLACED, agent_environment, python_api_text, wire_text, wire_turn

pytestmark = pytest.mark.timeout(120)


@pytest.mark.anyio
async def test_python_api_events_with_a_lone_surrogate_serialize(claude_acp: Any, work: Path) -> None:
    claude_acp(LONE_SCRIPT)
    assert await python_api_text("claude-acp", work) == REPLACED


def test_over_the_wire_a_lone_surrogate_leaves_both_sessions_running(claude_acp: Any, wire: Any, work: Path) -> None:
    claude_acp(LONE_SCRIPT)
    client = wire(env=agent_environment(), timeout=STEP)  # the fixture's CLAUDE_ACP_BIN
    first = client.ok("open", agent="claude-acp", dir=str(work))["id"]
    second = client.ok("open", agent="claude-acp", dir=str(work))["id"]
    for session in (first, second):
        assert wire_text(wire_turn(client, session)) == REPLACED
