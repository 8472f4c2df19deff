"""Agent lineage (``anyagentd.adapters.lineage`` through ``AgentProcess``): an agent dies with anyagentd, and what
it started outside its process group is gone after terminate/kill, zombies reaped. Real processes (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import anyio
import pytest

from anyagentd.adapters import lineage
from anyagentd.adapters.process import AgentProcess
from anyagentd_testing.events import marked_processes, process_running

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal and /proc: Linux"),
]

# An "agent" that starts a job in a session of its own (as Claude Code's Bash tool does), prints its pid, and
# exits when its stdin closes: the job is orphaned.
ESCAPING_AGENT = (
    "import subprocess, sys\n"
    "job = subprocess.Popen(['sleep', '312'], start_new_session=True)\n"
    "print(job.pid, flush=True)\n"
    "sys.stdin.read()\n"
)


async def first_line(proc: AgentProcess) -> str:
    with anyio.fail_after(10):
        async for line in proc.lines():
            return str(line)
    raise AssertionError("no line")


async def until_marked(pid: int, mark: str) -> None:
    """Wait until ``pid`` carries the agent's mark. Popen returns (vfork) once the child has given back the
    parent's memory, before execve has laid out the new environment: in that window ``/proc/pid/environ`` reads
    empty (seen under load), so the mark is asserted once exec is done, not the moment the pid is printed."""
    with anyio.fail_after(10):
        while pid not in marked_processes(mark):
            await anyio.sleep(0.02)


def gone(pid: int) -> bool:
    """Not running and not a zombie of ours either: reaped."""
    return not os.path.exists(f"/proc/{pid}")


@pytest.mark.anyio
async def test_a_job_in_its_own_session_dies_and_is_reaped_at_terminate() -> None:
    proc = await AgentProcess.start([sys.executable, "-c", ESCAPING_AGENT])
    job = int(await first_line(proc))
    assert process_running(job) and os.getsid(job) == job  # outside the agent's group and session
    await until_marked(job, proc.mark)
    await proc.terminate(grace=2.0)
    assert gone(job)
    assert marked_processes(proc.mark) == []


@pytest.mark.anyio
async def test_the_job_of_a_crashed_agent_is_swept() -> None:
    proc = await AgentProcess.start([sys.executable, "-c", ESCAPING_AGENT])
    job = int(await first_line(proc))
    os.kill(proc.pid, signal.SIGKILL)  # the agent crashes: its job is orphaned...
    await proc.wait()
    with anyio.fail_after(5):
        while lineage.processes().get(job, ("", 0, 0))[1] != os.getpid():
            await anyio.sleep(0.02)  # ...and re-parents to us (a subreaper), not to PID 1
    await proc.kill()
    assert gone(job)


@pytest.mark.anyio
async def test_orphans_that_died_on_their_own_are_reaped() -> None:
    # A shell in its own session backgrounds a short job and exits (a Bash tool's `sleep 0.3 &`): the job
    # re-parents to us at once, ends by itself, and would stay our zombie.
    code = (
        "import subprocess, sys\n"
        "out = subprocess.run(['sh', '-c', 'sleep 0.3 >/dev/null 2>&1 & echo $!'], start_new_session=True,\n"
        "                     capture_output=True, text=True).stdout\n"
        "print(out.strip(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = await AgentProcess.start([sys.executable, "-c", code])
    job = int(await first_line(proc))
    await anyio.sleep(0.8)
    assert not process_running(job) and not gone(job)  # a zombie of ours
    await proc.terminate(grace=2.0)
    assert gone(job)


def test_an_agent_dies_with_its_server_even_on_sigkill(tmp_path) -> None:
    runner = (
        "import anyio\n"
        "from anyagentd.adapters.process import AgentProcess\n"
        "async def main():\n"
        "    proc = await AgentProcess.start(['sleep', '311'])\n"
        "    print(proc.pid, flush=True)\n"
        "    await anyio.sleep(60)\n"
        "anyio.run(main)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
    try:
        agent = int(server.stdout.readline())
        assert process_running(agent)
        server.kill()  # SIGKILL: no cleanup code of the server runs
        server.wait()
        deadline = time.monotonic() + 5
        while process_running(agent) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not process_running(agent)
    finally:
        server.kill()
        server.wait()
        try:
            os.waitpid(agent, os.WNOHANG)  # re-parented to this (subreaper) test process
        except (ChildProcessError, UnboundLocalError):
            pass


@pytest.mark.anyio
async def test_stop_command_kills_that_command_tree_and_spares_the_agent() -> None:
    # As Codex runs a command: in a wrapper of its own process group (its sandbox), the shell below it.
    code = (
        "import subprocess, sys\n"
        "job = subprocess.Popen(['sh', '-c', 'sleep 309; echo late'], start_new_session=True)\n"
        "print(job.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = await AgentProcess.start([sys.executable, "-c", code])
    shell = int(await first_line(proc))
    with anyio.fail_after(5):
        while not [p for p in lineage.lineage(proc.pid, None) if lineage.cmdline(p)[:2] == ["sleep", "309"]]:
            await anyio.sleep(0.02)
    assert lineage.stop_command(proc.pid, "echo nothing like it") is None
    killed = lineage.stop_command(proc.pid, "sleep 309; echo late")
    assert killed and shell in killed and len(killed) == 2  # the shell and its sleep
    await lineage.reap(killed)
    with anyio.fail_after(5):
        while lineage.lineage(proc.pid, None):
            await anyio.sleep(0.02)  # the agent reaps its shell; the sleep re-parented here and was reaped
    assert process_running(proc.pid)
    await proc.terminate(grace=2.0)


def test_what_an_agent_left_outside_its_group_dies_with_the_server_too() -> None:
    """The parent-death signal reaches the agent only; the guardian kills its job in a session of its own."""
    runner = (
        "import sys, anyio\n"
        "from anyagentd.adapters.process import AgentProcess\n"
        "async def main():\n"
        "    proc = await AgentProcess.start([sys.executable, '-c', sys.argv[1]])\n"
        "    async for line in proc.lines():\n"
        "        print(proc.pid, line, proc.mark, flush=True)\n"
        "        break\n"
        "    await anyio.sleep(60)\n"
        "anyio.run(main)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", runner, ESCAPING_AGENT], stdout=subprocess.PIPE, text=True)
    try:
        agent, job, mark = server.stdout.readline().split()
        assert process_running(int(job)) and marked_processes(mark)
        server.kill()
        server.wait()
        deadline = time.monotonic() + 5
        while marked_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_running(int(agent)) and not process_running(int(job))
        assert marked_processes(mark) == []
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize(("setting", "expected"), [(None, "True"), ("0", "False")])
def test_the_subreaper_can_be_declined(setting: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANYAGENTD_SUBREAPER"}
    if setting is not None:
        env["ANYAGENTD_SUBREAPER"] = setting
    code = "from anyagentd.adapters import lineage; print(lineage.become_subreaper())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == expected


def test_ctypes_loads_with_the_first_spawn_not_at_import() -> None:
    # ctypes is ~1.5 ms of every start that only a spawn needs (issue 31): importing the process module, a
    # Runtime and the scripted agent load none of it; the preexec_fn's prctl is looked up in this process.
    code = (
        "import sys\n"
        "from anyagentd.adapters import lineage, process\n"
        "from anyagentd.runtime import Runtime\n"
        "Runtime()\n"
        "before = 'ctypes' in sys.modules\n"
        "preexec = lineage.die_with_parent()\n"
        "print(before, 'ctypes' in sys.modules, callable(preexec))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "False True True"


PDEATHSIG_PROBE = "import ctypes; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v)); print(v.value)"
"""Prints the process's parent-death signal (``prctl(PR_GET_PDEATHSIG)``)."""


@pytest.mark.anyio
async def test_an_agent_process_gets_sigkill_as_its_parent_death_signal() -> None:
    proc = await AgentProcess.start([sys.executable, "-c", PDEATHSIG_PROBE])
    try:
        lines = [line async for line in proc.lines()]
    finally:
        await proc.terminate(grace=1.0)
    assert lines == [str(int(signal.SIGKILL))]  # set by setpriv's prefix where installed, else by the preexec_fn


def test_the_setpriv_prefix_sets_the_parent_death_signal_and_declines_what_does_not_resolve() -> None:
    prefix = lineage.die_with_parent_prefix(sys.executable, os.environ.get("PATH"))
    if prefix is None:  # no util-linux setpriv here: the spawn keeps its preexec_fn
        assert lineage.die_with_parent_prefix("/nonexistent/agent", None) is None
        return
    out = subprocess.run([*prefix, sys.executable, "-c", PDEATHSIG_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(int(signal.SIGKILL))
    assert lineage.die_with_parent_prefix("/nonexistent/agent", None) is None  # Popen reports it, as before
    assert lineage.die_with_parent_prefix("no-such-agent-on-path", "/nonexistent") is None
