"""Memory of ``anyagentd serve`` under a hostile client. Prints figures; asserts nothing.

Usage: .venv/bin/python bench/bench_wire_hostile.py [--seconds 10] [--quick]

1. Stalled reader, busy writer: the client stops reading stdout and writes ``info`` commands as fast as the server
   takes them for ``--seconds`` (10 s). VmRSS is sampled every 50 ms. Side by side (interleaved, same machine):
   **bounded** (the defaults: reading stops while more than 1 MiB of output is unwritten or 1024 commands run) and
   **unbounded** (both bounds raised out of reach, i.e. the server before issue 16.3). The frames the server took
   and the RSS increase over idle are printed, with the ratio unbounded / bounded.
2. One long line: RSS increase after one 10 MB ``prompt`` line under the default 16 MiB line bound (parsed, then
   refused as a prompt on an unknown session) and under a 1 MiB bound (skipped unread, BadFrame).

See bench/README.md for what the figures mean. Every child gets a watchdog and is killed at the end.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from bench_wire import BenchError, Watchdog, anyagentd_cmd, finish, readline, rss_mib, spawn

UNBOUNDED = {"ANYAGENTD_WIRE_OUTPUT_BOUND_BYTES": str(10**12), "ANYAGENTD_WIRE_MAX_COMMANDS": str(10**9)}


def stalled_writer(env: dict[str, str] | None, seconds: float) -> dict[str, Any]:
    """Hello, then write ``info`` frames without reading for ``seconds``; RSS figures and the frames written."""
    proc = spawn([*anyagentd_cmd(), "serve", "--mock", "hello"], env=env)
    assert proc.stdin is not None and proc.stdout is not None
    with Watchdog(proc, seconds + 60, "stalled writer"):
        readline(proc)  # hello
        time.sleep(0.3)
        idle = rss_mib(proc.pid)
        written = 0
        stop = threading.Event()

        def write() -> None:
            nonlocal written
            try:
                while not stop.is_set():
                    proc.stdin.write(json.dumps({"id": written + 1, "cmd": "info", "session": "nope"}).encode() + b"\n")
                    proc.stdin.flush()
                    written += 1
            except (BrokenPipeError, OSError, ValueError):
                pass

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        start = time.monotonic()
        peak, early, deadline = idle, None, start + seconds
        while time.monotonic() < deadline:
            peak = max(peak, rss_mib(proc.pid))
            if early is None and time.monotonic() - start >= seconds / 5:
                early = (rss_mib(proc.pid), written)
            time.sleep(0.05)
        end = rss_mib(proc.pid)
        taken = written
        stop.set()
        # Read everything now: the writer unblocks, and every frame it wrote gets its reply.
        replies = 0
        while replies < written or writer.is_alive():
            line = proc.stdout.readline()
            if not line:
                break
            replies += line.startswith(b'{"id"')
            if not writer.is_alive() and replies >= written:
                break
        writer.join(5)
        hwm = rss_mib(proc.pid, "VmHWM")
    finish(proc)
    return {
        "idle": idle,
        "peak": peak,
        "end": end,
        "hwm": hwm,
        "written": taken,
        "replies": replies,
        "early": early or (end, taken),
    }


def long_line(env: dict[str, str] | None, size: int = 10_000_000) -> dict[str, Any]:
    """RSS increase after one ``size``-byte prompt line, and the reply it got."""
    proc = spawn([*anyagentd_cmd(), "serve", "--mock", "hello"], env=env)
    assert proc.stdin is not None
    with Watchdog(proc, 60, "long line"):
        readline(proc)
        time.sleep(0.3)
        idle = rss_mib(proc.pid)
        frame = json.dumps({"id": 1, "cmd": "prompt", "session": "nope", "text": "x" * size}).encode() + b"\n"
        proc.stdin.write(frame)
        proc.stdin.flush()
        reply = json.loads(readline(proc))
        time.sleep(0.3)
        after, hwm = rss_mib(proc.pid), rss_mib(proc.pid, "VmHWM")
    finish(proc)
    error = reply.get("error", {})
    return {
        "idle": idle,
        "after": after,
        "hwm": hwm,
        "reply": f"{error.get('kind')}: {error.get('message')}",
        "reply_bytes": len(json.dumps(reply)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="Memory of anyagentd serve under a hostile client.")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the client writes without reading")
    ap.add_argument("--quick", action="store_true", help="3 s of writing instead of 10")
    ap.add_argument(
        "--before",
        metavar="SRC",
        help="also run the server from this core/src (e.g. a checkout of main "
        "before issue 16: /work/main/core/src), put first on PYTHONPATH",
    )
    args = ap.parse_args()
    seconds = 3.0 if args.quick else args.seconds
    with open("/proc/loadavg") as f:
        print(f"load average {' '.join(f.read().split()[:3])}")

    print(f"\n1. stalled reader, busy writer of info frames, {seconds:.0f} s (VmRSS MiB)")
    variants: list[tuple[str, dict[str, str] | None]] = [("bounded", None), ("unbounded", UNBOUNDED)]
    if args.before:
        variants.append(("before", {"PYTHONPATH": args.before}))
    results = {}
    for name, env in variants:
        try:
            r = results[name] = stalled_writer(env, seconds)
        except BenchError as err:
            print(f"   {name:10} FAILED: {err}")
            continue
        rss, frames = r["early"]
        print(
            f"   {name:10} idle {r['idle']:6.1f} | at {seconds / 5:.0f} s {rss:6.1f} ({frames} frames)"
            f" | end {r['end']:6.1f} ({r['written']} frames)"
            f" | peak +{r['peak'] - r['idle']:.1f}, VmHWM {r['hwm']:.1f}"
            f" | replies read after: {r['replies']}"
        )
    grow = {k: max(0.1, v["peak"] - v["idle"]) for k, v in results.items()}
    for other in ("unbounded", "before"):
        if other in grow and "bounded" in grow:
            print(
                f"   {other} / bounded: RSS increase x{grow[other] / grow['bounded']:.1f}, frames taken "
                f"x{results[other]['written'] / max(1, results['bounded']['written']):.1f}"
            )

    print("\n2. one 10 MB prompt line (VmRSS MiB)")
    for name, env in (("16 MiB bound (default)", None), ("1 MiB bound", {"ANYAGENTD_WIRE_MAX_LINE_BYTES": "1048576"})):
        try:
            r = long_line(env)
        except BenchError as err:
            print(f"   {name:24} FAILED: {err}")
            continue
        print(
            f"   {name:24} idle {r['idle']:6.1f}   after {r['after']:6.1f}   VmHWM {r['hwm']:6.1f} "
            f"(+{r['hwm'] - r['idle']:.1f})   reply {r['reply']} ({r['reply_bytes']} bytes)"
        )


if __name__ == "__main__":
    main()
