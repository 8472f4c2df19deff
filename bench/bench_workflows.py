"""Workflow runner throughput and restart recovery, on the scripted ``mock`` agent and a real SQLite store.

    .venv/bin/python bench/bench_workflows.py [--runs 200] [--stored 1000]

1. **Runs per second**: ``--runs`` runs of a three-step workflow (two independent agent steps on ``mock``, then a
   finish step), started together, until every one completed; the store commits every transition. Baseline: the
   same number of bare engine turns (open a mock session, one prompt, read to TurnEnded, close) driven the same
   way — the engine work the runs contain — so the ratio is the runner's and store's overhead.
2. **Recovery**: ``--stored`` runs left waiting on a signal, the runner stopped, then the time a new runner takes to
   read them back and resume every one (``recover``), and the time to deliver one signal that resolves all.

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

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


async def bench_runs(tmp: Path, runs: int) -> float:
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(f"sqlite+aiosqlite:///{tmp / 'runs.db'}").open()
        runner = WorkflowRunner(runtime, store, load_workflows([THREE]), work_root=tmp / "w")
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            start = time.perf_counter()
            records = [await runner.start("three", {}, None) for _ in range(runs)]
            for record in records:
                done = await runner.wait(record.id)
                assert done.status == "completed", done.status
            elapsed = time.perf_counter() - start
            tg.cancel_scope.cancel()
        await store.close()
    return elapsed


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


async def bench_recovery(tmp: Path, stored: int) -> tuple[float, float, int]:
    url = f"sqlite+aiosqlite:///{tmp / 'recovery.db'}"
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(url).open()
        runner = WorkflowRunner(runtime, store, load_workflows([WAITING]), work_root=tmp / "r")
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            records = [await runner.start("waiting", {}, None) for _ in range(stored)]
            for record in records:
                while (await store.get(record.id)).status != "suspended":  # committed, not just in memory
                    await anyio.sleep(0.005)
            tg.cancel_scope.cancel()
        await store.close()
    async with Runtime(mock_script="hello") as runtime:
        store = await RunStore(url).open()
        runner = WorkflowRunner(runtime, store, load_workflows([WAITING]), work_root=tmp / "r")
        async with anyio.create_task_group() as tg:
            start = time.perf_counter()
            await tg.start(runner.serve)  # recover() runs before started()
            recovered = time.perf_counter() - start
            await anyio.sleep(0.2)  # let the recovered wait steps register
            start = time.perf_counter()
            delivered = await runner.signal("go", None, "operator", owner=None)
            statuses = [(await runner.wait(record.id)).status for record in records]
            signalled = time.perf_counter() - start
            assert statuses.count("completed") == stored, f"{statuses.count('completed')} of {stored} completed"
            tg.cancel_scope.cancel()
        await store.close()
    return recovered, signalled, delivered


async def main(args: argparse.Namespace) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        bare = await bench_bare(tmp, args.runs * 2)
        elapsed = await bench_runs(tmp, args.runs)
        print(
            f"runs: {args.runs} three-step runs in {elapsed:.2f} s = {args.runs / elapsed:.1f} runs/s; "
            f"baseline {args.runs * 2} bare mock turns in {bare:.2f} s = {args.runs * 2 / bare:.1f} turns/s; "
            f"runner / baseline time {elapsed / bare:.2f}x"
        )
        recovered, signalled, delivered = await bench_recovery(tmp, args.stored)
        print(
            f"recovery: {args.stored} stored waiting runs read back and resumed in {recovered:.2f} s "
            f"({recovered / args.stored * 1000:.2f} ms/run); one signal resolved {delivered} and all completed "
            f"in {signalled:.2f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--stored", type=int, default=1000)
    anyio.run(main, parser.parse_args())
