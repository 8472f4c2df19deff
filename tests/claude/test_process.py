"""``anyagentd.adapters.process.AgentProcess``, the subprocess helper every CLI adapter uses (lives beside the
Claude tests because Claude is its first user; it tests core code only)."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from anyagentd.adapters.process import AgentProcess, OversizedLine, format_exit_status
from anyagentd.errors import SpawnFailed

pytestmark = pytest.mark.timeout(30)


def test_exit_status_format() -> None:
    assert format_exit_status(0) == "exit status: 0"
    assert format_exit_status(3) == "exit status: 3"
    assert format_exit_status(-9) == "signal: 9 (SIGKILL)"
    assert format_exit_status(-15) == "signal: 15 (SIGTERM)"
    assert format_exit_status(None) == "unknown"


@pytest.mark.anyio
async def test_spawn_failure_is_spawn_failed(tmp_path) -> None:
    with pytest.raises(SpawnFailed):
        await AgentProcess.start([str(tmp_path / "missing")], cwd=str(tmp_path))
    with pytest.raises(SpawnFailed):
        await AgentProcess.start([sys.executable, "-c", "pass"], cwd=str(tmp_path / "nowhere"))


@pytest.mark.anyio
async def test_lines_json_and_oversized_line() -> None:
    code = (
        "import sys\n"
        "for line in sys.stdin:\n"
        "    sys.stdout.write('echo ' + line)\n"
        "    sys.stdout.write('x' * 5000 + '\\n')\n"
        "    sys.stdout.flush()\n"
        "sys.stdout.write('tail-without-newline')\n"
    )
    proc = await AgentProcess.start([sys.executable, "-c", code], max_line_bytes=1000)
    await proc.write_json({"a": "é"})
    await proc.close_stdin()
    got = [line async for line in proc.lines()]
    assert got == ['echo {"a":"é"}', OversizedLine(5000), "tail-without-newline"]
    assert await proc.wait() == "exit status: 0"


@pytest.mark.anyio
async def test_stderr_tail_is_bounded() -> None:
    code = "import sys\nfor i in range(500): sys.stderr.write(f'line {i}\\n')\nsys.exit(3)"
    proc = await AgentProcess.start([sys.executable, "-c", code])
    assert [line async for line in proc.lines()] == []
    assert await proc.wait() == "exit status: 3"
    await proc.stderr_drained()
    tail = proc.stderr_tail().splitlines()
    assert len(tail) == 40 and tail[-1] == "line 499"
    await proc.terminate(grace=0.1)


@pytest.mark.anyio
async def test_terminate_kills_the_whole_group() -> None:
    # A leader ignoring SIGTERM and stdin EOF, with a child that also ignores SIGTERM (like an npm wrapper
    # whose native binary does not get the signal): terminate must leave nothing running.
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = await AgentProcess.start([sys.executable, "-c", code])
    lines = proc.lines()
    child = int(await lines.__anext__())
    with anyio.fail_after(10):
        status = await proc.terminate(grace=0.3)
    assert status == "signal: 9 (SIGKILL)"
    await anyio.sleep(0.2)
    for pid in (proc.pid, child):
        try:
            os.kill(pid, 0)
            # a zombie awaiting its (dead) parent's reaper is not running
            with open(f"/proc/{pid}/stat") as fh:
                assert fh.read().split()[2] == "Z"
        except (ProcessLookupError, FileNotFoundError):
            pass


@pytest.mark.anyio
async def test_terminate_on_eof_is_graceful() -> None:
    proc = await AgentProcess.start([sys.executable, "-c", "import sys; sys.stdin.read()"])
    with anyio.fail_after(5):
        assert await proc.terminate(grace=3) == "exit status: 0"
    assert await proc.terminate() == "exit status: 0"  # idempotent
