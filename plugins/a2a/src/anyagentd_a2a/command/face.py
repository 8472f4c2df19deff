"""What the built-in op families need from the A2A daemon (``OpContext.face``), as one typed protocol.

The ops stay free of HTTP and of the daemon's internals: they read the instance's state and act on it only
through :class:`CommandFace`. The daemon's :class:`~anyagentd_a2a.instance.Instance` implements it; a test can
serve a real daemon and drive the ops over A2A.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from anyagentd.ops import owns

if TYPE_CHECKING:
    from anyagentd.engine.session import Session
    from anyagentd.ops import Principal
    from anyagentd.runtime import Runtime

    from ..auth.device import DeviceGrant
    from ..auth.sessions import AuthSessions
    from ..logring import LogRing
    from ..subagents.manager import SubagentManager
    from ..workflows.definition import Workflow
    from ..workflows.runner import WorkflowRunner


@dataclass(frozen=True)
class ConversationView:
    """One conversation as the ops see it: ``id`` (the contextId as its principal named it), ``principal`` (its
    owner's id), ``session`` (the engine session behind it, live or retained; ``None`` before the first turn or
    after it was retired), ``task_id`` (the newest task), ``turns`` (prompts run), ``version`` (bumped per
    turn), ``updated_ms`` (epoch ms of the last activity), ``turn_started_ms`` (epoch ms the running turn
    started; ``None`` when idle)."""

    id: str
    principal: str
    session: Session | None
    task_id: str | None
    turns: int
    version: int
    updated_ms: int
    turn_started_ms: int | None = None
    kind: str = "conversation"


def qualified_id(view: ConversationView) -> str:
    """``<principal>/<contextId>`` (``user:alice/ctx-1``): a conversation's name that no other principal's shares
    (contextIds are namespaced per principal, so two callers' ``ctx-1`` are two conversations)."""
    return f"{view.principal}/{view.id}"


def caller_id(view: ConversationView, principal: Principal) -> str:
    """The conversation's ``id`` as ``principal`` names it (``status``, ``plan.get``, ``conversation.get``): its own
    conversation by the bare contextId, another principal's (the operator sees them) by :func:`qualified_id`."""
    return view.id if owns(principal, view.principal, strictly=True) else qualified_id(view)


class CommandFace(Protocol):
    """The daemon as the built-in ops use it. Times are epoch milliseconds unless said otherwise.

    Every service an op uses is declared here, typed; one that is not configured is ``None`` and the op answers
    as if it had nothing (no run, no subagent, nobody signed in). An op reads them as attributes (``face.runner``),
    never by name with a default."""

    instance: str
    """This instance's id (stable for the process)."""
    version: str
    started_ms: int
    log: LogRing
    workflows: dict[str, Workflow]
    """The configured ``[[workflows]]`` by name (empty without any), as of the last reload."""
    runner: WorkflowRunner | None
    """The workflow runner; ``None`` when the daemon started without workflows (every run id is then unknown)."""
    subagents: SubagentManager | None
    """The subagent manager; ``None`` unless ``[subagents]`` is enabled (every handle is then unknown)."""
    device_grant: DeviceGrant | None
    """The OAuth device grant; ``None`` unless ``[a2a.device_grant]`` is enabled (its ops are switched off)."""
    auth_sessions: AuthSessions | None
    """The signed-in device sessions; ``None`` without the device grant (nobody is signed in)."""

    @property
    def runtime(self) -> Runtime:
        """The engine's runtime the ops are given (``OpContext.runtime``)."""

    @property
    def agent_name(self) -> str:
        """The conversation agent's name (``status.model``)."""

    @property
    def skills(self) -> list[str]:
        """The skill ids on the card."""

    @property
    def draining(self) -> bool: ...

    @property
    def paused(self) -> bool: ...

    def values(self, principal: Principal) -> dict[str, Any]:
        """``status.values`` for ``principal`` (lowerCamelCase keys): live agents, their cap and memory."""

    def conversations(self, principal: Principal) -> list[ConversationView]:
        """The conversations ``principal`` owns (every one for the operator), newest first."""

    def conversation(self, principal: Principal, conversation_id: str | None) -> ConversationView | None:
        """The conversation ``principal`` names ``conversation_id`` (the root conversation without one), or
        ``None`` when it has none by that name — the same whether it does not exist or is another principal's. The
        operator may also name another principal's conversation as ``<principal>/<contextId>``; a bare contextId
        several of the conversations it sees share raises ``anyagentd.ops.InvalidOpArguments`` naming those."""

    def redacted_config(self) -> dict[str, Any]:
        """The effective configuration as JSON, every credential shown as its ``{{secret:…}}`` reference."""

    def settable(self) -> list[str]:
        """The paths ``admin.set`` accepts."""

    def set_setting(self, path: str, value: Any) -> Any:
        """Set ``path`` to ``value`` parsed with the configuration file's own types, until the next reload;
        returns the value as parsed. Raises ``anyagentd.ops.InvalidOpArguments`` naming ``value``."""

    def begin_drain(self, reason: str) -> None:
        """Latch the drain (as SIGTERM does) and return at once; idempotent."""

    def pause(self, reason: str) -> None:
        """Hold the instance: nothing new starts; turns in flight finish."""

    def resume(self) -> None:
        """Clear the instance's pause; what waits starts."""


__all__ = ["CommandFace", "ConversationView", "caller_id", "qualified_id"]
