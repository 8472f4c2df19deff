"""Helpers shared by the A2A tests (imported by module name: pytest puts this directory on sys.path)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ANYAGENTD = str(Path(sys.executable).with_name("anyagentd"))
"""The ``anyagentd`` console script of this environment."""



def wait_state(daemon: Any, task_id: str, state: str, timeout: float = 20.0,
               token: str | None = None) -> dict[str, Any]:
    """Poll GetTask (as ``token``'s principal) until the task is in ``state``; returns it (fails with the last one
    seen)."""
    deadline = time.monotonic() + timeout
    while True:
        got = daemon.rpc("GetTask", {"id": task_id}, token=token).json()["result"]
        if got["status"]["state"] == state or time.monotonic() > deadline:
            assert got["status"]["state"] == state, got
            return got
        time.sleep(0.1)  # about 9 polls a second: a principal's default budget (120/60s) lasts through a slow run


def listed_tasks(daemon: Any, token: str | None, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Poll ListTasks (as ``token``'s principal) until it lists a task; returns the tasks (none after ``timeout``
    seconds)."""
    deadline = time.monotonic() + timeout
    listed: list[dict[str, Any]] = []
    while not listed and time.monotonic() < deadline:
        listed = daemon.rpc("ListTasks", {}, token=token).json()["result"].get("tasks", [])
        time.sleep(0.05)
    return listed


SLOW = {"turns": [[{"Emit": {"TextDelta": {"message_id": "m1", "text": "working"}}}, {"Sleep": 60000},
                   {"End": {"Completed": {"source": "Protocol"}}}],
                  [{"Emit": {"TextDelta": {"message_id": "m2", "text": "second"}}},
                   {"End": {"Completed": {"source": "Protocol"}}}]]}  # fmt: skip


