"""One Claude Code session's stream-json protocol state, in one object (``docs/agents/claude.md#protocol-state``).

:class:`ClaudeState` holds everything the CLI has told us, or we wrote to it, that both the connection and the
mapper act on: the session id (the resume token), the live options, whether a turn of ours runs, the user frames
whose ``result`` has not come yet (and the TurnAcks held behind an unconfirmed interrupt), the prompts sent (for
rollback), the tool snapshots the permission requests refer to, the last ``system/init``, and the open
``can_use_tool`` requests (:class:`~anyagentd.adapters.pending.PendingRequests`, the toolkit's table).
:class:`~.connection.ClaudeConnection` creates it and decides with it; :class:`~.mapping.FrameMapper` translates
stdout frames into events and records what they show here. No other object keeps a copy of it; the moves are its
methods. (Codex's counterpart: ``anyagentd_codex.state.ThreadState``.)
"""

from __future__ import annotations

from typing import Any

from anyagentd.adapters.pending import PendingRequests
from anyagentd.model import ToolUpdate


class ClaudeState:
    """The session's protocol state (see the module doc). ``options``: the live configuration values (``mode``,
    ``model``, …), updated in place; ``session_id``: the CLI's session id, our resume token."""

    def __init__(self, options: dict[str, Any] | None = None, session_id: str | None = None) -> None:
        self.session_id = session_id
        self.options: dict[str, Any] = options if options is not None else {}
        # the turn
        self.turn_running = False  # a turn of ours (a prompt or /compact) runs: its result has not come
        self.unfinished = 0  # user frames written whose result has not come yet
        self.deferred_acks = 0  # TurnAcks held until the results of earlier user frames
        self.unconfirmed_interrupt = False  # an interrupt was sent and no result has come since
        self.prompt_uuids: list[str] = []  # the uuids of the prompts sent, oldest first (rollback targets)
        # what the CLI has shown
        self.last_init: dict[str, Any] | None = None  # the last system/init frame
        self.tools: dict[str, ToolUpdate] = {}  # tool use id -> its latest snapshot
        self.tool_parents: dict[str, str | None] = {}  # tool use id -> the subagent's tool id (None: main thread)
        # the CLI's can_use_tool requests waiting for the engine, by control request id; data: the request body
        self.requests: PendingRequests[dict[str, Any]] = PendingRequests("Claude Code")

    # ------------------------------------------------------------------------------------------- moves

    def owes_earlier_result(self) -> bool:
        """Whether the CLI still owes the ``result`` of a turn we interrupted (the engine ended it meanwhile): a
        prompt sent now gets its TurnAck only once that result came."""
        return self.unconfirmed_interrupt and self.unfinished > 0

    def turn_begins(self) -> None:
        """A user frame of ours (a prompt, ``/compact``) is about to be written: a turn runs until its ``result``
        (set before the write: what the CLI echoes meanwhile is the turn's)."""
        self.turn_running = True

    def prompt_written(self, uuid: str, *, deferred: bool) -> None:
        """The user frame ``uuid`` of a prompt was written; ``deferred``: its TurnAck waits
        (:meth:`owes_earlier_result`)."""
        self.unfinished += 1
        self.prompt_uuids.append(uuid)
        if deferred:
            self.deferred_acks += 1

    def compact_written(self) -> None:
        """The ``/compact`` user frame was written (after :meth:`turn_begins`)."""
        self.unfinished += 1

    def interrupt_sent(self) -> None:
        """An ``interrupt`` was written: unconfirmed until the next ``result``, if a user frame is unfinished."""
        self.unconfirmed_interrupt = self.unfinished > 0

    def result_arrived(self) -> None:
        """A ``result`` frame came: one user frame fewer is unfinished, an interrupt is confirmed."""
        self.unfinished = max(0, self.unfinished - 1)
        self.unconfirmed_interrupt = False

    def turn_ended(self) -> None:
        """The mapper reported the turn's end (its ``result``)."""
        self.turn_running = False

    def deferred_ack_due(self) -> bool:
        """After a ``result``: whether a held TurnAck is now due (the held prompt is the one the CLI now runs);
        if so, that turn runs."""
        if self.deferred_acks and self.unfinished <= self.deferred_acks:
            self.deferred_acks -= 1
            self.turn_running = True
            return True
        return False

    def rolled_back(self, turns: int) -> None:
        """The CLI rewound the last ``turns`` prompts: they are no rollback targets any more."""
        del self.prompt_uuids[-turns:]

    def session_seen(self, session_id: object) -> bool:
        """A ``system/init`` named ``session_id``; ``True`` when it is a new one (the resume token changed)."""
        if isinstance(session_id, str) and session_id and session_id != self.session_id:
            self.session_id = session_id
            return True
        return False


__all__ = ["ClaudeState"]
