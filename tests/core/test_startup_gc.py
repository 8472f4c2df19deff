"""The collector while a command starts (:mod:`anyagentd.startup`, issue 17): the console script raises its
thresholds before anything is imported, and ``serve``, ``run`` and ``a2a`` hand the default thresholds back, with
what start-up built frozen, once they have started. Behaviour, not timing: the timings are bench's."""

from __future__ import annotations

import gc
import importlib.metadata
import json
import signal
import subprocess
import sys
from pathlib import Path

from wire_client import child_env

from anyagentd import startup

# Runs the console script's entry point with ARGV; every call of startup.done reports, on stderr, the thresholds
# the process began with, those in force when it was called, those after it, how much was frozen and the
# generation of each collection before it.
_CHILD = """
import gc, json, sys
import anyagentd.startup as startup
initial, real_done = gc.get_threshold(), startup.done
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "stop" else None)
def done():
    during, collected = gc.get_threshold(), list(collections)
    real_done()
    print("DONE " + json.dumps({"initial": initial, "during": during, "after": gc.get_threshold(),
                                "frozen": gc.get_freeze_count(), "collections": collected}),
          file=sys.stderr, flush=True)
startup.done = done
sys.argv = ["anyagentd", *json.loads(sys.argv[1])]
sys.exit(startup.main())
"""


def _reports(stderr: str) -> list[dict]:
    return [json.loads(line[len("DONE ") :]) for line in stderr.splitlines() if line.startswith("DONE ")]


def _child(args: list[str], **kwargs) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        text=True,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def _started_properly(reports: list[dict]) -> None:
    assert len(reports) == 1, reports  # done once
    report = reports[0]
    # the start ran with the young threshold raised, the older ones as they were
    assert report["during"] == [startup.YOUNG_THRESHOLD, *report["initial"][1:]]
    assert report["after"] == report["initial"] != report["during"]  # the interpreter's own thresholds are back
    assert report["frozen"] > 10_000  # the modules, schemas and plugins of the start


def test_the_console_script_is_the_start_up_entry_point() -> None:
    scripts = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts["anyagentd"] == "anyagentd.startup:main"


def test_run_gives_the_collector_back_once_the_session_is_open(tmp_path: Path) -> None:
    proc = _child(["run", "mock", "hi", "--dir", str(tmp_path)])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Hello! I am the scripted agent." in out + err
    _started_properly(_reports(err))
    # ~72,000 allocations to done: under the young threshold, so the start walked none of its heap (issue 31)
    assert _reports(err)[0]["collections"] == []


def test_serve_gives_the_collector_back_before_it_serves(tmp_path: Path) -> None:
    proc = _child(["serve"], stdin=subprocess.PIPE, cwd=tmp_path)
    frame = json.dumps({"id": 1, "cmd": "open", "agent": "mock", "dir": str(tmp_path)})
    out, err = proc.communicate(frame + "\n", timeout=60)
    assert '"ok"' in out.splitlines()[1]
    _started_properly(_reports(err))
    # ~57,000 allocations to done: at issue 17's threshold (50,000) one young collection walked them all before the
    # first reply (~10 ms of CPU); now none does
    assert _reports(err)[0]["collections"] == []


def test_the_a2a_daemon_gives_the_collector_back_once_listening(tmp_path: Path) -> None:
    proc = _child(["a2a", "--listen", "127.0.0.1:0", "--mock", "hello", "--state-dir", str(tmp_path)])
    try:
        assert proc.stdout is not None
        assert "listening" in json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)  # drains and stops
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    _started_properly(_reports(err))


def test_done_leaves_a_process_that_did_not_begin_alone() -> None:
    # An application embedding the CLI, or a test's CliRunner: no freeze, its thresholds untouched.
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    startup.done()
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_begin_then_done_restores_the_thresholds_it_found() -> None:
    before = gc.get_threshold()
    gc.set_threshold(1234, 5, 6)
    try:
        startup.begin()
        assert gc.get_threshold() == (startup.YOUNG_THRESHOLD, 5, 6)
        startup.begin()  # once: a second begin does not lose the thresholds to restore
        startup.done()
        assert gc.get_threshold() == (1234, 5, 6)
        startup.done()  # once done, done again changes nothing
        assert gc.get_threshold() == (1234, 5, 6)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
