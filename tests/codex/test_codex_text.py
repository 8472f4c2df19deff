"""Text no UTF-8 encoder takes, through the REAL pinned Codex CLI (issue 20.1): the scripted model sends a lone
surrogate (``"\\ud83d"``, valid JSON syntax) to one of two sessions of the same ``anyagentd serve``.

Codex parses the model's stream with serde, which refuses a lone surrogate escape: its turn fails with its own
stream error, so no such text reaches anyagentd from Codex (its output is always valid UTF-8; the adapter decodes
it through the same ``anyagentd.text.loads`` as the others). What must hold: the turn ends, every line on the wire
stays valid, and both sessions go on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_codex_live import STEP, codex_environment
from wire_client import kind_tag

pytestmark = pytest.mark.timeout(120)


def _ended(line: dict[str, Any]) -> bool:
    return "event" in line and kind_tag(line) == "TurnEnded"


def _text(lines: list[dict[str, Any]]) -> str:
    deltas = [line["event"]["kind"]["TextDelta"] for line in lines if "event" in line and kind_tag(line) == "TextDelta"]
    return "".join(delta["text"] for delta in deltas)


def test_over_the_wire_a_lone_surrogate_leaves_both_sessions_running(
    model_server: Callable[..., Any], wire: Any, tmp_path: Path
) -> None:
    server = model_server({"turns": [{"text": "broken \ud83d emoji"}]})
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    client = wire(env=codex_environment(server.url, home), timeout=STEP)
    first = client.ok("open", agent="codex", dir=str(work))["id"]
    second = client.ok("open", agent="codex", dir=str(work))["id"]
    client.ok("prompt", session=first, text="Say something.")
    lines = client.events(first, until=_ended)
    stop = lines[-1]["event"]["kind"]["TurnEnded"]["stop"]
    assert stop == {"Completed": {"source": "Protocol"}} or "Failed" in stop, stop
    assert "\ud83d" not in _text(lines)
    server.set_script({"turns": [{"text": "fine text"}]})
    for session in (second, first):
        client.ok("prompt", session=session, text="Say something else.")
        lines = client.events(session, until=_ended)
        assert lines[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
        assert _text(lines) == "fine text"
    for session in (first, second):
        client.ok("close", session=session, timeout=STEP)
        assert client.events(session)[-1] == {"closed": session}
