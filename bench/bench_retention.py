"""Memory of one Runtime that opens and closes many mock sessions: retention keeps it flat. Prints; asserts nothing.

Usage: .venv/bin/python bench/bench_retention.py [--sessions N] [--no-turn]

Each variant runs in a fresh child process (one ``Runtime``, ``mock`` agent with the ``hello`` script): open a
session, play one prompt to its ``TurnEnded`` (unless ``--no-turn``), close it; N times (default 10,000). VmRSS
(``/proc/self/status``) is sampled after a garbage collection at checkpoints. Variants, side by side:

- **retention** (defaults: ``retain_closed`` 50, ``retain_closed_seconds`` 600): the runtime retires the oldest
  closed sessions beyond 50;
- **keep all** (``retain_closed`` = 10^9): every closed session stays, as before retention existed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

CHECKPOINTS = (1_000, 2_500, 5_000, 7_500, 10_000)


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def churn(count: int, retain: int, turn: bool) -> dict[str, Any]:
    from anyagentd.engine.settings import EngineSettings
    from anyagentd.runtime import Runtime

    work = tempfile.mkdtemp(prefix="anyagentd-bench-")
    samples: list[tuple[int, float, int]] = []
    settings = EngineSettings(retain_closed=retain)
    async with Runtime(mock_script="hello", settings=settings) as rt:
        gc.collect()
        samples.append((0, rss_mib(), 0))
        started = time.perf_counter()
        for n in range(1, count + 1):
            session = await rt.open("mock", work)
            if turn:
                await session.prompt("hi")
                async for event in session.events():
                    if event.tag == "TurnEnded":
                        break
            await session.close()
            del session
            if n in CHECKPOINTS or n == count:
                gc.collect()
                samples.append((n, rss_mib(), len(rt.sessions(include_closed=True))))
        elapsed = time.perf_counter() - started
    return {"samples": samples, "seconds": elapsed}


def child(args: argparse.Namespace) -> None:
    import anyio

    result = anyio.run(churn, args.sessions, args.retain, not args.no_turn)
    print(json.dumps(result))


def run_variant(name: str, retain: int, args: argparse.Namespace) -> dict[str, Any] | None:
    argv = [sys.executable, __file__, "--child", "--retain", str(retain), "--sessions", str(args.sessions)]
    if args.no_turn:
        argv.append("--no-turn")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        print(f"  {name:12} FAILED: {proc.stderr.strip()[-800:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--no-turn", action="store_true", help="open and close only, no prompt")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--retain", type=int, default=50, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    what = "open + close" if args.no_turn else "open + one hello turn + close"
    print(f"== {args.sessions:,} mock sessions in one Runtime ({what}); VmRSS MiB after gc, sessions held")
    results = {}
    for name, retain in (("retention", 50), ("keep all", 10**9)):
        result = run_variant(name, retain, args)
        if result is None:
            continue
        results[name] = result
        samples = result["samples"]
        line = "  ".join(f"{n:>6,}: {rss:6.1f} ({held})" for n, rss, held in samples)
        print(f"  {name:10} {line}")
        base = next((rss for n, rss, _ in samples if n == min(1_000, args.sessions)), samples[0][1])
        growth = samples[-1][1] - base
        later = samples[-1][0] - min(1_000, args.sessions)
        per = growth * 1024 / later if later > 0 else float("nan")
        print(
            f"  {'':10} growth after the first {min(1_000, args.sessions):,}: {growth:+.1f} MiB "
            f"({per:.2f} KiB/session); {result['seconds'] / args.sessions * 1e3:.2f} ms/session"
        )
    if len(results) == 2:
        kept, flat = results["keep all"]["samples"][-1][1], results["retention"]["samples"][-1][1]
        print(f"  ratio final RSS keep all / retention: {kept / flat:.2f}x")


if __name__ == "__main__":
    main()
