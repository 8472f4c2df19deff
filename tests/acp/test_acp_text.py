"""Text no UTF-8 encoder takes, from the REAL pinned claude-agent-acp (issue 20.1): the scripted model sends a lone
surrogate (``"\\ud83d"``, valid JSON syntax); the ACP transport decodes it as U+FFFD, so the event serializes, the
wire writes it, and a second session on the same ``anyagentd serve`` goes on. (codex-acp, like Codex, refuses such
a stream itself; see tests/codex/test_codex_text.py.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from acp_support import STEP
from anyagentd.runtime import Runtime
from wire_client import kind_tag

pytestmark = pytest.mark.timeout(120)

LONE_SCRIPT = {"turns": [{"text": "broken \ud83d emoji"}]}


def _ended(line: dict[str, Any]) -> bool:
    return "event" in line and kind_tag(line) == "TurnEnded"


def _text(lines: list[dict[str, Any]]) -> str:
    deltas = [line["event"]["kind"]["TextDelta"] for line in lines if "event" in line and kind_tag(line) == "TextDelta"]
    return "".join(delta["text"] for delta in deltas)


@pytest.mark.anyio
async def test_python_api_events_with_a_lone_surrogate_serialize(claude_acp: Any, work: Path) -> None:
    claude_acp(LONE_SCRIPT)
    async with Runtime() as rt:
        session = await rt.open("claude-acp", dir=work)
        await session.prompt("Say something.")
        text = ""
        async for event in session.events():
            event.model_dump_json()  # raised PydanticSerializationError before
            if event.tag == "TextDelta":
                text += event.kind.text
            if event.tag == "TurnEnded":
                assert event.kind.stop.TAG == "Completed"
                break
        await session.close()
    assert text == "broken \ufffd emoji"


def test_over_the_wire_a_lone_surrogate_leaves_both_sessions_running(claude_acp: Any, wire: Any, work: Path) -> None:
    claude_acp(LONE_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k.startswith("ANYAGENTD_")}  # the fixture's CLAUDE_ACP_BIN
    client = wire(env=env, timeout=STEP)
    first = client.ok("open", agent="claude-acp", dir=str(work))["id"]
    second = client.ok("open", agent="claude-acp", dir=str(work))["id"]
    for session in (first, second):
        client.ok("prompt", session=session, text="Say something.")
        lines = client.events(session, until=_ended)
        assert lines[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
        assert _text(lines) == "broken \ufffd emoji"
    assert not any(b"\\ud83d" in raw for raw in client.raw_lines)
    for session in (first, second):
        client.ok("close", session=session, timeout=STEP)
        assert client.events(session)[-1] == {"closed": session}
