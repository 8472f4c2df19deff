"""Where ``anyagentd serve``'s start-up to its first ``open`` reply goes, in CPU time; asserts nothing.

Usage: .venv/bin/python bench/startup_steps.py [--runs N] [--tree NAME=ROOT ...] [--steps-only | --spawn-only]

Each ``--tree`` is a checkout (its ``core/src``, ``plugins/a2a/src``, ``plugins/temporal/src`` and ``testing/src``
go first on ``PYTHONPATH``); without one, the installed packages are measured under the name ``installed``. Every
tree is measured in the same rounds, interleaved, so a load change hits all of them alike.

1. **Spawn**: wall time and CPU time of fresh processes, median of ``--runs``: ``python -c "import pydantic, anyio,
   click"`` (the yardstick, spawn to exit), ``bench/wire_floor.py`` (the stack floor, spawn to its reply to
   ``open``), and per tree ``anyagentd serve`` to its reply to an ``open`` of the mock written at once, ``anyagentd
   run mock hi`` to exit and ``anyagentd serve`` to its hello. CPU to a reply is the sum over the process's
   threads of ``/proc/<pid>/task/*/schedstat`` read when the reply arrives (nanoseconds on CPU, start-up only);
   CPU to an exit is ``os.wait4``'s. CPU moves far less than wall time when other jobs share the machine.
2. **Steps**: one fresh process per run does, in order, what the stack floor does (click with ``anyagentd.cli``,
   pydantic's ``BaseModel``, anyio's backend, two small models validated and dumped, one worker-thread call), then
   what ``serve`` adds, step by step (the event model, the mock script module, runtime and engine, the wire, the
   entry-point scan alone (left out of the sum: ``Plugins()`` scans again), ``Plugins()``, the ``hello`` script,
   ``Runtime()``, parsing the ``open`` frame, ``Runtime.open``, the reply line), and prints each step's CPU
   (``time.process_time``), median over the runs. The harness never calls ``startup.done``: a collection that
   ``serve`` would skip can land in a step here.

Bytecode: run with a ``PYTHONPYCACHEPREFIX`` (or without ``PYTHONDONTWRITEBYTECODE``) so every tree loads from
.pyc files; the first round of each case is a warm-up and is not counted (see bench/README.md, "bytecode").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
EXE = str(Path(PY).parent / "anyagentd")
FLOOR = str(Path(__file__).with_name("wire_floor.py"))
WORKDIR = tempfile.mkdtemp(prefix="anyagentd-steps-")
OPEN = (json.dumps({"id": 1, "cmd": "open", "agent": "mock", "dir": WORKDIR}) + "\n").encode()
SOURCES = ("core/src", "plugins/a2a/src", "plugins/temporal/src", "testing/src")

EXTRA = "(entry_points() scan alone)"
"""A step timed for its cost only: ``Plugins()`` scans again, so the sum leaves it out."""

STEPS = r"""
import json, os, sys, time
EXTRA = "(entry_points() scan alone)"
T = [("start", time.process_time())]
def mark(name): T.append((name, time.process_time()))
from anyagentd import startup; startup.begin()
import click, anyagentd.cli; mark("click + anyagentd.cli")
from pydantic import BaseModel; import pydantic_core; mark("pydantic BaseModel")
import anyio, anyio._backends._asyncio; mark("anyio + asyncio backend")
class Open(BaseModel):
    id: int
    cmd: str
    agent: str
    dir: str
class Opened(BaseModel):
    id: int
    ok: dict[str, str]
line = os.environ["STEPS_OPEN"].encode()
Open.model_validate_json(line); Opened(id=1, ok={"id": "s1"}).model_dump_json(); mark("the floor's two models")
async def thread_call():
    await anyio.to_thread.run_sync(len, "")
anyio.run(thread_call); mark("the floor's loop + worker thread")
import anyagentd.model; mark("import anyagentd.model")
import anyagentd.mock.script; mark("import anyagentd.mock.script")
import anyagentd.runtime; mark("import runtime + engine")
import anyagentd.wire; mark("import anyagentd.wire (the rest)")
import importlib.metadata; importlib.metadata.entry_points(); mark(EXTRA)
from anyagentd.cli import loaded_plugins; plugins = loaded_plugins(); mark("Plugins()")
plugins.adapters(); mark("Plugins.adapters()")
from anyagentd.mock.script import load_script; load_script("hello"); mark("load_script('hello')")
from anyagentd.runtime import Runtime; runtime = Runtime(plugins=plugins); mark("Runtime()")
from anyagentd.wire import ok_line, parse_frame
async def first_open():
    frame = parse_frame(line); mark("parse the open frame")
    async with runtime:
        session = await runtime.open(frame.agent, frame.dir, **frame.options()); mark("Runtime.open")
        ok_line(frame.id, session.snapshot()); mark("the reply line")
        print(json.dumps([(name, t - T[i][1]) for i, (name, t) in enumerate(T[1:])]), flush=True)
        os._exit(0)
anyio.run(first_open)
"""


def env_for(root: str | None) -> dict[str, str]:
    env = dict(os.environ, STEPS_OPEN=OPEN.decode().strip())
    if root is None:
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = os.pathsep.join(str(Path(root) / s) for s in SOURCES)
    return env


def thread_cpu(pid: int) -> float:
    """Seconds on CPU so far of every live thread of ``pid`` (``/proc/<pid>/task/*/schedstat``)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a worker thread that ended meanwhile (its few us are lost)
    return total / 1e9


def to_exit(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=WORKDIR, env=env)  # fmt: skip
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def to_reply(argv: list[str], env: dict[str, str], hello_only: bool = False) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=WORKDIR, env=env)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if not hello_only:
            proc.stdin.write(OPEN)
            proc.stdin.flush()
        proc.stdout.readline()  # hello
        while not hello_only:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{argv}: no reply to open")
            if line.startswith(b'{"id":1'):
                break
        wall = time.perf_counter() - t0
        return wall, thread_cpu(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def median_table(results: dict[str, list[tuple[float, float]]]) -> None:
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    yard, floor = med["yardstick"], med["stack floor"]
    for name, (wall, cpu) in med.items():
        print(
            f"  {name:<24} wall {wall * 1000:6.0f} ms  {wall / yard[0]:5.2f}x yardstick  {wall / floor[0]:5.2f}x floor"
            f"  | CPU {cpu * 1000:6.0f} ms  {cpu / yard[1]:5.2f}x yardstick  {cpu / floor[1]:5.2f}x floor"
        )


def spawn(trees: dict[str, str | None], runs: int) -> None:
    print(f"\n== spawn to reply / exit (median of {runs}, interleaved)")
    cases = {
        "yardstick": lambda: to_exit([PY, "-c", "import pydantic, anyio, click"], env_for(None)),
        "stack floor": lambda: to_reply([PY, FLOOR], env_for(None)),
    }
    for name, root in trees.items():
        env = env_for(root)
        cases[f"{name}: open reply"] = lambda env=env: to_reply([EXE, "serve"], env)
        cases[f"{name}: run mock hi"] = lambda env=env: to_exit([EXE, "run", "mock", "hi", "--dir", WORKDIR], env)
        cases[f"{name}: hello"] = lambda env=env: to_reply([EXE, "serve"], env, hello_only=True)
    for case in cases.values():
        case()  # warm-up: bytecode written, files cached
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, case in cases.items():
            results[name].append(case())
    median_table(results)


def steps(trees: dict[str, str | None], runs: int) -> None:
    print(f"\n== in-process steps to the first open reply, CPU ms (median of {runs}, one process per run)")
    results: dict[str, list[list[tuple[str, float]]]] = {name: [] for name in trees}
    for i in range(runs + 1):
        for name, root in trees.items():
            out = subprocess.run([PY, "-c", STEPS], env=env_for(root), capture_output=True, text=True, cwd=WORKDIR)
            if out.returncode != 0:
                raise RuntimeError(f"{name}: {out.stderr[-2000:]}")
            if i:  # the first round warms up
                results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = [step for step, _ in next(iter(results.values()))[0]]
    print(f"  {'step':<36}" + "".join(f"{name:>14}" for name in trees))
    totals = dict.fromkeys(trees, 0.0)
    for k, step in enumerate(names):
        row = f"  {step:<36}"
        for name in trees:
            value = statistics.median(run[k][1] for run in results[name]) * 1000
            totals[name] += 0 if step == EXTRA else value
            row += f"{value:14.1f}"
        print(row)
    print(f"  {'sum (without the scan alone)':<36}" + "".join(f"{totals[name]:14.1f}" for name in trees))


def main() -> None:
    ap = argparse.ArgumentParser(description="Where serve's start-up to its first open reply goes, in CPU time.")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=ROOT", help="a checkout to measure")
    ap.add_argument("--steps-only", action="store_true")
    ap.add_argument("--spawn-only", action="store_true")
    args = ap.parse_args()
    trees: dict[str, str | None] = dict(t.split("=", 1) for t in args.tree) if args.tree else {"installed": None}
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}")
    print(f"PYTHONPYCACHEPREFIX={os.environ.get('PYTHONPYCACHEPREFIX', '')!r}")
    if not args.steps_only:
        spawn(trees, args.runs)
    if not args.spawn_only:
        steps(trees, args.runs)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
