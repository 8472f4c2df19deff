"""bench/bench_agents.py's bare drivers leave no process behind: each agent runs in a session (so a process group)
of its own, and the whole group is ended when the driver is done, times out, or is stopped by ^C, SIGTERM or SIGHUP
— even the members that ignore SIGTERM (a launcher's CLI). Real child processes (``sh``, ``sleep``, a Python ACP
responder), read through ``/proc`` (Linux). The benchmark's figures are not checked here: it asserts nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_agents

pytestmark = pytest.mark.timeout(60)

GROUP = "trap '' TERM; sleep 60 & sleep 60"
"""An agent that neither exits when its stdin closes nor on SIGTERM, with a child of its own (like a launcher and
the CLI it runs), and never answers."""

ACP_AGENT = """
import json, os, subprocess, sys
open(sys.argv[1], "w").write(str(os.getpgid(0)))
subprocess.Popen(["sleep", "60"])  # a child left running, like the CLI under a launcher
answers = {"initialize": {"protocolVersion": 1}, "session/new": {"sessionId": "s1"},
           "session/prompt": {"stopReason": "end_turn"}}
for line in sys.stdin:
    msg = json.loads(line)
    if msg["method"] == "session/prompt":
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
        print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                                                                                    "update": chunk}}), flush=True)
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": answers[msg["method"]]}), flush=True)
"""
"""An ACP agent answering one text turn, that leaves a child running when it exits."""


def live_members(pgid: int) -> list[int]:
    """The pids of process group ``pgid``'s processes that still run (zombies, already dead, left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
            if int(pgrp) == pgid and state != "Z":
                found.append(int(entry.name))
    return found


def blocked_reading(pid: int) -> bool:
    """Whether process ``pid``'s main thread is blocked in ``read(2)`` (``/proc/PID/syscall`` starts with its
    number: 0 on x86-64, 63 on arm64; a running thread reads ``running``)."""
    import platform

    with contextlib.suppress(OSError):
        number = {"x86_64": "0", "aarch64": "63"}[platform.machine()]
        return Path(f"/proc/{pid}/syscall").read_text().split(" ", 1)[0] == number
    return False


def wait_until(check: Callable[[], bool], what: str, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within} s")
        time.sleep(0.02)


def assert_gone(pgid: int) -> None:
    """Every process of group ``pgid`` ends soon (a SIGKILLed process dies when the kernel next runs it, a moment
    after ``killpg`` returns; the agents here would otherwise run for 60 s)."""
    wait_until(lambda: live_members(pgid) == [], f"process group {pgid} ends ({live_members(pgid)} still run)", 10)


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups the test starts; any still running at teardown (the test failed) are killed."""
    started: list[int] = []
    yield started
    for pgid in started:
        if live_members(pgid):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)


def test_closing_ends_every_process_of_the_group_even_those_that_ignore_sigterm(
    tmp_path: Path, groups: list[int]
) -> None:
    child = bench_agents.LineChild(["sh", "-c", GROUP], dict(os.environ), str(tmp_path))
    groups.append(child.proc.pid)
    assert os.getpgid(child.proc.pid) == child.proc.pid != os.getpgid(0)  # a group of its own
    wait_until(lambda: len(live_members(child.proc.pid)) >= 2, "the agent and its child run")
    child.close(grace=0.2)
    assert_gone(child.proc.pid)
    child.close()  # again: nothing to do


def test_an_agent_that_never_answers_times_out_and_its_group_is_ended(tmp_path: Path, groups: list[int]) -> None:
    child = bench_agents.LineChild(["sh", "-c", GROUP], dict(os.environ), str(tmp_path), timeout=0.5)
    groups.append(child.proc.pid)
    with pytest.raises(TimeoutError, match="did not finish within 0.5 s"), child:
        child.request("initialize", {})
    assert_gone(child.proc.pid)


def test_the_bare_acp_driver_runs_a_turn_and_leaves_nothing_behind(tmp_path: Path, groups: list[int]) -> None:
    pgid_file = tmp_path / "pgid"
    run = bench_agents.bare_acp([sys.executable, "-c", ACP_AGENT, str(pgid_file)])
    figures = run(dict(os.environ), str(tmp_path))
    groups.append(int(pgid_file.read_text()))
    assert {"first", "end"} <= figures.keys()
    assert_gone(groups[0])  # the agent's child too


DRIVER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # ^C's KeyboardInterrupt, even if SIGINT came ignored
sys.path.insert(0, sys.argv[1])
import bench_agents
bench_agents.EXIT_GRACE = bench_agents.TERM_GRACE = 0.2
bench_agents.end_on_signals()  # as main() does
bench_agents.bare_acp(["sh", "-c", "echo $$ > " + sys.argv[2] + "; " + sys.argv[3]])(dict(os.environ), sys.argv[4])
"""
"""The bench's bare ACP driver, waiting for an ``initialize`` answer from :data:`GROUP` (which writes its pid, the
group's id, to a file first)."""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_bench_stopped_by_a_signal_ends_its_agents_group(tmp_path: Path, groups: list[int], sig: int) -> None:
    pgid_file = tmp_path / "pgid"
    bench = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(BENCH), str(pgid_file), GROUP, str(tmp_path)], stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: pgid_file.exists() and pgid_file.read_text().strip() != "", "the agent starts")
        pgid = int(pgid_file.read_text())
        groups.append(pgid)
        wait_until(lambda: len(live_members(pgid)) >= 2, "the agent and its child run")
        # The agent's group can be up before the bench has its handle on it (on a loaded machine the bench may still
        # be inside Popen, or between it and the `with`): signal once the bench is blocked reading the agent.
        wait_until(lambda: blocked_reading(bench.pid), "the bench waits for the agent's answer")
        bench.send_signal(sig)
        bench.wait(timeout=30)
        assert_gone(pgid)
    finally:
        bench.kill()
        bench.wait()
