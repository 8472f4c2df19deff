"""The running daemon as the command ops see it: :class:`Instance` implements
:class:`~anyagentd_a2a.command.face.CommandFace` over the daemon's typed parts — its :class:`~.settings.Settings`,
its :class:`~.lifecycle.Lifecycle` latches, the runtime and the conversations — never the daemon itself (this
module does not import it: no import circle).

It keeps what is the instance's own rather than one conversation's: its id and start time, the log ring, and the
services the op families use (the workflow runner, the subagent manager, the device grant and the signed-in
sessions), each ``None`` when not configured. The pause and drain latches are the lifecycle's, the ``admin.set``
values the settings' (until the next reload).
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from anyagentd import __version__
from anyagentd.ops import InvalidOpArguments, Principal, owns

from .command.face import ConversationView, qualified_id
from .logring import LogRing

if TYPE_CHECKING:
    from anyagentd.runtime import Runtime

    from .auth.device import DeviceGrant
    from .auth.sessions import AuthSessions
    from .conversations import Conversations
    from .lifecycle import Lifecycle
    from .settings import Settings
    from .subagents.manager import SubagentManager
    from .workflows.definition import Workflow
    from .workflows.runner import WorkflowRunner

SETTABLE = ("agent.approval", "a2a.introspection.enabled")


class Instance:
    """The :class:`CommandFace` of one daemon: ``settings`` give the configuration in force (and hold the
    ``admin.set`` values), ``lifecycle`` the drain and pause latches, ``runtime`` the engine, ``pool`` the daemon's
    :class:`~.conversations.Conversations`; ``log`` is the daemon's log ring. The services (``runner``,
    ``workflows``, ``subagents``, ``device_grant``, ``auth_sessions``) are given as configured, each ``None``
    (``workflows``: empty) otherwise."""

    def __init__(
        self,
        settings: Settings,
        lifecycle: Lifecycle,
        runtime: Runtime,
        pool: Conversations,
        log: LogRing,
        *,
        runner: WorkflowRunner | None = None,
        workflows: dict[str, Workflow] | None = None,
        subagents: SubagentManager | None = None,
        device_grant: DeviceGrant | None = None,
        auth_sessions: AuthSessions | None = None,
    ) -> None:
        self.settings = settings
        self.lifecycle = lifecycle
        self._runtime = runtime
        self.pool = pool
        self.instance = f"agentd-{secrets.token_hex(4)}"
        self.version = __version__
        self.started_ms = int(time.time() * 1000)
        self.log = log
        self.runner: WorkflowRunner | None = runner
        self.workflows: dict[str, Workflow] = workflows if workflows is not None else {}
        self.subagents: SubagentManager | None = subagents
        self.device_grant: DeviceGrant | None = device_grant
        self.auth_sessions: AuthSessions | None = auth_sessions

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def agent_name(self) -> str:
        return self.settings.agent_label

    @property
    def skills(self) -> list[str]:
        return [self.settings.agent_label]

    @property
    def draining(self) -> bool:
        return self.lifecycle.draining

    @property
    def paused(self) -> bool:
        return self.lifecycle.paused

    def values(self, principal: Principal) -> dict[str, Any]:
        """``status.values``: the pool of live agents (:meth:`Conversations.values`), for the operator only."""
        return self.pool.values() if principal.is_operator else {}

    @property
    def approval(self) -> str:
        return self.settings.approval

    @property
    def introspection(self) -> bool:
        return self.settings.introspection

    def switches(self) -> dict[str, bool]:
        """The configuration switches ops are served under (see :attr:`anyagentd.ops.Op.switch`)."""
        return {
            "introspection": self.introspection,
            "device_grant": self.device_grant is not None,
            "tcp_listener": True,
        }

    # -- conversations ---------------------------------------------------------------------------------------

    def _view(self, conversation: Any) -> ConversationView:
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

    # -- configuration ---------------------------------------------------------------------------------------

    def redacted_config(self) -> dict[str, Any]:
        """The effective configuration: credential fields hold their references (secrets are resolved apart,
        never into the configuration), with ``admin.set`` overrides applied."""
        config = self.settings.loaded.config.model_dump(mode="json")
        config["agent"]["approval"] = self.approval
        if self.settings.mock_script is not None:  # --mock on the command line wins over the file
            config["agent"]["mock_script"] = str(self.settings.mock_script)
        config["a2a"]["introspection"] = self.introspection
        return config

    def settable(self) -> list[str]:
        return list(SETTABLE)

    def set_setting(self, path: str, value: Any) -> Any:
        """``admin.set``: values typed as the configuration file types them (TOML: a boolean is true/false, not the
        string ``"true"``). ``a2a.introspection`` (the file's key) and ``a2a.introspection.enabled`` (the schema's
        name) are one setting."""
        path = "a2a.introspection.enabled" if path == "a2a.introspection" else path  # the config file's key
        if path == "agent.approval":
            if value not in ("ask", "auto"):
                raise InvalidOpArguments('agent.approval is "ask" or "auto"', [("value", 'expected "ask" or "auto"')])
        elif path == "a2a.introspection.enabled":
            if not isinstance(value, bool):
                raise InvalidOpArguments(
                    "a2a.introspection.enabled is a boolean", [("value", "expected a boolean (true or false)")]
                )
        else:
            raise InvalidOpArguments(f"{path} cannot be set", [("path", f"one of {', '.join(SETTABLE)}")])
        self.settings.overrides[path] = value  # until the next reload (Settings.replace)
        self.log.emit("admin.set", path=path, value=value)
        return value

    # -- admission -------------------------------------------------------------------------------------------

    def begin_drain(self, reason: str) -> None:
        self.log.emit("admin.drain", reason=reason)
        self.lifecycle.request_drain(reason)

    def pause(self, reason: str) -> None:
        self.lifecycle.pause(reason)
        self.log.emit("admin.pause", reason=reason)

    def resume(self) -> None:
        self.lifecycle.resume()
        self.log.emit("admin.resume")
        if self.runner is not None:
            self.runner.wake_all()


__all__ = ["Instance", "SETTABLE"]
