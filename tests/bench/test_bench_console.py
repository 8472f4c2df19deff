"""bench/bench_console.py runs at a tiny size against a real daemon in Debian's headless Chromium: one page load
(cold and warm) and one event of each kind reach the screen, each a positive figure. The figures against the
targets are not checked here: the benchmark asserts nothing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_console

pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-dev.txt")

pytestmark = pytest.mark.timeout(180)


def test_the_console_bench_measures_loads_and_events() -> None:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed: apt-get install chromium"
    figures = bench_console.run(loads=1, events=1, chromium=chromium)
    assert set(figures) == {"cold shell", "cold overview", "warm shell", "warm overview", "conversation", "waiting"}
    for name, values in figures.items():
        assert len(values) == 1 and values[0] > 0, (name, values)
    assert figures["cold overview"][0] >= figures["cold shell"][0]  # the figures come after the shell
