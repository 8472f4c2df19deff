"""Plugins (pluggy, entry-point group ``anyagentd``): what is installed, the environment switches, loud failures for
bad hookimpls, third-party adapters in discovery, lifecycle hooks, and the README documenting every hook."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import anyio
import click
import pluggy
import pytest
from click.testing import CliRunner
from wire_client import child_env
from wire_schema import validate_def

from anyagentd import hookspecs
from anyagentd.adapters.interface import AgentAdapter, AgentProfile
from anyagentd.errors import InvalidConfiguration, NotInstalled
from anyagentd.hookspecs import hookimpl
from anyagentd.mock import plugin as mock_plugin
from anyagentd.model import AgentDetails, AgentInstallation, Authenticated, Capabilities
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.timeout(60)

README = Path(__file__).resolve().parents[2] / "README.md"
HOOKS = sorted(name for name, obj in vars(hookspecs).items() if callable(obj) and hasattr(obj, "anyagentd_spec"))


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", *args],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _plugins_json(env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    result = _cli("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def clean_plugin_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("ANYAGENTD_LOAD_PLUGINS", "ANYAGENTD_DISABLE_PLUGINS", "ANYAGENTD_TRACE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


# ------------------------------------------------------------------------------------------------ installed


def test_plugins_json_lists_the_builtin_mock() -> None:
    rows = _plugins_json()
    mock = next(row for row in rows if row["name"] == "mock")
    assert mock["distribution"] == "anyagentd"
    assert mock["module"] == "anyagentd.mock.plugin"
    assert mock["version"]
    assert mock["hooks"] == ["register_adapters"]
    assert mock["adapters"] == [{"name": "mock", "agents": ["mock"]}]
    assert len({row["name"] for row in rows}) == len(rows)  # each entry point loads once


def test_load_plugins_selects_entry_points() -> None:
    assert [row["name"] for row in _plugins_json({"ANYAGENTD_LOAD_PLUGINS": "mock"})] == ["mock"]
    assert _plugins_json({"ANYAGENTD_LOAD_PLUGINS": ""}) == []
    assert _plugins_json({"ANYAGENTD_LOAD_PLUGINS": "nosuchplugin"}) == []


def test_disable_plugins_removes_mock_from_discover() -> None:
    assert "mock" not in [row["name"] for row in _plugins_json({"ANYAGENTD_DISABLE_PLUGINS": "mock"})]
    result = _cli("discover", "--json", env={"ANYAGENTD_DISABLE_PLUGINS": "mock", "ANYAGENTD_NO_LOGIN_SHELL": "1"})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    validate_def("DiscoveryReport", report)
    assert "mock" not in [a["id"] for a in report["agents"]]
    # and with it enabled, it is there (first: pinned installations come first)
    result = _cli("discover", "--json", env={"ANYAGENTD_LOAD_PLUGINS": "mock", "ANYAGENTD_NO_LOGIN_SHELL": "1"})
    assert [a["id"] for a in json.loads(result.stdout)["agents"]] == ["mock"]


def test_loading_plugins_reads_the_installed_entry_points_once(clean_plugin_env: pytest.MonkeyPatch) -> None:
    # Each read scans every installed distribution's metadata (a few ms at start-up); both groups come from one.
    import importlib.metadata

    calls: list[dict[str, Any]] = []
    real = importlib.metadata.entry_points

    def counting(**params: Any) -> Any:
        calls.append(params)
        return real(**params)

    clean_plugin_env.setattr(importlib.metadata, "entry_points", counting)
    plugins = Plugins()
    assert len(calls) == 1
    assert "mock" in plugins.adapters() and "status" in plugins.ops()  # both groups loaded


def test_plugins_read_distribution_metadata_only_for_their_records(clean_plugin_env: pytest.MonkeyPatch) -> None:
    # Each read of a distribution's METADATA parses it (~0.45 ms a read at start-up): loading and using the plugins
    # reads none; the records read each plugin's once, with the same name and version as importlib.metadata's.
    import importlib.metadata

    version = importlib.metadata.version("anyagentd")
    reads: list[str] = []
    real = importlib.metadata.PathDistribution.metadata

    def counting(dist: importlib.metadata.PathDistribution) -> Any:
        reads.append(str(dist._path))  # type: ignore[attr-defined]
        return real.fget(dist)  # type: ignore[attr-defined]

    clean_plugin_env.setattr(importlib.metadata.PathDistribution, "metadata", property(counting))
    plugins = Plugins()
    assert "mock" in plugins.adapters()
    assert reads == []
    records = {r.name: r for r in plugins.records}
    assert len(reads) == len(records)  # op families included (several share a distribution)
    assert records["mock"].distribution == "anyagentd"
    assert records["mock"].version == version
    assert plugins.records is plugins.records and len(reads) == len(records)  # read once


def test_disable_plugins_in_process(clean_plugin_env: pytest.MonkeyPatch) -> None:
    clean_plugin_env.setenv("ANYAGENTD_DISABLE_PLUGINS", "other, mock")
    plugins = Plugins()
    assert "mock" not in [r.name for r in plugins.records]
    assert "mock" not in plugins.adapters()


def test_trace_plugins_writes_hook_calls_to_stderr() -> None:
    result = _cli(
        "discover",
        "--json",
        env={"ANYAGENTD_TRACE_PLUGINS": "1", "ANYAGENTD_LOAD_PLUGINS": "mock", "ANYAGENTD_NO_LOGIN_SHELL": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "anyagentd plugins:" in result.stderr
    assert "register_adapters" in result.stderr
    assert "anyagentd plugins:" not in result.stdout
    validate_def("DiscoveryReport", json.loads(result.stdout))  # stdout is still just the JSON
    quiet = _cli("discover", "--json", env={"ANYAGENTD_LOAD_PLUGINS": "mock", "ANYAGENTD_NO_LOGIN_SHELL": "1"})
    assert "anyagentd plugins:" not in quiet.stderr


# ------------------------------------------------------------------------------------------------ bad plugins


class _MisspelledHook:
    @hookimpl
    def register_adapter(self, register: Any) -> None:  # no such hook: register_adapters
        raise AssertionError("never called")


class _WrongArgument:
    @hookimpl
    def register_adapters(self, registrar: Any) -> None:  # the hook's argument is `register`
        raise AssertionError("never called")


@pytest.mark.parametrize("plugin", [_MisspelledHook(), _WrongArgument()], ids=["misspelled-hook", "wrong-argument"])
def test_bad_hookimpl_fails_loudly(plugin: object, clean_plugin_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(pluggy.PluginValidationError):
        Plugins(load_entry_points=False, extra=[plugin])


def test_a_plain_object_without_hooks_is_harmless(clean_plugin_env: pytest.MonkeyPatch) -> None:
    plugins = Plugins(load_entry_points=False, extra=[types.SimpleNamespace()])
    assert plugins.adapters() == {}


# ------------------------------------------------------------------------------------------------ third party


def _fake_adapter_module() -> types.ModuleType:
    """A third-party plugin, as a module object: one adapter with a pinned installation and one catalog profile."""

    class FakeAdapter(AgentAdapter):
        PLUGIN_NAME = "fake"
        profiles = (
            AgentProfile(id="fakecli", name="Fake CLI", executable="fakecli-7f3a", install_hint="pip i fake"),
            AgentProfile(id="absent", name="Absent CLI", executable="absent-9c1e", install_hint="brew i x"),
        )

        def pinned_installations(self) -> list[AgentInstallation]:
            return [
                AgentInstallation(id="fake-pinned", name="Fake (pinned)", executable_path="/opt/fake", source="Pinned")
            ]

        async def probe(self, installation: AgentInstallation) -> AgentDetails:
            return AgentDetails(
                version=f"fake 1.0 at {installation.executable_path}",
                auth=Authenticated(kind="ApiKey"),
                capabilities=Capabilities(features=["Resume"]),
            )

        async def connect(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not opened in these tests")

    module = types.ModuleType("anyagentd_fake.plugin")

    @hookimpl
    def register_adapters(register: Any) -> None:
        register(FakeAdapter)

    module.register_adapters = register_adapters  # type: ignore[attr-defined]
    return module


@pytest.mark.anyio
async def test_third_party_adapter_shows_up_in_discover(tmp_path: Path, clean_plugin_env: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "fakecli-7f3a"
    exe.write_text("#!/bin/sh\necho fake\n")
    exe.chmod(0o755)
    plugins = Plugins(load_entry_points=False, extra=[_fake_adapter_module()])
    assert [r.name for r in plugins.records] == ["anyagentd_fake.plugin"]
    assert plugins.records[0].hooks == ["register_adapters"]
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    async with Runtime(plugins=plugins, env=env) as runtime:
        report = await runtime.discover()
        validate_def("DiscoveryReport", report.model_dump(mode="json"))
        ids = [a.id for a in report.agents]
        assert ids[0] == "fake-pinned"  # pinned first
        assert "fakecli" in ids and "mock" not in ids
        found = report.find("fakecli")
        assert found is not None and found.source == "Path" and found.executable_path == str(exe)
        assert [m.id for m in report.missing] == ["absent"]
        assert report.missing[0].install_hint == "brew i x"
        details = await runtime.probe("fakecli")
        assert details.version == f"fake 1.0 at {exe}"


@pytest.mark.anyio
async def test_an_executable_override_resolves_without_a_worker_thread(
    tmp_path: Path, clean_plugin_env: pytest.MonkeyPatch
) -> None:
    # ANYAGENTD_<ID>_BIN naming an executable is one stat: resolved on the loop (a worker thread's first hop on a
    # new loop costs more than that); anything else still searches in a worker thread.
    exe = tmp_path / "fakecli-override"
    exe.write_text("#!/bin/sh\necho fake\n")
    exe.chmod(0o755)
    hops: list[object] = []

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return func(*args)

    clean_plugin_env.setattr("anyagentd.runtime.anyio.to_thread.run_sync", counted)
    plugins = Plugins(load_entry_points=False, extra=[_fake_adapter_module()])
    env = {"PATH": "", "HOME": str(tmp_path), "ANYAGENTD_NO_LOGIN_SHELL": "1", "ANYAGENTD_FAKECLI_BIN": str(exe)}
    async with Runtime(plugins=plugins, env=env) as runtime:
        _, found = await runtime.resolve("fakecli")
    assert (found.source, found.executable_path) == ("EnvOverride", str(exe))
    assert hops == []

    exe.chmod(0o644)  # no longer executable: a Warning, then the search, in a worker thread
    async with Runtime(plugins=plugins, env=env) as runtime:
        with pytest.raises(NotInstalled):
            await runtime.resolve("fakecli")
    assert len(hops) == 1


def test_two_adapters_claiming_one_catalog_id_are_refused(clean_plugin_env: pytest.MonkeyPatch) -> None:
    class One(AgentAdapter):
        PLUGIN_NAME = "one"
        profiles = (AgentProfile(id="dup", name="Dup", executable="dup", install_hint="-"),)

        async def probe(self, installation: AgentInstallation) -> AgentDetails:
            return AgentDetails()

        async def connect(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError

    class Two(One):
        PLUGIN_NAME = "two"

    plugin = types.SimpleNamespace(register_adapters=hookimpl(lambda register: (register(One), register(Two))))
    with pytest.raises(InvalidConfiguration, match="dup"):
        Plugins(load_entry_points=False, extra=[plugin]).adapters()


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    @hookimpl
    def runtime_started(self, runtime: Any) -> None:
        self.calls.append(("runtime_started", runtime))

    @hookimpl
    def session_opened(self, info: Any) -> None:
        self.calls.append(("session_opened", info.id))

    @hookimpl
    def session_closed(self, session_id: str) -> None:
        self.calls.append(("session_closed", session_id))


@pytest.mark.anyio
async def test_lifecycle_hooks_are_called_once_each(tmp_path: Path, clean_plugin_env: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    plugins = Plugins(load_entry_points=False, extra=[mock_plugin, recorder])
    with anyio.fail_after(20):
        async with Runtime(plugins=plugins, mock_script="hello") as runtime:
            assert recorder.calls == [("runtime_started", runtime)]
            session = await runtime.open("mock", tmp_path)
            await session.prompt("hi")
            async for event in session.events():
                if not isinstance(event.kind, str) and event.kind.TAG == "TurnEnded":
                    break
            assert recorder.calls[1:] == [("session_opened", session.id)]
            await session.close()
            await session.close()  # idempotent: still one session_closed
        assert recorder.calls[1:] == [("session_opened", session.id), ("session_closed", session.id)]


def test_cli_commands_hook_adds_subcommands(clean_plugin_env: pytest.MonkeyPatch) -> None:
    @click.command("hello-plugin")
    def hello_plugin() -> None:
        click.echo("hello from a plugin")

    plugin = types.SimpleNamespace(register_cli_commands=hookimpl(lambda cli: cli.add_command(hello_plugin)))
    group = click.Group("anyagentd")
    Plugins(load_entry_points=False, extra=[plugin]).add_cli_commands(group)
    result = CliRunner().invoke(group, ["hello-plugin"])
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"


# ------------------------------------------------------------------------------------------------ docs


def _plugin_section() -> str:
    assert README.is_file(), f"{README} does not exist: it must document every hook under '## Writing a plugin'"
    text = README.read_text(encoding="utf-8")
    # the section's own text, up to its first subsection (e.g. "### Writing an adapter") or the next section
    match = re.search(r"^## Writing a plugin[^\n]*\n(.*?)(?=^##+ |\Z)", text, flags=re.M | re.S)
    assert match, "README.md has no '## Writing a plugin' section"
    return match.group(1)


def test_hookspecs_are_found() -> None:
    assert "register_adapters" in HOOKS and "session_closed" in HOOKS
    assert len(HOOKS) >= 7


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_in_the_readme(hook: str) -> None:
    section = _plugin_section()
    assert re.search(rf"`{hook}(\(|`)", section), (
        f"hook {hook!r} of anyagentd.hookspecs is not documented in README.md's 'Writing a plugin' section "
        f"(expected `{hook}(...)` or `{hook}` in backticks)"
    )


def test_the_readme_documents_no_hook_that_does_not_exist() -> None:
    listed = re.findall(r"^\s*[-*] `([a-z_]+)\(", _plugin_section(), flags=re.M)
    assert listed, "no hook list ('- `hook_name(args)` — ...') in README's 'Writing a plugin' section"
    assert sorted(set(listed) - set(HOOKS)) == []


# ------------------------------------------------------------------------------------------------ op families

OP_FAMILY_MODULES = ("anyagentd_a2a.ops", "anyagentd_acme_ops")


def test_op_families_load_when_ops_are_first_asked_for() -> None:
    # In a fresh process: a runtime and the adapters import no op family; the first ops() does, with the same
    # environment switches as every entry point.
    code = (
        "import json, sys\nfrom anyagentd.plugins import Plugins\nfrom anyagentd.runtime import Runtime\n"
        "p = Plugins(); Runtime(plugins=p); p.adapters()\n"
        f"before = sorted(m for m in sys.modules if m.startswith({OP_FAMILY_MODULES!r}))\n"
        "ops = p.op_origins()\n"
        f"after = sorted(m for m in sys.modules if m.startswith({OP_FAMILY_MODULES!r}))\n"
        "print(json.dumps([before, after, ops, [r.name for r in p.records]]))"
    )

    def run(env: dict[str, str] | None = None) -> list[Any]:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=child_env(env)
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    before, after, ops, names = run()
    assert before == []
    assert "anyagentd_a2a.ops.status" in after and "anyagentd_acme_ops" in after
    assert ops["status"] == "a2a-status" and ops["acme.echo"] == "acme_ops"
    assert {"a2a-status", "a2a-admin", "acme_ops", "mock"} <= set(names)
    _, _, ops, names = run({"ANYAGENTD_DISABLE_PLUGINS": "a2a-admin,acme_ops"})
    assert "admin.set" not in ops and "acme.echo" not in ops and "status" in ops
    assert "a2a-admin" not in names and "acme_ops" not in names
    _, after, ops, names = run({"ANYAGENTD_LOAD_PLUGINS": "mock,acme_ops"})
    assert names == ["mock", "acme_ops"] and set(ops) == {"acme.echo", "acme.touch"}
    assert after == ["anyagentd_acme_ops"]


def test_plugins_lists_op_families_with_their_ops() -> None:
    rows = {row["name"]: row for row in _plugins_json()}
    assert rows["a2a-status"]["hooks"] == ["register_ops"] and rows["a2a-status"]["ops"] == ["status"]
    assert rows["acme_ops"]["distribution"] == "anyagentd-acme-ops" and "acme.echo" in rows["acme_ops"]["ops"]


def _op_family_entry_point(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType) -> None:
    """Install ``module`` as the only entry point, in the ``anyagentd.ops`` group."""
    import importlib.metadata

    from anyagentd import plugins as plugins_module

    monkeypatch.setitem(sys.modules, module.__name__, module)
    entry = importlib.metadata.EntryPoint(name="fake-ops", value=module.__name__, group=plugins_module.OP_FAMILY_GROUP)

    def entry_points(**params: Any) -> importlib.metadata.EntryPoints:
        return importlib.metadata.EntryPoints([entry]).select(**params)

    monkeypatch.setattr(plugins_module.importlib.metadata, "entry_points", entry_points)


def test_an_op_family_with_another_hook_is_refused_when_it_loads(clean_plugin_env: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("anyagentd_fake_ops")
    module.register_ops = hookimpl(lambda register: None)  # type: ignore[attr-defined]
    module.register_cli_commands = hookimpl(lambda cli: None)  # type: ignore[attr-defined]
    _op_family_entry_point(clean_plugin_env, module)
    plugins = Plugins()  # nothing of the op family is imported yet
    with pytest.raises(InvalidConfiguration, match="fake-ops.*register_cli_commands.*registers ops only"):
        plugins.ops()


def test_an_op_family_with_a_misspelled_hook_fails_loudly_when_it_loads(clean_plugin_env: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("anyagentd_fake_ops")
    module.register_op = hookimpl(lambda register: None)  # type: ignore[attr-defined]  # no such hook
    _op_family_entry_point(clean_plugin_env, module)
    plugins = Plugins()
    with pytest.raises(pluggy.PluginValidationError):
        plugins.ops()
