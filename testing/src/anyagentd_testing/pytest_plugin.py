"""pytest plugin of anyagentd (entry point ``pytest11: anyagentd``): a scripted model server fixture, and ``work``.

``model_server`` is a factory: ``srv = model_server({"turns": [...]})`` returns a started
:class:`~anyagentd_testing.model_server.ModelServer` (the script may also be a JSON string or file path;
keyword arguments go to the constructor), stopped at teardown. When a test fails, the requests each of
its servers received are summarised in the report under "model server requests".

``postgres_url`` is the URL of a new, empty database on a real PostgreSQL server on loopback, one server per test
session (``postgres_server``; :mod:`anyagentd_testing.postgres`); ``database_url`` runs a test once on SQLite and
once on that PostgreSQL.

``work`` is an empty directory (``tmp_path / "work"``) to open a session in, apart from the ``home`` a test may
make beside it. A project's own ``work`` fixture takes precedence over this one.

The adapter conformance suite (:mod:`anyagentd_testing.conformance`) runs on these: subclass its ``Conformance``
in a test module. When one of its scenarios fails, the report carries the scenario's contract under "adapter
contract".

The plugin is kept import-light: the server module (starlette, uvicorn) is imported only when the
fixture is used, so loading the plugin costs nothing for projects that do not use it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .model_server import ModelServer

_SERVERS = pytest.StashKey[list["ModelServer"]]()


@pytest.fixture
def model_server(request: pytest.FixtureRequest) -> Iterator[Callable[..., ModelServer]]:
    """A factory starting scripted model servers: ``model_server(script=None, **kwargs) -> ModelServer``.

    ``script`` is a dict in the script format, a JSON string, a path or a ``Script``; ``kwargs`` are
    ``ModelServer``'s (``host``, ``port``, ``log_path``). Every server started is stopped at teardown.
    """
    from .model_server import ModelServer

    servers = request.node.stash.setdefault(_SERVERS, [])

    def start(script: Any = None, **kwargs: Any) -> ModelServer:
        server = ModelServer(script, **kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def scripted_agent(
    model_server: Callable[..., ModelServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Callable[[Any], ModelServer]]:
    """A factory of ``scripted`` fixtures: ``scripted_agent(environment) -> start``. ``start(script)`` starts a
    model server playing ``script`` and makes this process's environment exactly ``environment(server_url, home)``
    (``home``: ``tmp_path / "home"``, the same for every start of the test), which an adapter passes through to the
    agent it starts; it returns the server. E.g.
    ``scripted_agent(lambda url, home: clean_environ(claude_env(url, home)))``."""
    from .agents import set_environ

    def make(environment: Callable[[str, Path], dict[str, str]]) -> Callable[[Any], ModelServer]:
        def start(script: Any) -> ModelServer:
            server = model_server(script)
            home = tmp_path / "home"
            home.mkdir(exist_ok=True)
            set_environ(monkeypatch, environment(server.url, home))
            return server

        return start

    return make


def _for_the_session(start: Callable[[], Any]) -> Iterator[Any]:
    """A server ``start()`` made, yielded to the session and stopped at its end (its ``stop()``)."""
    server = start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server on loopback for the whole test session (:mod:`anyagentd_testing.postgres`: one per
    xdist worker), stopped at its end."""
    from .postgres import start

    yield from _for_the_session(start)


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """The SQLAlchemy URL (``postgresql+asyncpg://…``) of a new, empty database on :func:`postgres_server`."""
    return str(postgres_server.database())


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[Any]:
    """A real Temporal dev server on loopback for the whole test session (:mod:`anyagentd_testing.temporal`: one per
    xdist worker), stopped at its end."""
    from .temporal import start

    yield from _for_the_session(start)


@pytest.fixture
def temporal(temporal_server: Any) -> dict[str, str]:
    """``{"address", "namespace"}``: :func:`temporal_server` and a new namespace on it (a test sees its runs only)."""
    return {"address": temporal_server.address, "namespace": temporal_server.namespace()}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store's SQLAlchemy URL, once per database the daemon supports: a new SQLite file in ``tmp_path``, then a new
    database on the session's PostgreSQL server (:func:`postgres_url`) — the same test on both."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An empty directory ``tmp_path / "work"`` to open a session in."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach a summary of the model servers' request logs to the report of a failed test, and the contract of a
    failed conformance scenario."""
    report = yield
    if report.failed and call.when == "call":
        servers = item.stash.get(_SERVERS, None)
        if servers:
            report.sections.append(("model server requests", "\n".join(_describe(s) for s in servers)))
        contract = _contract(item)
        if contract:
            report.sections.append(("adapter contract", contract))
    return report


def _contract(item: pytest.Item) -> str | None:
    """The docstring of a conformance scenario ``item`` runs (``None`` for other tests)."""
    cls = getattr(item, "cls", None)
    if cls is None or not any(c.__module__ == "anyagentd_testing.conformance" for c in cls.__mro__):
        return None
    func = getattr(item, "function", None)
    return inspect.getdoc(func) if func is not None else None


def _describe(server: ModelServer) -> str:
    lines = [repr(server)]
    for entry in server.requests:
        turn = "" if entry["turn"] is None else f" turn={entry['turn']}"
        reply = json.dumps(entry["reply"], ensure_ascii=False, default=str)
        if len(reply) > 200:
            reply = reply[:200] + "…"
        lines.append(
            f"  #{entry['seq']} {entry['method']} {entry['path']} {entry['kind']}{turn}"
            f" ({entry['reason'] or '-'}) model={entry['model']} -> {reply}"
        )
    return "\n".join(lines)
