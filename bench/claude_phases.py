"""Claude's first turn, phase by phase, on both sides of the pipe: anyagentd against claude-agent-sdk, interleaved.

Run: ``.venv/bin/python bench/claude_phases.py [--runs N] [--paths P1,P2,...]`` (paths of ``bench_agents.py``'s
``claude`` agent; default ``sdk same request,anyagentd``; the first is the baseline of the paired differences).
Prints figures, asserts nothing.

Each run is ``bench_agents.py``'s (same model server, same environment, fresh HOME and work dir), with timestamps
taken, in wall-clock seconds from the path's clock (just before ``Runtime.open`` / ``query()``):

- on the driver's side of the pipe, by wrapping anyagentd's ``AgentProcess`` (``_open_process``, ``write_line``,
  ``lines``) and the SDK's ``SubprocessCLITransport`` (``connect``, ``write``, ``_read_messages_impl``):
  ``spawn`` (the call that starts the CLI), ``w_init`` (the ``initialize`` request written), ``r_init`` (its answer
  read), ``w_user`` (the user frame written), ``r_sysinit`` (``system/init`` read: the CLI has taken the prompt),
  ``r_delta`` (the first text delta read), ``first`` (the path's own first text, after its event pipeline);
- on the CLI's side, by starting it through a wrapper (this Python with ``-S``: fork, exec the pinned CLI with the same
  stdio, ``wait4``): ``exec`` (the wrapper's start: the spawn has happened) and ``cli_cpu`` (the CLI's user + system
  CPU seconds, its children included: git, rg, ps);
- at the model: ``model`` (the scripted server logged the request, millisecond resolution) and ``bytes`` (its
  ``content-length``).

Then per path the medians, and per segment the paired difference path - baseline (runs of the same index are
neighbours in time): mean ± standard error and median, in ms. The wrapper costs both paths the same few ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_agents as B  # noqa: E402

WRAPPER = """import os, sys, time
t = time.time()
pid = os.fork()
if pid == 0:
    os.execv(CLI, [CLI, *sys.argv[1:]])
_, status, ru = os.wait4(pid, 0)
with open(os.environ["CLAUDE_PHASES_LOG"], "a") as f:
    f.write(f"{t} {ru.ru_utime + ru.ru_stime}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""

EVENTS: list[tuple[float, str, str, float]] = []
"""(wall-clock time, what, the frame's first bytes, this process's CPU seconds) of the run under way."""

MARKS = ("spawn", "exec", "w_init", "r_init", "w_user", "r_sysinit", "model", "r_delta", "first", "end")
SEGMENTS = (
    ("clock", "spawn"),
    ("spawn", "exec"),
    ("exec", "r_init"),
    ("r_init", "w_user"),
    ("w_user", "r_sysinit"),
    ("r_sysinit", "model"),
    ("model", "r_delta"),
    ("r_delta", "first"),
    ("clock", "first"),
)


def note(what: str, text: str = "") -> None:
    EVENTS.append((time.time(), what, text[:120], time.process_time()))


def instrument() -> None:
    """Wrap both drivers' spawn, writes and reads, and ``bench_agents.Clock`` (its start and marks), with
    :func:`note`."""
    from claude_agent_sdk._internal.transport import subprocess_cli as S

    from anyagentd.adapters import process as P

    clock_init, clock_mark = B.Clock.__init__, B.Clock.mark

    def init(self: Any) -> None:
        clock_init(self)
        note("clock")

    def mark(self: Any, key: str) -> None:
        if key not in self.figures:
            note("mark", key)
        clock_mark(self, key)

    B.Clock.__init__, B.Clock.mark = init, mark  # type: ignore[method-assign]

    open_process, write_line, lines = P._open_process, P.AgentProcess.write_line, P.AgentProcess.lines

    async def our_open(argv: list[str], **kw: Any) -> Any:
        note("spawn")
        return await open_process(argv, **kw)

    async def our_write(self: Any, line: str) -> None:
        note("w", line)
        await write_line(self, line)

    async def our_lines(self: Any) -> Any:
        async for line in lines(self):
            note("r", line if isinstance(line, str) else "")
            yield line

    P._open_process, P.AgentProcess.write_line, P.AgentProcess.lines = our_open, our_write, our_lines

    connect, write = S.SubprocessCLITransport.connect, S.SubprocessCLITransport.write
    read = S.SubprocessCLITransport._read_messages_impl

    async def sdk_connect(self: Any) -> None:
        note("spawn")
        await connect(self)

    async def sdk_write(self: Any, data: str) -> None:
        note("w", json.dumps(json.loads(data), separators=(",", ":")))
        await write(self, data)

    async def sdk_read(self: Any) -> Any:
        async for msg in read(self):
            note("r", json.dumps(msg, separators=(",", ":")))
            yield msg

    S.SubprocessCLITransport.connect = sdk_connect  # type: ignore[method-assign]
    S.SubprocessCLITransport.write = sdk_write  # type: ignore[method-assign]
    S.SubprocessCLITransport._read_messages_impl = sdk_read  # type: ignore[method-assign]


def phases(
    events: list[tuple[float, str, str, float]], cli_log: str, requests: list[dict[str, Any]]
) -> dict[str, float]:
    """The run's marks (seconds from its clock) from its events, the wrapper's line and the model server's log;
    ``driver_cpu``: this process's CPU seconds from the spawn to the ``initialize`` answer (while the CLI starts)."""
    t0 = next(t for t, what, _, _ in events if what == "clock")
    out: dict[str, float] = {"clock": 0.0}
    cpu: dict[str, float] = {}

    def first(key: str, what: str, *needles: str) -> None:
        for t, w, text, c in events:
            if w == what and all(n in text for n in needles):
                out.setdefault(key, t - t0)
                cpu.setdefault(key, c)
                return

    first("spawn", "spawn")
    first("w_init", "w", '"subtype":"initialize"')
    first("r_init", "r", '"type":"control_response"')
    first("w_user", "w", '"type":"user"')
    first("r_sysinit", "r", '"subtype":"init"')
    first("r_delta", "r", '"content_block_delta"')
    first("first", "mark", "first")
    first("end", "mark", "end")
    out["driver_cpu"] = cpu["r_init"] - cpu["spawn"]
    started, cli_cpu = Path(cli_log).read_text().split()[:2]
    out["exec"], out["cli_cpu"] = float(started) - t0, float(cli_cpu)
    for req in requests:
        if req["kind"] == "main" and t0 <= req["ts"] <= t0 + out["end"] + 0.01:
            out["model"] = req["ts"] - t0
            out["bytes"] = float(req["headers"].get("content-length", 0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--paths", default="sdk same request,anyagentd")
    args = ap.parse_args()
    B.end_on_signals()
    agent = B.agents()["claude"]
    names = [p.strip() for p in args.paths.split(",") if p.strip()]
    instrument()
    with tempfile.TemporaryDirectory(prefix="claude-phases-") as tmp:
        wrapper = Path(tmp, "claude")
        wrapper.write_text(f"#!{sys.executable} -S\nCLI = {str(B.agent_bin('claude'))!r}\n{WRAPPER}")
        wrapper.chmod(0o755)
        B.agent_bin = lambda name: wrapper  # type: ignore[assignment,return-value]  # both paths start the wrapper
        requests_log = Path(tmp, "requests.jsonl")
        original_env = dict(os.environ)
        results: dict[str, list[dict[str, float]]] = {p: [] for p in names}
        print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs per path, order rotated each run")
        with B.model_server(str(requests_log)) as url:
            for i in range(-1, args.runs):  # -1: warm-up, not counted
                order = names[i % len(names) :] + names[: i % len(names)]
                for p in order:
                    cli_log = Path(tmp, f"cli-{p}-{i}.log")
                    env = {**B.claude_environment(url, str(tmp)), "CLAUDE_PHASES_LOG": str(cli_log)}
                    EVENTS.clear()
                    with (
                        tempfile.TemporaryDirectory(prefix="bench-home-", ignore_cleanup_errors=True) as home,
                        tempfile.TemporaryDirectory(prefix="bench-work-", ignore_cleanup_errors=True) as work,
                    ):
                        env["HOME"] = home
                        B.set_environ(env)
                        try:
                            agent.paths[p](env, work)
                        finally:
                            B.set_environ(original_env)
                    if i >= 0:
                        reqs = [json.loads(line) for line in requests_log.read_text().splitlines()]
                        results[p].append(phases(list(EVENTS), str(cli_log), reqs))
    keys = [*MARKS, "cli_cpu", "driver_cpu", "bytes"]
    print(
        "medians, seconds from the path's clock (cli_cpu: the CLI's CPU seconds; driver_cpu: this process's from the"
        " spawn to the initialize answer; bytes: the model request's size)"
    )
    print(f"{'path':>18} " + " ".join(f"{k[:9]:>9}" for k in keys))
    for p in names:
        meds = [statistics.median(r[k] for r in results[p]) if all(k in r for r in results[p]) else None for k in keys]
        print(f"{p:>18} " + " ".join("      n/a" if m is None else f"{m:9.3f}" for m in meds))
    base = names[0]
    for p in names[1:]:
        print(f"paired {p} - {base}, ms: mean ± standard error, median (n={len(results[p])})")
        for a, b in [*SEGMENTS, ("", "cli_cpu"), ("", "driver_cpu")]:
            diffs = [
                1000 * ((x[b] - x.get(a, 0.0)) - (y[b] - y.get(a, 0.0)))
                for x, y in zip(results[p], results[base], strict=False)
                if b in x and b in y and (not a or (a in x and a in y))
            ]
            if len(diffs) < 2:
                continue
            se = statistics.stdev(diffs) / len(diffs) ** 0.5
            label = f"{a} -> {b}" if a else b
            print(f"  {label:>22}: {statistics.mean(diffs):7.1f} ± {se:5.1f}   median {statistics.median(diffs):7.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
