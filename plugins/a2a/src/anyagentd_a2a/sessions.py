"""The agent sessions the conversations open: :class:`ConversationSessions` opens a conversation's engine session
on the daemon's runtime — resumed from its stored token, or afresh — and keeps the conversation table's resume
tokens up to date (the :class:`~.conversations.AgentSessions` of :class:`~.conversations.Conversations`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from anyagentd.errors import ResumeFailed

if TYPE_CHECKING:
    from anyagentd.runtime import Runtime

    from .agentspec import AgentSpec
    from .conversations import Conversation, Opening
    from .settings import Settings
    from .store import ConversationTable
    from .subagents.mcp_server import SubagentMcpServer

log = logging.getLogger("anyagentd.a2a")


class ConversationSessions:
    """Opens the conversations' sessions of the served agent ``spec`` (in its directory, with its options as
    ``configure``, and its ``approval`` in ``settings`` as in force when a session opens) on ``runtime``; ``table``
    (the agent's) stores their resume tokens, written in the background through ``spawn`` (a task group's
    ``start_soon``); ``tools``, with ``[subagents] enabled``, is the subagent MCP server each session is given."""

    def __init__(
        self,
        spec: AgentSpec,
        settings: Settings,
        runtime: Runtime,
        table: ConversationTable,
        spawn: Callable[..., Any],
        tools: SubagentMcpServer | None = None,
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.runtime = runtime
        self.table = table
        self.spawn = spawn
        self.tools = tools

    async def open(self, conversation: Conversation, opening: Opening = "resume") -> Any:
        """The conversation's engine session, opened as ``opening`` says (:data:`.conversations.Opening`):
        ``"resume"``: with its stored resume token when there is one, else — no token, or the resume failed — afresh,
        the next task saying so (``Conversation.fresh_note``) when the agent no longer knows earlier turns;
        ``"require_resume"`` (an answer to a request from before a restart): ``ResumeFailed`` instead of afresh
        (``never_saved`` when the agent has no saved session under the token); ``"fresh"`` (a replay,
        :meth:`.executor.ConversationExecutor._answer_parked`): afresh without trying the token, the caller saying
        so. The new session's token is stored. Raises what ``Runtime.open`` raises."""
        spec = self.spec
        approval = "AutoApprove" if self.settings.approval_of(spec.id) == "auto" else "Ask"
        token = None
        if opening != "fresh":
            token = await self.table.resume_token(conversation.owner, conversation.context_id, spec.label)
        spec.dir.mkdir(parents=True, exist_ok=True)
        if opening == "require_resume" and not token:
            raise ResumeFailed("no resume token is stored for this conversation")
        failed: ResumeFailed | None = None
        if token:
            try:
                session = await self._open_agent(conversation, permission_mode=approval, resume=token)
                log.info("conversation %s resumed the agent's session", conversation.context_id)
                return self._opened(conversation, session)
            except ResumeFailed as err:
                if opening == "require_resume":
                    raise
                failed = err
                log.warning(
                    "conversation %s: resume failed (%s); starting afresh", conversation.context_id, err.message
                )
        session = await self._open_agent(conversation, permission_mode=approval)
        conversation.went_fresh = True
        if opening != "fresh" and (conversation.turns or failed is not None):
            # the agent no longer knows this conversation's earlier turns: the task says so
            why = "was never saved by the agent" if failed is not None and failed.never_saved else "was closed"
            conversation.fresh_note = (
                f"This conversation's agent session {why} and could not be resumed; this turn "
                "starts a fresh agent conversation."
            )
        return self._opened(conversation, session)

    async def _open_agent(self, conversation: Conversation, **options: Any) -> Any:
        """The conversation's agent session, opened with ``owner=`` the conversation's owner (the runtime's
        ``sessions(owner=…)`` selects it); with ``[subagents] enabled`` it gets the subagent MCP server, its
        bearer speaking for the conversation's owner (withdrawn when the session closes)."""
        spec = self.spec
        if spec.options:
            options["configure"] = dict(spec.options)
        if self.tools is None:
            return await self.runtime.open(spec.ref, spec.dir, owner=conversation.owner, **options)
        from .subagents.mcp_server import Caller

        return await self.tools.open_with_tools(
            self.runtime,
            spec.ref,
            spec.dir,
            Caller(owner=conversation.owner),
            spawn=self.spawn,
            owner=conversation.owner,
            **options,
        )

    def _opened(self, conversation: Conversation, session: Any) -> Any:
        self.remember(conversation, session.info().resume_token)
        return session

    def remember(self, conversation: Conversation, token: str | None) -> None:
        """Store ``token`` (when there is one) as the conversation's resume token for this agent, in the
        background."""
        if token:
            self.spawn(self.table.remember, conversation.owner, conversation.context_id, self.spec.label, token)


__all__ = ["ConversationSessions"]
