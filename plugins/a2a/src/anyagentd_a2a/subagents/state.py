"""Every rule of a subagent record's status, in one place and without I/O.

Statuses (``docs/commands.md#subagents``; ``subagent.status`` and ``subagent.get`` show them, and the command schema,
``agentd-command.schema.json`` ``$defs/ops/subagent.status``, types the word as a string without an enum):
``pending`` (spawned, its session opening), ``running`` (a turn runs), ``idle`` (a ``warm`` subagent between turns)
and the terminal ``completed``, ``failed``, ``cancelled`` (:data:`TERMINAL`). Whoever writes a record's status asks
:func:`move` first (the moves are the table :data:`MOVES`; a terminal status has none): the manager through
:meth:`.manager.Subagent.moved`. What counts against the per-owner limit, what takes a message, what a warm
subagent's turn leaves behind and what a restart does are decided only here. The module knows nothing of sessions,
child instances or the store: it takes status and mode words and answers with status words or booleans.
"""

from __future__ import annotations

from typing import Literal, get_args

Status = Literal["pending", "running", "idle", "completed", "failed", "cancelled"]
STATUSES: tuple[Status, ...] = get_args(Status)
"""Every status, in the order :data:`Status` lists them."""

TERMINAL: frozenset[Status] = frozenset({"completed", "failed", "cancelled"})
"""Ended: nothing follows (:data:`MOVES`), a kill leaves the status and error as they are, retention may delete the
record (:meth:`.store.SubagentStore.prune`)."""
LIVE: frozenset[Status] = frozenset({"pending", "running"})
"""A turn is on its way or runs: what counts against the per-owner limit (:func:`counts_against_limit`) and what a
restart fails "interrupted" (:func:`on_restart`). ``idle`` is neither: a warm subagent between turns."""
REPORTED: tuple[Status, ...] = tuple(status for status in STATUSES if status in TERMINAL)
"""The statuses a child instance's ``_instance.result`` may report (``docs/commands.md#child-instances``): how its
turn ended, any of :data:`TERMINAL`, in :data:`Status`'s order (the order a refusal names them)."""

MOVES: dict[Status, frozenset[Status]] = {
    # its first turn starts (the manager's _turn / _child_turn), its session does not open (_first_turn), a kill,
    # a restart while it was pending (store.load: failed "interrupted")
    "pending": frozenset({"running", "failed", "cancelled"}),
    # running again as the turn send started begins (_turn / _child_turn), idle once a warm subagent's session is
    # re-opened after a restart (reopen) and once its turn completed (_end_turn), the turn's end (_end_turn; a
    # child's report may say cancelled), its session not re-opened (_turn "cannot resume"), a kill, a restart
    "running": frozenset({"running", "idle", "completed", "failed", "cancelled"}),
    # a warm subagent takes a message (send) or is killed
    "idle": frozenset({"running", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
"""The only moves a subagent record makes: status → the statuses that may follow it (itself included where the
manager writes it again)."""


class StateError(ValueError):
    """A status or a move these rules do not allow (a bug in the caller, never a requester's input)."""


class MoveRefused(StateError):
    """A move :data:`MOVES` does not allow: from ``current`` to ``new``."""

    def __init__(self, current: str, new: str) -> None:
        super().__init__(f"a subagent cannot go from {current} to {new}")
        self.current = current
        self.new = new


def move(current: Status, new: Status) -> Status:
    """``new``, when a record in ``current`` may go there (:data:`MOVES`); else :class:`MoveRefused` naming both.
    A word that is no :data:`Status` (a stored row's, say) has no moves and is no move's target."""
    if new not in MOVES.get(current, frozenset()):
        raise MoveRefused(current, new)
    return new


def ended(status: str) -> bool:
    """Whether ``status`` is terminal (:data:`TERMINAL`): the record changes no more."""
    return status in TERMINAL


def counts_against_limit(status: str) -> bool:
    """Whether a record in ``status`` counts against its owner's ``per_owner`` limit (:data:`LIVE`)."""
    return status in LIVE


def takes_message(status: str) -> bool:
    """Whether a (warm) subagent in ``status`` takes another message: only ``idle`` (one running has a turn, one
    ended takes nothing). Whether it is warm is the caller's to check: a mode is no status."""
    return status == "idle"


def after_turn(mode: str, outcome: Status) -> Status:
    """The status a record of ``mode`` reads once its turn ended ``outcome`` (one of :data:`TERMINAL`): ``idle``
    for a ``warm`` subagent whose turn completed (it takes more messages), else ``outcome``."""
    return "idle" if mode == "warm" and outcome == "completed" else outcome


def answered(mode: str, status: str) -> bool:
    """Whether a record of ``mode`` in ``status`` shows a completed turn it is waiting after: ``status`` is what
    :func:`after_turn` makes of ``completed`` (``idle`` for ``warm``, ``completed`` otherwise). What a ``sync`` or
    ``warm`` spawn checks before it hands the result on."""
    return status == after_turn(mode, "completed")


def on_restart(status: Status) -> Status:
    """The status start-up gives a stored record that was in ``status`` when the daemon stopped: ``failed`` (with
    the error "interrupted", the store's to write) when a turn was on its way or ran (:data:`LIVE`), its session
    gone with the process; ``status`` otherwise (an ``idle`` warm one re-opens on its next message)."""
    return "failed" if status in LIVE else status


__all__ = [
    "LIVE",
    "MOVES",
    "REPORTED",
    "STATUSES",
    "TERMINAL",
    "MoveRefused",
    "StateError",
    "Status",
    "after_turn",
    "answered",
    "counts_against_limit",
    "ended",
    "move",
    "on_restart",
    "takes_message",
]
