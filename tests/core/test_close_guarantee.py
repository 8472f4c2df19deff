"""The engine's close guarantee (``docs/engine.md#close``): whatever an adapter's ``close()`` does, nothing of the
agent's process tree runs once the session has closed. What still runs ``close_grace`` seconds after close began
is killed by the engine and listed in ``Session.killed_at_close``; an agent that exits within the grace is not.

The adapter is one an author writes from the README's toolkit (a ``ProcessConnection`` whose reader calls
``output_ended()`` when the output ends), with a ``close`` broken in one way or another; the agent is a real python
process that starts a job in a session of its own (as Claude Code's Bash tool does) and ignores the end of its
input. Linux: the job is found through the lineage mark in ``/proc``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from anyagentd.adapters.connection import ProcessConnection
from anyagentd.adapters.interface import AgentAdapter
from anyagentd.adapters.process import AgentProcess
from anyagentd.engine.settings import EngineSettings
from anyagentd.errors import ProtocolFailed
from anyagentd.hookspecs import hookimpl
from anyagentd.model import AgentDetails, AgentInstallation, Capabilities, SessionConfiguration
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime
from anyagentd_testing.events import process_running

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),  # a hang (the Runtime waiting for an agent nobody kills) fails here
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the job is found through /proc: Linux"),
]

# Starts a job in a session of its own, prints its pid, and outlives the end of its input unless told how long
# to linger after it (argv[1], seconds; then it exits 0 and its job goes with it).
AGENT = (
    "import os, signal, subprocess, sys, time\n"
    "job = subprocess.Popen(['sleep', '313'], start_new_session=True)\n"
    "print(job.pid, flush=True)\n"
    "sys.stdin.read()\n"
    "if len(sys.argv) > 1:\n"
    "    time.sleep(float(sys.argv[1]))\n"
    "    os.kill(job.pid, signal.SIGKILL)\n"
    "    sys.exit(0)\n"
    "time.sleep(300)\n"
)


class Careless(ProcessConnection):
    """A README-style connection; ``mode`` says how its ``close`` is broken:

    - ``returns``: sets ``closing`` and returns, the agent still running (``super().close()`` forgotten);
    - ``raises``: raises, and ``kill`` does nothing either;
    - ``eof``: closes the agent's stdin and returns at once, the agent exiting on its own a moment later;
    - ``sound``: ``ProcessConnection.close``.
    """

    def __init__(self, process: AgentProcess, link: Any, mode: str) -> None:
        super().__init__(process, link)
        self.mode = mode
        self.details = AgentDetails(capabilities=Capabilities())
        self.configuration = SessionConfiguration()
        self.job: int | None = None
        self.job_known = anyio.Event()

    async def start_turn(self, turn_id: str, prompt: Any) -> None: ...
    async def answer(self, request_id: str, answer: Any) -> None: ...
    async def cancel(self) -> None: ...

    async def read(self) -> None:
        try:
            async for line in self.process.lines():
                if self.job is None:
                    self.job = int(str(line))
                    self.job_known.set()
        finally:
            await self.output_ended()

    async def close(self) -> None:
        self.closing = True
        if self.mode == "sound":
            await super().close()
        elif self.mode == "raises":
            raise RuntimeError("close failed")
        elif self.mode == "eof":
            await self.process.close_stdin()

    async def kill(self) -> None:
        if self.mode != "raises":
            await super().kill()


class CarelessAdapter(AgentAdapter):
    PLUGIN_NAME = "careless"

    def pinned_installations(self) -> list[AgentInstallation]:
        return [AgentInstallation(id="careless", name="Careless", executable_path=sys.executable, source="Pinned")]

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        return AgentDetails()

    async def connect(self, installation: Any, options: Any, link: Any, *, no_tools: bool = False) -> Careless:
        mode = self.config.get("mode", "sound")
        linger = ["0.3"] if mode == "eof" else []
        process = await AgentProcess.start([sys.executable, "-c", AGENT, *linger])
        self.conn = Careless(process, link, mode)
        link.start_soon(self.conn.read)
        if self.config.get("connect_fails"):
            raise RuntimeError("the handshake broke")  # without stopping the agent it started
        return self.conn


class _Plugin:
    @hookimpl
    def register_adapters(self, register: Any) -> None:
        register(CarelessAdapter)


def careless(mode: str, *, close_grace: float, connect_fails: bool = False) -> Runtime:
    return Runtime(
        plugins=Plugins(load_entry_points=False, extra=[_Plugin()]),
        settings=EngineSettings(close_grace=close_grace),
        adapter_config={"careless": {"mode": mode, "connect_fails": connect_fails}},
    )


async def _open(rt: Runtime, tmp_path: Any) -> tuple[Any, Careless, list[int]]:
    session = await rt.open("careless", tmp_path)
    conn = rt.adapters["careless"].conn  # type: ignore[attr-defined]
    with anyio.fail_after(10):
        await conn.job_known.wait()
    assert conn.job is not None
    tree = [conn.process.pid, conn.job]
    assert all(process_running(pid) for pid in tree)
    return session, conn, tree


def _warnings(session: Any) -> list[str]:
    return [
        e.kind.value.message for e in session.log.events() if e.tag == "Diagnostic" and e.kind.value.level == "Warning"
    ]


@pytest.mark.parametrize("mode", ["returns", "raises"])
async def test_what_a_broken_close_leaves_running_the_engine_kills_and_the_runtime_exits(tmp_path, mode) -> None:
    async with careless(mode, close_grace=0.5) as rt:
        session, conn, tree = await _open(rt, tmp_path)
        await session.close()
        assert sorted(session.killed_at_close) == sorted(tree)
        assert not any(process_running(pid) for pid in tree)
        assert conn.process.returncode is not None
        assert any(f"{sorted(tree)} were still running 0.5 s after close began" in w for w in _warnings(session))
    # leaving the Runtime returned: the adapter's reader saw the output end (before the engine's kill: never)


async def test_leaving_the_runtime_with_a_close_that_returns_early_ends_the_agent(tmp_path) -> None:
    async with careless("returns", close_grace=0.5) as rt:
        _, conn, tree = await _open(rt, tmp_path)
    assert not any(process_running(pid) for pid in tree)
    assert conn.process.returncode is not None


async def test_an_agent_that_exits_within_the_grace_is_not_killed(tmp_path) -> None:
    # close() returns at once; the agent exits on its own 0.3 s later, well within the grace.
    async with careless("eof", close_grace=20) as rt:
        session, conn, tree = await _open(rt, tmp_path)
        await session.close()
        assert session.killed_at_close == ()
        assert conn.process.returncode == 0  # its own exit, not the engine's SIGKILL
        assert not any(process_running(pid) for pid in tree)
        assert _warnings(session) == []


async def test_a_sound_close_leaves_the_engine_nothing_to_kill(tmp_path) -> None:
    async with careless("sound", close_grace=5) as rt:
        session, _, tree = await _open(rt, tmp_path)
        await session.close()
        assert session.killed_at_close == ()
        assert not any(process_running(pid) for pid in tree)
        assert _warnings(session) == []


async def test_a_failed_connect_leaves_no_process_the_adapter_started(tmp_path) -> None:
    async with careless("sound", close_grace=5, connect_fails=True) as rt:
        with pytest.raises(ProtocolFailed):
            await rt.open("careless", tmp_path)
        conn = rt.adapters["careless"].conn  # type: ignore[attr-defined]
        assert conn.process.returncode is not None
        assert conn.job is None or not process_running(conn.job)
        assert conn.process.running() == []
