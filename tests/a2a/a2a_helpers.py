"""Helpers shared by the A2A tests (imported by module name: pytest puts this directory on sys.path)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

ANYAGENTD = str(Path(sys.executable).with_name("anyagentd"))
"""The ``anyagentd`` console script of this environment."""


def self_signed(directory: Path, cert_name: str = "cert.pem", key_name: str = "key.pem") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (``CN`` and ``subjectAltName``, valid a day) and its key, made by
    ``openssl req`` at ``directory/cert_name`` and ``directory/key_name``; returns (certificate, key)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / cert_name, directory / key_name
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
    command += ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(command, check=True, capture_output=True)
    return cert, key


def wait_state(
    daemon: Any, task_id: str, state: str, timeout: float = 20.0, token: str | None = None, agent: str | None = None
) -> dict[str, Any]:
    """Poll GetTask (as ``token``'s principal, on ``agent``'s path: the root without one) until the task is in
    ``state``; returns it (fails with the last one seen)."""
    deadline = time.monotonic() + timeout
    while True:
        got = daemon.rpc("GetTask", {"id": task_id}, token=token, agent=agent).json()["result"]
        if got["status"]["state"] == state or time.monotonic() > deadline:
            assert got["status"]["state"] == state, got
            return got
        time.sleep(0.1)  # about 9 polls a second: a principal's default budget (120/60s) lasts through a slow run


def wait_task(
    daemon: Any, task_id: str, holds: Any, what: str, timeout: float = 20.0, token: str | None = None
) -> dict[str, Any]:
    """Poll GetTask (as ``token``'s principal) until ``holds(task)`` is true; returns the task (fails naming ``what``
    and the last task seen)."""
    deadline = time.monotonic() + timeout
    while True:
        got = daemon.rpc("GetTask", {"id": task_id}, token=token).json()["result"]
        if holds(got) or time.monotonic() > deadline:
            assert holds(got), f"{what}: {got}"
            return got
        time.sleep(0.1)


def listed_tasks(daemon: Any, token: str | None, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Poll ListTasks (as ``token``'s principal) until it lists a task; returns the tasks (none after ``timeout``
    seconds)."""
    deadline = time.monotonic() + timeout
    listed: list[dict[str, Any]] = []
    while not listed and time.monotonic() < deadline:
        listed = daemon.rpc("ListTasks", {}, token=token).json()["result"].get("tasks", [])
        time.sleep(0.05)
    return listed


SLOW = {
    "turns": [
        [
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "working"}}},
            {"Sleep": 60000},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {"Emit": {"TextDelta": {"message_id": "m2", "text": "second"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
    ]
}


class PushReceiver(BaseHTTPRequestHandler):
    """A push-notification endpoint: every POST's (headers, JSON body) lands in :attr:`received`, in order."""

    received: ClassVar[list[tuple[dict[str, str], Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def push_receiver() -> Iterator[ThreadingHTTPServer]:
    """A :class:`PushReceiver` listening on a loopback port (``server_address``), its ``received`` emptied."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), PushReceiver)
    PushReceiver.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()


def pushed_states(task_id: str) -> list[str]:
    """The states the receiver was told of ``task_id``, in arrival order (status updates and whole tasks)."""
    states = []
    for _, body in list(PushReceiver.received):
        found = body.get("statusUpdate") or body.get("task") or {}
        if found.get("taskId", found.get("id")) == task_id and found.get("status", {}).get("state"):
            states.append(found["status"]["state"])
    return states


def wait_pushed(task_id: str, state: str, timeout: float = 20.0) -> list[str]:
    """Wait until the receiver was told ``task_id`` reached ``state``; returns every state it was told of it."""
    deadline = time.monotonic() + timeout
    while state not in pushed_states(task_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state in pushed_states(task_id), pushed_states(task_id)
    return pushed_states(task_id)


COMMAND_URI = "https://agentd.dev/a2a/ext/command"
"""The command extension's URI (``agentd-command.schema.json``)."""


def command_message(op: str, **args: Any) -> dict[str, Any]:
    """A SendMessage ``message`` carrying the command ``op`` with ``args`` (proto3 JSON, marked with the extension)."""
    import uuid

    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "extensions": [COMMAND_URI],
        "parts": [{"data": {"agentd": {"op": op, **args}}, "mediaType": "application/json"}],
    }


def wait_for(check: Any, what: str, timeout: float = 30.0) -> Any:
    """``check()``'s value once it is truthy, polled; fails saying ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, what
            return value
        time.sleep(0.05)


def read_stream(url: str, body: dict[str, Any], headers: dict[str, str], into: dict[str, Any]) -> None:
    """POST the JSON-RPC ``body`` to ``url`` and read its SSE stream: every frame's JSON-RPC body into
    ``into["frames"]`` as it comes, ``into["status"]`` the HTTP status, ``into["ended"]`` once the stream ended,
    ``into["error"]`` if it broke (a read waits 60 s at most). For a thread: the caller waits on ``into``."""
    import httpx

    frames: list[dict[str, Any]] = into.setdefault("frames", [])
    try:
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
            into["status"] = response.status_code
            for line in response.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line.removeprefix("data: ")))
        into["ended"] = True
    except httpx.HTTPError as err:
        into["error"] = repr(err)
