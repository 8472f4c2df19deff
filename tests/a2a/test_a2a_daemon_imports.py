"""Issue 31: the daemon's start path (``anyagentd a2a``, spawn to its listening line) loads the pieces its
configuration uses and nothing else. With the default configuration (the mock agent on loopback, the SQLite task
store, JSON-RPC only, no push, metrics and the console on): no gRPC, no PostgreSQL dialect or driver, no MCP SDK, no
Temporal, no JSON Schema validator, and not httpx's command-line client (``rich``, ``pygments``:
:mod:`anyagentd_a2a.sdkimports`); with ``[a2a.metrics]`` and ``[a2a.console]`` off, neither the Prometheus client
nor the console either. OpenTelemetry's API is loaded: the a2a-sdk imports it at module level when it is installed
(its spans, ``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED``), so it is not in the lists.

The daemon runs in a child process whose stdout reports the loaded modules when the listening line is written, then
exits (no hidden switch in the daemon: the test wraps ``sys.stdout``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

NEVER = (
    "grpc",
    "asyncpg",
    "psycopg",
    "sqlalchemy.dialects.postgresql",
    "mcp",
    "temporalio",
    "anyagentd_temporal",
    "jsonschema",
    "rich",
    "pygments",
    "httpx._main",
)
"""Modules (and their submodules) the default configuration's start path must not load."""

OFF = ("prometheus_client", "anyagentd_a2a.observe.metrics", "anyagentd_a2a.console")
"""What ``[a2a.metrics] enabled = false`` and ``[a2a.console] enabled = false`` leave out besides."""

WRAPPER = textwrap.dedent(
    """
    import json, os, sys

    class Out:
        def __init__(self, stream):
            self.stream = stream
        def write(self, text):
            if "listening" in text:
                self.stream.write(json.dumps({"listening": text.strip(), "modules": sorted(sys.modules)}) + "\\n")
                self.stream.flush()
                os._exit(0)
            return self.stream.write(text)
        def __getattr__(self, name):
            return getattr(self.stream, name)

    sys.stdout = Out(sys.stdout)
    sys.argv = ["anyagentd", "a2a", *sys.argv[1:]]
    from anyagentd.startup import main
    main()
    """
)


def _loaded_at_listening(tmp_path: Path, *args: str) -> set[str]:
    """The modules loaded when ``anyagentd a2a --listen 127.0.0.1:0 --state-dir … ARGS`` writes its listening line."""
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    argv = [sys.executable, str(wrapper), "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "state"), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[0])
    assert "127.0.0.1" in report["listening"]
    return set(report["modules"])


def _found(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_the_default_start_path_loads_no_unconfigured_piece(tmp_path: Path) -> None:
    modules = _loaded_at_listening(tmp_path)
    assert _found(modules, NEVER) == []
    assert "httpx" in modules and "a2a.server.request_handlers" in modules  # the SDK's server is loaded


def test_metrics_and_console_off_load_neither(tmp_path: Path) -> None:
    config = tmp_path / "a2a.toml"
    config.write_text("[a2a.metrics]\nenabled = false\n\n[a2a.console]\nenabled = false\n")
    modules = _loaded_at_listening(tmp_path, "--config", str(config))
    assert _found(modules, NEVER + OFF) == []


SPANS = textwrap.dedent(
    """
    import json, os, sys
    if sys.argv[1] == "provider":
        from opentelemetry import trace
        from opentelemetry.trace import NoOpTracerProvider
        trace.set_tracer_provider(NoOpTracerProvider())
    import anyagentd_a2a.sdkimports
    import a2a.utils.telemetry as telemetry
    print(json.dumps([telemetry.otel_enabled, os.environ.get("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED")]))
    """
)


def spans(env: dict[str, str], how: str = "plain") -> list[object]:
    """[the a2a-sdk's spans on, the switch's value left in the environment] in a fresh process."""
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SPANS, how], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sdks_spans_are_off_unless_something_traces() -> None:
    """No ``OTEL_*`` variable and no tracer provider: the SDK's spans off (~10 % of a mock turn's CPU), the
    environment as it was; the operator's switch, any ``OTEL_*`` variable or a provider set in the process keep
    them."""
    assert spans({}) == [False, None]
    assert spans({"OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "true"}) == [True, "true"]
    assert spans({"OTEL_SERVICE_NAME": "agentd"}) == [True, None]
    assert spans({}, "provider") == [True, None]
