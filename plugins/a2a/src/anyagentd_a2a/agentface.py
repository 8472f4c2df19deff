"""The daemon as the command ops see it on one path: :class:`AgentFace` implements
:class:`~anyagentd_a2a.command.face.CommandFace` for one served agent — ``/agents/{id}/``, or the root, which
serves the default agent.

What is the agent's comes from it: its conversations, its pool, its model and skills, its pause and drain, its
``agent.approval``. What is the daemon's is the :class:`~.instance.Instance`'s: the instance id and start time, the
log ring, the workflow runner and runs, the subagents, the device grant and sessions, the configuration. The
admission ops act on the injected ``control``: the agent's own :class:`~.lifecycle.AgentAdmission` on its path,
the daemon's :class:`~.lifecycle.Lifecycle` at the root (``admin.pause``/``admin.drain`` there hold or drain the
whole daemon, as before several agents were served); one class, never a branch on which path it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from anyagentd.ops import InvalidOpArguments, Principal, owns

from .command.face import ConversationView, qualified_id

if TYPE_CHECKING:
    from anyagentd.runtime import Runtime

    from .agents import Agents
    from .agentspec import AgentSpec
    from .auth.device import DeviceGrant
    from .auth.sessions import AuthSessions
    from .conversations import Conversation, Conversations
    from .instance import Instance
    from .logring import LogRing
    from .subagents.manager import SubagentManager
    from .workflows.definition import Workflow
    from .workflows.runner import WorkflowRunner


class Control(Protocol):
    """What ``admin.pause``/``admin.resume``/``admin.drain`` act on: an agent's ``AgentAdmission`` or the daemon's
    ``Lifecycle``."""

    @property
    def draining(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    def pause(self, reason: str) -> None: ...

    def resume(self) -> None: ...

    def request_drain(self, reason: str) -> None: ...


class AgentFace:
    """The :class:`CommandFace` of one path: ``daemon`` (the :class:`~.instance.Instance`) for what is daemon-wide,
    ``spec``/``runtime``/``pool`` (its :class:`~.conversations.Conversations`) for the agent's own, ``control`` for
    the admission ops, ``agents`` (every served agent) for the operator's daemon-wide listing in ``status``."""

    def __init__(
        self,
        daemon: Instance,
        spec: AgentSpec,
        runtime: Runtime,
        pool: Conversations,
        control: Control,
        agents: Agents,
    ) -> None:
        self.daemon = daemon
        self.spec = spec
        self._runtime = runtime
        self.pool = pool
        self.control = control
        self.agents = agents

    # -- the daemon's ----------------------------------------------------------------------------------------

    @property
    def instance(self) -> str:
        return self.daemon.instance

    @property
    def version(self) -> str:
        return self.daemon.version

    @property
    def started_ms(self) -> int:
        return self.daemon.started_ms

    @property
    def log(self) -> LogRing:
        return self.daemon.log

    @property
    def workflows(self) -> dict[str, Workflow]:
        return self.daemon.workflows

    @property
    def runner(self) -> WorkflowRunner | None:
        return self.daemon.runner

    @property
    def subagents(self) -> SubagentManager | None:
        return self.daemon.subagents

    @property
    def device_grant(self) -> DeviceGrant | None:
        return self.daemon.device_grant

    @property
    def auth_sessions(self) -> AuthSessions | None:
        return self.daemon.auth_sessions

    def switches(self) -> dict[str, bool]:
        return self.daemon.switches()

    def redacted_config(self) -> dict[str, Any]:
        return self.daemon.redacted_config()

    def settable(self) -> list[str]:
        return self.daemon.settable()

    def set_setting(self, path: str, value: Any) -> Any:
        """``admin.set``: ``agent.approval`` is this path's agent's, the rest the daemon's
        (:meth:`.instance.Instance.set_setting`)."""
        return self.daemon.set_setting(path, value, self.spec.id)

    # -- the agent's -----------------------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def agent_name(self) -> str:
        return self.spec.model

    @property
    def skills(self) -> list[str]:
        return [s.id for s in self.spec.skills] if self.spec.skills else [self.spec.label]

    @property
    def draining(self) -> bool:
        return self.control.draining

    @property
    def paused(self) -> bool:
        return self.control.paused

    @property
    def approval(self) -> str:
        return self.daemon.settings.approval_of(self.spec.id)

    def values(self, principal: Principal) -> dict[str, Any]:
        """``status.values``, for the operator only: the agent's pool (:meth:`Conversations.values`); with more
        than one agent served, ``agents`` lists every one (:meth:`.agents.Agents.overview`)."""
        if not principal.is_operator:
            return {}
        values = self.pool.values()
        if len(self.agents) > 1:
            values["agents"] = self.agents.overview()
        return values

    def _view(self, conversation: Conversation) -> ConversationView:
        running = next((r for r in conversation.runs if not r.terminal), None)
        return ConversationView(
            id=conversation.context_id,
            principal=conversation.owner,
            session=conversation.session,
            task_id=conversation.last_task_id,
            turns=conversation.turns,
            version=conversation.turns,
            updated_ms=conversation.updated_ms,
            turn_started_ms=running.started_ms if running else None,
        )

    def conversations(self, principal: Principal) -> list[ConversationView]:
        found = [c for c in self.pool.conversations.values() if owns(principal, c.owner)]
        return [self._view(c) for c in sorted(found, key=lambda c: -c.updated_ms)]

    def conversation(self, principal: Principal, conversation_id: str | None) -> ConversationView | None:
        """The conversation ``principal`` names (see :class:`CommandFace`): among those it may see, its own by that
        contextId first; the operator may also write ``<principal>/<contextId>`` (``user:alice/ctx-1``, the ``id``
        ``status`` lists for another principal's conversation). A bare contextId that several principals'
        conversations share (the operator sees them all) is refused (``InvalidOpArguments`` naming the qualified
        ids), never one of them picked. Without an id, the root conversation: an A2A conversation is always named
        by its contextId (kind ``conversation``), so there is none here."""
        visible = self.conversations(principal)
        if conversation_id is None:
            return next((v for v in visible if v.kind == "root"), None)
        own = [v for v in visible if v.id == conversation_id and owns(principal, v.principal, strictly=True)]
        if own:
            return own[0]
        found = [v for v in visible if conversation_id in (v.id, qualified_id(v))]
        if len(found) > 1:
            named = ", ".join(sorted(qualified_id(v) for v in found))
            raise InvalidOpArguments(
                f"{len(found)} conversations have the contextId {conversation_id!r}: name one "
                f"as <principal>/<contextId> ({named})",
                [("id", f"one of {named}")],
            )
        return found[0] if found else None

    # -- admission -------------------------------------------------------------------------------------------

    def begin_drain(self, reason: str) -> None:
        self.log.emit("admin.drain", reason=reason, agent=self.spec.id)
        self.control.request_drain(reason)

    def pause(self, reason: str) -> None:
        self.control.pause(reason)
        self.log.emit("admin.pause", reason=reason, agent=self.spec.id)

    def resume(self) -> None:
        self.control.resume()
        self.log.emit("admin.resume", agent=self.spec.id)
        if self.runner is not None:
            self.runner.wake_all()


__all__ = ["AgentFace", "Control"]
