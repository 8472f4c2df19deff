"""The workflow runner on real engine sessions (the scripted ``mock`` agent) and a real SQLite store: steps in
dependency order, concurrency of independent steps, signals, timeouts and retries, cancel and pause, ask steps
answered, and a restart that resumes a waiting run without running its done steps again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from anyagentd.model import AnswerPermission
from anyagentd.runtime import Runtime
from anyagentd_a2a.workflows.definition import load_workflows
from anyagentd_a2a.workflows.runner import RunNotFound, RunStateRefused, WorkflowRunner
from anyagentd_a2a.workflows.store import RunStore

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

HELLO = "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."


def pipeline(**extra: Any) -> dict[str, Any]:
    return {
        "name": "pipe",
        "inputs": {"issue": {"type": "string"}},
        "steps": {
            "write": {"kind": "agent", "agent": "mock", "prompt": "Fix {{inputs.issue}}"},
            "check": {"kind": "agent", "agent": "mock", "prompt": "Check {{inputs.issue}}"},
            "review": {
                "kind": "agent",
                "agent": "mock",
                "depends_on": ["write", "check"],
                "prompt": "Review: {{steps.write.output}}",
            },
            "go": {"kind": "wait", "on": "signal", "signal": "go", "depends_on": ["review"], **extra},
            "done": {"kind": "finish", "depends_on": ["go"], "output": "{{steps.review.output}} / {{steps.go.output}}"},
        },
    }


class Harness:
    def __init__(self, tmp: Path, workflows: list[dict[str, Any]], script: Any = "hello") -> None:
        self.tmp, self.raw, self.script = tmp, workflows, script
        self.changes: list[tuple[str, dict[str, Any]]] = []

    async def listener(self, record: Any, change: dict[str, Any]) -> None:
        self.changes.append((record.status, change))

    def runner(self, runtime: Runtime, store: RunStore) -> WorkflowRunner:
        return WorkflowRunner(
            runtime, store, load_workflows(self.raw), work_root=self.tmp / "runs", listener=self.listener
        )


STORE_URL: dict[str, str] = {}
"""The run store's URL of the running test (:func:`_store_on_each_database`), by test id."""


@pytest.fixture(autouse=True)
def _store_on_each_database(database_url: str) -> Iterator[None]:
    """Every test here runs once with the run store on SQLite, once on PostgreSQL (``database_url``)."""
    STORE_URL["url"] = database_url
    yield
    STORE_URL.clear()


@asynccontextmanager
async def daemon(tmp: Path, harness: Harness) -> AsyncIterator[tuple[Runtime, RunStore, WorkflowRunner]]:
    """A runtime, the run store (on the test's database, :func:`_store_on_each_database`) and a serving runner; leaving it stops them as a dying daemon
    would (the runner's tasks cancelled, nothing checkpointed)."""
    async with Runtime(mock_script=harness.script) as runtime:
        store = await RunStore(STORE_URL["url"]).open()
        try:
            async with anyio.create_task_group() as tg:
                runner = harness.runner(runtime, store)
                await tg.start(runner.serve)
                yield runtime, store, runner
                tg.cancel_scope.cancel()
        finally:
            await store.close()


async def wait_status(runner: WorkflowRunner, run_id: str, status: str, timeout: float = 20) -> Any:
    """The run once both the runner and its store say ``status`` (a restart test kills right after)."""
    with anyio.fail_after(timeout):
        while True:
            record = await runner.get(run_id)
            stored = await runner.store.get(run_id)
            if record is not None and record.status == status and stored is not None and stored.status == status:
                return record
            await anyio.sleep(0.02)


async def test_a_run_goes_through_its_steps_and_a_signal(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [pipeline()])
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("pipe", {"issue": "#1"}, "user:alice")
        assert record.id.startswith("pipe-") and len(record.id) == len("pipe-") + 26
        waiting = await wait_status(runner, record.id, "suspended")
        assert waiting.steps["go"].wait == {"on": "signal", "signal": "go", "timeout_ms": None}
        assert {s: waiting.steps[s].status for s in ("write", "check", "review")} == dict.fromkeys(
            ("write", "check", "review"), "done"
        )
        assert waiting.steps["write"].output == HELLO
        assert await runner.signal("go", {"ok": True}, "user:bob", owner="user:mallory") == 0  # not theirs
        assert await runner.signal("go", {"ok": True}, "user:alice", owner="user:alice") == 1
        done = await runner.wait(record.id)
        assert done.status == "completed"
        assert done.steps["go"].output == {"signal": "go", "payload": {"ok": True}, "from": "user:alice"}
        assert done.output == HELLO + ' / {"signal":"go","payload":{"ok":true},"from":"user:alice"}'
        stored = await store.get(record.id)
        assert stored is not None and stored.status == "completed" and stored.output == done.output
        [delivered] = await store.signals(record.id)
        assert delivered.pop("at") <= stored.steps["go"].finished
        assert delivered == {"step": "go", "signal": "go", "payload": {"ok": True}, "from": "user:alice"}
        assert ("completed", {"type": "status"}) in harness.changes
        assert any(c.get("type") == "text" for _, c in harness.changes)
        # write and check are independent: both ran before review started
        assert max(stored.steps["write"].started, stored.steps["check"].started) < stored.steps["review"].started


async def test_restart_resumes_a_waiting_run_without_rerunning_done_steps(tmp_path: Path) -> None:
    harness = Harness(tmp_path, [pipeline()])
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("pipe", {"issue": "#2"}, "user:alice")
        before = await wait_status(runner, record.id, "suspended")
        pass  # the daemon goes away mid-wait

    async with daemon(tmp_path, harness) as (runtime, store, runner):
        resumed = await runner.get(record.id)
        assert resumed is not None and resumed.status == "suspended"
        for step in ("write", "check", "review"):
            assert resumed.steps[step].attempt == 1 and resumed.steps[step].started == before.steps[step].started
        assert await runner.signal("go", None, "operator", owner=None) == 1
        assert (await runner.wait(record.id)).status == "completed"


async def test_a_running_step_is_retried_after_a_restart_or_fails_interrupted(tmp_path: Path) -> None:
    slow = {"turns": [[{"Sleep": 5000}, {"End": {"Completed": {"source": "Protocol"}}}]]}
    flows = [
        {"name": "once", "steps": {"a": {"kind": "agent", "agent": "mock", "prompt": "x"}}},
        {"name": "twice", "steps": {"a": {"kind": "agent", "agent": "mock", "prompt": "x", "retry": {"max": 1}}}},
    ]
    harness = Harness(tmp_path, flows, script=slow)
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        once = await runner.start("once", {}, None)
        twice = await runner.start("twice", {}, None)
        await wait_status(runner, once.id, "running")
        await wait_status(runner, twice.id, "running")
        pass  # the daemon goes away mid-step
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        failed = await runner.wait(once.id)
        assert failed.status == "failed" and failed.steps["a"].error == "interrupted"
        retried = await wait_status(runner, twice.id, "running")
        assert retried.steps["a"].attempt == 2
        await runner.cancel(twice.id, "enough")


async def test_timeout_retry_then_failure_skips_what_follows(tmp_path: Path) -> None:
    flow = {
        "name": "t",
        "steps": {
            "w": {"kind": "wait", "on": "signal", "signal": "never", "timeout": "200ms", "retry": {"max": 1}},
            "after": {"kind": "finish", "depends_on": ["w"], "output": "x"},
        },
    }
    harness = Harness(tmp_path, [flow])
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("t", {}, None)
        ended = await runner.wait(record.id)
        assert ended.status == "failed"
        assert ended.steps["w"].status == "timeout" and ended.steps["w"].attempt == 2
        assert ended.steps["after"].status == "skipped"
        assert "timed out" in (ended.error or "")


async def test_cancel_closes_the_running_session_and_pause_holds(tmp_path: Path) -> None:
    slow = {"turns": [[{"Sleep": 10000}, {"End": {"Completed": {"source": "Protocol"}}}]]}
    flows = [
        {
            "name": "slow",
            "steps": {
                "a": {"kind": "agent", "agent": "mock", "prompt": "x"},
                "b": {"kind": "finish", "depends_on": ["a"], "output": "y"},
            },
        },
        pipeline(),
    ]
    harness = Harness(tmp_path, flows, script=slow)
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("slow", {}, "user:alice")
        await wait_status(runner, record.id, "running")
        with anyio.fail_after(5):
            cancelled = await runner.cancel(record.id, "no longer needed")
        assert cancelled.status == "cancelled" and cancelled.error == "no longer needed"
        assert cancelled.steps["a"].status == "cancelled" and cancelled.steps["b"].status == "cancelled"
        assert all(s.closed for s in runtime._sessions.values()), "the step's session is closed"
        with pytest.raises(RunStateRefused):
            await runner.pause(record.id)
        with pytest.raises(RunStateRefused):  # issue 25: cancelling an ended run is refused as pausing it is
            await runner.cancel(record.id)
        with pytest.raises(RunNotFound):
            await runner.pause("slow-nope")
        with pytest.raises(RunNotFound):
            await runner.cancel("slow-nope")

        paused = await runner.start("slow", {}, None)
        await runner.pause(paused.id)
        assert (await runner.get(paused.id)).status == "paused"
        await anyio.sleep(0.3)
        assert (await runner.get(paused.id)).steps["a"].status == "pending", "nothing starts while paused"
        await runner.resume(paused.id)
        await wait_status(runner, paused.id, "running")
        with pytest.raises(RunStateRefused):
            await runner.resume(paused.id)
        await runner.cancel(paused.id)


async def test_an_ask_step_waits_for_its_answer(tmp_path: Path) -> None:
    flow = {"name": "ask", "steps": {"a": {"kind": "agent", "agent": "mock", "prompt": "x", "approval": "ask"}}}
    harness = Harness(tmp_path, [flow], script="permission")
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("ask", {}, None)
        waiting = await wait_status(runner, record.id, "suspended")
        pending = runner.awaiting_input(record.id)
        assert pending is not None and pending["step"] == "a" and "Permission" in pending["request"]
        assert pending["event"]["kind"]["RequestOpened"] == pending["request"]  # the event, as the wire writes it
        assert waiting.steps["a"].wait["on"] == "input"
        assert await runner.answer(record.id, AnswerPermission(value="AllowOnce"))
        ended = await runner.wait(record.id)
        assert ended.status == "completed" and ended.steps["a"].output
        assert runner.awaiting_input(record.id) is None


async def test_a_runs_task_that_subscribes_after_the_ask_still_reads_waiting(tmp_path: Path) -> None:
    """``workflow.run``'s task follows its run (``ops.workflow.run_progress``) from when it subscribes: a run that
    reached its ``ask`` step before that (a fast run on a fresh daemon) sends no change for it any more, and the task
    read WORKING for ever. It reads the run as it stands instead: started, then input_required, then the end."""
    from anyagentd_a2a.ops.workflow import run_progress

    flow = {"name": "ask", "steps": {"a": {"kind": "agent", "agent": "mock", "prompt": "x", "approval": "ask"}}}
    harness = Harness(tmp_path, [flow], script="permission")
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("ask", {}, None)
        await wait_status(runner, record.id, "suspended")  # the ask came before anyone followed
        seen = []
        with anyio.fail_after(20):  # a bound, not a wait: without the fix the second progress never comes
            async for progress in run_progress(runner, record):
                seen.append(progress.state)
                if progress.state == "input_required":
                    assert progress.data["step"] == "a" and "Permission" in progress.data["request"]
                    assert await runner.answer(record.id, AnswerPermission(value="AllowOnce"))
        assert seen[:2] == ["working", "input_required"] and seen.count("input_required") == 1, seen
        assert seen[-1] == "completed", seen


async def test_a_follower_sees_every_step_then_the_end(tmp_path: Path) -> None:
    flow = {
        "name": "f",
        "steps": {
            "a": {"kind": "agent", "agent": "mock", "prompt": "x"},
            "b": {"kind": "finish", "depends_on": ["a"], "output": "{{steps.a.output}}"},
        },
    }
    harness = Harness(tmp_path, [flow])
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("f", {}, None)
        seen = []
        async with runner.follow(record.id) as changes:
            async for rec, change in changes:
                seen.append((rec.status, change["type"], tuple(change.get("steps", ()))))
        assert seen[-1][:2] == ("completed", "status")
        assert ("running", "step", ("a",)) in seen and any(kind == "text" for _, kind, _ in seen)
        assert (await runner.get(record.id)).output == HELLO
        async with runner.follow(record.id) as after:  # an ended run: the stream ends at once
            assert [c async for c in after] == []


async def test_a_field_of_a_text_output_fails_the_step_not_the_runner(tmp_path: Path) -> None:
    # {{steps.a.output.result}} where a's output is text: the finish step fails naming the reference
    flow = {
        "name": "f",
        "steps": {
            "a": {"kind": "agent", "agent": "mock", "prompt": "x"},
            "b": {"kind": "finish", "depends_on": ["a"], "output": "{{steps.a.output.result}}"},
        },
    }
    harness = Harness(tmp_path, [flow])
    async with daemon(tmp_path, harness) as (runtime, store, runner):
        record = await runner.start("f", {}, None)
        ended = await runner.wait(record.id)
        assert ended.status == "failed" and ended.steps["b"].error == "KeyError: 'steps.a.output.result'"
        again = await runner.wait((await runner.start("f", {}, None)).id)  # the runner still runs
        assert again.status == "failed"
