"""Run an A2A server with a clock on each phase of every request; at exit print, on stderr, one JSON line with the
median over the requests of each phase (ms) and of the calls per request. For bench_a2a.py ``--phases``; requests
must come one at a time (they are told apart by their first bytes arriving and their last ones leaving).

Usage: python bench/a2a_phases.py anyagentd a2a --listen 127.0.0.1:0 ...   (anyagentd's CLI)
       python bench/a2a_phases.py bench/a2a_echo_server.py --listen 127.0.0.1:0 ...   (a script)

Phases (time inside each, summed per request): ``request`` (first byte in → last byte out), ``sdk`` (the SDK's
JSON-RPC dispatcher), ``handler`` (its ``on_message_send``), ``executor`` (``AgentExecutor.execute``),
``store.get`` / ``store.save`` (the task store), ``push.lookup`` (the push sender's config look-up).
"""

from __future__ import annotations

import atexit
import functools
import json
import runpy
import statistics
import sys
import time
from typing import Any

spans: dict[str, float] = {}
calls: dict[str, int] = {}
requests: list[tuple[dict[str, float], dict[str, int]]] = []
began: list[float] = []


def timed(cls: Any, name: str, label: str) -> None:
    inner = getattr(cls, name)

    @functools.wraps(inner)
    async def clocked(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            spans[label] = spans.get(label, 0.0) + time.perf_counter() - start
            calls[label] = calls.get(label, 0) + 1

    setattr(cls, name, clocked)


def install(stores: list[type]) -> None:
    """Clock uvicorn's first byte in and last byte out, the SDK's dispatcher, handler and push look-up, and the
    ``get``/``save`` of ``stores`` (the classes the server uses, not their bases: a call is counted once)."""
    import asyncio.selector_events

    import uvicorn.protocols.http.h11_impl as h11_impl
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
    from a2a.server.tasks import BasePushNotificationSender

    received = h11_impl.H11Protocol.data_received

    def data_received(self: Any, data: bytes) -> None:
        if not began:
            began.append(time.perf_counter())
        received(self, data)

    write = asyncio.selector_events._SelectorSocketTransport.write

    def written(self: Any, data: Any) -> None:
        write(self, data)
        if began and not bytes(data[:9]).startswith(b"HTTP/1.1"):  # the body (or the chunked end): done
            spans["request"] = time.perf_counter() - began.pop()
            requests.append((dict(spans), dict(calls)))
            spans.clear()
            calls.clear()

    h11_impl.H11Protocol.data_received = data_received
    asyncio.selector_events._SelectorSocketTransport.write = written
    timed(JsonRpcDispatcher, "handle_requests", "sdk")
    timed(DefaultRequestHandler, "on_message_send", "handler")
    timed(BasePushNotificationSender, "send_notification", "push.lookup")
    for store in stores:
        timed(store, "get", "store.get")
        timed(store, "save", "store.save")


def exit_normally() -> None:
    """uvicorn re-raises the SIGTERM it caught once it has shut down, which would kill the process before
    ``atexit`` prints the summary: forget the caught signal instead."""
    import contextlib

    import uvicorn

    captured = uvicorn.Server.capture_signals

    @contextlib.contextmanager
    def capture_signals(self: Any) -> Any:
        with captured(self):
            try:
                yield
            finally:
                self._captured_signals.clear()

    uvicorn.Server.capture_signals = capture_signals


def summary() -> None:
    rest = requests[1:]  # the first opens the agent
    if not rest:
        return
    labels = sorted({label for spent, _ in rest for label in spent})
    out: dict[str, Any] = {"requests": len(rest)}
    for label in labels:
        out[f"{label} ms"] = round(statistics.median(spent.get(label, 0.0) for spent, _ in rest) * 1000, 2)
        if label != "request":
            out[f"{label} calls"] = statistics.median(n.get(label, 0) for _, n in rest)
    sys.stderr.write(json.dumps({"phases": out}) + "\n")
    sys.stderr.flush()


def main() -> None:
    target, sys.argv = sys.argv[1], sys.argv[1:]
    atexit.register(summary)
    if target.endswith(".py"):  # the echo server: the SDK's own stores, its executor class
        import asyncio

        from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore

        install([InMemoryTaskStore, DatabaseTaskStore])
        exit_normally()
        script = runpy.run_path(target, run_name="a2a_phases_target")
        timed(script["Echo"], "execute", "executor")
        asyncio.run(script["main"]())
        return
    from anyagentd.cli import main as cli
    from anyagentd_a2a.executor import ConversationExecutor
    from anyagentd_a2a.store import PrincipalTaskStore

    install([PrincipalTaskStore])
    timed(ConversationExecutor, "execute", "executor")
    sys.exit(cli())


if __name__ == "__main__":
    main()
