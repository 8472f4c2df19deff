"""The conformance suite's own tests: it passes a sound adapter, and it fails a deliberately broken one with a
message that tells the author what to fix (one that reports a Failed stop for a cancel, one whose close returns with
its agent still running, one whose close and kill both do nothing, one that never ends a turn).

Each case runs the kit in a fresh pytest (``pytester``) against the real pinned Claude Code: the adapter is the
real one, wrapped so that it breaks one rule. The inner suite is what an author outside this repository writes: a
``Conformance`` subclass with a ``scripted`` fixture built from ``anyagentd_testing.agents``.
"""

from __future__ import annotations

import os

import pytest

from anyagentd_testing.agents import AGENTS_DIR_ENV, agent_bin

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(240)

SUITE = '''
import os
from typing import Any

import pytest
from anyagentd.adapters.interface import AgentConnection
from anyagentd.model import FailedStop
from anyagentd.runtime import Runtime
from anyagentd_claude.adapter import ClaudeAdapter
from anyagentd_testing.agents import agent_bin, claude_env, clean_environ
from anyagentd_testing.conformance import Conformance

class FailedCancel(ClaudeAdapter):
    """Reports a Failed stop for a cancel."""

    async def connect(self, *args: Any, **kwargs: Any) -> AgentConnection:
        conn = await super().connect(*args, **kwargs)

        async def cancel() -> None:
            await conn.link.turn_ended(FailedStop(message="interrupted"))

        conn.cancel = cancel
        return conn


class LeftBehind(ClaudeAdapter):
    """Returns from close without ending its process."""

    async def connect(self, *args: Any, **kwargs: Any) -> AgentConnection:
        conn = await super().connect(*args, **kwargs)

        async def close() -> None:
            pass

        conn.close = conn.kill = close
        return conn


class CloseReturns(ClaudeAdapter):
    """Its close says it is closing and returns, the agent still running: an override that forgot
    `await super().close()` (the README's toolkit section); its kill is the toolkit's."""

    async def connect(self, *args: Any, **kwargs: Any) -> AgentConnection:
        conn = await super().connect(*args, **kwargs)

        async def close() -> None:
            conn.closing = True

        conn.close = close
        return conn


class NeverEnds(ClaudeAdapter):
    """Never reports the end of a turn."""

    async def connect(self, *args: Any, **kwargs: Any) -> AgentConnection:
        conn = await super().connect(*args, **kwargs)

        async def turn_ended(stop: Any) -> None:
            pass

        conn.link.turn_ended = turn_ended
        return conn


class TestKit(Conformance):
    agent = "claude"
    ADAPTER = os.environ["KIT_ADAPTER"]

    @pytest.fixture
    def scripted(self, scripted_agent):
        binary = {"ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude"))}
        return scripted_agent(lambda url, home: clean_environ({**claude_env(url, home), **binary}))

    def write_tool(self, name):
        return {"name": "Write", "input": {"file_path": "{{cwd}}/" + name, "content": "hi\\\\n"}}

    def runtime(self):
        rt = Runtime()
        adapters = {"FailedCancel": FailedCancel, "LeftBehind": LeftBehind, "CloseReturns": CloseReturns,
                    "NeverEnds": NeverEnds, "ClaudeAdapter": ClaudeAdapter}
        rt.adapters["claude"] = adapters[self.ADAPTER]()
        return rt
'''


def run_kit(pytester: pytest.Pytester, adapter: str, scenario: str) -> pytest.RunResult:
    pytester.makepyfile(test_kit=SUITE)
    pytester.makeini("[pytest]\naddopts =\n")
    env = {"KIT_ADAPTER": adapter, AGENTS_DIR_ENV: str(agent_bin("claude", start=__file__).parent)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:cov", "-k", scenario, timeout=200)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_a_sound_adapter_passes(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "ClaudeAdapter", "test_cancel_mid_turn or test_close_leaves_no_process")
    result.assert_outcomes(passed=2)


def test_a_failed_stop_for_a_cancel_fails_the_kit_saying_what_to_fix(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "FailedCancel", "test_cancel_is_reported_cancelled")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AdapterContractError: cancel ended the turn Failed*",
            "*what to fix: report TurnEnded(Cancelled) for a turn the caller cancelled*",
        ]
    )


@pytest.mark.parametrize("adapter", ["CloseReturns", "LeftBehind"])
def test_a_close_that_leaves_the_agent_running_fails_the_kit_saying_what_to_fix(
    pytester: pytest.Pytester, adapter: str
) -> None:
    # The engine kills what the adapter's close left (so the runtime's exit does not wait for it for ever), and the
    # scenario fails naming those pids and what to fix; the kit's own check then finds nothing left running.
    result = run_kit(pytester, adapter, "test_close_leaves_no_process")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AdapterContractError: close() left processes [[]*[]] of the agent running: the "
            "engine killed them 5 s after close began*",
            "*what to fix: close (and kill) must end the agent's whole process group before returning*",
        ]
    )
    result.stdout.no_fnmatch_line("*still running after close*")


def test_a_turn_that_never_ends_fails_the_kit_naming_the_usual_causes(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "NeverEnds", "test_text_assembly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AdapterContractError: no TurnEnded within 25.0 s (last events: [*'MessageEnded'*",
            "*what to fix: report TurnAck (link.turn_ack()) when the agent accepts the prompt*",
        ]
    )
    result.stdout.no_fnmatch_line("*processes * still running*")
