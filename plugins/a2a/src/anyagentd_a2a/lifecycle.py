"""The instance's admission — the drain and the operator's pause — and the drain itself.

One :class:`Lifecycle` per daemon, over the engine's ``Runtime``: the pause is the runtime's admission (``paused``:
nothing new starts, ``Runtime.pause``/``resume``), with the operator's reason kept here; the drain latch is set
the moment a drain is asked for (the front refuses sends while :attr:`Lifecycle.draining`, ``/readyz`` answers
503), and :meth:`Lifecycle.drain` ends in ``Runtime.drain`` (``docs/a2a-tasks.md#drain``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio
from a2a.types import CancelTaskRequest
from a2a.utils.errors import A2AError

from .calls import call_context
from .executor import CANCEL_GRACE
from .principals import OPERATOR
from .tasks.state import on_drain

if TYPE_CHECKING:
    from a2a.server.request_handlers import DefaultRequestHandler

    from anyagentd.runtime import Runtime

    from .conversations import Conversations
    from .subagents.manager import SubagentManager
    from .workflows.runner import WorkflowRunner

log = logging.getLogger("anyagentd.a2a")

DRAIN_TIMEOUT = 20.0
"""Seconds the drain gives the live agents' sessions, all closing at once, after the running tasks are cancelled."""


def _closing_on_purpose(record: logging.LogRecord) -> bool:
    """A logging filter for the SDK's event queues while the drain closes them: their "Events may be lost" and
    "Cannot wait for event dispatch" warnings (a2a-sdk 1.3.0, ``EventQueueSource.close(immediate=True)``) say
    nothing then — every task's state is stored, its run checkpointed — and read as trouble at every shutdown."""
    return record.levelno != logging.WARNING or "Dispatcher task" not in record.getMessage()


class Draining(Protocol):
    """What reads whether the instance drains (the front, ``/readyz``): a :class:`Lifecycle` is one."""

    @property
    def draining(self) -> bool: ...


class Lifecycle:
    """The admission of one daemon over ``runtime`` (the engine's; ``None`` only where nothing pauses or drains
    agents, as in a probe's test). ``draining``: sends are refused (set by :meth:`request_drain`, and by
    :meth:`drain` itself); ``drain_reason``: what asked for it (``SIGTERM``, ``admin.drain``'s reason)."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime
        self.draining = False
        self.drain_reason: str | None = None
        self._pause_reason: str | None = None
        self._drain_requested = anyio.Event()

    def request_drain(self, reason: str) -> None:
        """Latch the drain (SIGTERM, SIGINT, ``admin.drain``): idempotent; sends are refused from now on, every
        reply waiting on a command's task is answered at once with the task as it stands (:meth:`drain_requested`
        releases it: :class:`.command.dispatch.CommandDispatcher`), and the drain task cancels running work,
        closes the agents and stops the listener."""
        if not self._drain_requested.is_set():
            self.draining = True
            self.drain_reason = reason
            self._drain_requested.set()

    async def drain_requested(self) -> None:
        """Return once :meth:`request_drain` was called (at once if it was): what the drain task awaits, and what
        ends the wait of a reply on a command's task (a blocking ``workflow.run``, an answer's or a CancelTask's
        wait), so that no request is still open when the listener stops."""
        await self._drain_requested.wait()

    @property
    def paused(self) -> bool:
        """Whether the runtime's admission is ``paused`` (``admin.pause``; the engine holds every new prompt)."""
        return self.runtime is not None and self.runtime.admission == "paused"

    @property
    def paused_for(self) -> str | None:
        """The operator's reason while the instance is paused, else ``None``."""
        return self._pause_reason if self.paused else None

    def pause(self, reason: str) -> None:
        """Pause the runtime (``Runtime.pause``: nothing new starts; raises ``Draining`` while draining), saying
        ``reason``."""
        assert self.runtime is not None
        self.runtime.pause()
        self._pause_reason = reason

    def resume(self) -> None:
        """Resume the runtime (``Runtime.resume``: every held prompt goes on, in order; raises ``Draining`` while
        draining)."""
        assert self.runtime is not None
        self.runtime.resume()
        self._pause_reason = None

    def pause_note(self) -> str | None:
        """How the instance is paused, for a task that waits for the resume: ``"paused by the operator (<reason>)"``
        (only the operator pauses it: ``admin.pause``); ``None`` while it is not paused."""
        return None if self.paused_for is None else f"paused by the operator ({self.paused_for})"

    async def drain(
        self,
        conversations: Conversations,
        handler: DefaultRequestHandler,
        runner: WorkflowRunner | None,
        subagents: SubagentManager | None,
    ) -> None:
        """Stop intake (sends get DRAINING), do to every live conversation task what
        :func:`.tasks.state.on_drain` decides — cancel it through the SDK ``handler`` (recorded CANCELED), or park
        it (waiting for input, its agent has a resume token: it stays INPUT_REQUIRED and its answer after the
        restart resumes the conversation) — checkpoint the workflow runs of ``runner`` (their tasks are kept: the
        runs resume after the restart), close the ``subagents``; then ``Runtime.drain`` closes every session at
        once, within :data:`DRAIN_TIMEOUT` — the sessions of parked tasks left waiting, their questions
        unanswered (``Conversations.left_waiting``); last, the SDK ``handler`` closes every task it holds open, which
        ends the streams still subscribed to one."""
        self.draining = True
        context = call_context(OPERATOR)

        async def cancel(task_id: str) -> None:
            with anyio.move_on_after(CANCEL_GRACE + 1):
                try:
                    await handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
                except A2AError as err:  # already ended meanwhile
                    log.info("drain: task %s: %s", task_id, err)

        async with anyio.create_task_group() as tg:
            for task_id, run in list(conversations.runs.items()):
                decision = on_drain(run.state, run_task=False, resumable=run.conversation.holds_resume_token)
                if decision.action == "cancel":
                    tg.start_soon(cancel, task_id)
            if runner is not None:
                tg.start_soon(runner.drain, CANCEL_GRACE + 1)
            if subagents is not None:
                tg.start_soon(subagents.close)
        assert self.runtime is not None
        began, live = anyio.current_time(), self.runtime.sessions()
        with anyio.move_on_after(DRAIN_TIMEOUT):
            await self.runtime.drain(0, leave_waiting=conversations.left_waiting())
        left = sum(1 for s in live if not s.closed)
        log.info(
            "drain: closed %d of %d live agent session(s) in %.2f s",
            len(live) - left,
            len(live),
            anyio.current_time() - began,
        )
        # every task's SDK ActiveTask closes: a stream still subscribed to a task (SubscribeToTask on a run's task
        # the drain checkpointed) ends now, not at uvicorn's graceful timeout with an error line
        queues = logging.getLogger("a2a.server.events.event_queue_v2")
        queues.addFilter(_closing_on_purpose)
        try:
            await handler.aclose()
        finally:
            queues.removeFilter(_closing_on_purpose)


__all__ = ["DRAIN_TIMEOUT", "Draining", "Lifecycle"]
