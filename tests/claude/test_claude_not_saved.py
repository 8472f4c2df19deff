"""Issue 32, part 1, on the wire: ``anyagentd serve`` (the client's) is killed (-9) right after the REAL pinned
Claude Code asks a permission in a session's first turn, before the CLI has saved the session; a new ``serve``'s
``open`` with that ``resume`` token fails with ``ResumeFailed`` whose ``reason`` is ``not_saved`` and whose message
says the session was never saved (``docs/wire.md#error-kinds``), so the client knows to open afresh and replay.

Claude Code writes its transcript on its own schedule (often before it asks, not always under load), so once the
killed ``serve``'s CLI is gone (it dies with ``serve``) the test removes the transcript: the disk is then exactly as
a CLI killed before its write leaves it. Fails (never skips) when the CLI is missing: ``agent_bin`` raises."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from anyagentd.adapters import lineage
from anyagentd_testing.events import process_running

pytestmark = pytest.mark.timeout(120)

STEP = 25.0
"""Seconds any single wait on the real CLI may take."""

WRITE = {
    "turns": [
        {"text": "Writing.", "tool": {"name": "Write", "input": {"file_path": "{{cwd}}/out.txt", "content": "hi\n"}}},
        {"text": "Done."},
    ]
}


def test_a_resume_of_a_session_claude_never_saved_is_resume_failed_not_saved(
    model_server: Any, wire: Any, tmp_path: Path
) -> None:
    from anyagentd_testing.agents import agent_bin, claude_env

    server = model_server(WRITE)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {**claude_env(server.url, home), "ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude"))}
    client = wire(env=env, timeout=STEP)
    info = client.ok("open", agent="claude", dir=str(work))
    token = info["resume_token"]
    client.ok("prompt", session=info["id"], text="Write out.txt")
    client.events(info["id"], until=lambda line: "RequestOpened" in line.get("event", {}).get("kind", {}))
    agents = [pid for pid, (_, ppid, _) in lineage.processes().items() if ppid == client.proc.pid]
    assert agents
    client.proc.kill()  # the client's serve crashes; its CLI dies with it
    client.proc.wait(5)
    deadline = time.monotonic() + STEP
    while any(process_running(pid) for pid in agents):
        assert time.monotonic() < deadline, "Claude Code outlived serve"
        time.sleep(0.05)
    for path in (home / ".claude" / "projects").glob("**/*.jsonl"):
        path.unlink()  # as if the CLI had died before writing its transcript

    again = wire(env=env, timeout=STEP)
    error = again.error("open", agent="claude", dir=str(work), resume=token)
    assert error["kind"] == "ResumeFailed" and error["reason"] == "not_saved", error
    assert f"has no saved session {token}: it was never saved" in error["message"], error
    assert "No conversation found with session ID" in error["detail"], error
    # what the client then does: a fresh session takes the turn again
    fresh = again.ok("open", agent="claude", dir=str(work))
    assert fresh["resume_token"] != token
