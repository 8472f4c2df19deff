"""What start-up loads (issue 17): importing the CLI, starting ``serve`` and opening the scripted agent import none
of the agent adapters' session modules (protocol models, connections, mappings), and ``serve`` writes its hello line
before it loads the engine. Behaviour, not timing: the timings are bench/bench_wire.py's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from wire_client import child_env
from wire_schema import validate_line

# The adapters' modules a session of that agent needs; registering the adapter must not load them.
HEAVY = (
    "anyagentd_codex.protocol",
    "anyagentd_codex.connection",
    "anyagentd_codex.mapping",
    "anyagentd_codex.launch",
    "anyagentd_claude.connection",
    "anyagentd_claude.mapping",
    "anyagentd_claude.control",
    "anyagentd_acp.connection",
    "acp",
    "mcp",
    "anyagentd.engine.session",
    "anyagentd.engine.event_parts",
    "anyagentd.wire",
    "anyagentd.wire_lines",
    # op families (anyagentd.ops entry points) load when a face builds its op table
    "anyagentd_a2a.ops",
    "anyagentd_a2a.ops.status",
    "anyagentd_a2a.ops.admin",
    "anyagentd_a2a.ops.workflow",
    "anyagentd_a2a.command.face",
    "anyagentd_acme_ops",
    "anyagentd.ops.interface",
)
# What loading the plugins (without a Runtime) must not import: MCP transports load when the Runtime asks for them.
TRANSPORTS = ("anyagentd_mcp_stdio.transport", "anyagentd_mcp_http.transport", "anyagentd_mcp_sse.transport")

_REPORT = "import sys; print(json.dumps(sorted(m for m in sys.modules if m in HEAVY)))"
# The first-party adapters register lazily (anyagentd.adapters.lazy): loading and registering them imports their
# package and plugin module, nothing else of theirs, until a session, probe or plan query uses them.
ADAPTER_PACKAGES = ("anyagentd_claude", "anyagentd_codex", "anyagentd_opencode", "anyagentd_acp")
_ADAPTER_MODULES = (
    "sorted(m for m in sys.modules if m.split('.')[0] in "
    + repr(ADAPTER_PACKAGES)
    + " and m.partition('.')[2] not in ('', 'plugin'))"
)


def _loaded(code: str) -> list[str]:
    program = f"import json\nHEAVY = {HEAVY!r}\n{code}\n{_REPORT}"
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60, env=child_env()
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_adapter_session_module_nor_the_engine() -> None:
    assert _loaded("import anyagentd.cli") == []


def test_loading_every_plugin_and_a_runtime_loads_no_adapter_session_module() -> None:
    code = (
        "from anyagentd.runtime import Runtime\nrt = Runtime()\nassert {'claude', 'codex', 'acp'} <= set(rt.adapters)"
    )
    assert [m for m in _loaded(code) if not m.startswith("anyagentd.")] == []


def test_serve_greets_first_and_opens_the_mock_without_adapter_session_modules(tmp_path: Path) -> None:
    # serve ends with os._exit: the wrapper reports what was imported just before.
    wrapper = tmp_path / "serve.py"
    wrapper.write_text(
        textwrap.dedent(f"""
        import json, os, sys
        HEAVY = {HEAVY!r}
        real_exit = os._exit

        def report_and_exit(code):
            loaded = sorted(m for m in sys.modules if m in HEAVY and not m.startswith("anyagentd."))
            os.write(2, ("LOADED " + json.dumps(loaded) + "\\n").encode())
            os.write(2, ("ADAPTER MODULES " + json.dumps({_ADAPTER_MODULES}) + "\\n").encode())
            real_exit(code)

        os._exit = report_and_exit
        from anyagentd.cli import main
        main(["serve"], prog_name="anyagentd")
    """)
    )
    frame = {"id": 1, "cmd": "open", "agent": "mock", "dir": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(wrapper)],
        input=json.dumps(frame) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(raw) for raw in result.stdout.splitlines()]
    for line in lines:
        validate_line(line)
    assert "hello" in lines[0] and lines[1]["id"] == 1 and lines[1]["ok"]["agent"]["id"] == "mock"
    assert lines[-1] == {"closed": lines[1]["ok"]["id"]}
    assert "LOADED []" in result.stderr, result.stderr
    assert "ADAPTER MODULES []" in result.stderr, result.stderr  # every adapter is registered, none imported


def test_help_imports_no_adapter_module_nor_the_event_model() -> None:
    # `anyagentd --help` loads every plugin (for their subcommands) and registers no adapter: only the adapters'
    # packages and plugin modules load, and neither the event model nor pydantic nor anyio.
    code = textwrap.dedent(f"""
        import json, sys
        from anyagentd.cli import main
        try:
            main(["--help"], prog_name="anyagentd")
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
        print(json.dumps([{_ADAPTER_MODULES}, sorted(m for m in sys.modules if m.split(".")[0] in {ADAPTER_PACKAGES!r}),
                          sorted(m for m in ("anyagentd.model", "pydantic", "anyio", "anyagentd.adapters.interface")
                                 if m in sys.modules)]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=child_env()
    ).stdout
    adapter_modules, packages, heavy = json.loads(out.strip().splitlines()[-1])
    assert "Usage: anyagentd" in out and "serve" in out
    assert {"anyagentd_claude.plugin", "anyagentd_codex.plugin", "anyagentd_acp.plugin"} <= set(packages)
    assert adapter_modules == [] and heavy == []


def test_serve_writes_hello_before_it_loads_the_engine(tmp_path: Path) -> None:
    # A mock script that cannot be read is refused when the runtime is built, which is after the hello line.
    result = subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", "serve", "--mock", str(tmp_path / "none.json")],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["hello"]["protocol"] == 1
    assert result.returncode == 2 and "InvalidConfiguration" in result.stderr and "Traceback" not in result.stderr


async def _open_without_discovery(tmp_path: Path, monkeypatch) -> str:  # type: ignore[no-untyped-def]
    from anyagentd import discovery
    from anyagentd.runtime import Runtime

    def no_search(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("opening the pinned mock searched for agents")

    monkeypatch.setattr(discovery, "discover", no_search)
    async with Runtime() as runtime:
        session = await runtime.open("mock", tmp_path)
        return session.installation.source


def test_opening_a_pinned_agent_searches_for_no_agent(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import anyio

    assert anyio.run(_open_without_discovery, tmp_path, monkeypatch) == "Pinned"


def test_importing_the_cli_loads_neither_pydantic_nor_rich_nor_anyio() -> None:
    code = "import sys, anyagentd.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'rich', 'anyio'}))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=child_env()
    ).stdout
    assert out.strip() == "[]"


def test_loading_every_plugin_imports_no_op_family_nor_mcp_transport() -> None:
    code = f"from anyagentd.plugins import Plugins\nPlugins()\nHEAVY = HEAVY + {TRANSPORTS!r}"
    assert _loaded(code) == []


def _schemas_built(code: str) -> list[str]:
    """The models whose schema pydantic generated while ``code`` ran (in a fresh process), in order."""
    program = (
        textwrap.dedent("""
        import json
        from pydantic._internal import _generate_schema
        built = []
        original = _generate_schema.GenerateSchema._model_schema
        def spy(self, cls):
            built.append(cls.__name__)
            return original(self, cls)
        _generate_schema.GenerateSchema._model_schema = spy
    """)
        + textwrap.dedent(code)
        + "\nprint(json.dumps(built))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60, env=child_env()
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_mock_script_builds_the_schemas_of_the_kinds_it_emits_only() -> None:
    # The hello script emits TextDelta, MessageEnded and ContextUsage: SessionUpdated (which holds a SessionInfo)
    # and the request kinds are not built, so the first open does not pay for them.
    built = _schemas_built("from anyagentd.mock.script import load_script\nload_script('hello')")
    assert {"Script", "Emit", "TextDelta", "MessageEnded", "ContextUsage"} <= set(built)
    assert not {"SessionUpdated", "SessionInfo", "RequestOpened", "PlanUpdated", "ToolUpdated"} & set(built)


def test_a_frame_builds_the_schema_of_its_own_command_only() -> None:
    built = _schemas_built(
        'from anyagentd import wire\nwire.parse_frame(b\'{"id": 1, "cmd": "open", "agent": "mock", "dir": "/tmp"}\')'
    )
    assert "Open" in built and not {"Generate", "AnswerCmd", "Configure", "Prompt"} & set(built)


def test_importing_the_model_builds_no_schema() -> None:
    assert _schemas_built("import anyagentd.model") == []


def test_the_first_event_builds_no_schema_of_every_event_kind() -> None:
    # Choosing how events are built (direct, or model_construct) compares instance state, not serialized bytes:
    # the first event of a process does not build Event's schema, which holds every event kind.
    built = _schemas_built("""
        from anyagentd.engine.event_parts import EventParts, _direct_event, build_event, event_builder
        from anyagentd.model import TextDelta, TurnContext
        event = build_event(EventParts(1, 1_700_000_000_000_000_000, "s1", TurnContext(id="t1"),
                                       TextDelta(message_id="m", text="x"), None))
        assert event_builder() is _direct_event and event.kind.text == "x"
    """)
    assert "Event" not in built and "SessionInfo" not in built
