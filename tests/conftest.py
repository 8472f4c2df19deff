"""Root fixtures: the anyio backend, the wire schema, and ``wire``, a factory of checked ``anyagentd serve``
clients (every line they read is validated against the schema and the wire's ordering guarantees)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # wire_schema, wire_client

import wire_schema as _wire_schema  # noqa: E402
from wire_client import WireClient  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _collect_leftovers() -> None:
    """Collect garbage before each test, outside any event loop: an HTTP client an earlier test left behind is
    finalized here (its "event loop is closed" ignored), not inside the next async test's loop, where anyio's
    runner would report it as that test's failure."""
    import gc

    gc.collect()


@pytest.fixture(scope="session")
def wire_schema() -> Any:
    """The module :mod:`wire_schema`: ``validate_line(obj)``, ``validate_def(name, obj)``, ``SCHEMA``."""
    return _wire_schema


@pytest.fixture
def wire() -> Iterator[Callable[..., WireClient]]:
    """``wire(*serve_args, env=None, cwd=None, timeout=10)`` starts ``anyagentd serve`` and returns its
    :class:`WireClient`; every server is ended at teardown and its remaining lines validated."""
    clients: list[WireClient] = []

    def start(*args: str, **kwargs: Any) -> WireClient:
        client = WireClient(*args, **kwargs)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty directory ``tmp_path / "work"``: a session's working directory, apart from anything else the test
    keeps in ``tmp_path`` (a fresh HOME, logs)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def claude(model_server: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``claude(script)`` starts a model server with ``script`` and points this process's environment (what the
    adapter passes to the CLI) at it, with ``ANYAGENTD_CLAUDE_BIN`` set to the pinned CLI. Returns the server.
    Fails (never skips) when the CLI is missing."""
    from anyagentd_testing.agents import agent_bin, claude_env, clean_environ, set_environ

    binary = str(agent_bin("claude"))

    def start(script: Any) -> Any:
        server = model_server(script)
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        env = clean_environ(claude_env(server.url, home))
        env["ANYAGENTD_CLAUDE_BIN"] = binary
        set_environ(monkeypatch, env)
        return server

    return start
