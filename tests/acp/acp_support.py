"""Helpers of the ACP adapter tests (imported by the ``test_acp_*`` modules; fixtures are in ``conftest.py``).

The real agents are the pinned ``codex-acp`` and ``claude-agent-acp`` (``tests/agents``); they fail the tests
(never skip) when missing: ``agent_bin`` raises. ``tiny_agent.py`` beside this file is a small ACP agent on the
same library, for what the real ones do not show.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from anyagentd.model import Event

STEP = 25.0
"""Seconds any single wait on a real agent may take."""

TINY = Path(__file__).with_name("tiny_agent.py")

CODEX_ACP_FLAGS = ["-c", "approval_policy=untrusted", "-c", "sandbox_mode=workspace-write"]


def tiny_ref(name: str = "tiny") -> dict[str, Any]:
    """The ``{"acp": {...}}`` AgentRef of the tiny agent (no discovery)."""
    return {"acp": {"name": name, "path": sys.executable, "args": [str(TINY)]}}


def tag(event: Event) -> str:
    kind = event.kind
    return kind if isinstance(kind, str) else kind.TAG


class Stream:
    """One consumer of ``session.events()`` with bounded waits."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._it: AsyncIterator[Event] = session.events().__aiter__()
        self.seen: list[Event] = []

    async def next(self, timeout: float = STEP) -> Event:
        with anyio.fail_after(timeout):
            event = await self._it.__anext__()
        self.seen.append(event)
        return event

    async def until(self, name: str, timeout: float = STEP) -> Event:
        with anyio.fail_after(timeout):
            while True:
                event = await self.next(timeout)
                if tag(event) == name:
                    return event

    async def rest(self, timeout: float = STEP) -> list[Event]:
        out = []
        with anyio.fail_after(timeout):
            async for event in self._it:
                self.seen.append(event)
                out.append(event)
        return out

    def of(self, name: str) -> list[Any]:
        return [e for e in self.seen if tag(e) == name]

    def text(self) -> str:
        return "".join(e.kind.text for e in self.seen if tag(e) == "TextDelta" and e.turn_info is not None)


def alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pid: int, timeout: float = 3.0) -> None:
    """Wait until the process group ``pid`` has no member left (SIGKILL delivery is asynchronous)."""
    with anyio.fail_after(timeout):
        while alive(pid):
            await anyio.sleep(0.05)
