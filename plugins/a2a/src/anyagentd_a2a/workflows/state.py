"""Every rule of a run's and its steps' states, in one place and without I/O.

Run statuses (``docs/commands.md``): ``pending``, ``running``, ``suspended``, ``paused`` and the terminal
``completed``, ``failed``, ``refused``, ``cancelled``, ``stalled``. Step statuses: ``pending``, ``running``,
``suspended`` and the terminal ``done``, ``failed``, ``skipped``, ``cancelled``, ``timeout``. The runner asks this
module which steps may start, what a step's outcome makes of it (a retry or its end) and what the run's status
is; it never decides any of that itself. Which A2A task state shows a run is a task rule, not a run's
(:func:`anyagentd_a2a.tasks.state.from_run`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .definition import Workflow

RunStatus = Literal[
    "pending", "running", "suspended", "paused", "completed", "failed", "refused", "cancelled", "stalled"
]
StepStatus = Literal["pending", "running", "suspended", "done", "failed", "skipped", "cancelled", "timeout"]

RUN_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "refused", "cancelled", "stalled"})
STEP_TERMINAL: frozenset[str] = frozenset({"done", "failed", "skipped", "cancelled", "timeout"})
STEP_ACTIVE: frozenset[str] = frozenset({"running", "suspended"})

# The only moves a step makes. A retry is failed/timeout -> pending with the attempt counted up.
STEP_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "suspended", "skipped", "cancelled"}),
    "running": frozenset({"done", "failed", "timeout", "cancelled", "suspended", "pending"}),
    "suspended": frozenset({"running", "done", "failed", "timeout", "cancelled", "pending"}),
    "failed": frozenset({"pending"}),
    "timeout": frozenset({"pending"}),
    "done": frozenset(),
    "skipped": frozenset(),
    "cancelled": frozenset(),
}


class StateError(ValueError):
    """A move the rules do not allow (a bug in the caller, never the user's input)."""


@dataclass(frozen=True)
class StepState:
    """One step of one run: ``status``, ``attempt`` (1 for the first try; 0 before it), ``started`` /
    ``finished`` (epoch ms), ``error``, ``wait`` (``{"on": "signal", "signal": X, "timeout_ms": ...}`` while a
    wait step is suspended; ``{"on": "input", "request": ...}`` while an ask step waits for an answer),
    ``output``."""

    status: StepStatus = "pending"
    attempt: int = 0
    started: int | None = None
    finished: int | None = None
    error: str | None = None
    wait: dict[str, Any] | None = None
    output: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "attempt": self.attempt,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "wait": self.wait,
            "output": self.output,
        }


@dataclass(frozen=True)
class RunFlags:
    """What an operator or caller asked of a run, beside its steps: cancelled, paused, refused (an agent step
    refused its prompt)."""

    cancelled: bool = False
    paused: bool = False
    refused: bool = False


def move(step: StepState, status: StepStatus, **changes: Any) -> StepState:
    """``step`` moved to ``status`` (with ``changes``). Raises :class:`StateError` for a move not in
    :data:`STEP_MOVES`."""
    if status != step.status and status not in STEP_MOVES[step.status]:
        raise StateError(f"a step cannot go from {step.status} to {status}")
    return replace(step, status=status, **changes)


def after_failure(step: StepState, max_retries: int, status: StepStatus, error: str, now_ms: int) -> StepState:
    """A step that failed or timed out: back to ``pending`` for another attempt while ``attempt <= max_retries``
    (the first try is attempt 1, so ``max`` retries allow ``max + 1`` attempts), else ended ``status``."""
    if step.attempt <= max_retries:
        return move(move(step, status, error=error, finished=now_ms), "pending", wait=None)
    return move(step, status, error=error, finished=now_ms, wait=None)


def ready(workflow: Workflow, steps: dict[str, StepState], flags: RunFlags) -> list[str]:
    """The pending steps that may start now, in the workflow's order: every dependency ``done``, and the run
    neither cancelled, paused, refused nor failed."""
    if flags.cancelled or flags.paused or flags.refused or _failed(steps):
        return []
    return [
        step_id
        for step_id in workflow.order()
        if steps[step_id].status == "pending"
        and all(steps[dep].status == "done" for dep in workflow.steps[step_id].depends_on)
    ]


def waiting(workflow: Workflow, steps: dict[str, StepState]) -> list[str]:
    """Wait steps suspended on a signal (after a restart they wait on; nothing else restarts them)."""
    return [s for s, st in steps.items() if st.status == "suspended" and workflow.steps[s].kind == "wait"]


def to_skip(workflow: Workflow, steps: dict[str, StepState]) -> list[str]:
    """Pending steps that can never run: a dependency ended in anything but ``done``."""
    return [
        step_id
        for step_id, state in steps.items()
        if state.status == "pending"
        and any(
            steps[d].status in STEP_TERMINAL and steps[d].status != "done" for d in workflow.steps[step_id].depends_on
        )
    ]


def _failed(steps: dict[str, StepState]) -> bool:
    return any(s.status in ("failed", "timeout") for s in steps.values())


def run_status(steps: dict[str, StepState], flags: RunFlags) -> RunStatus:
    """The run's status from its steps and flags.

    Cancelled wins once no step is active; a refused agent step makes the run refused, a failed or timed-out one
    (with no attempt left) failed, once no other step is still active; every step done or skipped is completed;
    a paused run reads paused until it ends; otherwise running while a step runs, suspended while steps only
    wait, pending before anything started, and stalled when nothing can move any more.
    """
    active = any(s.status in STEP_ACTIVE for s in steps.values())
    if flags.cancelled:
        return "running" if active else "cancelled"
    if flags.refused and not active:
        return "refused"
    if _failed(steps) and not active:
        return "failed"
    if all(s.status in ("done", "skipped") for s in steps.values()):
        return "completed"
    if flags.paused:
        return "paused"
    if any(s.status == "running" for s in steps.values()):
        return "running"
    if any(s.status == "suspended" for s in steps.values()):
        return "suspended"
    if all(s.status == "pending" and s.attempt == 0 for s in steps.values()):
        return "pending"
    if any(s.status == "pending" for s in steps.values()):
        return "running"  # between attempts, or the next steps about to start
    return "stalled"


@dataclass
class Recovery:
    """What a restart does to one stored run's steps (:func:`recover`): the new step states and, per step, why."""

    steps: dict[str, StepState]
    notes: dict[str, str] = field(default_factory=dict)


def recover(workflow: Workflow, steps: dict[str, StepState], now_ms: int) -> Recovery:
    """A run found non-terminal at start-up: a step that was ``running`` (or an agent step waiting for an answer,
    whose session died with the process) starts a new attempt under its retry policy, or fails
    ``interrupted`` when none is left; a wait step keeps waiting; done steps are kept (never run again)."""
    out = dict(steps)
    notes: dict[str, str] = {}
    for step_id, state in steps.items():
        kind = workflow.steps[step_id].kind
        if state.status == "running" or (state.status == "suspended" and kind != "wait"):
            retry = workflow.steps[step_id].retry.max
            out[step_id] = after_failure(state, retry, "failed", "interrupted", now_ms)
            notes[step_id] = "retried" if out[step_id].status == "pending" else "interrupted"
    return Recovery(out, notes)


__all__ = [
    "RUN_TERMINAL",
    "STEP_TERMINAL",
    "Recovery",
    "RunFlags",
    "RunStatus",
    "StateError",
    "StepState",
    "StepStatus",
    "after_failure",
    "move",
    "ready",
    "recover",
    "run_status",
    "to_skip",
    "waiting",
]
