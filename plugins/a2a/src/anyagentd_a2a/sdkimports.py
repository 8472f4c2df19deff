"""What the daemon's import of the a2a-sdk may leave out: httpx's command-line client, and the SDK's tracing
spans when nothing traces.

The SDK imports ``httpx`` at module level (its push sender), and ``httpx/__init__`` imports ``httpx._main`` (the
``httpx`` console script) when it can, which imports ``rich`` and ``pygments``: ~80 modules, ~40 ms of CPU of the
daemon's start, for a command line the daemon never runs (bench/README.md, issue 31). :func:`httpx_without_cli`
imports ``httpx`` with ``httpx._main`` marked unimportable, so ``httpx`` takes the fallback it has for an install
without its CLI extra (``httpx.main`` then prints that the CLI is not installed), then unmarks it: a later
``import httpx._main`` loads it as usual. Importing this module does it once, so the daemon imports this module
before anything that imports the SDK (:mod:`.daemon`'s first import of the package).

The SDK wraps its request handler, event queues, task manager and dispatcher in OpenTelemetry spans
(``a2a.utils.telemetry``): with no tracer provider configured each span is a no-op, but entering and leaving ~110
of them per A2A turn (each reading the environment for the tracer provider) was ~10 % of a mock turn's CPU
(bench/README.md, issue 31). The SDK reads ``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED`` once, at import:
:func:`spans_only_when_traced` imports it with that variable ``false`` — unless the variable is set (the operator's
choice stands), any other ``OTEL_*`` variable is set (tracing is being configured), or a tracer provider was set in
this process (``opentelemetry-instrument``'s start-up) — and puts the environment back.

Only the standard library is imported here, ``httpx`` and the SDK's telemetry module aside.
"""

from __future__ import annotations

import os
import sys

A2A_SPANS = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"
"""The a2a-sdk's switch for its spans (read when ``a2a.utils.telemetry`` is imported)."""


def httpx_without_cli() -> None:
    """Import ``httpx`` without ``httpx._main`` (see the module docstring); does nothing once ``httpx`` is imported
    (a process that imported it first keeps its CLI)."""
    if "httpx" in sys.modules:
        return
    marked = "httpx._main" not in sys.modules
    if marked:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]  # None: "import httpx._main" raises ImportError
    try:
        import httpx  # noqa: F401
    finally:
        if marked and sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]


def spans_only_when_traced() -> None:
    """Import the a2a-sdk's telemetry with its spans off when nothing traces (see the module docstring); does
    nothing once it is imported."""
    if "a2a.utils.telemetry" in sys.modules or any(key.startswith("OTEL_") for key in os.environ):
        return
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None and getattr(trace, "_TRACER_PROVIDER", None) is not None:
        return  # a provider set in this process: its spans are wanted
    os.environ[A2A_SPANS] = "false"
    try:
        import a2a.utils.telemetry  # noqa: F401
    finally:
        os.environ.pop(A2A_SPANS, None)


httpx_without_cli()
spans_only_when_traced()

__all__ = ["A2A_SPANS", "httpx_without_cli", "spans_only_when_traced"]
