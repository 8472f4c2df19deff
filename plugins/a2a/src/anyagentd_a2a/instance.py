"""The running daemon as the command ops see it: :class:`Instance` implements
:class:`~anyagentd_a2a.command.face.CommandFace` over an :class:`InstanceHost` — the few things of the daemon it
reads (the :class:`~anyagentd_a2a.daemon.Daemon` is one; this module does not import it: no import circle).

It keeps what is the instance's own rather than one conversation's: its id and start time, the log ring, the
pause latch, the settings ``admin.set`` changes until the next reload, and the services the op families use (the
workflow runner, the subagent manager, the device grant and the signed-in sessions), each ``None`` when not
configured.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any, Protocol

from anyagentd import __version__
from anyagentd.ops import InvalidOpArguments, Principal, owns

from .command.face import ConversationView, qualified_id
from .logring import LogRing

if TYPE_CHECKING:
    from anyagentd.runtime import Runtime

    from .auth.device import DeviceGrant
    from .auth.sessions import AuthSessions
    from .config import Loaded
    from .conversations import Conversations
    from .subagents.manager import SubagentManager
    from .workflows.definition import Workflow
    from .workflows.runner import WorkflowRunner

SETTABLE = ("agent.approval", "a2a.introspection.enabled")


class InstanceHost(Protocol):
    """What :class:`Instance` reads of the daemon that runs it (:class:`~anyagentd_a2a.daemon.Daemon` is one),
    each read when used: ``runtime`` and ``conversations`` exist once the daemon serves, ``loaded`` changes at a
    SIGHUP reload."""

    runtime: Runtime
    conversations: Conversations
    loaded: Loaded
    agent_label: str
    mock_script: str | None
    draining: bool

    def request_drain(self, reason: str) -> None: ...


class Instance:
    """The :class:`CommandFace` of one daemon. ``daemon`` (an :class:`InstanceHost`) gives the configuration, the
    runtime and the conversations; ``log`` is the daemon's log ring."""

    def __init__(self, daemon: InstanceHost, log: LogRing) -> None:
        self.daemon = daemon
        self.instance = f"agentd-{secrets.token_hex(4)}"
        self.version = __version__
        self.started_ms = int(time.time() * 1000)
        self.log = log
        self._paused: str | None = None
        self.overrides: dict[str, Any] = {}
        self.runner: WorkflowRunner | None = None
        self.workflows: dict[str, Workflow] = {}
        self.subagents: SubagentManager | None = None
        self.device_grant: DeviceGrant | None = None
        self.auth_sessions: AuthSessions | None = None

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        return self.daemon.runtime

    @property
    def agent_name(self) -> str:
        return self.daemon.agent_label

    @property
    def skills(self) -> list[str]:
        return [self.daemon.agent_label]

    @property
    def draining(self) -> bool:
        return self.daemon.draining

    @property
    def paused(self) -> bool:
        return self._paused is not None

    def pause_note(self) -> str | None:
        """How the instance is paused, for a task that waits for the resume: ``"paused by the operator (<reason>)"``
        (only the operator pauses it: ``admin.pause``); ``None`` while it is not paused."""
        return None if self._paused is None else f"paused by the operator ({self._paused})"

    def values(self, principal: Principal) -> dict[str, Any]:
        """``status.values``: the pool of live agents (:meth:`Conversations.values`), for the operator only."""
        return self.daemon.conversations.values() if principal.is_operator else {}

    @property
    def approval(self) -> str:
        return self.overrides.get("agent.approval", self.daemon.loaded.config.agent.approval)

    @property
    def introspection(self) -> bool:
        return self.overrides.get("a2a.introspection.enabled", self.daemon.loaded.config.a2a.introspection)

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
        found = [c for c in self.daemon.conversations.conversations.values() if owns(principal, c.owner)]
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
        config = self.daemon.loaded.config.model_dump(mode="json")
        config["agent"]["approval"] = self.approval
        if self.daemon.mock_script is not None:  # --mock on the command line wins over the file
            config["agent"]["mock_script"] = str(self.daemon.mock_script)
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
        self.overrides[path] = value
        self.log.emit("admin.set", path=path, value=value)
        return value

    def reloaded(self) -> None:
        """A SIGHUP reload: ``admin.set`` values last until here."""
        self.overrides.clear()

    # -- admission -------------------------------------------------------------------------------------------

    def begin_drain(self, reason: str) -> None:
        self.log.emit("admin.drain", reason=reason)
        self.daemon.request_drain(reason)

    def pause(self, reason: str) -> None:
        self._paused = reason
        self.log.emit("admin.pause", reason=reason)
        self.daemon.runtime.pause()

    def resume(self) -> None:
        self._paused = None
        self.log.emit("admin.resume")
        self.daemon.runtime.resume()
        if self.runner is not None:
            self.runner.wake_all()


__all__ = ["Instance", "InstanceHost", "SETTABLE"]
