"""Adapters registered lazily (``anyagentd.adapters.lazy``, issue 17): the catalog, ``discover`` and the registry
read the declaration without importing the adapter's module; the first probe, plan query or session imports it
and uses the real class with the caller's config and MCP transports; a declaration the class contradicts, or a
module that cannot be imported, is refused with ``InvalidConfiguration`` when it loads."""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anyagentd.adapters.interface import AgentAdapter, AgentProfile
from anyagentd.adapters.lazy import lazy_adapter
from anyagentd.errors import InvalidConfiguration, UnsupportedFeature
from anyagentd.hookspecs import hookimpl
from anyagentd.plugins import Plugins
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.timeout(60)

PROFILE = AgentProfile(id="lazycli", name="Lazy CLI", executable="lazycli-4b2d", install_hint="pip i lazy")

ADAPTER_SOURCE = """
from anyagentd.adapters.interface import AgentAdapter, AgentProfile
from anyagentd.errors import UnsupportedFeature
from anyagentd.model import AgentDetails, Authenticated, Capabilities

PROFILE = AgentProfile(id="lazycli", name="Lazy CLI", executable="lazycli-4b2d", install_hint="pip i lazy")


class LazyCli(AgentAdapter):
    PLUGIN_NAME = {name!r}
    profiles = (PROFILE,)
    report_buffer = 7

    @property
    def flavour(self):
        return self.config.get("flavour", "plain")

    async def probe(self, installation):
        return AgentDetails(version=f"lazy {{self.flavour}} {{sorted(self.mcp_transports)}}",
                            auth=Authenticated(kind="ApiKey"), capabilities=Capabilities())

    async def plan_usage(self, installation):
        raise UnsupportedFeature("lazy has no plan " + self.flavour)

    async def connect(self, *args, **kwargs):
        raise AssertionError("not opened in these tests")
"""


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module name (importable from ``tmp_path``, not yet imported) that defines ``LazyCli``."""
    name = f"lazy_target_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(ADAPTER_SOURCE.format(name="lazy")))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ANYAGENTD_NO_LOGIN_SHELL", "1")
    yield name
    sys.modules.pop(name, None)


def _plugins(adapter: type[AgentAdapter]) -> Plugins:
    plugin = types.SimpleNamespace(register_adapters=hookimpl(lambda register: register(adapter)))
    return Plugins(load_entry_points=False, extra=[plugin])


class _Transport:
    transport = "Stdio"


@pytest.mark.anyio
async def test_the_catalog_and_discover_do_not_import_the_adapter_and_first_use_does(
    target: str, tmp_path: Path
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / PROFILE.executable
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    plugins = _plugins(lazy_adapter(f"{target}:LazyCli", name="lazy", profiles=(PROFILE,)))
    plugins.register(
        types.SimpleNamespace(register_mcp_transports=hookimpl(lambda register: register(_Transport))),
        name="transports",
    )
    assert [p.id for p, _ in plugins.profiles()] == ["lazycli"]
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    async with Runtime(plugins=plugins, env=env, adapter_config={"lazy": {"flavour": "sour"}}) as runtime:
        adapter = runtime.adapters["lazy"]
        assert isinstance(adapter, AgentAdapter) and adapter.PLUGIN_NAME == "lazy"
        report = await runtime.discover()
        assert report.find("lazycli") is not None and report.find("lazycli").executable_path == str(exe)
        assert target not in sys.modules  # registry, runtime and discovery read the declaration only
        details = await runtime.probe("lazycli")
        assert target in sys.modules
        # the real class, with the caller's config and the runtime's MCP transports
        assert details.version == "lazy sour ['Stdio']"
        assert adapter.flavour == "sour" and adapter.report_buffer == 7  # its own attributes, through the stand-in
        with pytest.raises(UnsupportedFeature, match="lazy has no plan sour"):
            await runtime.plan_usage("lazycli")
        assert type(adapter.adapter).__name__ == "LazyCli" and adapter.adapter is adapter.adapter


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"name": "other", "profiles": (PROFILE,)}, "PLUGIN_NAME is 'lazy'"),
        ({"name": "lazy", "profiles": ()}, r"profiles are \['lazycli'\] \(registered: \[\]\)"),
        ({"name": "lazy", "profiles": (PROFILE,), "acp_ref": True}, "acp_ref is False"),
    ],
)
@pytest.mark.anyio
async def test_a_declaration_the_class_contradicts_is_refused_when_it_loads(
    target: str, declared: dict[str, Any], message: str
) -> None:
    adapter = lazy_adapter(f"{target}:LazyCli", **declared)(None)
    with pytest.raises(InvalidConfiguration, match=message):
        adapter.adapter


def test_a_target_that_cannot_be_imported_is_a_configuration_error(target: str) -> None:
    for missing in ("lazy_target_that_does_not_exist:LazyCli", f"{target}:NoSuchClass", f"{target}:PROFILE"):
        adapter = lazy_adapter(missing, name="lazy", profiles=(PROFILE,))(None)
        with pytest.raises(InvalidConfiguration, match="adapter 'lazy'"):
            adapter.adapter
    with pytest.raises(ValueError, match="module:Class"):
        lazy_adapter("no_colon", name="lazy")


def test_every_first_party_adapter_registers_lazily_and_its_class_matches_its_declaration() -> None:
    plugins = Plugins()
    adapters = plugins.adapters()
    for name in ("claude", "codex", "opencode", "acp"):
        stand_in = adapters[name]
        real = stand_in.load()  # type: ignore[attr-defined]
        assert stand_in is not real and name == real.PLUGIN_NAME and real.profiles == stand_in.profiles
        assert stand_in.__module__ == real.__module__  # `anyagentd plugins --json` attributes it to its plugin
    assert adapters["acp"].acp_ref and {p.id for p in adapters["acp"].profiles} == {"codex-acp", "claude-acp", "gemini"}
