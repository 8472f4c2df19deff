"""Helpers of the ACP adapter tests (imported by the ``test_acp_*`` modules; fixtures are in ``conftest.py``).

The real agents are the pinned ``codex-acp`` and ``claude-agent-acp`` (``tests/agents``); they fail the tests
(never skip) when missing: ``agent_bin`` raises. ``tiny_agent.py`` beside this file is a small ACP agent on the
same library, for what the real ones do not show. Reading events: :mod:`anyagentd_testing.events`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

STEP = 25.0
"""Seconds any single wait on a real agent may take."""

TINY = Path(__file__).with_name("tiny_agent.py")

CODEX_ACP_FLAGS = ["-c", "approval_policy=untrusted", "-c", "sandbox_mode=workspace-write"]


def tiny_ref(name: str = "tiny") -> dict[str, Any]:
    """The ``{"acp": {...}}`` AgentRef of the tiny agent (no discovery)."""
    return {"acp": {"name": name, "path": sys.executable, "args": [str(TINY)]}}
