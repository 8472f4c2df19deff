"""The MCP transport plugins on their own: registration, validation, forwarding rules, checks against the real
marker server (stdio, streamable HTTP, SSE) and against dead ones, ``Runtime.open(check_mcp=True)`` and the
``anyagentd mcp check`` CLI."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MARKER_SERVER, stdio_marker, url_server

from anyagentd.errors import InvalidConfiguration, ProtocolFailed, SpawnFailed, UnsupportedFeature
from anyagentd.hookspecs import hookimpl
from anyagentd.mcp import McpToolInfo, McpTransportPlugin, effective_transports, render_mcp_servers
from anyagentd.mcp.forwarding import install_hint
from anyagentd.model import Http, McpServer, Sse, Stdio
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

pytestmark = [pytest.mark.timeout(60), pytest.mark.anyio]

ANYAGENTD = str(Path(sys.executable).parent / "anyagentd")


@pytest.fixture(scope="module")
def transports() -> dict[str, McpTransportPlugin]:
    """The installed transports, with the SDK modules they use imported already (importing the SDK takes
    seconds, which the timing assertions below must not count)."""
    import mcp.client
    import mcp.client.sse
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401

    return Plugins().mcp_transports()


def constructed(name: str, conn: Any) -> McpServer:
    """A server built without pydantic validation (what a caller of the Python API could hand over)."""
    return McpServer.model_construct(name=name, connection=conn)


# ------------------------------------------------------------------------------------------------ registration


def test_the_three_plugins_register_through_entry_points(transports: dict[str, McpTransportPlugin]) -> None:
    assert sorted(transports) == ["Http", "Sse", "Stdio"]
    for tag, plugin in transports.items():
        assert isinstance(plugin, McpTransportPlugin) and plugin.transport == tag
    records = {r.name: r for r in Plugins().records}
    for name in ("mcp-stdio", "mcp-http", "mcp-sse"):
        record = records[name]
        assert record.distribution == f"anyagentd-{name}" and record.hooks == ["register_mcp_transports"]


def test_disabling_a_plugin_removes_its_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYAGENTD_DISABLE_PLUGINS", "mcp-sse")
    assert sorted(Plugins().mcp_transports()) == ["Http", "Stdio"]


def test_a_transport_registered_twice_is_refused(transports: dict[str, McpTransportPlugin]) -> None:
    class Twice:
        @hookimpl
        def register_mcp_transports(self, register: Any) -> None:
            register(transports["Stdio"])

    class Again:
        @hookimpl
        def register_mcp_transports(self, register: Any) -> None:
            register(type(transports["Stdio"]))  # a class is instantiated

    plugins = Plugins(load_entry_points=False, extra=[Twice(), Again()])
    with pytest.raises(InvalidConfiguration, match="Stdio is registered by both"):
        plugins.mcp_transports()
    assert list(Plugins(load_entry_points=False, extra=[Again()]).mcp_transports()) == ["Stdio"]


# ------------------------------------------------------------------------------------------------ validate

BAD = [
    ("Stdio", constructed("srv-a", Stdio(command="")), "command"),
    ("Stdio", constructed("srv-b", Stdio(command="   ")), "command"),
    ("Stdio", constructed("srv-c", Stdio.model_construct(command="x", args=["ok", 3], env={})), "args[1]"),
    ("Stdio", constructed("srv-d", Stdio.model_construct(command="x", args=[], env={"K": 1})), "env.K"),
    ("Http", constructed("srv-e", Http(url="ftp://host/mcp")), "url"),
    ("Http", constructed("srv-f", Http(url="http:///mcp")), "url"),
    ("Http", constructed("srv-g", Http(url="not a url")), "url"),
    ("Http", constructed("srv-h", Http(url="http://h:99999/")), "url"),
    ("Http", constructed("srv-i", Http.model_construct(url="http://h/mcp", headers={"X-Token": 5})), "headers.X-Token"),
    ("Sse", constructed("srv-j", Sse(url="")), "url"),
    ("Sse", constructed("srv-k", Sse.model_construct(url="https://h/sse", headers={"A": None})), "headers.A"),
    ("Stdio", constructed("", Stdio(command="x")), "name"),
]


@pytest.mark.parametrize(("tag", "server", "field"), BAD, ids=[f"{t}-{f}-{s.name}" for t, s, f in BAD])
def test_validate_names_the_server_and_the_field(
    transports: dict[str, McpTransportPlugin], tag: str, server: McpServer, field: str
) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        transports[tag].validate(server)
    assert f"MCP server {server.name!r}" in caught.value.message
    assert f": {field} " in caught.value.message


def test_validate_accepts_good_servers(transports: dict[str, McpTransportPlugin]) -> None:
    transports["Stdio"].validate(McpServer(name="s", connection=Stdio(command="srv", args=["-x"], env={"K": "V"})))
    transports["Http"].validate(
        McpServer(name="h", connection=Http(url="https://example.com:8443/mcp", headers={"Authorization": "Bearer t"}))
    )
    transports["Sse"].validate(McpServer(name="e", connection=Sse(url="http://127.0.0.1:9/sse")))
    with pytest.raises(InvalidConfiguration, match="is not Stdio"):  # a plugin refuses another transport
        transports["Stdio"].validate(McpServer(name="h", connection=Http(url="http://h/")))


async def test_an_invalid_server_is_never_spawned(transports: dict[str, McpTransportPlugin], tmp_path: Path) -> None:
    flag = tmp_path / "spawned"
    server = constructed("sneaky", Stdio.model_construct(command="sh", args=["-c", f"touch {flag}"], env={"A": 1}))
    with pytest.raises(InvalidConfiguration, match="env.A"):
        await transports["Stdio"].check(server, timeout=5)
    time.sleep(0.3)
    assert not flag.exists()
    # the same command with a valid env does run (so the check above could have spawned it)
    ok = McpServer(name="sneaky", connection=Stdio(command="sh", args=["-c", f"touch {flag}"]))
    with pytest.raises(ProtocolFailed):
        await transports["Stdio"].check(ok, timeout=5)
    assert flag.exists()


# ------------------------------------------------------------------------------------------------ forwarding


def test_render_refuses_a_transport_without_plugin(transports: dict[str, McpTransportPlugin]) -> None:
    renderers = {"Stdio": lambda s: "S", "Http": lambda s: "H", "Sse": lambda s: "E"}
    servers = [stdio_marker("a"), url_server("b", "Sse", "http://127.0.0.1:1/sse")]
    only_stdio = {"Stdio": transports["Stdio"]}
    with pytest.raises(UnsupportedFeature) as caught:
        render_mcp_servers(servers, renderers, only_stdio, agent="claude")
    assert f"MCP transport Sse is not installed ({install_hint('Sse')})" in caught.value.message
    assert "anyagentd-mcp-sse" in install_hint("Sse")
    assert "'b'" in caught.value.message
    rendered = render_mcp_servers(servers, renderers, transports, agent="claude")
    assert [(s.name, r) for s, r in rendered] == [("a", "S"), ("b", "E")]


def test_render_refuses_a_transport_the_agent_cannot_take(transports: dict[str, McpTransportPlugin]) -> None:
    with pytest.raises(UnsupportedFeature) as caught:
        render_mcp_servers(
            [url_server("web", "Http", "http://h/mcp")], {"Stdio": lambda s: s}, transports, agent="someagent"
        )
    assert "someagent" in caught.value.message and "Http" in caught.value.message


def test_render_validates_before_rendering(transports: dict[str, McpTransportPlugin]) -> None:
    called: list[str] = []
    servers = [stdio_marker("fine"), constructed("broken", Http(url="gopher://x"))]
    renderers = {"Stdio": lambda s: called.append(s.name), "Http": lambda s: called.append(s.name)}
    with pytest.raises(InvalidConfiguration, match="'broken': url"):
        render_mcp_servers(servers, renderers, transports, agent="claude")
    assert called == []  # nothing rendered unless every server passes


def test_effective_transports_is_supported_and_installed_in_order(transports: dict[str, McpTransportPlugin]) -> None:
    assert effective_transports(["Sse", "Stdio", "Http"], transports) == ["Stdio", "Http", "Sse"]
    assert effective_transports(["Sse", "Stdio"], {"Stdio": transports["Stdio"]}) == ["Stdio"]
    assert effective_transports(["Http"], {}) == []


# ------------------------------------------------------------------------------------------------ check


def names(tools: list[McpToolInfo]) -> list[str]:
    return [t.name for t in tools]


async def test_check_stdio_lists_the_real_tool(transports: dict[str, McpTransportPlugin]) -> None:
    tools = await transports["Stdio"].check(stdio_marker(), timeout=30)
    assert names(tools) == ["write_marker"]
    assert "Write `text`" in tools[0].description


async def test_check_http_lists_the_real_tool(transports: dict[str, McpTransportPlugin], http_marker: Any) -> None:
    server = url_server("web", "Http", http_marker.url, {"X-Test": "1"})
    assert names(await transports["Http"].check(server, timeout=15)) == ["write_marker"]


async def test_check_sse_lists_the_real_tool(transports: dict[str, McpTransportPlugin], sse_marker: Any) -> None:
    server = url_server("events", "Sse", sse_marker.url)
    assert names(await transports["Sse"].check(server, timeout=15)) == ["write_marker"]


async def test_check_a_missing_command_is_spawn_failed(transports: dict[str, McpTransportPlugin]) -> None:
    started = time.monotonic()
    with pytest.raises(SpawnFailed) as caught:
        await transports["Stdio"].check(
            McpServer(name="ghost", connection=Stdio(command="/nonexistent/mcp")), timeout=5
        )
    assert time.monotonic() - started < 5
    assert "'ghost'" in caught.value.message and "/nonexistent/mcp" in caught.value.message


async def test_check_a_command_that_dies_reports_its_stderr(transports: dict[str, McpTransportPlugin]) -> None:
    server = McpServer(name="dies", connection=Stdio(command="sh", args=["-c", "echo boom-reason >&2; exit 3"]))
    started = time.monotonic()
    with pytest.raises(ProtocolFailed) as caught:
        await transports["Stdio"].check(server, timeout=5)
    assert time.monotonic() - started < 5
    assert "'dies'" in caught.value.message and "boom-reason" in caught.value.message


async def test_check_a_silent_command_times_out(transports: dict[str, McpTransportPlugin]) -> None:
    server = McpServer(name="mute", connection=Stdio(command="sleep", args=["60"]))
    started = time.monotonic()
    with pytest.raises(ProtocolFailed, match="within 1 s"):
        await transports["Stdio"].check(server, timeout=1)
    # the timeout, plus the SDK's bounded shutdown of the process (stdin closed, 2 s, then SIGTERM)
    assert time.monotonic() - started < 6


@pytest.mark.parametrize("tag", ["Http", "Sse"])
async def test_check_a_closed_port_fails_fast(transports: dict[str, McpTransportPlugin], tag: str) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ProtocolFailed) as caught:
        await transports[tag].check(url_server("gone", tag, f"http://127.0.0.1:{port}/mcp"), timeout=3)
    assert time.monotonic() - started < 3
    assert "'gone'" in caught.value.message and "Connect" in caught.value.message


@pytest.mark.parametrize("tag", ["Http", "Sse"])
async def test_check_a_server_that_never_answers_times_out(transports: dict[str, McpTransportPlugin], tag: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accepts connections and never says a word
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        started = time.monotonic()
        with pytest.raises(ProtocolFailed):
            await transports[tag].check(url_server("silent", tag, url), timeout=2)
        assert time.monotonic() - started < 4
        assert accepted  # it did connect
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


async def test_check_http_at_a_wrong_path_fails(transports: dict[str, McpTransportPlugin], http_marker: Any) -> None:
    with pytest.raises(ProtocolFailed, match="Not Found"):
        await transports["Http"].check(url_server("typo", "Http", http_marker.url + "-nope"), timeout=5)


# ------------------------------------------------------------------------------------------------ Runtime.open


@pytest.mark.anyio
async def test_open_with_check_mcp(work: Path) -> None:
    dead = McpServer(name="ghost", connection=Stdio(command="/nonexistent/mcp"))
    async with Runtime(mock_script="hello") as rt:
        with pytest.raises(SpawnFailed, match="ghost"):
            await rt.open("mock", dir=work, mcp_servers=[dead], check_mcp=True)
        # the pre-flight passes for a live server; then the mock, which takes no MCP server, refuses it clearly
        with pytest.raises(UnsupportedFeature, match="Stdio"):
            await rt.open("mock", dir=work, mcp_servers=[stdio_marker()], check_mcp=True)
        tools = await rt.check_mcp([stdio_marker("m")], timeout=30)
        assert names(tools["m"]) == ["write_marker"]


@pytest.mark.anyio
async def test_check_mcp_without_the_plugin(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYAGENTD_DISABLE_PLUGINS", "mcp-http")
    async with Runtime(mock_script="hello") as rt:
        hint = re.escape(f"MCP transport Http is not installed ({install_hint('Http')})")
        with pytest.raises(UnsupportedFeature, match=hint):
            await rt.open("mock", dir=work, mcp_servers=[url_server("w", "Http", "http://h/mcp")], check_mcp=True)


# ------------------------------------------------------------------------------------------------ CLI


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANYAGENTD_DISABLE_PLUGINS", "ANYAGENTD_LOAD_PLUGINS")}
    env["COLUMNS"] = "200"
    return subprocess.run([ANYAGENTD, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_cli_check_lists_tools(tmp_path: Path, http_marker: Any) -> None:
    spec = tmp_path / "servers.json"
    spec.write_text(
        json.dumps(
            [
                {
                    "name": "local",
                    "connection": {"Stdio": {"command": sys.executable, "args": [str(MARKER_SERVER), "stdio"]}},
                },
                {"name": "web", "connection": {"Http": {"url": http_marker.url}}},
            ]
        )
    )
    done = cli("mcp", "check", str(spec), "--timeout", "30")
    assert done.returncode == 0, done.stderr
    assert "local (Stdio): 1 tool(s)" in done.stderr and "web (Http): 1 tool(s)" in done.stderr
    assert done.stderr.count("write_marker") == 2
    single = tmp_path / "one.json"
    single.write_text(json.dumps({"name": "web", "connection": {"Http": {"url": http_marker.url}}}))
    done = cli("mcp", "check", str(single), "--json")
    assert done.returncode == 0, done.stderr
    description = "Write `text` to the file at `path` and return a confirmation token."
    assert json.loads(done.stdout) == [
        {
            "server": "web",
            "transport": "Http",
            "ok": True,
            "tools": [{"name": "write_marker", "description": description}],
        }
    ]


def test_cli_check_fails_with_the_reason(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = tmp_path / "servers.json"
    spec.write_text(
        json.dumps(
            [
                {"name": "ghost", "connection": {"Stdio": {"command": "/nonexistent/mcp"}}},
                {"name": "gone", "connection": {"Http": {"url": f"http://127.0.0.1:{port}/mcp"}}},
            ]
        )
    )
    started = time.monotonic()
    done = cli("mcp", "check", str(spec), "--timeout", "3", "--json")
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    assert "ghost (Stdio) failed SpawnFailed" in done.stderr and "/nonexistent/mcp" in done.stderr
    assert "gone (Http) failed ProtocolFailed" in done.stderr
    results = json.loads(done.stdout)
    assert [(r["server"], r["ok"], r["error"]["kind"]) for r in results] == [
        ("ghost", False, "SpawnFailed"),
        ("gone", False, "ProtocolFailed"),
    ]
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "connection": {"Carrier": {}}}')
    done = cli("mcp", "check", str(bad))
    assert done.returncode == 2 and "not an McpServer" in done.stderr
    done = cli("mcp", "check", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "not a readable JSON file" in done.stderr
