"""One Codex session's protocol state, in one object the connection owns (``docs/agents/codex.md#protocol-state``).

:class:`ThreadState` holds everything the app-server protocol has told us, or we asked, about the session's
thread: its id and live options, the running turn (requested, started, its Codex id, a held steer, a cancel), what
the turn has shown (tool snapshots, open messages, subagent threads, the last usage) and the server requests
waiting for an answer. :class:`~.connection.CodexConnection` creates it and decides with it;
:class:`~.mapping.NotificationMapper` translates notifications into events and records what they show here. No
other object keeps turn or thread state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyagentd.adapters.interface import PromptInput
from anyagentd.adapters.pending import PendingRequest, PendingRequests
from anyagentd.model import ContextUsage, ToolUpdate


class ThreadState:
    """The session thread's protocol state (see the module doc). ``options``: the live settings (model, effort,
    mode, sandbox), updated in place; ``thread_id`` is set once ``thread/start`` (or resume, fork) answered."""

    def __init__(self, options: dict[str, Any], thread_id: str = "") -> None:
        self.thread_id = thread_id
        self.options = options
        # the running turn
        self.requested = False  # a turn/start (or compact) is in flight or running
        self.turn_id: str | None = None  # the session thread's running Codex turn, once known
        self.turn_started = False  # its turn/started arrived (a steer can be sent)
        self.last_turn_id: str | None = None
        self.cancel_requested = False
        self.held_steer: PromptInput | None = None  # a steer that came before turn/started
        self.survivors: set[str] = set()  # tool ids still running after an interrupt (could not be stopped)
        # what the turn has shown
        self.tools: dict[str, ToolUpdate] = {}
        self.tool_parents: dict[str, str | None] = {}
        self.child_threads: dict[str, str] = {}  # child thread id -> parent tool id
        self.streamed: set[str] = set()  # message item ids that got deltas
        self.open_messages: dict[str, str | None] = {}  # item id -> parent tool id
        self.interrupted: set[str] = set()  # tools ended Cancelled at an interrupt: their late completion is moot
        self.last_usage: ContextUsage | None = None
        self.last_total: Any = None  # the thread's running token total last reported: a repeat reports no tokens
        # server requests waiting for an answer, by request id (the JSON-RPC id as a string): the toolkit's table;
        # kind command | file | question | legacy, agent_id the JSON-RPC id to reply to, data the request's params
        self.requests: PendingRequests[dict[str, Any]] = PendingRequests("Codex")

    def parent_of(self, thread_id: object) -> str | None:
        """``None`` for the session's own thread; the spawning tool's id for a subagent's thread."""
        if not thread_id or thread_id == self.thread_id:
            return None
        return self.child_threads.get(str(thread_id), str(thread_id))

    def is_session_turn(self, params: object) -> bool:
        """Whether a ``turn/*`` notification's ``params`` are about the session's own thread."""
        return isinstance(params, dict) and params.get("threadId") == self.thread_id

    def turn_requested(self) -> None:
        """A turn/start or compact was sent: a turn is on its way, no cancel yet."""
        self.requested = True
        self.cancel_requested = False

    def turn_refused(self) -> PromptInput | None:
        """The turn/start was refused: no turn runs; returns the held steer (to be reported rejected), if any."""
        self.requested = False
        held, self.held_steer = self.held_steer, None
        return held

    def turn_ending(self) -> PromptInput | None:
        """``turn/completed`` of the session's turn arrived: open requests are moot, nothing is requested or
        cancelled any more; returns the held steer (to be reported rejected), if any."""
        held, self.held_steer = self.held_steer, None
        self.requests.cancel_all()  # moot once the turn ended: no reply is sent
        self.requested = False
        self.cancel_requested = False
        return held

    def turn_ended(self, turn_id: str) -> None:
        """The session's turn ``turn_id`` ended (its open messages were reported ended): forget them and its id."""
        self.open_messages.clear()
        self.streamed.clear()
        self.last_turn_id = turn_id
        self.turn_id = None
        self.turn_started = False

    def cancel_requests(
        self, reply: Callable[[PendingRequest[dict[str, Any]]], Any]
    ) -> list[PendingRequest[dict[str, Any]]]:
        """A cancel: mark it, drop the held steer, and answer every open request with ``reply(request)`` (its
        cancel result); returns them, to send (:meth:`PendingRequests.cancel_all`)."""
        self.cancel_requested = True
        self.held_steer = None
        return self.requests.cancel_all(reply)


__all__ = ["ThreadState"]
