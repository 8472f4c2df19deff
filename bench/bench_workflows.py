"""Workflow engines' throughput and restart recovery, ``local`` (the runner on SQLite) against ``temporal`` (the
:class:`~anyagentd_temporal.engine.TemporalRunner` on a Temporal dev server), on the scripted ``mock`` agent and a
real SQLite run store.

    .venv/bin/python bench/bench_workflows.py [--runs 100] [--stored 1000] [--engines local,temporal]

One Temporal dev server (:mod:`anyagentd_testing.temporal`, the ``temporal`` CLI) for the whole bench, a fresh
namespace and a fresh store per measurement; each measurement runs on ``local`` then on ``temporal``.

1. **Runs per second**: ``--runs`` runs of a three-step workflow (two independent agent steps on ``mock``, then a
   finish step), started one after the other without waiting, until every one completed; every transition is
   committed to the store (on ``temporal`` by the workflow's ``commit`` local activity, the agent steps being
   activities on the ``mock`` queue). A few runs first warm each engine up (not counted). Baseline: the same number
   of bare engine turns (open a mock session, one prompt, read to TurnEnded, close), all at once — the engine work
   the runs contain — so runner / baseline is the engine's and the store's overhead.
2. **Recovery**: ``--stored`` runs of a one-step workflow left waiting on a signal (the time to start them is
   printed: starts/s), the runner stopped (its task group cancelled), the store closed; then a new runner on the
   same store (and namespace): the time from creating it to its ``serve`` having started (on ``local`` that reads
   every run back and resumes it; on ``temporal`` it connects and starts the workers, the runs being Temporal's),
   then the time for one signal through it (``signal("go", …, owner=None)``) to return, and until every run
   completed (the store lists none not ended).

Prints figures and ratios temporal / local; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "a2a" / "src"))

from anyagentd.runtime import Runtime  # noqa: E402
from anyagentd_a2a.workflows.definition import load_workflows  # noqa: E402
from anyagentd_a2a.workflows.runner import WorkflowRunner  # noqa: E402
from anyagentd_a2a.workflows.store import RunStore  # noqa: E402

THREE = {
    "name": "three",
    "steps": {
        "a": {"kind": "agent", "agent": "mock", "prompt": "one"},
        "b": {"kind": "agent", "agent": "mock", "prompt": "two"},
        "c": {"kind": "finish", "depends_on": ["a", "b"], "output": "{{steps.a.output}}"},
    },
}
WAITING = {"name": "waiting", "steps": {"w": {"kind": "wait", "on": "signal", "signal": "go"}}}
WARM = 5
"""Runs each engine does before the timed ones (not counted)."""

Factory = Callable[[Any, RunStore, dict[str, Any], Path], Any]
"""``(runtime, store, workflows, work_root) -> runner``: one engine."""


def local_engine(server: Any) -> Factory:
    def make(runtime: Any, store: RunStore, workflows: dict[str, Any], work_root: Path) -> Any:
        return WorkflowRunner(runtime, store, workflows, work_root=work_root)

    return make


def temporal_engine(server: Any, namespace: str) -> Factory:
    from anyagentd_temporal.engine import TemporalRunner

    options = {
        "address": server.address,
        "namespace": namespace,
        "task_queue_prefix": "bench",
        "heartbeat": 10.0,
        "max_concurrent": 100,
    }

    def make(runtime: Any, store: RunStore, workflows: dict[str, Any], work_root: Path) -> Any:
        return TemporalRunner(
            runtime, store, workflows, work_root=work_root, default_agent="mock", options=options, hosts=["mock"]
        )

    return make


async def engine(name: str, server: Any) -> Factory:
    if name == "local":
        return local_engine(server)
    namespace = await anyio.to_thread.run_sync(server.namespace)
    return temporal_engine(server, namespace)


async def bench_runs(make: Factory, tmp: Path, runs: int) -> tuple[float, float]:
    """``(seconds to start the runs, seconds until all completed)``."""
    tmp.mkdir()
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(f"sqlite+aiosqlite:///{tmp / 'runs.db'}").open()
        runner = make(runtime, store, load_workflows([THREE]), tmp / "w")
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            for record in [await runner.start("three", {}, None) for _ in range(WARM)]:
                await runner.wait(record.id)
            start = time.perf_counter()
            records = [await runner.start("three", {}, None) for _ in range(runs)]
            started = time.perf_counter() - start
            for record in records:
                done = await runner.wait(record.id)
                assert done.status == "completed", done.status
            elapsed = time.perf_counter() - start
            tg.cancel_scope.cancel()
        await store.close()
    return started, elapsed


async def bench_bare(tmp: Path, turns: int) -> float:
    async with Runtime(mock_script="hello") as runtime:

        async def one() -> None:
            session = await runtime.open("mock", tmp)
            await session.prompt("one")
            async for event in session.events():
                if event.tag == "TurnEnded":
                    break
            await session.close()

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(turns):
                tg.start_soon(one)
        return time.perf_counter() - start


async def until_suspended(store: RunStore, stored: int) -> float:
    """Seconds until ``stored`` runs are committed suspended (not just in memory)."""
    start = time.perf_counter()
    while sum(r.status == "suspended" for r in await store.list(non_terminal=True)) < stored:
        await anyio.sleep(0.05)
    return time.perf_counter() - start


async def bench_recovery(make: Factory, tmp: Path, stored: int) -> dict[str, float]:
    """``started`` (seconds to start the runs), ``suspended`` (then until all were committed suspended),
    ``recovered`` (a new runner's ``serve`` started), ``signal`` (one signal returned), ``completed`` (from the
    signal until no run is left), ``delivered`` (the steps it resolved)."""
    tmp.mkdir()
    url = f"sqlite+aiosqlite:///{tmp / 'recovery.db'}"
    out: dict[str, float] = {}
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(url).open()
        runner = make(runtime, store, load_workflows([WAITING]), tmp / "r")
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            start = time.perf_counter()
            for _ in range(stored):
                await runner.start("waiting", {}, None)
            out["started"] = time.perf_counter() - start
            out["suspended"] = await until_suspended(store, stored)
            tg.cancel_scope.cancel()
        await store.close()
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(url).open()
        start = time.perf_counter()
        runner = make(runtime, store, load_workflows([WAITING]), tmp / "r")
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)  # local: recover() runs before started()
            out["recovered"] = time.perf_counter() - start
            await anyio.sleep(0.2)  # let the recovered wait steps register
            start = time.perf_counter()
            out["delivered"] = await runner.signal("go", None, "bench", owner=None)
            out["signal"] = time.perf_counter() - start
            while left := await store.list(non_terminal=True):
                await anyio.sleep(0.05)
            out["completed"] = time.perf_counter() - start
            runs = await store.list()
            completed = sum(r.status == "completed" for r in runs)
            assert completed == stored, f"{completed} of {stored} completed ({len(left)} left)"
            tg.cancel_scope.cancel()
        await store.close()
    return out


async def main(args: argparse.Namespace, server: Any) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        bare = await bench_bare(tmp, args.runs * 2)
        print(
            f"baseline: {args.runs * 2} bare mock turns in {bare:.2f} s = {args.runs * 2 / bare:.1f} turns/s",
            flush=True,
        )
        runs: dict[str, Any] = {}
        for name in args.engines:
            make = await engine(name, server)
            started, elapsed = await bench_runs(make, tmp / f"runs-{name}", args.runs)
            runs[name] = {"elapsed": elapsed, "rate": args.runs / elapsed}
            print(
                f"runs {name}: {args.runs} three-step runs started in {started:.2f} s, all completed in "
                f"{elapsed:.2f} s = {args.runs / elapsed:.1f} runs/s; runner / baseline time {elapsed / bare:.2f}x",
                flush=True,
            )
        if len(runs) == 2:
            print(f"runs temporal / local: runs/s {runs['temporal']['rate'] / runs['local']['rate']:.2f}x")
        recovery: dict[str, Any] = {}
        for name in args.engines:
            make = await engine(name, server)
            print(f"recovery {name}: starting {args.stored} waiting runs…", flush=True)
            out = await bench_recovery(make, tmp / f"recovery-{name}", args.stored)
            out["rate"] = args.stored / out["started"]
            recovery[name] = out
            print(
                f"recovery {name}: {args.stored} waiting runs started in {out['started']:.2f} s "
                f"({out['rate']:.1f} starts/s), all suspended {out['suspended']:.2f} s later; runner stopped; "
                f"a new runner serving in {out['recovered']:.2f} s ({out['recovered'] / args.stored * 1000:.2f} "
                f"ms/run); one signal resolved {out['delivered']:.0f} in {out['signal']:.2f} s, "
                f"all completed in {out['completed']:.2f} s",
                flush=True,
            )
        if len(recovery) == 2:
            local, temporal = recovery["local"], recovery["temporal"]
            print(
                f"recovery temporal / local: starts/s {temporal['rate'] / local['rate']:.2f}x, new runner serving "
                f"{temporal['recovered'] / local['recovered']:.2f}x, signal to all completed "
                f"{temporal['completed'] / local['completed']:.2f}x"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--stored", type=int, default=1000)
    parser.add_argument("--engines", type=lambda s: s.split(","), default=["local", "temporal"])
    parsed = parser.parse_args()
    temporal_server = None
    if "temporal" in parsed.engines:
        from anyagentd_testing.temporal import start

        temporal_server = start()
    try:
        anyio.run(main, parsed, temporal_server)
    finally:
        if temporal_server is not None:
            temporal_server.stop()
