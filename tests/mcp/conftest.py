"""Fixtures of the MCP tests: the real marker MCP server (``marker_server.py``, built with the official SDK) over
stdio, streamable HTTP and SSE, server-description helpers, and ``claude``: the pinned real Claude Code pointed at
a scripted model server (as in ``tests/claude/test_claude_live.py``)."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from anyagentd.model import McpServer

HERE = Path(__file__).parent
MARKER_SERVER = HERE / "marker_server.py"
STARTUP = 30.0
"""Seconds an HTTP/SSE marker server may take to print READY (importing the SDK alone takes seconds)."""


def stdio_marker(name: str = "marker", initialize_delay: float | None = None) -> McpServer:
    """The marker server over stdio: ``python marker_server.py stdio [initialize_delay]`` (with a delay it answers
    ``initialize`` that many seconds late at the earliest: it reads nothing before)."""
    delay = [] if initialize_delay is None else [str(initialize_delay)]
    return McpServer.model_validate(
        {
            "name": name,
            "connection": {"Stdio": {"command": sys.executable, "args": [str(MARKER_SERVER), "stdio", *delay]}},
        }
    )


def url_server(name: str, transport: str, url: str, headers: dict[str, str] | None = None) -> McpServer:
    return McpServer.model_validate({"name": name, "connection": {transport: {"url": url, "headers": headers or {}}}})


class ServedMarker:
    """A marker server subprocess serving over HTTP or SSE at ``url``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by stop(); a file, not a pipe: the server logs every request
        self.proc = subprocess.Popen(
            [sys.executable, str(MARKER_SERVER), kind],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,
        )
        self.url = self._wait_ready()

    def _wait_ready(self) -> str:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(STARTUP):
            self.stop()
            raise RuntimeError(f"marker server ({self.kind}) printed nothing within {STARTUP} s")
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self.stderr.seek(0)
            err = self.stderr.read()
            self.stop()
            raise RuntimeError(f"marker server ({self.kind}) did not start: {line!r} {err[-2000:]}")
        return line.split(" ", 1)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(5)
        self.stderr.close()


@pytest.fixture(scope="session")
def http_marker() -> Iterator[ServedMarker]:
    """The marker server over streamable HTTP on 127.0.0.1 (a free port), ready when yielded."""
    served = ServedMarker("http")
    yield served
    served.stop()


@pytest.fixture(scope="session")
def sse_marker() -> Iterator[ServedMarker]:
    """The marker server over the legacy HTTP+SSE transport on 127.0.0.1, ready when yielded."""
    served = ServedMarker("sse")
    yield served
    served.stop()
