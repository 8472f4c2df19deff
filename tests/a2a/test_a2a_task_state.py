"""The A2A task-state rules (``anyagentd_a2a.tasks.state``), in process and without I/O: the sets, every move the
table allows or refuses, the stop / run / progress mappings, the restart and drain decisions; and that the package
writes those sets nowhere else."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import get_args

import pytest
from a2a.types import TaskState

import anyagentd_a2a
from anyagentd.model import COMPLETED_INFERRED, FailedStop
from anyagentd.ops import ProgressState
from anyagentd_a2a.tasks import state as rules
from anyagentd_a2a.workflows import state as run_rules

EVERY = [TaskState.Value(n) for n in TaskState.keys()]  # noqa: SIM118 - a protobuf enum, not a dict

# Written out here, not read from the module: what each state may be followed by.
ALLOWED = {
    "SUBMITTED": {
        "SUBMITTED",
        "WORKING",
        "INPUT_REQUIRED",
        "AUTH_REQUIRED",
        "COMPLETED",
        "FAILED",
        "CANCELED",
        "REJECTED",
    },
    "WORKING": {
        "WORKING",
        "SUBMITTED",
        "INPUT_REQUIRED",
        "AUTH_REQUIRED",
        "COMPLETED",
        "FAILED",
        "CANCELED",
        "REJECTED",
    },
    "INPUT_REQUIRED": {"INPUT_REQUIRED", "WORKING", "COMPLETED", "FAILED", "CANCELED", "REJECTED"},
    "AUTH_REQUIRED": {"AUTH_REQUIRED", "WORKING", "COMPLETED", "FAILED", "CANCELED", "REJECTED"},
    "COMPLETED": set(),
    "FAILED": set(),
    "CANCELED": set(),
    "REJECTED": set(),
    "UNSPECIFIED": set(),
}


def short(state: int) -> str:
    return TaskState.Name(state).removeprefix("TASK_STATE_")


def test_the_sets_split_every_state_but_unspecified() -> None:
    assert {short(s) for s in rules.TERMINAL} == {"COMPLETED", "FAILED", "CANCELED", "REJECTED"}
    assert {short(s) for s in rules.PAUSED} == {"INPUT_REQUIRED", "AUTH_REQUIRED"}
    assert {short(s) for s in rules.OPEN} == {"SUBMITTED", "WORKING", "INPUT_REQUIRED", "AUTH_REQUIRED"}
    assert rules.PAUSED < rules.OPEN and not rules.OPEN & rules.TERMINAL
    assert set(EVERY) - rules.OPEN - rules.TERMINAL == {TaskState.TASK_STATE_UNSPECIFIED}


@pytest.mark.parametrize("current,new", list(itertools.product(EVERY, EVERY)), ids=lambda s: short(s))
def test_every_move_is_allowed_or_refused_naming_both_states(current: int, new: int) -> None:
    if short(new) in ALLOWED[short(current)]:
        assert rules.move(current, new) == new
        return
    with pytest.raises(rules.MoveRefused) as refused:
        rules.move(current, new)
    assert (refused.value.current, refused.value.new) == (current, new)
    assert TaskState.Name(current) in str(refused.value) and TaskState.Name(new) in str(refused.value)
    assert isinstance(refused.value, rules.StateError)


def test_a_terminal_state_has_no_move_not_even_to_itself() -> None:
    for ended in rules.TERMINAL:
        assert rules.MOVES[ended] == frozenset()
        with pytest.raises(rules.MoveRefused):
            rules.move(ended, ended)


def test_an_engine_stop_ends_its_task() -> None:
    assert rules.from_stop(COMPLETED_INFERRED) == TaskState.TASK_STATE_COMPLETED
    assert rules.from_stop("Cancelled") == TaskState.TASK_STATE_CANCELED
    assert rules.from_stop("Refused") == TaskState.TASK_STATE_REJECTED
    assert rules.from_stop(FailedStop(message="x")) == TaskState.TASK_STATE_FAILED
    assert rules.from_stop("SomethingNewer") == TaskState.TASK_STATE_FAILED
    assert all(rules.from_stop(tag) in rules.TERMINAL for tag in ("Completed", "Cancelled", "Refused", "Failed"))


def test_every_run_status_shows_as_a_task_state() -> None:
    shown = {status: short(rules.from_run(status)) for status in get_args(run_rules.RunStatus)}
    assert shown == {
        "pending": "WORKING",
        "running": "WORKING",
        "suspended": "WORKING",
        "paused": "WORKING",
        "completed": "COMPLETED",
        "refused": "REJECTED",
        "cancelled": "CANCELED",
        "failed": "FAILED",
        "stalled": "FAILED",
    }
    # a run's terminal statuses are exactly those whose task is terminal
    assert {s for s in get_args(run_rules.RunStatus) if rules.from_run(s) in rules.TERMINAL} == run_rules.RUN_TERMINAL
    # an ask step waiting: INPUT_REQUIRED while the run is open, its end once it ended
    assert rules.from_run("suspended", awaiting_input=True) == TaskState.TASK_STATE_INPUT_REQUIRED
    assert rules.from_run("cancelled", awaiting_input=True) == TaskState.TASK_STATE_CANCELED
    with pytest.raises(rules.StateError, match="'done'"):
        rules.from_run("done")


def test_every_progress_word_is_a_task_state_and_back() -> None:
    shown = {word: short(rules.from_progress(word)) for word in get_args(ProgressState)}
    assert shown == {
        "working": "WORKING",
        "input_required": "INPUT_REQUIRED",
        "completed": "COMPLETED",
        "failed": "FAILED",
        "cancelled": "CANCELED",
        "rejected": "REJECTED",
    }
    assert all(rules.progress_of(rules.from_progress(word)) == word for word in get_args(ProgressState))
    with pytest.raises(rules.StateError):
        rules.from_progress("canceled")
    with pytest.raises(rules.StateError, match="TASK_STATE_SUBMITTED"):
        rules.progress_of(TaskState.TASK_STATE_SUBMITTED)


def decided(decision: rules.Decision) -> str:
    if decision.action == "fail":
        return "fail:" + (
            "unresumable"
            if decision.reason == rules.UNRESUMABLE_MESSAGE
            else "interrupted"
            if decision.reason == rules.INTERRUPTED_MESSAGE
            else str(decision.reason)
        )
    assert decision.reason is None
    return decision.action


@pytest.mark.parametrize(
    "state,run_task,resumable,expected",
    [
        ("SUBMITTED", False, False, "fail:interrupted"),
        ("SUBMITTED", False, True, "fail:interrupted"),
        ("WORKING", False, False, "fail:interrupted"),
        ("WORKING", False, True, "fail:interrupted"),
        ("INPUT_REQUIRED", False, False, "fail:unresumable"),
        ("INPUT_REQUIRED", False, True, "park"),
        ("AUTH_REQUIRED", False, True, "fail:interrupted"),
        ("WORKING", True, False, "keep"),
        ("INPUT_REQUIRED", True, False, "keep"),
        ("SUBMITTED", True, False, "keep"),
        ("COMPLETED", False, False, "keep"),
        ("FAILED", False, True, "keep"),
        ("CANCELED", True, False, "keep"),
        ("REJECTED", False, False, "keep"),
        ("UNSPECIFIED", False, False, "keep"),
    ],
)
def test_what_a_restart_does_to_a_task(state: str, run_task: bool, resumable: bool, expected: str) -> None:
    decision = rules.on_restart(TaskState.Value(f"TASK_STATE_{state}"), run_task=run_task, resumable=resumable)
    assert decided(decision) == expected


@pytest.mark.parametrize(
    "state,run_task,resumable,expected",
    [
        ("SUBMITTED", False, False, "cancel"),
        ("SUBMITTED", False, True, "cancel"),
        ("WORKING", False, False, "cancel"),
        ("WORKING", False, True, "cancel"),
        ("INPUT_REQUIRED", False, False, "cancel"),
        ("INPUT_REQUIRED", False, True, "park"),
        ("AUTH_REQUIRED", False, True, "cancel"),
        ("WORKING", True, False, "keep"),
        ("INPUT_REQUIRED", True, True, "keep"),
        ("COMPLETED", False, False, "keep"),
        ("FAILED", False, True, "keep"),
        ("CANCELED", False, False, "keep"),
        ("REJECTED", False, False, "keep"),
    ],
)
def test_what_a_drain_does_to_a_task(state: str, run_task: bool, resumable: bool, expected: str) -> None:
    decision = rules.on_drain(TaskState.Value(f"TASK_STATE_{state}"), run_task=run_task, resumable=resumable)
    assert decided(decision) == expected


def test_a_task_parked_at_the_drain_is_parked_again_at_the_restart() -> None:
    waiting = TaskState.TASK_STATE_INPUT_REQUIRED
    assert rules.on_drain(waiting, run_task=False, resumable=True) == rules.PARK
    assert rules.on_restart(waiting, run_task=False, resumable=True) == rules.PARK


# ------------------------------------------------------------------------------------------------ one owner

PACKAGE = Path(anyagentd_a2a.__file__).parent
OWNER = PACKAGE / "tasks" / "state.py"
ENDED = {"COMPLETED", "FAILED", "CANCELED", "REJECTED"}
WAITING = {"SUBMITTED", "WORKING", "INPUT_REQUIRED", "AUTH_REQUIRED"}


def _state_of(node: ast.expr) -> str | None:
    """The task state an expression spells (``TaskState.TASK_STATE_FAILED``, ``"TASK_STATE_FAILED"``, ``FAILED``
    from the rules, or its lowercase word ``"failed"`` as a label or an option shows it), else None."""
    if isinstance(node, ast.Attribute) and node.attr.startswith("TASK_STATE_"):
        return node.attr.removeprefix("TASK_STATE_")
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("TASK_STATE_"):
        return node.value.removeprefix("TASK_STATE_")
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.upper() in ENDED | WAITING
        and node.value.islower()
    ):
        return node.value.upper()
    if isinstance(node, ast.Name) and node.id in ENDED | WAITING:
        return node.id
    return None


def state_collections(source: str) -> list[tuple[int, set[str]]]:
    """Every tuple, list, set or dict literal in ``source`` naming three task states or more (a dict: among its keys,
    or among its values): (line, their names). Two are a comparison's pair, not a copy of a set (a report's
    ``{COMPLETED: "completed", CANCELED: "cancelled"}``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            groups = [node.elts]
        elif isinstance(node, ast.Dict):
            groups = [[k for k in node.keys if k is not None], node.values]
        else:
            continue
        for items in groups:
            named = {s for s in map(_state_of, items) if s}
            if len(named) >= 3:
                found.append((node.lineno, named))
    return found


def test_the_state_sets_are_written_only_by_their_owner() -> None:
    copies = {
        f"{path.relative_to(PACKAGE)}:{line}": sorted(named)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OWNER
        for line, named in state_collections(path.read_text())
    }
    assert copies == {}, "task-state sets written outside tasks/state.py"
    assert any(named == ENDED for _, named in state_collections(OWNER.read_text()))  # the owner does write them


def test_the_scan_finds_the_copies_it_is_for() -> None:
    old = (
        "TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,\n"
        "                     TaskState.TASK_STATE_CANCELED})\n"
        '_OPEN = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED")\n'
        'STATE = {"working": "TASK_STATE_WORKING", "failed": "TASK_STATE_FAILED", "x": "TASK_STATE_REJECTED"}\n'
        "ENDED = {COMPLETED, CANCELED, FAILED}\n"
        'REPORTED = {TaskState.TASK_STATE_COMPLETED: "completed", TaskState.TASK_STATE_CANCELED: "cancelled"}\n'
        'one = state == "TASK_STATE_COMPLETED"\n'
        'LABELS = ("submitted", "working", "input_required", "completed")\n'
        'RUN = {"pending": 1, "running": 2, "completed": 3, "cancelled": 4, "failed": 5}\n'
    )
    assert sorted(line for line, _ in state_collections(old)) == [1, 3, 4, 5, 8]


def test_a_runs_rules_know_no_task_state() -> None:
    from anyagentd_a2a.command import dispatch
    from anyagentd_a2a.ops import workflow

    assert not hasattr(run_rules, "TASK_STATE") and not hasattr(run_rules, "task_state")
    assert not hasattr(workflow, "PROGRESS_OF") and not hasattr(dispatch, "STATE")
    assert "TASK_STATE" not in (PACKAGE / "workflows" / "state.py").read_text()
    # the restart knows a run's task by being told, not by the op name in its metadata
    assert "workflow.run" not in (PACKAGE / "store.py").read_text()


def _sleep_polls(source: str) -> list[int]:
    """Lines of the loops in ``source`` that wait for something by sleeping a fixed time each round (``while …:
    … await anyio.sleep(0.02)``): a poll where an event the owner sets can be awaited."""
    found = []
    for loop in ast.walk(ast.parse(source)):
        if not isinstance(loop, ast.While):
            continue
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Await)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "sleep"
                and node.value.args
                and isinstance(node.value.args[0], ast.Constant)
            ):
                found.append(loop.lineno)
                break
    return found


def test_nothing_waits_for_a_state_by_polling() -> None:
    """Issue 25: the daemon waited for a run's task to leave INPUT_REQUIRED, or to end after a CancelTask, in loops
    sleeping 20 ms a round; each now awaits what the task's writer signals (``tasks/optasks.OpTask``)."""
    polls = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in _sleep_polls(path.read_text())
    }
    assert polls == set(), polls


def test_the_poll_scan_finds_a_poll() -> None:
    assert _sleep_polls("async def f():\n    while waiting():\n        await anyio.sleep(0.02)\n") == [2]
    assert _sleep_polls("async def f():\n    while True:\n        await anyio.sleep(backoff)\n") == []
