"""The agents one daemon serves, each under its own sub-path (``/agents/{id}/``): :class:`AgentServices` holds one
agent's served parts, :class:`Agents` is the ordered registry the routes, the ops and the drain read.

Built by :func:`.agent_services.build_agent`; this module builds nothing and imports nothing of the assembly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.types import AgentCard, TaskStatusUpdateEvent

    from anyagentd.runtime import Runtime

    from .agentspec import AgentSpec
    from .conversations import Conversations
    from .executor import ConversationExecutor
    from .front import Endpoint
    from .lifecycle import AgentAdmission
    from .scopes import Scope
    from .store import ConversationTable, PrincipalTaskStore
    from .tasks.feed import TaskFeed
    from .tasks.optasks import OpTasks


@dataclass
class AgentStore:
    """One served agent's part of the database, open: its ``scope`` (which tables and files directory are its),
    ``tasks`` (the SDK's task store over its task table, per principal), ``table`` (its conversations' resume
    tokens); what the start found of the last process in it — ``interrupted`` (the status update of every task it
    failed, for their push subscribers) and ``parked`` (the tasks left waiting for input: task id → (owner,
    contextId))."""

    scope: Scope
    tasks: PrincipalTaskStore
    table: ConversationTable
    interrupted: list[TaskStatusUpdateEvent] = field(default_factory=list)
    parked: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class AgentServices:
    """One served agent: its ``spec`` (configuration), ``runtime`` (the engine its conversations run on),
    ``admission`` (its pause and drain latches), ``store`` (its task table), ``table`` (its conversations' resume
    tokens), ``conversations``, task ``feed``, ``card`` (interface at ``/agents/{id}``) and ``root_card`` (the same
    at the daemon's root URL, served there for the default agent), the SDK's ``executor`` and ``handler``,
    ``op_tasks`` (its command ops' tasks), and the front's ``endpoint`` for its path and ``root_endpoint`` for the
    root (the same checks, the root's command face)."""

    spec: AgentSpec
    runtime: Runtime
    admission: AgentAdmission
    store: PrincipalTaskStore
    table: ConversationTable
    conversations: Conversations
    feed: TaskFeed
    card: AgentCard
    root_card: AgentCard
    executor: ConversationExecutor
    handler: DefaultRequestHandler
    op_tasks: OpTasks
    endpoint: Endpoint
    root_endpoint: Endpoint

    @property
    def id(self) -> str:
        return self.spec.id


class Agents:
    """The served agents in configuration order; ``default`` is the one the root URL serves. Filled by the
    assembly (:meth:`add`) before the app serves."""

    def __init__(self) -> None:
        self._by_id: dict[str, AgentServices] = {}
        self._default: AgentServices | None = None

    def add(self, agent: AgentServices) -> None:
        self._by_id[agent.id] = agent
        if agent.spec.default or self._default is None:
            self._default = agent

    @property
    def default(self) -> AgentServices:
        assert self._default is not None, "no agent is served"
        return self._default

    def get(self, agent_id: str) -> AgentServices | None:
        return self._by_id.get(agent_id)

    def ids(self) -> list[str]:
        return list(self._by_id)

    def __iter__(self) -> Iterator[AgentServices]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    async def holding(self, task_id: str) -> AgentServices | None:
        """The agent whose task table holds ``task_id`` (one indexed read per agent, the default's first), or
        ``None``: what a restart's resumed workflow run follows its task through (:class:`.tasks.runs.RunTasks`)."""
        ordered = [self.default, *(a for a in self if a is not self.default)]
        for agent in ordered:
            if await agent.store.has(task_id):
                return agent
        return None

    def overview(self) -> list[dict[str, Any]]:
        """A row per agent (``GET /agents``' ``agents`` without the URLs, ``status.values.agents``): ``id``,
        ``name`` (the agent it drives), ``model``, ``default``, ``state`` (``serving``/``paused``/``draining``),
        ``liveAgents`` and ``maxLive`` (its pool)."""
        rows = []
        for agent in self:
            values = agent.conversations.values()
            rows.append(
                {
                    "id": agent.id,
                    "name": agent.spec.label,
                    "model": agent.spec.model,
                    "default": agent is self.default,
                    "state": agent.admission.state,
                    "liveAgents": values["liveAgents"],
                    "maxLive": values["maxLive"],
                }
            )
        return rows

    async def count_by_state(self) -> dict[int, int]:
        """Tasks by state summed over every agent's table (the metrics' ``tasks{state}``)."""
        total: dict[int, int] = {}
        for agent in self:
            for state, count in (await agent.store.count_by_state()).items():
                total[state] = total.get(state, 0) + count
        return total


__all__ = ["AgentServices", "AgentStore", "Agents"]
