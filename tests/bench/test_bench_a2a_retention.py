"""bench/bench_a2a_retention.py runs at a tiny size: both variants write their turns through the real task store
on a real SQLite file, and retention keeps fewer tasks than keep-all does. Its figures (sizes, times) are not
checked here: the benchmark asserts nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_a2a_retention

pytestmark = pytest.mark.timeout(120)


def test_the_retention_bench_runs_and_retention_prunes() -> None:
    kept, everything, _, _ = bench_a2a_retention.run(turns=120, age=300, every=10.0, reply=64, interval=300)
    assert [row["turns"] for row in kept] == [row["turns"] for row in everything] == [120]
    assert everything[-1]["tasks"] == 120, "keep-all keeps every task"
    assert kept[-1]["tasks"] < 120, "retention pruned the tasks older than its age"
    assert all(row["mib"] > 0 and row["list_ms"] > 0 for row in kept + everything)
