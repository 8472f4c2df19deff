"""The services of one running daemon, built in one place: the stores (:func:`open_stores`), then everything
that serves (:func:`build_services` → :class:`Services`), which the app (:func:`.app.build_app`), the drain and
the reload are given.

Configured services are built only when configured, and their modules imported only then: the workflow runner
and its store (``[[workflows]]``), the device grant and its sessions (``[a2a.device_grant]``), the subagent
manager and its MCP server (``[subagents] enabled``), the parents reported to (``[[subagents.parents]]``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import BasePushNotificationSender
from a2a.types import AgentCard, TaskStatusUpdateEvent
from a2a.utils.push_url_validator import validate_push_notification_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from anyagentd.ops import OpTable
from anyagentd.runtime import Runtime

from .calls import PrincipalContextBuilder
from .card import SCHEMA_PATH, CallerCard, build_card
from .command.dispatch import CommandDispatcher
from .command.envelope import COMMAND_URI
from .conversations import Conversations
from .executor import ConversationExecutor
from .front import Front
from .instance import Instance
from .intercept import Intercept
from .lifecycle import Lifecycle
from .logring import LogRing
from .principals import Identities
from .push import OnDemandClient
from .sendchecks import SendChecks
from .sessions import ConversationSessions
from .settings import Settings, pool_limits, seconds
from .store import (
    FLUSH_DELAY,
    ConversationTable,
    PrincipalTaskStore,
    PushConfigStore,
    StoreUnavailable,
    check_sqlite_directory,
    engine_for,
    fail_interrupted,
)
from .tasks.feed import TaskFeed
from .tasks.optasks import OpTasks, PreparedIds

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .retention import Retention
    from .subagents.manager import SubagentManager
    from .subagents.mcp_server import SubagentMcpServer
    from .tasks.runs import RunTasks
    from .workflows.store import RunStore

log = logging.getLogger("anyagentd.a2a")


@dataclass
class Stores:
    """The daemon's database, open: ``engine`` (SQLAlchemy's), ``tasks`` (the SDK's task store, per principal),
    ``table`` (the conversations' resume tokens), ``runs`` (the workflow runs' store; ``None`` without workflows);
    what the start found of the last process — ``interrupted`` (the status update of every task it failed, for
    their push subscribers) and ``parked`` (the tasks left waiting for input: task id → (owner, contextId))."""

    engine: AsyncEngine
    tasks: PrincipalTaskStore
    table: ConversationTable
    runs: RunStore | None
    interrupted: list[TaskStatusUpdateEvent] = field(default_factory=list)
    parked: dict[str, tuple[str, str]] = field(default_factory=dict)


@asynccontextmanager
async def open_stores(settings: Settings) -> AsyncIterator[Stores]:
    """Open the store (a task a dead process left open gets what :func:`.tasks.state.on_restart` decides) for the
    body; at its end the task updates still written behind are flushed and the engine disposed of (a flush that
    fails is logged: a restart reads those tasks as interrupted). Raises ``StoreUnavailable`` (the task store
    cannot be opened: unreachable, refused, unwritable, its SQLite directory missing)."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    url = settings.store_url
    check_sqlite_directory(url)
    engine = engine_for(url)
    store = PrincipalTaskStore(
        engine,
        flush_delay=seconds("ANYAGENTD_A2A_FLUSH_DELAY", FLUSH_DELAY),
        history_kept=settings.loaded.config.a2a.limits.task_history,
    )
    try:
        try:
            await store.initialize()
            table = ConversationTable(engine)
            await table.initialize()
            resumable = await table.resumable(settings.agent_label)
            runs = await _open_runs(settings, engine)
            failed, parked = await fail_interrupted(store, resumable, await runs.task_ids() if runs else set())
        except (OSError, SQLAlchemyError) as err:  # unreachable, refused, unwritable: not the listener
            raise StoreUnavailable(engine.url.render_as_string(hide_password=True), err) from None
        if failed:
            log.warning("marked %d task(s) FAILED: they were running when the daemon last stopped", len(failed))
        if parked:
            log.info("%d task(s) still wait for input: their answers resume the agent's conversation", len(parked))
        yield Stores(engine, store, table, runs, failed, parked)
    finally:
        try:
            await store.flush()  # the updates still written behind
        except Exception as err:  # noqa: BLE001 - the stop goes on: a restart reads those tasks as interrupted
            log.error("writing the running tasks' last updates failed: %s", type(err).__name__)
        finally:
            await engine.dispose()


async def _open_runs(settings: Settings, engine: AsyncEngine) -> RunStore | None:
    """The workflow runs' store, open (with ``workflows`` configured): the restart keeps the tasks its runs run
    under open (:func:`.tasks.state.on_restart`), their runs follow them. None without workflows: no runner would
    follow them, so they fail like any task a dead process left open."""
    if not settings.loaded.config.workflows:
        return None
    from .workflows.store import RunStore

    return await RunStore(engine).open()


@dataclass
class Services:
    """Everything one running daemon serves with, built by :func:`build_services`: its ``settings`` and
    ``lifecycle`` latches, the ``stores``, the engine's ``runtime``, the log ``ring``, the listener's ``url`` and
    the ``public_url`` (``a2a.url``, else the listener's), the ``ops`` table, the ``instance`` the ops act on (it
    holds the workflow runner, the subagent manager, the device grant and its sessions, as configured), the
    ``conversations``, the task ``feed``, the public ``card``, the SDK's ``executor`` and request ``handler``, the
    push client ``push_http`` (``None`` with push off), the command ``dispatcher``, the workflow runs' tasks
    ``run_tasks`` (``None`` without workflows), the ``front`` of ``POST /`` and the ``retention`` prune."""

    settings: Settings
    lifecycle: Lifecycle
    stores: Stores
    runtime: Runtime
    ring: LogRing
    url: str
    public_url: str
    ops: OpTable
    instance: Instance
    conversations: Conversations
    feed: TaskFeed
    card: AgentCard
    executor: ConversationExecutor
    handler: DefaultRequestHandler
    push_http: OnDemandClient | None
    dispatcher: CommandDispatcher
    run_tasks: RunTasks | None
    front: Front
    retention: Retention


async def build_services(
    settings: Settings,
    lifecycle: Lifecycle,
    stores: Stores,
    runtime: Runtime,
    ring: LogRing,
    url: str,
    tg: TaskGroup,
) -> Services:
    """Build every service of the daemon listening at ``url`` on ``runtime``, the long-lived ones started in ``tg``
    (the daemon's task group): subagents first (a workflow's subagent steps use them), then the workflow runner
    (which resumes the stored runs as it starts), then the conversations, the instance, the card, the SDK's
    handler, the command dispatcher and the front. Raises what opening a configured service's store raises."""
    config = settings.loaded.config
    public_url = config.a2a.url or url
    ops = runtime.plugins.op_table()
    workflows = {}
    if config.workflows:
        from .workflows.definition import load_workflows

        workflows = load_workflows(config.workflows)
    auth_sessions = device_grant = None
    if config.a2a.device_grant.enabled:
        from .auth.device import DeviceGrant
        from .auth.sessions import AuthSessions

        grant = config.a2a.device_grant
        auth_sessions = await AuthSessions(stores.engine, lifetime=grant.token_days * 86400).open()
        device_grant = DeviceGrant(
            auth_sessions,
            verification_uri=f"{public_url.rstrip('/')}/oauth2/device",
            principal_ids={p.id for p in config.a2a.principals},
            lifetime=grant.lifetime,
        )
    subagents, tools = await _start_subagents(settings, stores, runtime, public_url, tg)
    runner = None
    if workflows:
        from .workflows.runner import WorkflowRunner

        assert stores.runs is not None  # opened with the workflows configured (open_stores)
        runner = WorkflowRunner(
            runtime,
            stores.runs,
            workflows,
            work_root=settings.state_dir / "runs",
            default_agent=settings.agent_ref,
            held=lifecycle.pause_note,
        )
        runner.subagents = subagents  # for subagent steps, recovered ones included
        await tg.start(runner.serve)
    sessions = ConversationSessions(settings, runtime, stores.table, tg.start_soon, tools)
    conversations = Conversations(
        settings.state_dir,
        sessions=sessions,
        start_pump=tg.start_soon,
        limits=pool_limits(settings.loaded),
        paused=lifecycle.pause_note,
    )
    instance = Instance(
        settings,
        lifecycle,
        runtime,
        conversations,
        ring,
        runner=runner,
        workflows=workflows,
        subagents=subagents,
        device_grant=device_grant,
        auth_sessions=auth_sessions,
    )
    card = build_card(
        settings.loaded, public_url, ops=ops.listed(instance.switches()), schema_url=f"{public_url}{SCHEMA_PATH}"
    )
    push = config.a2a.push
    push_store = sender = http = validator = None
    if push.enabled:
        push_store = PushConfigStore(stores.engine)
        validator = None if push.allow_private else validate_push_notification_url
        http = OnDemandClient(timeout=10.0)  # made by the first push: its TLS context is not the start's
        sender = BasePushNotificationSender(http, push_store, push_url_validator=validator)
    feed = TaskFeed(stores.tasks, sender)
    op_tasks = OpTasks(runner, tg.start_soon, lifecycle.drain_requested)
    executor = ConversationExecutor(
        conversations,
        allow_private_urls=push.allow_private,
        parked=stores.parked,
        parents=settings.parents(tg.start_soon),
        tasks_of=stores.tasks.tasks_of,
        ops=op_tasks,
    )
    handler = DefaultRequestHandler(
        executor,
        stores.tasks,
        card,
        push_config_store=push_store,
        push_sender=sender,
        extended_agent_card=card,
        extended_card_modifier=CallerCard(ops, instance),
        push_url_validator=validator,
        # new ids read absent, no query
        request_context_builder=PreparedIds(task_id_generator=stores.tasks.task_ids),
    )
    dispatcher = CommandDispatcher(ops, instance, switches=instance.switches, new_task_id=stores.tasks.new_task_id)
    run_tasks = None
    if runner is not None:
        from .tasks.runs import RunTasks

        run_tasks = RunTasks(runner, handler, feed)
    rpc = JsonRpcDispatcher(handler, context_builder=PrincipalContextBuilder())
    front = Front(
        Identities(settings.loaded, auth_sessions),
        rpc.handle_requests,
        set(rpc.METHOD_TO_MODEL),
        lifecycle=lifecycle,
        supported_extensions={COMMAND_URI},
        realm="anyagentd",
        check_send=SendChecks(conversations, stores.parked, op_tasks, feed, card.default_output_modes, settings),
        intercept=Intercept(dispatcher),
        spawn=tg.start_soon,
    )
    return Services(
        settings=settings,
        lifecycle=lifecycle,
        stores=stores,
        runtime=runtime,
        ring=ring,
        url=url,
        public_url=public_url,
        ops=ops,
        instance=instance,
        conversations=conversations,
        feed=feed,
        card=card,
        executor=executor,
        handler=handler,
        push_http=http,
        dispatcher=dispatcher,
        run_tasks=run_tasks,
        front=front,
        retention=_retention(settings, stores, conversations, instance),
    )


async def _start_subagents(
    settings: Settings, stores: Stores, runtime: Runtime, public_url: str, tg: TaskGroup
) -> tuple[SubagentManager | None, SubagentMcpServer | None]:
    """With ``[subagents] enabled``: the subagent manager (its records adopted from its store) and the MCP server a
    conversation's agent spawns subagents through, both started in ``tg``; else ``(None, None)``."""
    section = settings.loaded.config.subagents
    if not section.enabled:
        return None, None
    from .subagents.instances import ChildInstance
    from .subagents.manager import SubagentLimits, SubagentManager
    from .subagents.mcp_server import SubagentMcpServer
    from .subagents.store import SubagentStore

    secrets = settings.loaded.secrets.instances
    children = {
        c.name: ChildInstance(
            c.name, c.url, secrets[c.name].get_secret_value() if c.name in secrets else None, reports=c.reports
        )
        for c in section.instances
    }
    store = await SubagentStore(stores.engine).open()
    manager = SubagentManager(
        runtime,
        SubagentLimits(tuple(section.agents), section.per_owner, section.depth, section.timeout),
        work_root=settings.state_dir / "subagents",
        save=store.save,
        instances=children,
        parent_url=public_url,
    )
    manager.adopt(await store.load())
    await tg.start(manager.serve)
    tools = SubagentMcpServer(manager)
    await tg.start(tools.serve)
    return manager, tools


def _retention(settings: Settings, stores: Stores, conversations: Conversations, instance: Instance) -> Retention:
    """The :class:`.retention.Retention` over this daemon's stores: the tasks and conversations always, the runs'
    with workflows configured, the device sessions with the grant on, the subagent records with subagents on."""
    from .retention import Retention

    subagents = None
    if settings.loaded.config.subagents.enabled:
        from .subagents.store import SubagentStore

        subagents = SubagentStore(stores.engine)
    return Retention(
        lambda: settings.loaded.config.a2a.retention,
        settings.state_dir,
        stores.tasks,
        stores.table,
        pool=conversations,
        runs=stores.runs,
        sessions=instance.auth_sessions,
        subagents=subagents,
        subagent_manager=instance.subagents,
    )


def tell_interrupted(services: Services, tg: TaskGroup) -> None:
    """Tell the push subscribers of every task this start failed (:attr:`Stores.interrupted`) its FAILED status,
    in ``tg``: the SDK pushes only what it serves. Once: the list is emptied."""
    for event in services.stores.interrupted:
        tg.start_soon(services.feed.tell, event)
    services.stores.interrupted = []


__all__ = ["Services", "Stores", "build_services", "open_stores", "tell_interrupted"]
