"""Benchmark of ``anyagentd run``'s terminal renderer against the wire. Prints figures; asserts nothing.

Usage: .venv/bin/python bench/bench_run.py [--runs N]

The shipped flood (200,000 TextDeltas as fast as the scripted agent emits them) is run three ways, interleaved,
``--runs`` times each: ``run`` with stderr on a pipe, ``run`` with stderr on a pseudo-terminal (what a person
sees), and ``serve`` with stdout on a pipe (the wire, the baseline: it writes every event). For each: the median
wall time from spawn to exit, events/s, bytes the reader received, and the ratio of ``run``'s events/s to the
wire's. The renderer writes streamed text at most 20 times a second, so ``run`` should not be slower than the wire.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
N_EVENTS = 200_000
WORKDIR = tempfile.mkdtemp(prefix="anyagentd-bench-run-")


def anyagentd_cmd() -> list[str]:
    exe = Path(PY).parent / "anyagentd"
    return [str(exe)] if exe.exists() else [PY, "-m", "anyagentd.cli"]


def drain(fd: int, proc: subprocess.Popen[bytes], timeout: float = 300) -> int:
    """Read ``fd`` until EOF (or the child exited and nothing is left); returns the bytes read."""
    total, deadline = 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the pty's other end closed
            break
        if not chunk:
            break
        total += len(chunk)
    return total


def run_flood(on_pty: bool) -> tuple[float, int]:
    argv = [*anyagentd_cmd(), "run", "mock", "go", "--mock", "flood", "--dir", WORKDIR]
    env = {**os.environ, "ANYAGENTD_NO_LOGIN_SHELL": "1", "COLUMNS": "200"}
    if on_pty:
        parent, child = pty.openpty()
    else:
        parent, child = os.pipe()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=child, env=env)
    os.close(child)
    received = drain(parent, proc)
    status = proc.wait()
    elapsed = time.perf_counter() - start
    os.close(parent)
    if status != 0:
        raise RuntimeError(f"run exited {status}")
    return elapsed, received


def serve_flood() -> tuple[float, int]:
    argv = [*anyagentd_cmd(), "serve", "--mock", "flood"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps({"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR}) + "\n").encode())
    proc.stdin.flush()
    received = 0
    for line in proc.stdout:  # the session exists once its open is answered
        received += len(line)
        if line.startswith(b'{"id": 1') or line.startswith(b'{"id":1'):
            break
    proc.stdin.write((json.dumps({"id": 2, "cmd": "prompt", "session": "s1", "text": "go"}) + "\n").encode())
    proc.stdin.flush()
    for line in proc.stdout:
        received += len(line)
        if b'"TurnEnded"' in line:
            break
    proc.stdin.close()
    received += len(proc.stdout.read())
    proc.wait()
    return time.perf_counter() - start, received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"flood of {N_EVENTS:,} TextDeltas, {args.runs} runs each, load average {load[0]:.2f} {load[1]:.2f}")
    results: dict[str, list[tuple[float, int]]] = {
        "run (stderr pipe)": [],
        "run (stderr pty)": [],
        "serve (wire, baseline)": [],
    }
    for _ in range(args.runs):  # interleaved, so load hits every variant alike
        for name, measure in (
            ("run (stderr pipe)", lambda: run_flood(False)),
            ("run (stderr pty)", lambda: run_flood(True)),
            ("serve (wire, baseline)", serve_flood),
        ):
            try:
                results[name].append(measure())
            except Exception as err:  # noqa: BLE001 - a failed measurement is printed, the others go on
                print(f"{name}: FAILED ({err})")
    baseline = results["serve (wire, baseline)"]
    wire = statistics.median(t for t, _ in baseline) if baseline else None
    for name, samples in results.items():
        if not samples:
            continue
        seconds = statistics.median(t for t, _ in samples)
        received = statistics.median(b for _, b in samples)
        ratio = f"  run/wire events/s: {wire / seconds:.2f}" if wire and not name.startswith("serve") else ""
        print(f"{name:24} {seconds:6.2f} s  {N_EVENTS / seconds:10,.0f} events/s  {received / 1e6:7.2f} MB read{ratio}")


if __name__ == "__main__":
    main()
