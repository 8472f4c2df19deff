"""Profile one 200k-TextDelta flood through the wire server, in-process (no pipe), with cProfile.

Usage: .venv/bin/python bench/profile_flood.py [--events N] [--top 25] [--no-profile] [--fast-construct]

Runs ``WireServer`` over a ``Runtime(mock_script=<flood script>)`` with an in-memory reader (open, prompt, then
EOF once the turn has ended) and a counting writer, so what is measured is the engine + wire per-event path.
Prints wall time, events/s, and the top functions by total (self) time.

``--fast-construct`` monkeypatches (in this process only; no core file is changed) the engine's per-event
construction to show the effect of the fix described in bench/README.md: ``Event``/``SystemTime``/``TurnContext``
built by setting ``__dict__`` directly instead of through pydantic's pure-Python ``model_construct``, and the
turn's ``TurnContext`` built once per (turn, parent_tool_id) instead of once per event.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

import anyio

from anyagentd.runtime import Runtime
from anyagentd.wire import WireServer


def install_fast_construct() -> None:
    """Monkeypatch ``Session._emit`` and ``_Turn.context`` with a fast-construct equivalent (same lines out)."""
    import time as _time

    import anyio as _anyio

    from anyagentd.engine import session as engine
    from anyagentd.model import Event, SystemTime, TurnContext

    setattr_ = object.__setattr__
    event_fields = frozenset(Event.model_fields)
    time_fields = frozenset(SystemTime.model_fields)
    ctx_fields = frozenset(TurnContext.model_fields)

    def fast(cls, fields_set, values):  # what model_construct does, minus its per-field Python loop
        m = cls.__new__(cls)
        setattr_(m, "__dict__", values)
        setattr_(m, "__pydantic_fields_set__", fields_set)
        setattr_(m, "__pydantic_extra__", None)
        setattr_(m, "__pydantic_private__", None)
        return m

    def context(self, parent_tool_id=None):
        cache = self.__dict__.setdefault("_ctx_cache", {})
        ctx = cache.get(parent_tool_id)
        if ctx is None:
            ctx = cache[parent_tool_id] = fast(TurnContext, ctx_fields, {"id": self.id, "parent_tool_id": parent_tool_id})
        return ctx

    def _emit(self, kind, turn_info=None, extensions=None):
        self._sequence += 1
        ns = _time.time_ns()
        occurred = fast(SystemTime, time_fields,
                        {"secs_since_epoch": ns // 1_000_000_000, "nanos_since_epoch": ns % 1_000_000_000})
        event = fast(Event, event_fields, {
            "sequence": self._sequence, "occurred_at": occurred, "session_id": self.id, "turn_info": turn_info,
            "kind": kind, "extensions": extensions if extensions is not None else {},
        })  # fmt: skip
        try:
            self._out_send.send_nowait(event)
        except _anyio.WouldBlock:
            self._lagged()
        except (_anyio.BrokenResourceError, _anyio.ClosedResourceError):
            pass

    engine._Turn.context = context
    engine.Session._emit = _emit


def flood_script(n: int) -> dict:
    return {"turns": [[
        {"Repeat": {"times": n, "steps": [{"Emit": {"TextDelta": {"message_id": "m1", "text": "x"}}}]}},
        {"Emit": {"MessageEnded": {"message_id": "m1"}}},
        {"End": {"Completed": {"source": "Protocol"}}},
    ]]}  # fmt: skip


async def run_flood(n: int) -> tuple[int, int, float]:
    opened, ended = anyio.Event(), anyio.Event()
    stats = {"lines": 0, "bytes": 0, "t0": 0.0, "t1": 0.0}
    commands = [b'{"id":1,"cmd":"open","agent":"mock","dir":"/tmp"}\n']

    async def read_line() -> bytes:
        if commands:
            return commands.pop()
        if not opened.is_set():
            await opened.wait()
            stats["t0"] = time.perf_counter()
            return b'{"id":2,"cmd":"prompt","session":"s1","text":"go"}\n'
        await ended.wait()
        return b""

    def write(data: bytes) -> None:  # runs in a worker thread, like the real stdout writer
        stats["lines"] += data.count(b"\n")
        stats["bytes"] += len(data)
        if not opened.is_set() and b'"ok"' in data:
            anyio.from_thread.run_sync(opened.set)
        if b"TurnEnded" in data and not ended.is_set():
            stats["t1"] = time.perf_counter()
            anyio.from_thread.run_sync(ended.set)

    async with Runtime(mock_script=flood_script(n)) as runtime:
        await WireServer(runtime, read_line, write).run()
    return stats["lines"], stats["bytes"], stats["t1"] - stats["t0"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true", help="only time it (no cProfile overhead)")
    ap.add_argument("--fast-construct", action="store_true", help="monkeypatch the fix (see the docstring)")
    args = ap.parse_args()
    if args.fast_construct:
        install_fast_construct()
    prof = None if args.no_profile else cProfile.Profile()
    if prof:
        prof.enable()
    lines, nbytes, dt = anyio.run(run_flood, args.events)
    if prof:
        prof.disable()
    print(f"{lines} lines, {nbytes / 1e6:.1f} MB, prompt->TurnEnded {dt:.2f} s = {lines / dt:,.0f} events/s"
          + (" (under cProfile)" if prof else ""))
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    sys.exit(main())
