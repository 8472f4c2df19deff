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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import BasePushNotificationSender
from a2a.utils.push_url_validator import validate_push_notification_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from anyagentd.errors import InvalidConfiguration
from anyagentd.ops import OpTable
from anyagentd.runtime import Runtime

from .agents import Agents, AgentStore
from .command.envelope import COMMAND_URI
from .config import ConfigError
from .front import Front
from .instance import Instance
from .lifecycle import Lifecycle
from .logring import LogRing
from .members import LEASE, LEASE_ENV, TASK, Membership, home_of
from .pool import Pool
from .principals import Identities
from .push import OnDemandClient
from .scopes import AgentScopes
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
    open_task_ids,
)
from .takeover import Takeover

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
    """The daemon's database, open: ``engine`` (SQLAlchemy's), ``scopes`` (which agent holds which tables),
    ``agents`` (each served agent's :class:`AgentStore`, by id, in configuration order), ``runs`` (the workflow
    runs' store; ``None`` without workflows), ``members`` (this daemon's membership of the database, joined:
    :mod:`.members`)."""

    engine: AsyncEngine
    scopes: AgentScopes
    agents: dict[str, AgentStore]
    runs: RunStore | None
    members: Membership


@asynccontextmanager
async def open_stores(settings: Settings) -> AsyncIterator[Stores]:
    """Open the store for the body: this daemon joins the database's members (:mod:`.members`; lease
    :data:`.members.LEASE`, env ``ANYAGENTD_A2A_MEMBER_LEASE``), every served agent's scope claimed
    (:meth:`.scopes.AgentScopes.claim`: the default agent keeps the tables of a database written before agents had
    ids), its task table and conversations table made if missing, and each open task a dead process left — one
    this daemon claims (:meth:`.members.Membership.claim`: its holder dead, gone or unknown; another live
    daemon's tasks are its own) — given what :func:`.tasks.state.on_restart` decides. At its end the task updates
    still written behind are flushed, the daemon leaves the members and the engine is disposed of (a flush that
    fails is logged: a restart reads those tasks as interrupted). Raises ``StoreUnavailable`` (the task store
    cannot be opened: unreachable, refused, unwritable, its SQLite directory missing)."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    url = settings.store_url
    check_sqlite_directory(url)
    engine = engine_for(url, settings.loaded.config.a2a.store_synchronous)
    agents: dict[str, AgentStore] = {}
    members = Membership(
        engine,
        home=home_of(settings.state_dir),
        lease=seconds(LEASE_ENV, LEASE),
        exclusive=url.startswith("sqlite"),
    )
    joined = False
    try:
        try:
            await members.join(settings.loaded.config.a2a.url or None)
            joined = True
            scopes = AgentScopes(engine, settings.state_dir)
            claimed = await scopes.claim([s.id for s in settings.specs], settings.default.id)
            runs = await _open_runs(settings, engine)
            if runs is not None:
                runs.members = members  # before the runner recovers: it resumes the runs it claims
            run_tasks = await runs.task_ids() if runs else set()
            for spec in settings.specs:
                scope = claimed[spec.id]
                store = PrincipalTaskStore(
                    engine,
                    table=scope.tasks_table,
                    flush_delay=seconds("ANYAGENTD_A2A_FLUSH_DELAY", FLUSH_DELAY),
                    history_kept=settings.loaded.config.a2a.limits.task_history,
                )
                agents[spec.id] = AgentStore(scope, store, ConversationTable(engine, scope.conversations_table))
                store.members = members
                await store.initialize()
                await agents[spec.id].table.initialize()
                resumable = await agents[spec.id].table.resumable(spec.label)
                mine = await members.claim(TASK, await open_task_ids(store))
                failed, parked = await fail_interrupted(store, resumable, run_tasks, only=mine)
                agents[spec.id].interrupted, agents[spec.id].parked = failed, parked
                if failed:
                    log.warning(
                        "agent %s: marked %d task(s) FAILED: they were running when the daemon last stopped",
                        spec.id,
                        len(failed),
                    )
                if parked:
                    log.info(
                        "agent %s: %d task(s) still wait for input: their answers resume the agent's conversation",
                        spec.id,
                        len(parked),
                    )
        except (OSError, SQLAlchemyError) as err:  # unreachable, refused, unwritable: not the listener
            raise StoreUnavailable(engine.url.render_as_string(hide_password=True), err) from None
        yield Stores(engine, scopes, agents, runs, members)
    finally:
        try:
            for agent in agents.values():
                await agent.tasks.flush()  # the updates still written behind
        except Exception as err:  # noqa: BLE001 - the stop goes on: a restart reads those tasks as interrupted
            log.error("writing the running tasks' last updates failed: %s", type(err).__name__)
        finally:
            try:
                if joined:
                    await members.leave()
            except Exception as err:  # noqa: BLE001 - its lease runs out: the others find it dead
                log.error("leaving the database's members failed: %s", type(err).__name__)
            finally:
                await engine.dispose()


@dataclass
class Runtimes:
    """The engine's runtimes of one daemon: ``shared`` runs the workflow steps and the subagents, ``agents`` holds
    each served agent's own (by id: its pause is that agent's alone, its ``mock_script`` its own)."""

    shared: Runtime
    agents: dict[str, Runtime]


@asynccontextmanager
async def open_runtimes(settings: Settings) -> AsyncIterator[Runtimes]:
    """The daemon's :class:`Runtimes` for the body, over one plugin set (``settings.options.plugins``, else loaded
    once here); each closes at its end (its sessions too)."""
    from contextlib import AsyncExitStack

    from anyagentd.plugins import Plugins

    plugins = settings.options.plugins or Plugins()
    async with AsyncExitStack() as stack:
        shared = await stack.enter_async_context(Runtime(mock_script=settings.default.mock_script, plugins=plugins))
        agents = {}
        for spec in settings.specs:
            agents[spec.id] = await stack.enter_async_context(Runtime(mock_script=spec.mock_script, plugins=plugins))
        yield Runtimes(shared, agents)


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
    ``lifecycle`` latches, the ``stores``, the engine's ``runtimes``, the log ``ring``, the listener's ``url`` and
    the ``public_url`` (``a2a.url``, else the listener's), the ``ops`` table, the daemon-wide ``instance`` (it holds
    the workflow runner, the subagent manager, the device grant and its sessions, as configured), the served
    ``agents`` (each with its conversations, card, SDK handler and front endpoint), the daemon-wide live-agent
    ``pool``, the push client ``push_http`` (``None`` with push off), the workflow runs' tasks ``run_tasks``
    (``None`` without workflows), the ``front`` every agent's path passes, the ``retention`` prune and the
    ``takeover`` (the lease renewed, dead members' work taken over: :mod:`.takeover`)."""

    settings: Settings
    lifecycle: Lifecycle
    stores: Stores
    runtimes: Runtimes
    ring: LogRing
    url: str
    public_url: str
    ops: OpTable
    instance: Instance
    agents: Agents
    pool: Pool
    push_http: OnDemandClient | None
    run_tasks: RunTasks | None
    front: Front
    retention: Retention
    takeover: Takeover

    @property
    def runtime(self) -> Runtime:
        """The shared runtime (workflow steps, subagents; its plugins are every runtime's)."""
        return self.runtimes.shared


def _workflow_runner(
    settings: Settings, runtime: Runtime, store: RunStore, workflows: dict[str, Any], lifecycle: Lifecycle
) -> Any:
    """The runner of the configured workflow engine (:mod:`.workflows.engines`): the local one, or an installed
    plugin's, given the ``[workflow_engine]`` table and the agents this daemon hosts (``hosts``, else its
    ``[[agents]]``). Raises ``ConfigError`` naming ``workflow_engine.kind`` (no such engine installed) or the key
    an engine refuses."""
    import inspect

    from .workflows.engines import UnknownEngine, engine_class

    section = settings.loaded.config.workflow_engine
    try:
        cls = engine_class(section.kind)
    except UnknownEngine as err:
        raise ConfigError("workflow_engine.kind", str(err)) from None
    work_root = Path(section.work_root).expanduser() if section.work_root else settings.state_dir / "runs"
    extra: dict[str, Any] = {}
    accepts = inspect.signature(cls).parameters
    if "options" in accepts:
        options = section.model_dump(exclude={"kind", "hosts", "work_root"})
        options["max_concurrent"] = settings.loaded.config.a2a.pool.max_live or None
        extra["options"] = options
    if "hosts" in accepts:
        extra["hosts"] = section.hosts if section.hosts is not None else sorted({s.label for s in settings.specs})
    try:
        return cls(
            runtime,
            store,
            workflows,
            work_root=work_root,
            default_agent=settings.default.ref,
            held=lifecycle.pause_note,
            **extra,
        )
    except InvalidConfiguration as err:
        raise ConfigError("workflows", err.message) from None


async def build_services(
    settings: Settings,
    lifecycle: Lifecycle,
    stores: Stores,
    runtimes: Runtimes,
    ring: LogRing,
    url: str,
    tg: TaskGroup,
) -> Services:
    """Build every service of the daemon listening at ``url``, the long-lived ones started in ``tg`` (the daemon's
    task group): subagents first (a workflow's subagent steps use them), then the workflow runner (which resumes
    the stored runs as it starts) on the shared runtime, then the instance, the push sender, each served agent
    (:func:`.agent_services.build_agent`, on its own runtime) and the front. Raises what opening a configured
    service's store raises."""
    from .agent_services import AgentParts, build_agent

    config = settings.loaded.config
    public_url = config.a2a.url or url
    await stores.members.announce(public_url)
    runtime = runtimes.shared
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
        assert stores.runs is not None  # opened with the workflows configured (open_stores)
        runner = _workflow_runner(settings, runtime, stores.runs, workflows, lifecycle)
        runner.subagents = subagents  # for subagent steps, recovered ones included
        await tg.start(runner.serve)
    instance = Instance(
        settings,
        lifecycle,
        ring,
        runner=runner,
        workflows=workflows,
        subagents=subagents,
        device_grant=device_grant,
        auth_sessions=auth_sessions,
    )
    push = config.a2a.push
    push_store = sender = http = validator = None
    if push.enabled:
        push_store = PushConfigStore(stores.engine)
        validator = None if push.allow_private else validate_push_notification_url
        http = OnDemandClient(timeout=10.0)  # made by the first push: its TLS context is not the start's
        sender = BasePushNotificationSender(http, push_store, push_url_validator=validator)
    front = Front(
        Identities(settings.loaded, auth_sessions),
        set(JsonRpcDispatcher.METHOD_TO_MODEL),
        supported_extensions={COMMAND_URI},
        realm="anyagentd",
        spawn=tg.start_soon,
    )
    agents = Agents()
    pool = Pool(pool_limits(settings.loaded))
    parts = AgentParts(
        settings=settings,
        instance=instance,
        lifecycle=lifecycle,
        ops=ops,
        agents=agents,
        pool=pool,
        public_url=public_url,
        push_store=push_store,
        push_sender=sender,
        push_validator=validator,
        parents=settings.parents(tg.start_soon),
        tools=tools,
        spawn=tg.start_soon,
    )
    for spec in settings.specs:
        agents.add(build_agent(spec, runtimes.agents[spec.id], stores.agents[spec.id], parts))
    run_tasks = None
    if runner is not None:
        from .tasks.runs import RunTasks

        run_tasks = RunTasks(runner, agents)
    return Services(
        settings=settings,
        lifecycle=lifecycle,
        stores=stores,
        runtimes=runtimes,
        ring=ring,
        url=url,
        public_url=public_url,
        ops=ops,
        instance=instance,
        agents=agents,
        pool=pool,
        push_http=http,
        run_tasks=run_tasks,
        front=front,
        retention=_retention(settings, stores, agents, instance),
        takeover=Takeover(
            stores.members,
            agents,
            stores.agents,
            runner,
            run_tasks,
            push_store,
            tg.start_soon,
            draining=lambda: lifecycle.draining,
        ),
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


def _retention(settings: Settings, stores: Stores, agents: Agents, instance: Instance) -> Retention:
    """The :class:`.retention.Retention` over this daemon's stores: every agent's tasks, conversations and files
    always, the runs' with workflows configured, the device sessions with the grant on, the subagent records with
    subagents on."""
    from .retention import RetainedAgent, Retention

    subagents = None
    if settings.loaded.config.subagents.enabled:
        from .subagents.store import SubagentStore

        subagents = SubagentStore(stores.engine)
    return Retention(
        lambda: settings.loaded.config.a2a.retention,
        settings.state_dir,
        [RetainedAgent(a.store, a.table, stores.agents[a.id].scope.files_root, a.conversations, a.id) for a in agents],
        task_tables=stores.scopes.task_tables,
        runs=stores.runs,
        sessions=instance.auth_sessions,
        subagents=subagents,
        subagent_manager=instance.subagents,
    )


def tell_interrupted(services: Services, tg: TaskGroup) -> None:
    """Tell the push subscribers of every task this start failed (:attr:`AgentStore.interrupted`) its FAILED
    status, in ``tg``: the SDK pushes only what it serves. Once: the lists are emptied."""
    for agent in services.agents:
        store = services.stores.agents[agent.id]
        for event in store.interrupted:
            tg.start_soon(agent.feed.tell, event)
        store.interrupted = []


__all__ = ["Runtimes", "Services", "Stores", "build_services", "open_runtimes", "open_stores", "tell_interrupted"]
