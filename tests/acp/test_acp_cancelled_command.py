"""A cancelled turn's command does not run on: the REAL pinned codex-acp (0.16.0) answers ``session/cancel`` with
``stopReason: cancelled`` at once and leaves the shell it started for the tool (under ``codex-linux-sandbox`` and
``bwrap``) running, so the side effect the tool was cancelled before came anyway (issue 26). The adapter stops
that command's processes before it reports the tool ``Cancelled`` (``anyagentd.adapters.cancelled_commands``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_support import STEP

from anyagentd.model import AnswerPermission
from anyagentd.runtime import Runtime
from anyagentd_testing.events import EventStream, event_tag, process_group_alive, process_running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def host_pid(namespaced: int, cwd: Path) -> int | None:
    """The pid, as this process sees it, of the process that reads its own pid as ``namespaced`` and runs in
    ``cwd``: Codex's sandbox (bwrap) gives commands a pid namespace of their own, so ``$$`` is not our pid."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                nspid = next((line.split()[1:] for line in fh if line.startswith("NSpid:")), [])
            if nspid and int(nspid[-1]) == namespaced and os.readlink(f"/proc/{name}/cwd") == str(cwd):
                return int(name)
        except OSError:
            continue
    return None


async def test_a_cancelled_command_is_stopped_before_the_tool_reads_cancelled(codex_acp: Any, work: Path) -> None:
    command = "echo $$ > pid.txt; sleep 20; echo done > after.txt"
    codex_acp({"turns": [{"tool": {"name": "exec_command", "input": {"cmd": command}}}, {"text": "never"}]})
    async with Runtime() as rt:
        session = await rt.open("codex-acp", dir=work)
        stream = EventStream(session)
        await session.prompt("Run the slow command")
        request = (await stream.until("RequestOpened")).kind.value.value
        await session.answer(request.id, AnswerPermission(value="AllowOnce"))
        while True:  # reported running: codex-acp now holds it as a process that may outlive the turn
            tool = (await stream.until("ToolUpdated")).kind.value
            if tool.kind == "Execute" and tool.status == "Running":
                break
        shell = None
        with anyio.fail_after(STEP):  # the shell runs once it wrote its pid
            while shell is None:
                await anyio.sleep(0.05)
                written = (work / "pid.txt").read_text().strip() if (work / "pid.txt").exists() else ""
                shell = host_pid(int(written), work) if written else None
        await session.cancel()
        ended = await stream.until("TurnEnded")
        assert ended.kind.stop == "Cancelled" and not ended.kind.background
        end = [e for e in stream.seen if event_tag(e) == "ToolUpdated"][-1]
        assert end.kind.value.status == "Cancelled"
        assert end.extensions["acp/closed_at_turn_end"] is True
        assert shell in end.extensions["acp/stopped_processes"]["pids"]
        with anyio.fail_after(5):  # stopped, not left to finish its 20 s
            while process_running(shell):
                await anyio.sleep(0.05)
        assert not (work / "after.txt").exists()  # the shell that would write it is gone
        assert process_group_alive(session.connection.process.pid)  # codex-acp itself lives on
        await session.close()
        await stream.rest()
        assert [e.kind.value.status for e in stream.seen if event_tag(e) == "ToolUpdated"][-1] == "Cancelled"
