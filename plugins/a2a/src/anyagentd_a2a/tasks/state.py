"""Every rule of an A2A task's states, in one place and without I/O (``docs/a2a-tasks.md`` says them for a reader).

States are a2a-sdk's ``TaskState`` values: SUBMITTED and WORKING, the paused INPUT_REQUIRED and AUTH_REQUIRED
(:data:`OPEN` all four), and the terminal COMPLETED, FAILED, CANCELED and REJECTED (:data:`TERMINAL`). Whoever
writes a task's state asks :func:`move` first (the moves are the table :data:`MOVES`; a terminal state has none).
The engine's stop, a workflow run's status and an op's progress become a task state only here (:func:`from_stop`,
:func:`from_run`, :func:`from_progress`), and what a restart or a drain does to a task is decided only here
(:func:`on_restart`, :func:`on_drain`) from what the caller knows of it. The module knows nothing of
conversations, ops or runs beyond the words they hand it: a stop's tag, a run's status, a progress word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from a2a.types import TaskState

SUBMITTED: int = TaskState.TASK_STATE_SUBMITTED
WORKING: int = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED: int = TaskState.TASK_STATE_INPUT_REQUIRED
AUTH_REQUIRED: int = TaskState.TASK_STATE_AUTH_REQUIRED
COMPLETED: int = TaskState.TASK_STATE_COMPLETED
FAILED: int = TaskState.TASK_STATE_FAILED
CANCELED: int = TaskState.TASK_STATE_CANCELED
REJECTED: int = TaskState.TASK_STATE_REJECTED

PAUSED: frozenset[int] = frozenset({INPUT_REQUIRED, AUTH_REQUIRED})
"""Open, and waiting for the client (an answer, credentials): a task served until here is handed back."""
TERMINAL: frozenset[int] = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})
"""Ended: nothing follows (:data:`MOVES`), a message to the task is refused, the store writes it at once."""
OPEN: frozenset[int] = frozenset({SUBMITTED, WORKING}) | PAUSED
"""Not ended: what a restart or a drain has to decide about (:func:`on_restart`, :func:`on_drain`)."""

MOVES: dict[int, frozenset[int]] = {
    # queued (a Queued prompt's note keeps it SUBMITTED), started, asked, or ended before its turn: steered into
    # the running turn (COMPLETED), cancelled while queued (CANCELED), its prompt not delivered (FAILED)
    SUBMITTED: frozenset({SUBMITTED, WORKING, INPUT_REQUIRED, AUTH_REQUIRED}) | TERMINAL,
    # updates, a question, the end; back to SUBMITTED when a prompt whose fresh-session note was said is queued
    WORKING: frozenset({WORKING, SUBMITTED, INPUT_REQUIRED, AUTH_REQUIRED}) | TERMINAL,
    # asked again ("Not an answer", the answer refused), answered, or ended while waiting
    INPUT_REQUIRED: frozenset({INPUT_REQUIRED, WORKING}) | TERMINAL,
    AUTH_REQUIRED: frozenset({AUTH_REQUIRED, WORKING}) | TERMINAL,
    COMPLETED: frozenset(),
    FAILED: frozenset(),
    CANCELED: frozenset(),
    REJECTED: frozenset(),
}
"""The only moves a task makes: state → the states that may follow it (itself included where an update repeats
it)."""

STOPS: dict[str, int] = {"Completed": COMPLETED, "Cancelled": CANCELED, "Refused": REJECTED, "Failed": FAILED}
"""An engine ``TurnEnded``'s ``StopReason`` tag (``docs/engine.md``) → the state the turn's task ends in."""

RUNS: dict[str, int] = {
    "pending": WORKING,
    "running": WORKING,
    "suspended": WORKING,
    "paused": WORKING,
    "completed": COMPLETED,
    "refused": REJECTED,
    "cancelled": CANCELED,
    "failed": FAILED,
    "stalled": FAILED,
}
"""A workflow run's status (``workflows/state.RunStatus``, ``docs/commands.md``) → the state of the task it runs
under."""

PROGRESS: dict[str, int] = {
    "working": WORKING,
    "input_required": INPUT_REQUIRED,
    "completed": COMPLETED,
    "failed": FAILED,
    "cancelled": CANCELED,
    "rejected": REJECTED,
}
"""A long-running op's ``Progress.state`` (core's ``anyagentd.ops.ProgressState``) → its task's state."""
_PROGRESS_OF = {state: word for word, state in PROGRESS.items()}

INTERRUPTED_MESSAGE = "The daemon stopped while this task was running; its turn is lost."
"""Why a task left running by a process that died reads FAILED after a restart (:func:`on_restart`)."""
UNRESUMABLE_MESSAGE = (
    "The daemon stopped while this task waited for input, and the agent keeps no resume token "
    "for this conversation, so it cannot resume it: the request is lost and cannot be answered. "
    "Send a new message in this contextId."
)
"""Why a task that waited for input reads FAILED after a restart (:func:`on_restart`); an answer to it is refused
with -32004 saying so."""


class StateError(ValueError):
    """A state or a word these rules do not know (a bug in the caller, never the client's input)."""


class MoveRefused(StateError):
    """A move :data:`MOVES` does not allow: from ``current`` to ``new`` (both ``TaskState`` values)."""

    def __init__(self, current: int, new: int) -> None:
        super().__init__(f"a task cannot go from {name(current)} to {name(new)}")
        self.current = current
        self.new = new


def name(state: int) -> str:
    """``TaskState``'s name of ``state`` (``TASK_STATE_WORKING``), as proto3 JSON writes it; ``state`` itself as
    text when it is no ``TaskState``."""
    try:
        return TaskState.Name(state)
    except ValueError:
        return str(state)


def label(state: int) -> str:
    """The lowercase word of ``state`` (``working``, ``input_required``): its ``TaskState`` name without the
    ``TASK_STATE_`` prefix, as a metric's ``state`` label shows it (:mod:`..observe.metrics`)."""
    return name(state).removeprefix("TASK_STATE_").lower()


def labels() -> tuple[str, ...]:
    """The :func:`label` of every state these rules know (:data:`OPEN` and :data:`TERMINAL`), in ``TaskState``'s
    order (``submitted``, ``working``, ``completed``, …): what the metrics' ``state`` label and the client's
    ``tasks --state`` take."""
    return tuple(label(state) for state in sorted(OPEN | TERMINAL))


def of_name(state_name: str) -> int:
    """The ``TaskState`` value a stored task's JSON names (``TASK_STATE_WORKING``); :class:`StateError` for a name
    ``TaskState`` does not have."""
    try:
        return TaskState.Value(state_name)
    except ValueError:
        raise StateError(f"no task state is named {state_name!r}") from None


def move(current: int, new: int) -> int:
    """``new``, when a task in ``current`` may go there (:data:`MOVES`); else :class:`MoveRefused` naming both. A
    state outside the table (UNSPECIFIED) has no moves."""
    if new not in MOVES.get(current, frozenset()):
        raise MoveRefused(current, new)
    return new


def from_stop(stop: Any) -> int:
    """The terminal state of the task whose turn ended with ``stop``: an engine ``StopReason`` (its ``TAG``) or
    its tag as text, per :data:`STOPS`; a tag it does not list (one a newer engine adds) is FAILED."""
    from anyagentd.model import kind_tag  # here: the client reads this module's sets without the event model

    tag = kind_tag(stop)
    return STOPS.get(tag, FAILED)


def from_run(status: str, awaiting_input: bool = False) -> int:
    """The state of the task a workflow run with ``status`` runs under, per :data:`RUNS`; INPUT_REQUIRED while
    the run is open and ``awaiting_input`` (an ``ask`` step waits for an answer). :class:`StateError` for a status
    runs do not have."""
    state = RUNS.get(status)
    if state is None:
        raise StateError(f"no run status is named {status!r}")
    return INPUT_REQUIRED if awaiting_input and state not in TERMINAL else state


def from_progress(progress: str) -> int:
    """The state of a long-running op's task at its ``Progress.state`` ``progress``, per :data:`PROGRESS`;
    :class:`StateError` for a word progress does not have."""
    state = PROGRESS.get(progress)
    if state is None:
        raise StateError(f"no progress state is named {progress!r}")
    return state


def progress_of(state: int) -> str:
    """The ``Progress.state`` word that shows ``state`` (the inverse of :func:`from_progress`): what an op yields
    for a task it wants in ``state``. :class:`StateError` for SUBMITTED, AUTH_REQUIRED and UNSPECIFIED, which no
    progress shows."""
    word = _PROGRESS_OF.get(state)
    if word is None:
        raise StateError(f"no progress shows {name(state)}")
    return word


Action = Literal["keep", "park", "fail", "cancel"]


@dataclass(frozen=True)
class Decision:
    """What a restart or a drain does to one task: ``keep`` it as stored, ``park`` it (it stays waiting for input:
    its answer resumes the agent's conversation), ``fail`` it with the status message ``reason``, or ``cancel``
    it."""

    action: Action
    reason: str | None = None


KEEP = Decision("keep")
PARK = Decision("park")
CANCEL = Decision("cancel")


def on_restart(state: int, *, run_task: bool, resumable: bool) -> Decision:
    """What start-up does to a stored task a process that died left in ``state``: ``run_task`` — it is the task a
    workflow run runs under —, ``resumable`` — its conversation has a resume token stored.

    An ended task is kept, and so is a run's task (its run resumes and the task follows it again). A task waiting
    for input parks when its conversation can resume, else fails with :data:`UNRESUMABLE_MESSAGE`; any other open
    task (its turn died with the process) fails with :data:`INTERRUPTED_MESSAGE`.
    """
    if state not in OPEN or run_task:
        return KEEP
    if state == INPUT_REQUIRED:
        return PARK if resumable else Decision("fail", UNRESUMABLE_MESSAGE)
    return Decision("fail", INTERRUPTED_MESSAGE)


def on_drain(state: int, *, run_task: bool, resumable: bool) -> Decision:
    """What a drain (SIGTERM, ``admin.drain``) does to a live task in ``state``: ``run_task`` — it is the task a
    workflow run runs under —, ``resumable`` — its conversation's agent session has a resume token.

    An ended task is kept, and so is a run's task (the runner checkpoints its run, which resumes after the restart
    with the task following it). A task waiting for input parks when its conversation can resume (after the
    restart :func:`on_restart` parks it again and its answer resumes the agent); every other task is cancelled.
    """
    if state in TERMINAL or run_task:
        return KEEP
    if state == INPUT_REQUIRED and resumable:
        return PARK
    return CANCEL


__all__ = [
    "AUTH_REQUIRED",
    "CANCEL",
    "CANCELED",
    "COMPLETED",
    "FAILED",
    "INPUT_REQUIRED",
    "INTERRUPTED_MESSAGE",
    "KEEP",
    "MOVES",
    "OPEN",
    "PARK",
    "PAUSED",
    "PROGRESS",
    "REJECTED",
    "RUNS",
    "STOPS",
    "SUBMITTED",
    "TERMINAL",
    "UNRESUMABLE_MESSAGE",
    "WORKING",
    "Action",
    "Decision",
    "MoveRefused",
    "StateError",
    "from_progress",
    "from_run",
    "from_stop",
    "label",
    "labels",
    "move",
    "name",
    "of_name",
    "on_drain",
    "on_restart",
    "progress_of",
]
