"""Shared checks of issue 20.1 for every agent that can send a lone surrogate (``"\\ud83d"``, valid JSON syntax):
the adapter decodes it as U+FFFD, so events serialize through the Python API and over the wire, where a second
session on the same ``anyagentd serve`` goes on. Imported by module name (``tests`` is on ``sys.path``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wire_client import kind_tag

from anyagentd.runtime import Runtime

LONE_SCRIPT = {"turns": [{"text": "broken \ud83d emoji"}, {"text": "still \ud83d here"}]}
REPLACED = "broken \ufffd emoji"


def ended(line: dict[str, Any]) -> bool:
    return "event" in line and kind_tag(line) == "TurnEnded"


def wire_text(lines: list[dict[str, Any]]) -> str:
    """The text of a turn's ``TextDelta`` lines, as the wire wrote them."""
    deltas = [line["event"]["kind"]["TextDelta"] for line in lines if "event" in line and kind_tag(line) == "TextDelta"]
    return "".join(delta["text"] for delta in deltas)


async def python_api_text(agent: str, work: Path) -> str:
    """One turn on ``agent`` through the Python API, every event serialized; returns its text (asserts it ended
    Completed)."""
    async with Runtime() as rt:
        session = await rt.open(agent, dir=work)
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
    return text


def wire_turn(client: Any, session: str) -> list[dict[str, Any]]:
    """One prompt on ``session`` over the wire, to its TurnEnded (asserted Completed); returns the session's lines."""
    client.ok("prompt", session=session, text="Say something.")
    lines = client.events(session, until=ended)
    assert lines[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    return lines


def agent_environment() -> dict[str, str]:
    """What a ``wire`` child needs of a fixture's environment (its ``ANYAGENTD_*_BIN`` and arguments)."""
    return {k: v for k, v in os.environ.items() if k.startswith("ANYAGENTD_")}
