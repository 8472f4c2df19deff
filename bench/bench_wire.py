"""Benchmark of ``anyagentd serve``: wire throughput, cold start, memory. Prints figures; asserts nothing.

Usage: .venv/bin/python bench/bench_wire.py [--quick] [--runs N]

1. Wire throughput: a 200k-TextDelta flood (``serve --mock flood``) read through a pipe, vs a bare Python process
   that writes the same event lines (json.dumps in a loop) to the same kind of pipe, read by the same reader.
2. Cold start: spawn ``anyagentd serve`` -> hello line, vs ``python -c pass`` and ``python -c "import anyagentd.cli"``.
3. Memory: VmRSS of one ``serve`` process idle, with 100 idle sessions, and while its consumer stalls on a flood.

See bench/README.md for what each figure means. Every child gets a watchdog and is killed at the end.
"""

from __future__ import annotations

import argparse
import atexit
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

PY = sys.executable
N_EVENTS = 200_000  # TextDeltas in the shipped flood.json
STALL_SECONDS = 3.0
IDLE_SESSIONS = 100
WORKDIR = tempfile.mkdtemp(prefix="anyagentd-bench-")
CHILDREN: list[subprocess.Popen[bytes]] = []


class BenchError(Exception):
    pass


# ------------------------------------------------------------------------------------------------ children


def anyagentd_cmd() -> list[str]:
    """The ``anyagentd`` console script next to this interpreter (what a user runs), else ``python -m``."""
    exe = Path(PY).parent / "anyagentd"
    return [str(exe)] if exe.exists() else [PY, "-m", "anyagentd.cli"]


def spawn(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    stderr = tempfile.TemporaryFile(dir=WORKDIR)  # noqa: SIM115 - lives as long as the child, closed by the reaper
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=WORKDIR,
        bufsize=1 << 16,
        env={**os.environ, **(env or {})},
    )
    proc._bench_stderr = stderr  # type: ignore[attr-defined]
    CHILDREN.append(proc)
    return proc


def stderr_tail(proc: subprocess.Popen[bytes], n: int = 5) -> str:
    f = getattr(proc, "_bench_stderr", None)
    if f is None:
        return ""
    try:
        f.seek(0)
        lines = f.read().decode(errors="replace").strip().splitlines()
    except (OSError, ValueError):
        return ""
    return " | ".join(lines[-n:])


def finish(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """EOF on stdin, drain stdout, wait for exit; kill when it takes longer than ``timeout``."""
    if proc.poll() is None:
        try:
            proc.communicate(timeout=timeout)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            proc.kill()
            try:
                proc.communicate(timeout=5)
            except (subprocess.TimeoutExpired, ValueError, OSError):
                pass
    for f in (proc.stdin, proc.stdout, getattr(proc, "_bench_stderr", None)):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass


@atexit.register
def _kill_children() -> None:
    for proc in CHILDREN:
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    try:
        for name in os.listdir(WORKDIR):
            os.unlink(os.path.join(WORKDIR, name))
        os.rmdir(WORKDIR)
    except OSError:
        pass


class Watchdog:
    """Kills ``proc`` when the ``with`` block outlasts ``seconds`` (a blocked read then sees EOF), then raises."""

    def __init__(self, proc: subprocess.Popen[bytes], seconds: float, what: str) -> None:
        self.proc, self.what, self.seconds = proc, what, seconds
        self.fired = False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        self.proc.kill()

    def __enter__(self) -> Watchdog:
        self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.timer.cancel()
        if self.fired:
            raise BenchError(f"timeout after {self.seconds:.0f} s: {self.what}")


def send(proc: subprocess.Popen[bytes], frame: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(frame).encode() + b"\n")
    proc.stdin.flush()


def readline(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise BenchError(f"child ended early (rc={proc.poll()}) {stderr_tail(proc)}")
    return line


def read_reply(proc: subprocess.Popen[bytes], frame_id: int) -> dict[str, Any]:
    """Skip lines until the reply to ``frame_id``; raise on an error reply."""
    while True:
        line = readline(proc)
        if line.startswith(b'{"event"'):
            continue
        msg = json.loads(line)
        if msg.get("id") == frame_id:
            if "error" in msg:
                raise BenchError(f"command {frame_id} failed: {msg['error']}")
            return msg


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise BenchError(f"no {field} for pid {pid}")


# ------------------------------------------------------------------------------------------------ reader


def read_until_end(stream: Iterable[bytes]) -> dict[str, Any]:
    """The reader shared by every flood: count lines and bytes, stop at TurnEnded (found by substring) or at the
    session's ``closed`` line. Non-event lines (replies, session errors) are rare and parsed."""
    lines = nbytes = other = 0
    end, error = "EOF", None
    for line in stream:
        lines += 1
        nbytes += len(line)
        if line.startswith(b'{"event"'):
            if b"TurnEnded" in line:
                end = "TurnEnded"
                break
            continue
        other += 1
        msg = json.loads(line)
        if "closed" in msg:
            end = "closed"
            break
        if "session" in msg and "error" in msg:
            error = msg["error"].get("kind")
    t1 = time.perf_counter()
    return {"t1": t1, "lines": lines, "bytes": nbytes, "events": lines - other, "end": end, "error": error}


# ------------------------------------------------------------------------------------------------ baseline

# A bare Python process speaking just enough of the wire: hello, an ok for "open", then for "prompt" an ok plus the
# same event lines anyagentd writes for the flood (same keys, compact separators like pydantic's to_json), each one
# built with json.dumps in a loop and written to a buffered stdout. Then it waits for EOF.
BASELINE_SRC = r"""
import json, sys, time
n = int(sys.argv[1])
out, inp = sys.stdout.buffer, sys.stdin.buffer
dumps = json.dumps
out.write(b'{"hello": {"protocol": 1, "anyagent": "baseline"}}\n'); out.flush()
inp.readline()
out.write(b'{"id": 1, "ok": {"id": "s1"}}\n'); out.flush()
inp.readline()
out.write(b'{"id": 2, "ok": {"prompt_id": "p1", "kind": {"Started": {"turn_id": "t1"}}}}\n')
seq = 0
def emit(turn_info, kind):
    global seq
    seq += 1
    ns = time.time_ns()
    line = dumps({"event": {"sequence": seq, "occurred_at": {"secs_since_epoch": ns // 1000000000,
                  "nanos_since_epoch": ns % 1000000000}, "session_id": "s1", "turn_info": turn_info,
                  "kind": kind, "extensions": {}}}, separators=(",", ":"))
    out.write(line.encode() + b"\n")
emit({"id": "t1", "parent_tool_id": None}, {"TurnStarted": {"origin": {"Prompt": "p1"}}})
emit(None, {"StatusChanged": "Working"})
for _ in range(n):
    emit({"id": "t1", "parent_tool_id": None}, {"TextDelta": {"message_id": "m1", "text": "x"}})
emit({"id": "t1", "parent_tool_id": None}, {"MessageEnded": {"message_id": "m1"}})
emit({"id": "t1", "parent_tool_id": None}, {"TurnEnded": {"stop": {"Completed": {"source": "Protocol"}}, "background": []}})
emit(None, {"StatusChanged": "Idle"})
out.flush()
inp.read()
"""


# The same producer with orjson (the fast-JSON bare producer): one orjson.dumps per event.
BASELINE_ORJSON_SRC = (
    BASELINE_SRC.replace("import json, sys, time", "import orjson, sys, time")
    .replace("dumps = json.dumps", "dumps = orjson.dumps")
    .replace(', separators=(",", ":"))', ")")
    .replace('out.write(line.encode() + b"\\n")', 'out.write(line + b"\\n")')
)


def have_orjson() -> bool:
    return subprocess.run([PY, "-c", "import orjson"], capture_output=True, check=False).returncode == 0


# ------------------------------------------------------------------------------------------------ 1. throughput


def cpu_seconds(pid: int) -> float | None:
    """The user + system CPU time ``pid`` has used so far (``/proc/<pid>/stat``, clock ticks), None without it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def flood_once(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """Spawn ``argv`` (a wire server), open, prompt, read until TurnEnded (or the session's ``closed`` line); time
    from prompt sent to that line read, and the producer's own CPU time over the same span (``cpu``, None where
    ``/proc`` has no figure)."""
    proc = spawn(argv, env)
    try:
        with Watchdog(proc, timeout, f"flood through {' '.join(argv[-3:])}"):
            readline(proc)  # hello
            send(proc, {"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR})
            read_reply(proc, 1)
            cpu0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            send(proc, {"id": 2, "cmd": "prompt", "session": "s1", "text": "go"})
            result = read_until_end(proc.stdout)  # type: ignore[arg-type]
            cpu1 = cpu_seconds(proc.pid)
        result["seconds"] = result.pop("t1") - t0
        result["cpu"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        return result
    finally:
        finish(proc)


def reader_ceiling(n: int) -> float:
    """events/s of ``read_until_end`` alone over the baseline's lines held in memory (no pipe, no producer)."""
    proc = subprocess.run(
        [PY, "-c", BASELINE_SRC, str(n)], input=b"open\nprompt\n", capture_output=True, timeout=60, check=False
    )
    data = proc.stdout.split(b"\n", 2)[2]  # drop hello and the open reply, as flood_once does
    stream = io.BufferedReader(io.BytesIO(data), 1 << 16)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    result = read_until_end(stream)
    return result["events"] / (result["t1"] - t0)


def fmt_rate(r: dict[str, Any]) -> str:
    eps = r["events"] / r["seconds"]
    mbs = r["bytes"] / r["seconds"] / 1e6
    return (
        f"{eps:>10,.0f} events/s  {mbs:6.1f} MB/s  ({r['events']:,} events, {r['bytes'] / 1e6:.1f} MB, "
        f"{r['seconds']:.2f} s, {r['bytes'] / max(r['lines'], 1):.0f} B/line)"
    )


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda r: r["events"] / r["seconds"])[len(runs) // 2]  # the median by rate


BIG_BOUND = {"ANYAGENTD_EVENT_BOUND": "1000000"}


def run_variants(
    variants: list[tuple[str, list[str], dict[str, str] | None]], runs: int, results: dict[str, list[dict[str, Any]]]
) -> None:
    for i in range(runs):
        for name, argv, env in variants:  # interleaved, so machine noise spreads over every variant
            try:
                r = flood_once(argv, env)
            except BenchError as err:
                print(f"  {name} run {i + 1}: FAILED: {err}")
                continue
            results.setdefault(name, []).append(r)
            if r["end"] != "TurnEnded":
                print(
                    f"  {name} run {i + 1}: no TurnEnded: session ended by its {r['end']} line after "
                    f"{r['events']:,} events (session error: {r['error']})"
                )


def rate(r: dict[str, Any]) -> float:
    return r["events"] / r["seconds"]


def bench_throughput(runs: int, quick: bool, whole: bool = False) -> None:
    print(f"\n== 1. Wire throughput: {N_EVENTS:,}-TextDelta flood, prompt sent -> TurnEnded read (median of {runs})")
    serve = [*anyagentd_cmd(), "serve", "--mock", "flood"]
    results: dict[str, list[dict[str, Any]]] = {}
    variants = [("anyagentd", serve, None), ("baseline", [PY, "-c", BASELINE_SRC, str(N_EVENTS)], None)]
    if whole:  # every round also measures a whole flood (no ConsumerLagged when the reader is descheduled)
        variants.insert(1, ("anyagentd bound=1M", serve, BIG_BOUND))
    if have_orjson():
        variants.append(("baseline orjson", [PY, "-c", BASELINE_ORJSON_SRC, str(N_EVENTS)], None))
    run_variants(variants, runs, results)
    lagged = any(r["end"] != "TurnEnded" for r in results.get("anyagentd", []))
    if lagged and not quick and not whole:
        # Same server, only the engine's bound raised (a documented setting): the rate of a whole flood. One run
        # (about 20 s), to keep the whole benchmark near 2 minutes.
        run_variants([("anyagentd bound=1M", serve, BIG_BOUND)], 1, results)
    med = {name: median_run(rs) for name, rs in results.items() if rs}
    width = max(map(len, med), default=0) + 2
    for name, r in med.items():
        note = "" if r["end"] == "TurnEnded" else f"  <- ended by {r['error'] or r['end']}: rate over delivered part"
        print(f"  {name:<{width}}{fmt_rate(r)}{note}")
    base = med.get("baseline")
    if base:
        for name, r in med.items():
            if not name.startswith("baseline"):
                print(
                    f"  ratio {name} / baseline: {rate(r) / rate(base):.3f} events/s, "
                    f"{(r['bytes'] / r['seconds']) / (base['bytes'] / base['seconds']):.3f} MB/s  "
                    f"(per event {r['seconds'] / r['events'] * 1e6:.1f} us vs {base['seconds'] / base['events'] * 1e6:.1f} us)"
                )
    fast = med.get("baseline orjson")
    if fast:
        for name, r in med.items():
            if not name.startswith("baseline"):
                print(f"  ratio {name} / baseline orjson: {rate(r) / rate(fast):.3f} events/s")
    # Each producer's own CPU time per event (median over its runs): what the wall rates come to when each process
    # has a core to itself, so it can be read on a machine too busy for the rates (issue 31).
    cpu = {
        name: statistics.median(r["cpu"] / r["events"] for r in rs)
        for name, rs in results.items()
        if rs and all(r["cpu"] is not None for r in rs)
    }
    if cpu:
        print("  CPU per event: " + ", ".join(f"{name} {us * 1e6:.2f} us" for name, us in cpu.items()))
        if "baseline orjson" in cpu:
            for name, us in cpu.items():
                if not name.startswith("baseline") and us:
                    print(f"  CPU ratio baseline orjson / {name}: {cpu['baseline orjson'] / us:.3f}")
    for name, rs in results.items():
        if not name.startswith("baseline"):
            done = sum(r["end"] == "TurnEnded" for r in rs)
            print(f"  {name}: {done} of {len(rs)} runs reached TurnEnded")
    if lagged and quick and not whole:
        print("  (without --quick a run with ANYAGENTD_EVENT_BOUND=1000000 gives the whole-flood rate)")
    try:
        ceiling = reader_ceiling(N_EVENTS)
        note = f" = {ceiling / rate(base):.1f}x the baseline rate" if base else ""
        print(f"  reader alone (same reader over the baseline's lines in memory): {ceiling:,.0f} events/s{note}")
    except (subprocess.TimeoutExpired, OSError, ZeroDivisionError) as err:
        print(f"  reader ceiling: FAILED: {err}")


# ------------------------------------------------------------------------------------------------ 2. cold start


def time_hello(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc = spawn(argv)
    try:
        with Watchdog(proc, 30, "hello line"):
            readline(proc)
        return time.perf_counter() - t0
    finally:
        finish(proc)


def time_exit(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
        cwd=WORKDIR,
    )
    return time.perf_counter() - t0


def import_breakdown(top: int = 6, first_open: bool = False) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Self (exclusive) import time of ``import anyagentd.cli`` (one ``-X importtime`` run), or with
    ``first_open`` of ``anyagentd serve`` answering one ``open`` of the mock, summed per top-level package and per
    module; the top few of each, in seconds."""
    if first_open:
        frame = json.dumps({"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR}) + "\n"
        proc = subprocess.run(
            [PY, "-X", "importtime", "-m", "anyagentd.cli", "serve"],
            input=frame.encode(),
            capture_output=True,
            timeout=30,
            check=False,
            cwd=WORKDIR,
        )
    else:
        proc = subprocess.run(
            [PY, "-X", "importtime", "-c", "import anyagentd.cli"],
            capture_output=True,
            timeout=30,
            check=False,
            cwd=WORKDIR,
        )
    packages: dict[str, float] = {}
    modules: dict[str, float] = {}
    for line in proc.stderr.decode(errors="replace").splitlines():
        parts = line[len("import time:") :].split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name, self_s = parts[2].strip(), int(parts[0]) / 1e6
        modules[name] = modules.get(name, 0) + self_s
        packages[name.split(".")[0]] = packages.get(name.split(".")[0], 0) + self_s
    best = lambda d: sorted(d.items(), key=lambda kv: -kv[1])[:top]  # noqa: E731
    return best(packages), best(modules)


def time_first_open(argv: list[str]) -> float:
    """Spawn ``argv`` (a wire server) with an ``open`` of the mock already written; seconds to its reply."""
    t0 = time.perf_counter()
    proc = spawn(argv)
    try:
        with Watchdog(proc, 30, "reply to the first open"):
            send(proc, {"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR})
            readline(proc)  # hello
            read_reply(proc, 1)
        return time.perf_counter() - t0
    finally:
        finish(proc)


LIBS = "import pydantic, anyio, click"
FLOOR = str(Path(__file__).with_name("wire_floor.py"))


def bench_cold_start(runs: int) -> None:
    print(f"\n== 2. Cold start (median of {runs})")
    cases: list[tuple[str, Callable[[], float]]] = [
        ("anyagentd serve -> hello", lambda: time_hello([*anyagentd_cmd(), "serve"])),
        ("python -c pass", lambda: time_exit([PY, "-c", "pass"])),
        ("python -c 'import anyagentd.cli'", lambda: time_exit([PY, "-c", "import anyagentd.cli"])),
        ("serve -> reply to open mock", lambda: time_first_open([*anyagentd_cmd(), "serve"])),
        (f"python -c '{LIBS}'", lambda: time_exit([PY, "-c", LIBS])),
        ("anyagentd --help", lambda: time_exit([*anyagentd_cmd(), "--help"])),
        ("anyagentd run mock hi", lambda: time_exit([*anyagentd_cmd(), "run", "mock", "hi", "--dir", WORKDIR])),
        ("stack floor -> reply to open", lambda: time_first_open([PY, FLOOR])),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(runs):
        for name, fn in cases:
            try:
                times[name].append(fn())
            except (BenchError, subprocess.TimeoutExpired, OSError) as err:
                print(f"  {name}: FAILED: {err}")
    med = {name: statistics.median(ts) for name, ts in times.items() if ts}
    for name, t in med.items():
        print(
            f"  {name:<36}{t * 1000:8.0f} ms   (min {min(times[name]) * 1000:.0f}, max {max(times[name]) * 1000:.0f})"
        )
    serve, bare, imp, first_open, libs, help_, run, floor = (med.get(name) for name, _ in cases)
    if libs:
        for name, value in (
            ("serve->hello", serve),
            ("serve->open reply", first_open),
            ("--help", help_),
            ("run mock", run),
            ("stack floor", floor),
        ):
            if value:
                print(f"  ratio {name} / python -c '{LIBS}': {value / libs:.2f}x")
    if floor:
        for name, value in (("serve->open reply", first_open), ("run mock", run)):
            if value:
                print(f"  ratio {name} / stack floor: {value / floor:.2f}x")
    if serve and bare:
        print(f"  ratio serve->hello / python -c pass: {serve / bare:.1f}x")
    if serve and imp:
        print(
            f"  ratio serve->hello / import anyagentd.cli: {serve / imp:.2f}x  "
            f"(serve minus import: {(serve - imp) * 1000:+.0f} ms)"
        )
    for what, first_open in (("import anyagentd.cli", False), ("serve -> reply to open mock", True)):
        try:
            packages, modules = import_breakdown(first_open=first_open)
            print(
                f"  {what}, self import time by package (one -X importtime run): "
                + ", ".join(f"{name} {sec * 1000:.0f} ms" for name, sec in packages)
            )
            print("    by module: " + ", ".join(f"{name} {sec * 1000:.0f} ms" for name, sec in modules))
        except (subprocess.TimeoutExpired, OSError) as err:
            print(f"  import breakdown ({what}): FAILED: {err}")


def precompile() -> str:
    """Write the bytecode of the workspace's packages the server imports (``compileall`` into their
    ``__pycache__``), so a cold start reads .pyc files as the libraries in site-packages do. Without it, under
    ``PYTHONDONTWRITEBYTECODE=1`` (set in some environments, this one included) every spawn compiles each of our
    modules from source again: about 50 ms of a cold start that no installed copy pays. Returns what it did."""
    code = (
        "import importlib.util, json, sys\n"
        "names = ['anyagentd'] + sorted({m.name for m in __import__('pkgutil').iter_modules()"
        " if m.name.startswith('anyagentd_')})\n"
        "print(json.dumps([importlib.util.find_spec(n).submodule_search_locations[0] for n in names]))"
    )
    try:
        dirs = json.loads(subprocess.run([PY, "-c", code], capture_output=True, timeout=30, check=True).stdout)
        done = subprocess.run([PY, "-m", "compileall", "-q", *dirs], capture_output=True, timeout=120, check=False)
    except (subprocess.SubprocessError, OSError, ValueError) as err:
        return f"not precompiled ({err})"
    state = "written" if done.returncode == 0 else "could not all be written (read-only tree?)"
    return f"bytecode of {len(dirs)} workspace packages {state} first (compileall)"


# ------------------------------------------------------------------------------------------------ 3. memory


def bench_memory(stall: float) -> None:
    print("\n== 3. Memory (VmRSS of one `anyagentd serve` process, MiB)")
    # Idle, then 100 idle scripted sessions.
    proc = spawn([*anyagentd_cmd(), "serve", "--mock", "hello"])
    try:
        with Watchdog(proc, 60, f"opening {IDLE_SESSIONS} sessions"):
            readline(proc)
            time.sleep(0.3)
            idle = rss_mib(proc.pid)
            print(f"  idle after hello:                  {idle:7.1f}")
            assert proc.stdin is not None
            t0 = time.perf_counter()
            proc.stdin.write(
                b"".join(
                    json.dumps({"id": i, "cmd": "open", "agent": "mock", "dir": WORKDIR}).encode() + b"\n"
                    for i in range(1, IDLE_SESSIONS + 1)
                )
            )
            proc.stdin.flush()
            oks = errors = 0
            while oks + errors < IDLE_SESSIONS:
                msg = json.loads(readline(proc))
                if isinstance(msg.get("id"), int):
                    oks += "ok" in msg
                    errors += "error" in msg
            opened_in = time.perf_counter() - t0
            time.sleep(0.3)
            full = rss_mib(proc.pid)
        per = (full - idle) * 1024 / max(oks, 1)
        print(
            f"  with {oks} idle sessions:           {full:7.1f}   (+{full - idle:.1f} MiB, {per:.0f} KiB/session; "
            f"opened in {opened_in * 1000:.0f} ms{f', {errors} open errors' if errors else ''})"
        )
    except BenchError as err:
        print(f"  idle sessions: FAILED: {err}")
    finally:
        finish(proc)

    # One stalled consumer: prompt a flood and do not read stdout for `stall` seconds.
    proc = spawn([*anyagentd_cmd(), "serve", "--mock", "flood"])
    try:
        with Watchdog(proc, stall + 60, "stalled-consumer flood"):
            readline(proc)
            time.sleep(0.3)
            idle = rss_mib(proc.pid)
            send(proc, {"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR})
            read_reply(proc, 1)
            opened = rss_mib(proc.pid)
            send(proc, {"id": 2, "cmd": "prompt", "session": "s1", "text": "go"})
            peak, samples, deadline = opened, 0, time.monotonic() + stall
            while time.monotonic() < deadline:
                peak = max(peak, rss_mib(proc.pid))
                samples += 1
                time.sleep(0.02)
            stalled = rss_mib(proc.pid)
            hwm = rss_mib(proc.pid, "VmHWM")
            result = read_until_end(proc.stdout)  # type: ignore[arg-type]
            time.sleep(0.3)
            after = rss_mib(proc.pid)
        print(f"  flood server idle / session open:  {idle:7.1f} / {opened:.1f}")
        print(
            f"  stalled consumer ({stall:.0f} s unread):   {peak:7.1f} peak of {samples} samples "
            f"(+{peak - opened:.1f} MiB; end of stall {stalled:.1f}; VmHWM {hwm:.1f})"
        )
        lagged = result["error"] == "ConsumerLagged"
        how = f"by its closed line after a {result['error']} error" if result["error"] else f"by {result['end']}"
        print(
            f"  after reading on:                  {after:7.1f}   session ended {how}; "
            f"{result['events']:,} of {N_EVENTS + 5:,} events delivered"
        )
        print(f"  closed with ConsumerLagged: {'yes' if lagged else 'NO'}")
    except BenchError as err:
        print(f"  stalled consumer: FAILED: {err}")
    finally:
        finish(proc)


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description="Benchmark anyagentd serve: wire throughput, cold start, memory.")
    ap.add_argument("--quick", action="store_true", help="1 flood run, 3 cold starts (well under 30 s)")
    ap.add_argument("--runs", type=int, help="flood runs per variant (default 3, or 1 with --quick)")
    ap.add_argument(
        "--no-precompile",
        action="store_true",
        help="do not write the workspace's bytecode first (e.g. for a tree you must not write to)",
    )
    ap.add_argument(
        "--whole",
        action="store_true",
        help="add an `anyagentd bound=1M` flood to every interleaved round (whole-flood rates)",
    )
    ap.add_argument("--throughput-only", action="store_true", help="only the wire throughput (no cold start, memory)")
    args = ap.parse_args()
    runs = args.runs or (1 if args.quick else 3)
    started = time.perf_counter()
    try:
        import anyagentd

        version = anyagentd.__version__
    except ImportError:
        version = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"anyagentd {version}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}")
    print(f"server: {' '.join(anyagentd_cmd())}")
    compiled = "not precompiled (--no-precompile)" if args.no_precompile else precompile()
    print(f"bytecode: {compiled}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    bench_throughput(runs, args.quick, args.whole)
    if not args.throughput_only:
        bench_cold_start(3 if args.quick else 5)
        bench_memory(STALL_SECONDS)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
