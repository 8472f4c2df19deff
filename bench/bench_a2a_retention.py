"""The A2A daemon's database over many turns, with ``[a2a.retention]`` on and off: its size and a user's
``ListTasks`` time stay flat with retention. Prints; asserts nothing.

Usage: .venv/bin/python bench/bench_a2a_retention.py [--turns N] [--age S] [--every S] [--interval S] [--reply B]

The turns are written the way the daemon writes them, in this process, without a daemon (10,000 turns through a
live daemon and the mock agent take far longer than the store's writes, and the agent's work is not what is
measured): per turn the task's first save (SUBMITTED, the prompt in its history) and its end (COMPLETED, the reply
as an artifact and in its history) through :class:`anyagentd_a2a.store.PrincipalTaskStore`, ten turns per
conversation (contextId), each conversation's resume token through ``ConversationTable.remember`` — on a SQLite
file made by ``engine_for`` (WAL, ``auto_vacuum=INCREMENTAL``), owner ``alice``.

Time is simulated: turn n happens ``--every`` seconds after turn n-1 (default 10 s), the last one now, so the
turns span days. Variants, side by side, each on a fresh file:

- **retention**: ``tasks = --age`` (default 3600 s: one hour of turns, 360 of them, is kept); a prune
  (:class:`anyagentd_a2a.retention.Retention`, as the daemon runs it, its space given back) every ``--interval``
  simulated seconds (default 3600, the daemon's default interval);
- **keep all**: ``tasks = 0``, nothing pruned: the database as it was before retention.

At checkpoints (1k, 5k, 10k turns and the last) it prints the database's size (the file and its WAL, MiB), the
tasks stored, and ``ListTasks`` as alice (the default page: 50 tasks, the newest; median of 5 calls, ms) for both,
and the ratio keep-all / retention.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

CHECKPOINTS = (1_000, 5_000, 10_000)
PER_CONVERSATION = 10


def _size_mib(db: Path) -> float:
    wal = db.with_name(db.name + "-wal")
    return (db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / (1024 * 1024)


async def churn(
    turns: int, age: int, every: float, reply: int, work: Path, interval: float = 3600
) -> list[dict[str, Any]]:
    """Write ``turns`` turns (see the module doc) on a fresh file in ``work``, a prune every ``interval`` simulated
    seconds; ``age`` 0: nothing pruned. Returns
    one row per checkpoint: ``turns``, ``mib``, ``tasks`` (stored), ``list_ms`` (median ListTasks)."""
    from a2a.server.context import ServerCallContext
    from a2a.types import Artifact, ListTasksRequest, Message, Part, Role, Task, TaskState, TaskStatus

    from anyagentd_a2a.config import RetentionSection
    from anyagentd_a2a.retention import RetainedAgent, Retention
    from anyagentd_a2a.store import ConversationTable, PrincipalTaskStore, _Owner, engine_for

    db = work / "a2a.db"
    engine = engine_for(f"sqlite+aiosqlite:///{db}")
    store = PrincipalTaskStore(engine)
    await store.initialize()
    table = ConversationTable(engine)
    await table.initialize()
    context = ServerCallContext(user=_Owner("alice"))
    start = time.time() - turns * every  # simulated: the last turn is now
    text = "x" * reply
    checkpoints = sorted({c for c in CHECKPOINTS if c <= turns} | {turns})
    rows: list[dict[str, Any]] = []
    next_prune = start + interval
    try:
        for n in range(1, turns + 1):
            at = start + n * every
            context_id = f"ctx-{n // PER_CONVERSATION}"
            task_id = str(uuid.uuid4())
            prompt = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                context_id=context_id,
                task_id=task_id,
                parts=[Part(text=f"turn {n}: do the next thing")],
            )
            task = Task(
                id=task_id,
                context_id=context_id,
                history=[prompt],
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            task.status.timestamp.FromDatetime(datetime.fromtimestamp(at, UTC).replace(tzinfo=None))
            await store.save(task, context)
            answer = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_AGENT,
                context_id=context_id,
                task_id=task_id,
                parts=[Part(text=text)],
            )
            task.history.append(answer)
            task.artifacts.append(Artifact(artifact_id=str(uuid.uuid4()), parts=[Part(text=text)]))
            task.status.state = TaskState.TASK_STATE_COMPLETED
            task.status.timestamp.FromDatetime(datetime.fromtimestamp(at + 1, UTC).replace(tzinfo=None))
            await store.save(task, context)
            if n % PER_CONVERSATION == 1:
                await table.remember("alice", context_id, "mock", f"resume-{context_id}")
            if age and at >= next_prune:
                # the daemon's prune with the age moved by how far the simulated clock is behind the real one
                behind = int(time.time() - at)
                section = RetentionSection(tasks=f"{age + behind}s")
                await Retention(lambda section=section: section, work, [RetainedAgent(store, table, work)]).prune()
                next_prune = at + interval
            if n in checkpoints:
                times = []
                for _ in range(5):
                    began = time.perf_counter()
                    listed = await store.list(ListTasksRequest(), context)
                    times.append((time.perf_counter() - began) * 1000)
                rows.append(
                    {"turns": n, "mib": _size_mib(db), "tasks": listed.total_size, "list_ms": statistics.median(times)}
                )
    finally:
        await store.flush()
        await engine.dispose()
    return rows


def run(
    turns: int, age: int, every: float, reply: int, interval: float = 3600
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float, float]:
    """Both variants, retention first; returns (retention rows, keep-all rows, their wall seconds)."""
    results = []
    for variant_age in (age, 0):
        with tempfile.TemporaryDirectory(prefix="anyagentd-retention-") as work:
            began = time.perf_counter()
            rows = anyio.run(churn, turns, variant_age, every, reply, Path(work), interval)
            results.append((rows, time.perf_counter() - began))
    (kept, kept_s), (every_row, all_s) = results
    return kept, every_row, kept_s, all_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--age", type=int, default=3600, help="[a2a.retention] tasks, seconds (default 3600)")
    parser.add_argument("--every", type=float, default=10.0, help="simulated seconds between turns (default 10)")
    parser.add_argument("--interval", type=float, default=3600, help="simulated seconds between prunes (3600)")
    parser.add_argument("--reply", type=int, default=2048, help="bytes of each reply (default 2048)")
    args = parser.parse_args()
    kept, everything, kept_s, all_s = run(args.turns, args.age, args.every, args.reply, args.interval)
    print(
        f"{args.turns} turns, one every {args.every:g} s (simulated), {args.reply} B replies; retention tasks = "
        f"{args.age} s, a prune every {args.interval:g} simulated s"
    )
    print(
        f"{'turns':>7} | {'MiB ret':>8} {'MiB all':>8} {'all/ret':>7} | {'tasks ret':>9} {'tasks all':>9} | "
        f"{'List ms ret':>11} {'List ms all':>11} {'all/ret':>7}"
    )
    for on, off in zip(kept, everything, strict=True):
        print(
            f"{on['turns']:>7} | {on['mib']:>8.2f} {off['mib']:>8.2f} {off['mib'] / on['mib']:>7.2f} | "
            f"{on['tasks']:>9} {off['tasks']:>9} | {on['list_ms']:>11.2f} {off['list_ms']:>11.2f} "
            f"{off['list_ms'] / on['list_ms']:>7.2f}"
        )
    first, last = kept[0], kept[-1]
    print(
        f"retention, first → last checkpoint: size x{last['mib'] / first['mib']:.2f}, ListTasks "
        f"x{last['list_ms'] / first['list_ms']:.2f}; wall {kept_s:.1f} s (retention) vs {all_s:.1f} s (keep all)"
    )


if __name__ == "__main__":
    main()
