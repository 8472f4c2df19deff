"""The daemon's admission — the drain and the operator's pause — per agent and for the whole daemon, and the drain
itself.

One :class:`AgentAdmission` per served agent, over that agent's ``Runtime``: its pause is the runtime's admission
(``Runtime.pause``/``resume``: nothing new starts), with the operator's reason kept here; its drain latch is set the
moment a drain of that agent (``admin.drain`` on its path) or of the daemon is asked for (the front refuses its
sends while :attr:`AgentAdmission.draining`). One :class:`Lifecycle` per daemon: its latch (SIGTERM, SIGINT, the
root's ``admin.drain``, the last agent drained) releases every agent's, ``/readyz`` answers 503 once it is set, and
its pause holds every agent and the shared runtime that runs workflows and subagents. :meth:`AgentAdmission.drain`
ends in ``Runtime.drain`` (``docs/a2a-tasks.md#drain``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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
    """What reads whether sends are refused (the front, ``/readyz``): an :class:`AgentAdmission` or the daemon's
    :class:`Lifecycle`; ``drain_note`` says who drains, for the refusal."""

    @property
    def draining(self) -> bool: ...

    @property
    def drain_note(self) -> str: ...

    @property
    def by_daemon(self) -> bool:
        """Whether the drain is the daemon's (every send refused, commands too), not one agent's own."""


class RuntimePause:
    """The operator's pause of one ``runtime`` (``None``: nothing to pause, as in a probe's test): ``paused`` is the
    runtime's own admission (``Runtime.pause``/``resume``: the engine holds every new prompt), the reason is kept
    here. One owner of the pause for an agent (:class:`AgentAdmission`) and for the daemon (:class:`Lifecycle`)."""

    def __init__(self, runtime: Runtime | None) -> None:
        self.runtime = runtime
        self._pause_reason: str | None = None

    @property
    def paused(self) -> bool:
        """Whether the runtime's admission is ``paused`` (``admin.pause``)."""
        return self.runtime is not None and self.runtime.admission == "paused"

    @property
    def paused_for(self) -> str | None:
        """The operator's reason while paused, else ``None``."""
        return self._pause_reason if self.paused else None

    def pause(self, reason: str) -> None:
        """Pause the runtime (``Runtime.pause``: nothing new starts; raises ``Draining`` while it drains), saying
        ``reason``."""
        assert self.runtime is not None
        self.runtime.pause()
        self._pause_reason = reason

    def resume(self) -> None:
        """Resume the runtime (``Runtime.resume``: every held prompt goes on, in order; raises ``Draining`` while it
        drains)."""
        assert self.runtime is not None
        self.runtime.resume()
        self._pause_reason = None

    def pause_note(self) -> str | None:
        """How it is paused, for a task or run that waits for the resume: ``"paused by the operator (<reason>)"``
        (only the operator pauses: ``admin.pause``); ``None`` while it is not paused."""
        return None if self.paused_for is None else f"paused by the operator ({self.paused_for})"


class AgentAdmission(RuntimePause):
    """The admission of one served agent (``agent``: its id) over its ``runtime``: the operator's pause of it and
    its drain latch, which ``daemon``'s (the :class:`Lifecycle`) releases too. ``draining``: its sends are refused
    (:meth:`request_drain` of this agent, or the daemon's); ``drain_reason``: what asked for it."""

    def __init__(self, agent: str, runtime: Runtime, daemon: Lifecycle) -> None:
        super().__init__(runtime)
        self.agent = agent
        self.drain_reason: str | None = None
        self.drained = False
        """Set once :meth:`drain` has closed this agent's sessions."""
        self.by_daemon = False  # released by the daemon's drain, not this agent's own
        self._asked = anyio.Event()  # this agent's own drain (admin.drain on its path)
        self._released = anyio.Event()  # its own drain or the daemon's
        daemon.admissions.append(self)

    @property
    def draining(self) -> bool:
        return self._released.is_set()

    @property
    def drain_note(self) -> str:
        """Who drains: ``"the daemon is draining"``, or ``"agent 'a' is draining"`` (its own ``admin.drain``)."""
        return "the daemon is draining" if self.by_daemon else f"agent {self.agent!r} is draining"

    def request_drain(self, reason: str) -> None:
        """Latch this agent's own drain (``admin.drain`` on its path): idempotent; its sends are refused from now on,
        every reply waiting on one of its commands' tasks is answered at once, and the daemon's drain task drains
        it (:meth:`Lifecycle.serve`)."""
        if not self._asked.is_set():
            self._asked.set()
            self.release(reason)

    def release(self, reason: str, *, by_daemon: bool = False) -> None:
        """Refuse this agent's sends and release its waiting replies (:meth:`drain_requested`), without asking for
        its own drain: what the daemon's drain does to every agent (``by_daemon``)."""
        self.by_daemon = self.by_daemon or by_daemon  # the daemon's drain after this agent's own: every send refused
        if not self._released.is_set():
            self.drain_reason = reason
            self._released.set()

    async def drain_requested(self) -> None:
        """Return once this agent's drain or the daemon's was asked for (at once if it was): what ends the wait of a
        reply on one of its commands' tasks (:class:`.tasks.optasks.OpTasks`)."""
        await self._released.wait()

    async def own_drain_requested(self) -> None:
        """Return once this agent's own drain was asked for (:meth:`request_drain`)."""
        await self._asked.wait()

    @property
    def state(self) -> str:
        """``"draining"``, ``"paused"`` or ``"serving"`` (``GET /agents``, ``status.values.agents``)."""
        return "draining" if self.draining else "paused" if self.paused else "serving"

    async def drain(self, conversations: Conversations, handler: DefaultRequestHandler) -> None:
        """Refuse this agent's sends, do to every live conversation task what :func:`.tasks.state.on_drain`
        decides — cancel it through the SDK ``handler`` (recorded CANCELED), or park it (waiting for input, its
        agent has a resume token: it stays INPUT_REQUIRED and its answer after the restart resumes the
        conversation) — then ``Runtime.drain`` closes every session of the agent at once, within
        :data:`DRAIN_TIMEOUT`, the sessions of parked tasks left waiting, their questions unanswered
        (``Conversations.left_waiting``)."""
        self.release(self.drain_reason or "drain")
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
        began, live = anyio.current_time(), self.runtime.sessions()
        with anyio.move_on_after(DRAIN_TIMEOUT):
            await self.runtime.drain(0, leave_waiting=conversations.left_waiting())
        left = sum(1 for s in live if not s.closed)
        self.drained = True
        log.info(
            "drain: closed %d of %d live agent session(s) in %.2f s (agent %s)",
            len(live) - left,
            len(live),
            anyio.current_time() - began,
            self.agent,
        )


class Settling(Protocol):
    """What holds the requests in hand (the front): :meth:`settled` returns once none waits for its answer."""

    async def settled(self, timeout: float) -> None: ...


SETTLE_TIMEOUT = 5.0
"""Seconds the drain waits for the requests in hand to be answered before it closes the SDK's handlers."""


class Drained(Protocol):
    """One agent as the daemon's drain reaches it: its admission, its conversations and its SDK handler."""

    @property
    def admission(self) -> AgentAdmission: ...

    @property
    def conversations(self) -> Conversations: ...

    @property
    def handler(self) -> DefaultRequestHandler: ...


class Lifecycle(RuntimePause):
    """The admission of one daemon: ``runtime`` is the shared one that runs workflow steps and subagents (``None``
    only where nothing pauses or drains agents, as in a probe's test); ``admissions`` every served agent's
    (:class:`AgentAdmission` adds itself). ``draining``: the daemon drains, every agent's sends are refused (set by
    :meth:`request_drain`); ``drain_reason``: what asked for it (``SIGTERM``, ``admin.drain``'s reason)."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        super().__init__(runtime)
        self.admissions: list[AgentAdmission] = []
        self.draining = False
        self.drain_reason: str | None = None
        self._drain_requested = anyio.Event()

    def request_drain(self, reason: str) -> None:
        """Latch the daemon's drain (SIGTERM, SIGINT, the root's ``admin.drain``): idempotent; every agent's sends
        are refused from now on, every reply waiting on a command's task is answered at once with the task as it
        stands (:meth:`AgentAdmission.drain_requested` releases it), and the drain task cancels running work,
        closes the agents and stops the listener."""
        if not self._drain_requested.is_set():
            self.draining = True
            self.drain_reason = reason
            self._drain_requested.set()
            for admission in self.admissions:
                admission.release(reason, by_daemon=True)

    drain_note = "the daemon is draining"
    by_daemon = True

    async def drain_requested(self) -> None:
        """Return once :meth:`request_drain` was called (at once if it was): what the drain task awaits."""
        await self._drain_requested.wait()

    def pause(self, reason: str) -> None:
        """Pause the shared runtime and every agent not draining (``Runtime.pause``; raises ``Draining`` while the
        daemon drains, before anything is paused), saying ``reason``. An agent drained on its own stays drained."""
        super().pause(reason)
        for admission in self.admissions:
            if not admission.draining:
                admission.pause(reason)

    def resume(self) -> None:
        """Resume the shared runtime and every agent not draining (``Runtime.resume``: every held prompt goes on,
        in order; raises ``Draining`` while the daemon drains, before anything is resumed)."""
        super().resume()
        for admission in self.admissions:
            if not admission.draining:
                admission.resume()

    async def serve(self, agents: Iterable[Drained]) -> None:
        """Drain each agent whose own drain is asked for (``admin.drain`` on its path), as it is asked; once every
        agent has drained, drain the daemon (the listener stops, the process exits 0). Runs until cancelled."""
        agents = list(agents)

        async def drain_when_asked(agent: Drained) -> None:
            await agent.admission.own_drain_requested()
            if self.draining:
                return  # the daemon's drain drains it
            await agent.admission.drain(agent.conversations, agent.handler)
            if all(a.admission.drained for a in agents):
                self.request_drain("every agent drained")

        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(drain_when_asked, agent)

    async def drain(
        self,
        agents: Iterable[Drained],
        runner: WorkflowRunner | None,
        subagents: SubagentManager | None,
        requests: Settling | None = None,
    ) -> None:
        """Stop intake (every agent's sends get DRAINING), drain every agent not yet drained at once
        (:meth:`AgentAdmission.drain`: its tasks cancelled or parked, its sessions closed), checkpoint the workflow
        runs of ``runner`` (their tasks are kept: the runs resume after the restart), close the ``subagents``; then
        ``Runtime.drain`` closes the shared runtime's sessions; once the ``requests`` in hand are answered (within
        :data:`SETTLE_TIMEOUT`), each agent's SDK ``handler`` closes every task it holds open, which ends the streams
        still subscribed to one."""
        if not self.draining:
            self.request_drain("drain")
        agents = list(agents)
        async with anyio.create_task_group() as tg:
            for agent in agents:
                if not agent.admission.drained:
                    tg.start_soon(agent.admission.drain, agent.conversations, agent.handler)
            if runner is not None:
                tg.start_soon(runner.drain, CANCEL_GRACE + 1)
            if subagents is not None:
                tg.start_soon(subagents.close)
        if self.runtime is not None:
            with anyio.move_on_after(DRAIN_TIMEOUT):
                await self.runtime.drain(0)
        if requests is not None:
            await requests.settled(SETTLE_TIMEOUT)
        # every task's SDK ActiveTask closes: a stream still subscribed to a task (SubscribeToTask on a run's task
        # the drain checkpointed) ends now, not at uvicorn's graceful timeout with an error line
        queues = logging.getLogger("a2a.server.events.event_queue_v2")
        queues.addFilter(_closing_on_purpose)
        try:
            for agent in agents:
                await agent.handler.aclose()
        finally:
            queues.removeFilter(_closing_on_purpose)


__all__ = [
    "DRAIN_TIMEOUT",
    "SETTLE_TIMEOUT",
    "AgentAdmission",
    "RuntimePause",
    "Drained",
    "Draining",
    "Lifecycle",
    "Settling",
]
