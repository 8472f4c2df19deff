"""The pool's ``agentRssBytes`` (``status``, ``[a2a.pool] max_rss_mb``) counts the agents' processes only: the
lineage guardian, a child of anyagentd that outlives the last agent, is not one (a status once read 9650176 bytes
with ``liveAgents: 0`` after an idle close)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the guardian are Linux's")

PROBE = textwrap.dedent("""
    import json, os, subprocess, time
    from anyagentd.adapters import lineage
    from anyagentd_a2a.conversations import process_tree_rss

    def stat(pid):
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()

    lineage.guard(lineage.new_mark())  # starts the guardian, as the first agent does
    guardian = lineage.guardian_pid()
    agent = subprocess.Popen(["sleep", "60"])
    while stat(agent.pid)[0] != b"S":  # exec'd and asleep: its RSS holds still
        time.sleep(0.01)
    page = os.sysconf("SC_PAGE_SIZE")
    print(json.dumps({"guardian": int(stat(guardian)[21]) * page, "agent": int(stat(agent.pid)[21]) * page,
                      "counted": process_tree_rss()}))
    agent.kill()
    agent.wait()
""")


def test_the_guardian_is_not_counted_as_an_agent() -> None:
    """A process whose children are the guardian and one agent (``sleep``) counts the agent's RSS, not the
    guardian's."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(out.stdout)
    assert seen["guardian"] > 0 and seen["agent"] > 0
    assert seen["counted"] == seen["agent"], seen
