"""Profile one 200k-TextDelta flood through the wire server, in-process (no pipe), with cProfile.

Usage: .venv/bin/python bench/profile_flood.py [--events N] [--top 25] [--no-profile]

Runs ``WireServer`` over a ``Runtime(mock_script=<flood script>)`` with an in-memory reader (open, prompt, then
EOF once the turn has ended) and a counting writer, so what is measured is the engine + wire per-event path.
Prints wall time, events/s, the process's CPU time per line, and the top functions by total (self) time. Set
``ANYAGENTD_EVENT_BOUND=1000000`` so the session is not closed with ConsumerLagged mid-profile (the log then holds
the whole flood, so collections cost more than with the default bound; compare like with like).
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


def flood_script(n: int) -> dict:
    return {
        "turns": [
            [
                {"Repeat": {"times": n, "steps": [{"Emit": {"TextDelta": {"message_id": "m1", "text": "x"}}}]}},
                {"Emit": {"MessageEnded": {"message_id": "m1"}}},
                {"End": {"Completed": {"source": "Protocol"}}},
            ]
        ]
    }


async def run_flood(n: int) -> tuple[int, int, float, bool]:
    opened, ended = anyio.Event(), anyio.Event()
    stats = {"lines": 0, "bytes": 0, "t0": 0.0, "t1": 0.0, "lagged": False}
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

    async def write(data: bytes) -> None:  # awaited from the event loop, like the real stdout writer
        stats["lines"] += data.count(b"\n")
        stats["bytes"] += len(data)
        if not opened.is_set() and b'"ok"' in data:
            opened.set()
        if b"ConsumerLagged" in data:
            stats["lagged"] = True
        if (b"TurnEnded" in data or b'{"closed"' in data) and not ended.is_set():
            stats["t1"] = time.perf_counter()
            ended.set()

    async with Runtime(mock_script=flood_script(n)) as runtime:
        await WireServer(runtime, read_line, write).run()
    return stats["lines"], stats["bytes"], stats["t1"] - stats["t0"], stats["lagged"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true", help="only time it (no cProfile overhead)")
    args = ap.parse_args()
    prof = None if args.no_profile else cProfile.Profile()
    if prof:
        prof.enable()
    cpu0 = time.process_time()
    lines, nbytes, dt, lagged = anyio.run(run_flood, args.events)
    cpu = time.process_time() - cpu0
    if prof:
        prof.disable()
    # CPU time per line, start-up included: on a machine shared with other jobs it moves far less than the rate.
    print(
        f"{lines} lines, {nbytes / 1e6:.1f} MB, prompt->TurnEnded {dt:.2f} s = {lines / dt:,.0f} events/s, "
        f"CPU {cpu / lines * 1e6:.2f} us/line"
        + (" (under cProfile)" if prof else "")
        + (" -- session closed early with ConsumerLagged (the writer fell behind)" if lagged else "")
    )
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    sys.exit(main())
