"""Text no UTF-8 encoder takes, from the REAL pinned Claude Code (issue 20.1): a lone surrogate (``"\\ud83d"``,
valid JSON syntax) in the scripted model's text or in an MCP tool's result. The adapter decodes it as U+FFFD, so
the event serializes, the wire writes it, and a second session on the same ``anyagentd serve`` goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lone_surrogate import LONE_SCRIPT, REPLACED, agent_environment, ended, python_api_text, wire_text, wire_turn
from wire_client import kind_tag

pytestmark = pytest.mark.timeout(90)

STEP = 25.0


@pytest.mark.anyio
async def test_python_api_events_with_a_lone_surrogate_serialize(claude: Any, work: Path) -> None:
    claude(LONE_SCRIPT)
    assert await python_api_text("claude", work) == REPLACED


def test_over_the_wire_a_lone_surrogate_leaves_both_sessions_running(claude: Any, wire: Any, work: Path) -> None:
    claude(LONE_SCRIPT)
    client = wire(env=agent_environment(), timeout=STEP)  # the fixture's CLAUDE_BIN
    first = client.ok("open", agent="claude", dir=str(work))["id"]
    second = client.ok("open", agent="claude", dir=str(work))["id"]
    assert wire_text(wire_turn(client, first)) == REPLACED
    assert b"\xef\xbf\xbd" in b"".join(client.raw_lines)  # U+FFFD as UTF-8, never a "\ud83d" escape
    assert not any(b"\\ud83d" in raw for raw in client.raw_lines)
    assert wire_text(wire_turn(client, second)) == REPLACED
    assert client.ok("info", session=first)["status"] == "Idle"
    for session in (first, second):
        client.ok("close", session=session, timeout=STEP)
        assert client.events(session)[-1] == {"closed": session}


# An MCP server over stdio, by hand: its one tool answers text with a lone surrogate (json.dumps writes "\ud83d").
LONE_MCP_SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "lone", "version": "0.0.1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "Echo text",
                             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "tool \ud83d result"}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


def test_over_the_wire_an_mcp_result_with_a_lone_surrogate(claude: Any, wire: Any, work: Path, tmp_path: Path) -> None:
    import sys

    server_path = tmp_path / "lone_mcp.py"
    server_path.write_text(LONE_MCP_SERVER)
    model = claude(
        {
            "turns": [
                {"text": "Calling.", "tool": {"name": "mcp__lone__echo", "input": {"text": "x"}}},
                {"text": "Done."},
            ]
        }
    )
    client = wire(env=agent_environment(), timeout=STEP)
    stdio = {"command": sys.executable, "args": [str(server_path)], "env": {}}
    mcp = [{"name": "lone", "connection": {"Stdio": stdio}}]
    first = client.ok("open", agent="claude", dir=str(work), mcp_servers=mcp, permission_mode="AutoApprove")["id"]
    second = client.ok("open", agent="claude", dir=str(work))["id"]
    client.ok("prompt", session=first, text="Use the tool.")
    lines = client.events(first, until=ended, timeout=60)
    assert lines[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    outputs = [
        l["event"]["kind"]["ToolUpdated"].get("output") for l in lines if "event" in l and kind_tag(l) == "ToolUpdated"
    ]
    assert any(o and "tool \ufffd result" in o for o in outputs), outputs
    assert wire_text(lines).endswith("Done.")
    model.set_script({"turns": [{"text": "fine"}]})
    client.ok("prompt", session=second, text="Say something.")
    assert client.events(second, until=ended)[-1]["event"]["kind"]["TurnEnded"]["stop"] == {
        "Completed": {"source": "Protocol"}
    }
