"""Fixtures for the A2A daemon: ``a2a_daemon(...)`` starts ``anyagentd a2a --listen 127.0.0.1:0`` as a real
subprocess, reads its listening line and returns a :class:`Daemon` handle; every daemon is stopped at teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import ANYAGENTD

STARTUP = 30.0
"""Seconds a daemon may take to print its listening line."""


@dataclass
class Daemon:
    """A running ``anyagentd a2a``: its ``url``, process, state dir and stderr lines (JSON logs)."""

    url: str
    process: subprocess.Popen[str]
    state_dir: Path
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    stderr_reader: threading.Thread | None = None

    def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        request_id: Any = 1,
        agent: str | None = None,
    ) -> httpx.Response:
        """One raw JSON-RPC POST with A2A-Version 1.0 (``headers`` override), to the root or to ``agent``'s path
        (``/agents/{agent}/``)."""
        sent = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        if token:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        path = f"/agents/{agent}/" if agent else "/"
        return httpx.post(self.url + path, json=body, headers=sent, timeout=60)

    def send_text(
        self,
        text: str,
        *,
        token: str | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        agent: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        if context_id:
            message["contextId"] = context_id
        if task_id:
            message["taskId"] = task_id
        response = self.rpc("SendMessage", {"message": message, **params}, token=token, agent=agent)
        body = response.json()
        assert "result" in body, body
        return body["result"]["task"]

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout=timeout)

    def all_stderr(self, timeout: float = 10.0) -> list[str]:
        """Every stderr line of a daemon that has exited (its reader thread joined: nothing more can come)."""
        assert self.process.poll() is not None, "the daemon is still running"
        if self.stderr_reader is not None:
            self.stderr_reader.join(timeout)
        return list(self.stderr)


def _start(args: list[str], env: dict[str, str], cwd: Path) -> Daemon:
    process = subprocess.Popen(
        [ANYAGENTD, "a2a", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + STARTUP
    line = ""
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line or process.poll() is not None:
            break
    if not line:
        process.kill()
        raise AssertionError(f"the daemon printed no listening line; stderr: {''.join(stderr)[-2000:]}")
    url = json.loads(line)["listening"]
    daemon = Daemon(url, process, Path(args[args.index("--state-dir") + 1]), stderr, stderr_reader=reader)
    threading.Thread(target=lambda: daemon.stdout.extend(process.stdout), daemon=True).start()  # type: ignore
    return daemon


@pytest.fixture
def a2a_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """``a2a_daemon(*args, config=None (TOML text), env=None (extra variables), state_dir=None, mock=None)``."""
    daemons: list[Daemon] = []

    def start(
        *args: str,
        config: str | None = None,
        env: dict[str, str] | None = None,
        state_dir: Path | None = None,
        mock: str | None = None,
        listen: str = "127.0.0.1:0",
    ) -> Daemon:
        state = state_dir or tmp_path / f"state{len(daemons)}"
        argv = ["--listen", listen, "--state-dir", str(state), *args]
        if mock:
            argv += ["--mock", mock]
        if config is not None:
            path = tmp_path / f"config{len(daemons)}.toml"
            path.write_text(config)
            argv += ["--config", str(path)]
        daemon = _start(argv, {**os.environ, **(env or {})}, tmp_path)
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        if daemon.process.poll() is None:
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait(timeout=10)


def temporal_engine(
    temporal: dict[str, str], heartbeat: float = 3, hosts: list[str] | None = None, work_root: Path | None = None
) -> str:
    """The ``[workflow_engine]`` table of the ``temporal`` engine on ``temporal`` (the ``temporal`` fixture's server
    and namespace), agent steps interrupted after ``heartbeat`` seconds without a heartbeat; ``hosts``: the agents
    whose steps the daemon runs (default: its ``[[agents]]``), ``work_root``: the runs' directories."""
    table = (
        f'\n[workflow_engine]\nkind = "temporal"\naddress = "{temporal["address"]}"\n'
        f'namespace = "{temporal["namespace"]}"\nheartbeat = {heartbeat}\n'
    )
    if hosts is not None:
        table += f"hosts = {json.dumps(hosts)}\n"
    if work_root is not None:
        table += f"work_root = {json.dumps(str(work_root))}\n"
    return table


@pytest.fixture(params=["local", "temporal"])
def workflow_engine(request: pytest.FixtureRequest) -> str:
    """Each workflow engine in turn, as the configuration's ``[workflow_engine]`` table: ``""`` (the embedded
    ``local`` default), then ``temporal`` on the session's Temporal dev server, in a namespace of the test's own,
    the daemon hosting the steps of ``mock``, ``claude`` and ``codex``."""
    if request.param == "local":
        return ""
    return temporal_engine(request.getfixturevalue("temporal"), hosts=["mock", "claude", "codex"])
