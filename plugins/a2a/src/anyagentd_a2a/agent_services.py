"""One served agent's assembly: :func:`build_agent` wires an agent's parts — its conversations on its own runtime,
its cards, its SDK executor and request handler over its own task table, its command faces and the front's
endpoints for its path and (for the default agent) the root — from the daemon-wide :class:`AgentParts`. It does
nothing but wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

from .agentface import AgentFace
from .agents import AgentServices, AgentStore
from .calls import PrincipalContextBuilder
from .card import SCHEMA_PATH, CallerCard, build_card
from .command.dispatch import CommandDispatcher
from .conversations import Conversations, PoolLimits
from .executor import ConversationExecutor
from .front import Endpoint
from .intercept import Intercept
from .lifecycle import AgentAdmission
from .routing import agent_url
from .sendchecks import SendChecks
from .sessions import ConversationSessions
from .settings import agent_idle_close
from .tasks.feed import TaskFeed
from .tasks.handler import RunCancelHandler
from .tasks.optasks import OpTasks, PreparedIds

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyagentd.ops import OpTable
    from anyagentd.runtime import Runtime

    from .agents import Agents
    from .agentspec import AgentSpec
    from .instance import Instance
    from .lifecycle import Lifecycle
    from .pool import Pool
    from .settings import Settings
    from .subagents.mcp_server import SubagentMcpServer


@dataclass(frozen=True)
class AgentParts:
    """What every agent of one daemon is built with: the ``settings``, the daemon-wide ``instance`` and
    ``lifecycle``, the ``ops`` table, the ``agents`` registry, the daemon-wide ``pool``, the ``public_url``, the
    push config store, sender and URL validator (``None`` with push off), the ``parents`` reported to, the
    subagent ``tools`` (``None`` without subagents) and ``spawn`` (the daemon's task group's ``start_soon``)."""

    settings: Settings
    instance: Instance
    lifecycle: Lifecycle
    ops: OpTable
    agents: Agents
    pool: Pool
    public_url: str
    push_store: Any
    push_sender: Any
    push_validator: Any
    parents: Any
    tools: SubagentMcpServer | None
    spawn: Callable[..., Any]


def build_agent(spec: AgentSpec, runtime: Runtime, store: AgentStore, parts: AgentParts) -> AgentServices:
    """The served agent ``spec`` on ``runtime`` over its ``store`` (:class:`.services.AgentStore`)."""
    settings, instance, ops = parts.settings, parts.instance, parts.ops
    admission = AgentAdmission(spec.id, runtime, parts.lifecycle)
    sessions = ConversationSessions(spec, settings, runtime, store.table, parts.spawn, parts.tools)
    conversations = Conversations(
        store.scope.files_root,
        sessions=sessions,
        start_pump=parts.spawn,
        limits=PoolLimits(idle_close=agent_idle_close(spec, settings.loaded), max_live=spec.max_live),
        paused=admission.pause_note,
        pool=parts.pool,
        agent=spec.id,
    )
    url = agent_url(parts.public_url, spec.id)
    schema_url = f"{parts.public_url}{SCHEMA_PATH}"
    listed = ops.listed(instance.switches())
    card = build_card(settings.loaded, url, ops=listed, schema_url=schema_url, spec=spec, daemon_url=parts.public_url)
    root_card = build_card(
        settings.loaded, parts.public_url, ops=listed, schema_url=schema_url, spec=spec, daemon_url=parts.public_url
    )
    face = AgentFace(instance, spec, runtime, conversations, admission, parts.agents)
    feed = TaskFeed(store.tasks, parts.push_sender)
    op_tasks = OpTasks(instance.runner, parts.spawn, admission.drain_requested)
    executor = ConversationExecutor(
        conversations,
        allow_private_urls=settings.loaded.config.a2a.push.allow_private,
        parked=store.parked,
        parents=parts.parents,
        tasks_of=store.tasks.tasks_of,
        ops=op_tasks,
    )
    handler = RunCancelHandler(
        executor,
        store.tasks,
        card,
        push_config_store=parts.push_store,
        push_sender=parts.push_sender,
        extended_agent_card=card,
        extended_card_modifier=CallerCard(ops, face),
        push_url_validator=parts.push_validator,
        # new ids read absent, no query
        request_context_builder=PreparedIds(task_id_generator=store.tasks.task_ids),
        runs=instance.runner,
    )
    rpc = JsonRpcDispatcher(handler, context_builder=PrincipalContextBuilder())
    check_send = SendChecks(conversations, store.parked, op_tasks, feed, card.default_output_modes, settings)

    def endpoint(face: AgentFace, interface_url: str) -> Endpoint:
        dispatcher = CommandDispatcher(ops, face, switches=instance.switches, new_task_id=store.tasks.new_task_id)
        return Endpoint(
            agent=spec.id,
            dispatch=rpc.handle_requests,
            admission=admission,
            interface_url=interface_url,
            check_send=check_send,
            intercept=Intercept(dispatcher),
        )

    # the root serves the default agent; its admission ops act on the whole daemon (the lifecycle)
    root_face = AgentFace(instance, spec, runtime, conversations, parts.lifecycle, parts.agents)
    return AgentServices(
        spec=spec,
        runtime=runtime,
        admission=admission,
        store=store.tasks,
        table=store.table,
        conversations=conversations,
        feed=feed,
        card=card,
        root_card=root_card,
        executor=executor,
        handler=handler,
        op_tasks=op_tasks,
        endpoint=endpoint(face, url),
        root_endpoint=endpoint(root_face, parts.public_url),
    )


__all__ = ["AgentParts", "build_agent"]
