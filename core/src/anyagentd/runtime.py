"""The async Python API: a :class:`Runtime` discovers agents, probes them, opens sessions and generates text.

::

    async with Runtime(mock_script="permission") as runtime:
        session = await runtime.open("mock", dir=".")
        await session.prompt("write hello.txt")
        async for event in session.events():
            ...

The wire server (``anyagentd serve``) is a thin layer over this same API.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict, Unpack

import anyio
from pydantic import ValidationError

from . import discovery
from .adapters.interface import AgentAdapter
from .engine.admission import Admission, AdmissionState
from .engine.session import Session, next_session_id
from .engine.settings import EngineSettings
from .errors import (
    AnyagentError,
    Draining,
    InvalidConfiguration,
    NotInstalled,
    ProtocolFailed,
    SessionClosed,
    UnknownSession,
    UnsupportedFeature,
)
from .mcp.interface import McpToolInfo
from .model import (
    AcpRef,
    AgentDetails,
    AgentInstallation,
    AgentRef,
    AnswerPermission,
    AnswerQuestion,
    CompletedStop,
    ConfigValue,
    DiscoveryReport,
    McpServer,
    PermissionMode,
    PermissionRequested,
    PlanUsage,
    Request,
    RequestOpened,
    SessionOptions,
    TextAnswer,
    TextDelta,
    ToolUpdated,
    TurnEnded,
    kind_tag,
)
from .plugins import Plugins


class OpenOptions(TypedDict, total=False):
    """The keyword options of :meth:`Runtime.generate`: those of :meth:`Runtime.open` but ``no_tools``."""

    resume: str | None
    fork: str | None
    fork_at: str | None
    permission_mode: PermissionMode | None
    mcp_servers: Iterable[McpServer | dict[str, Any]]
    configure: dict[str, ConfigValue] | None
    check_mcp: bool
    owner: str | None
    labels: dict[str, str] | None


class Runtime:
    """Entry point of the Python API; an async context manager that owns every session it opens.

    Takes: ``plugins`` (default: every installed plugin, see :mod:`anyagentd.plugins`), ``settings``
    (default: :meth:`EngineSettings.from_env`), ``adapter_config`` (per adapter ``PLUGIN_NAME``, e.g.
    ``{"mock": {"script": "flood"}}``), ``mock_script`` (shorthand for the mock's script: a path, an example name
    or a dict), ``env`` (the environment discovery reads; default ``os.environ``).
    Leaving the context closes every open session.

    Closed sessions stay readable (``session(id)``, ``sessions(include_closed=True)``) until retired: beyond
    ``settings.retain_closed`` of them, or ``settings.retain_closed_seconds`` after they closed. Admission
    (:attr:`admission`): :meth:`pause`, :meth:`resume`, :meth:`drain`.
    """

    def __init__(
        self,
        *,
        plugins: Plugins | None = None,
        settings: EngineSettings | None = None,
        adapter_config: dict[str, dict[str, Any]] | None = None,
        mock_script: str | Path | dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.plugins = plugins or Plugins()
        self.settings = settings or EngineSettings.from_env()
        self.env = env
        config = {name: dict(value) for name, value in (adapter_config or {}).items()}
        if mock_script is not None:
            config.setdefault("mock", {})["script"] = mock_script
        self.adapters: dict[str, AgentAdapter] = {
            name: cls(config.get(name)) for name, cls in self.plugins.adapters().items()
        }
        self.mcp_transports = self.plugins.mcp_transports()
        for adapter in self.adapters.values():
            adapter.mcp_transports = self.mcp_transports
        self._last_report: DiscoveryReport | None = None
        self._sessions: dict[str, Session] = {}
        self._closed_sessions: OrderedDict[str, Session] = OrderedDict()  # oldest close first
        self._retire_wake: anyio.Event | None = None  # made in __aenter__ (an Event needs the event loop)
        self._retiring: anyio.CancelScope | None = None
        self._admission = Admission()
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False

    async def __aenter__(self) -> Runtime:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._retire_wake, self._retiring = anyio.Event(), anyio.CancelScope()
        self._tg.start_soon(self._retirer)
        self.plugins.runtime_started(self)
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        assert self._tg is not None
        try:
            with anyio.CancelScope(shield=exc[0] is not None):
                await self.aclose()
        finally:
            # Let the body's own exception propagate as itself, not wrapped in an ExceptionGroup.
            if self._retiring is not None:
                self._retiring.cancel()
            if exc[0] is not None:
                self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
        return None

    async def aclose(self) -> None:
        """Close every open session (concurrently); later ``open`` calls close what they open at once."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for session in list(self._sessions.values()):
                tg.start_soon(session.close)

    # ----------------------------------------------------------------------------------------- discovery

    def _owners(self) -> dict[str, AgentAdapter]:
        owners: dict[str, AgentAdapter] = {}
        for adapter in self.adapters.values():
            for installation in adapter.pinned_installations():
                owners[installation.id] = adapter
            for profile in adapter.profiles:
                owners.setdefault(profile.id, adapter)
        return owners

    async def discover(self) -> DiscoveryReport:
        """Find the installed agents whose adapter plugin is installed; never launches one. First-party agents
        whose adapter is not installed are Info diagnostics naming the distribution to install. The report is kept
        to resolve catalog ids in later calls."""
        pinned = [i for a in self.adapters.values() for i in a.pinned_installations()]
        profiles = [p for a in self.adapters.values() for p in a.profiles]
        env = dict(self.env if self.env is not None else os.environ)
        report = await anyio.to_thread.run_sync(lambda: discovery.discover(profiles, env=env, pinned=pinned))
        report.diagnostics += discovery.uninstalled_adapters({p.id for p in profiles})
        self._last_report = report
        return report

    async def resolve(self, agent: AgentRef | dict[str, Any]) -> tuple[AgentAdapter, AgentInstallation]:
        """The adapter and installation for an ``AgentRef``: a catalog id (looked up in the last discovery,
        discovering again when there is none or the id is absent) or ``{"acp": {name, path, args}}``.
        Raises ``NotInstalled``."""
        if isinstance(agent, dict):
            agent = AcpRef.model_validate(agent)
        if isinstance(agent, AcpRef):
            adapter = next((a for a in self.adapters.values() if a.acp_ref), None)
            if adapter is None:
                raise NotInstalled(agent.acp.name, "opening an ACP agent by path needs the anyagentd-acp plugin")
            installation = AgentInstallation(
                id=agent.acp.name,
                name=agent.acp.name,
                executable_path=agent.acp.path,
                source="Pinned",
                acp_args=list(agent.acp.args),
            )
            return adapter, installation
        owner = self._owners().get(agent)
        if owner is None:
            raise NotInstalled(agent, discovery.no_adapter_message(agent))
        pinned = next((i for i in owner.pinned_installations() if i.id == agent), None)
        if pinned is not None:
            return owner, pinned  # what discovery would list for it, without searching for every other agent
        report = self._last_report
        if report is None or report.find(agent) is None:
            report = await self._discover_one(agent, owner)
        found = report.find(agent)
        if found is None:
            missing = next((m for m in report.missing if m.id == agent), None)
            hint = f"; install it with: {missing.install_hint}" if missing else ""
            raise NotInstalled(agent, f"{agent!r} was not found on this machine{hint}")
        return owner, found

    async def _discover_one(self, agent_id: str, owner: AgentAdapter) -> DiscoveryReport:
        # Only the profile asked for: opening one agent does not wait for the search of every other one (nor for
        # a login shell that only another agent's search would start). Not kept as the last report.
        profiles = [p for p in owner.profiles if p.id == agent_id]
        env = dict(self.env if self.env is not None else os.environ)
        if all(discovery.overridden(p, env) for p in profiles):
            # ANYAGENTD_<ID>_BIN names the executable: discovery is one stat, cheaper here than the hop to a worker
            # thread (on a new event loop that hop starts the thread: 1-3 ms before the spawn in bench_agents.py's
            # Claude runs, which give the CLI's path as the SDK's cli_path is given; bench/README.md, issue 31).
            return discovery.discover(profiles, env=env)
        return await anyio.to_thread.run_sync(lambda: discovery.discover(profiles, env=env))

    async def probe(self, agent: AgentRef | dict[str, Any]) -> AgentDetails:
        """What the agent is and can do (version, auth, capabilities, options, commands)."""
        adapter, installation = await self.resolve(agent)
        return await adapter.probe(installation)

    async def plan_usage(self, agent: AgentRef | dict[str, Any]) -> PlanUsage:
        """The account's plan quota; ``UnsupportedFeature`` or ``AuthRequired`` where there is none."""
        adapter, installation = await self.resolve(agent)
        return await adapter.plan_usage(installation)

    # ----------------------------------------------------------------------------------------- sessions

    async def open(
        self,
        agent: AgentRef | dict[str, Any],
        dir: str | Path,
        *,
        resume: str | None = None,
        fork: str | None = None,
        fork_at: str | None = None,
        permission_mode: PermissionMode | None = None,
        mcp_servers: Iterable[McpServer | dict[str, Any]] = (),
        configure: dict[str, ConfigValue] | None = None,
        no_tools: bool = False,
        check_mcp: bool = False,
        owner: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> Session:
        """Open a session with ``agent`` in directory ``dir`` (the wire's ``open``; options as in
        ``SessionOptions``). Returns the live :class:`Session`. Raises ``NotInstalled``, ``InvalidConfiguration``
        (``dir`` not a directory, bad options), and the adapter's ``SpawnFailed``, ``HandshakeTimeout``,
        ``ResumeFailed``, ``UnsupportedFeature``, ``AuthRequired``.

        ``check_mcp`` (Python API only, not on the wire): before the agent is started, connect to each MCP server
        with its transport plugin (``initialize`` + ``tools/list``, 10 s each); a failure raises the plugin's
        ``SpawnFailed``/``ProtocolFailed``/``InvalidConfiguration``, a transport without a plugin
        ``UnsupportedFeature``.

        ``owner`` (an opaque principal id) and ``labels`` (free ``str -> str`` tags) are kept on the session and
        select it in :meth:`sessions`; Python API only, not on the wire. ``InvalidConfiguration`` if they are not
        strings. While the runtime drains, raises ``Draining``."""
        if self._tg is None:
            raise RuntimeError("use the Runtime as `async with Runtime() as runtime:`")
        if self._admission.draining:
            raise Draining()
        if self._closing:
            raise SessionClosed("the runtime is shutting down")
        if owner is not None and not isinstance(owner, str):
            raise InvalidConfiguration(f"owner must be a string, not {type(owner).__name__}")
        if labels is not None and (
            not isinstance(labels, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        ):
            raise InvalidConfiguration("labels must map strings to strings")
        try:
            options = SessionOptions(
                dir=str(dir),
                resume=resume,
                fork=fork,
                fork_at=fork_at,
                permission_mode=permission_mode,
                mcp_servers=[McpServer.model_validate(s) if isinstance(s, dict) else s for s in mcp_servers],
                configure=dict(configure or {}),
            )
        except (ValidationError, TypeError, ValueError) as err:
            raise InvalidConfiguration(f"invalid open options: {err}") from None
        if not str(dir) or not Path(options.dir).is_dir():
            raise InvalidConfiguration(f"{options.dir!r} is not a directory")
        adapter, installation = await self.resolve(agent)
        if check_mcp:
            await self.check_mcp(options.mcp_servers)
        session = Session(
            next_session_id(),
            installation,
            permission_mode=permission_mode,
            settings=self.settings,
            on_closed=self._forget,
            owner=owner,
            labels=labels,
            admission=self._admission,
        )
        await self._tg.start(session.run)
        await session.connect(adapter, options, no_tools=no_tools)
        self._sessions[session.id] = session
        self.plugins.session_opened(session.info())
        if self._closing or self._admission.draining:  # opened while the runtime shut down or drained
            await session.close()
        return session

    async def check_mcp(
        self, servers: Iterable[McpServer | dict[str, Any]], *, timeout: float = 10.0
    ) -> dict[str, list[McpToolInfo]]:
        """Check each MCP server with its installed transport plugin; returns the tools by server name. Raises
        ``UnsupportedFeature`` (no plugin for its transport) or the plugin's error for the first that fails."""
        from .mcp.forwarding import install_hint

        found: dict[str, list[McpToolInfo]] = {}
        for server in servers:
            server = McpServer.model_validate(server) if isinstance(server, dict) else server
            tag = server.connection.TAG
            plugin = self.mcp_transports.get(tag)
            if plugin is None:
                raise UnsupportedFeature(
                    f"MCP transport {tag} is not installed ({install_hint(tag)}); needed by server {server.name!r}"
                )
            found[server.name] = await plugin.check(server, timeout=timeout)
        return found

    def _forget(self, session: Session) -> None:
        # The session ended: it stays readable until retired (by count at once, by age in _retirer).
        self.plugins.session_closed(session.id)
        if self._sessions.get(session.id) is session:
            self._closed_sessions[session.id] = session
            self._retire(by_count=True)
            if self._retire_wake is not None:
                self._retire_wake.set()

    def _retire(self, *, by_count: bool = False) -> float | None:
        # Retire closed sessions beyond the count, and those closed longer ago than the age; returns when the
        # next one is due (time.monotonic()), or None when none is held.
        keep, age = self.settings.retain_closed, self.settings.retain_closed_seconds
        closed = self._closed_sessions
        while len(closed) > max(keep, 0):
            self._sessions.pop(closed.popitem(last=False)[0], None)
        if by_count:
            return None
        now = time.monotonic()
        while closed:
            session_id, session = next(iter(closed.items()))
            due = (session.closed_at or now) + age
            if due > now:
                return due
            del closed[session_id]
            self._sessions.pop(session_id, None)
        return None

    async def _retirer(self) -> None:
        assert self._retiring is not None
        with self._retiring:
            while True:
                self._retire_wake = anyio.Event()
                due = self._retire()
                if due is None:
                    await self._retire_wake.wait()
                    continue
                with anyio.move_on_after(max(due - time.monotonic(), 0)):
                    await self._retire_wake.wait()

    def session(self, session_id: str) -> Session:
        """The session with this id; ``UnknownSession`` if none was opened here or it was retired. A closed
        session stays known until retired (``retain_closed`` / ``retain_closed_seconds``)."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSession(session_id) from None

    def sessions(self, owner: str | None = None, *, include_closed: bool = False) -> list[Session]:
        """The sessions opened here, oldest first: the open ones (plus the closed ones not yet retired with
        ``include_closed``), only those of ``owner`` when it is given."""
        return [
            s
            for s in self._sessions.values()
            if (include_closed or not s.closed) and (owner is None or s.owner == owner)
        ]

    # ----------------------------------------------------------------------------------------- admission

    @property
    def admission(self) -> AdmissionState:
        """``accepting`` (the default), ``paused`` or ``draining``."""
        return self._admission.state

    def pause(self) -> None:
        """Nothing new starts: a new prompt is queued instead of started (or steered), and a turn's end promotes
        no queued prompt; turns in flight finish. New sessions may still open. Idempotent; ``Draining`` while
        draining."""
        if self._admission.draining:
            raise Draining()
        self._admission.state = "paused"

    def resume(self) -> None:
        """Back to accepting: every session promotes its first waiting prompt (then the next at each turn end, in
        order). Idempotent; ``Draining`` while draining."""
        if self._admission.draining:
            raise Draining()
        if self._admission.state == "accepting":
            return
        self._admission.state = "accepting"
        for session in self.sessions():
            session.release_queue()

    async def drain(self, timeout: float, *, leave_waiting: Iterable[Session] = ()) -> None:
        """Stop for good: from now on ``open`` and ``prompt`` raise ``Draining`` and no queued prompt starts;
        turns in flight get ``timeout`` seconds to finish, then are cancelled (and get ``close_grace`` seconds to
        confirm); then every session closes, all at once. Returns when all are closed; closed sessions stay
        readable until retired. Calling it again while draining waits for the same end.

        ``leave_waiting``: sessions whose open request is kept for after a restart (the A2A drain of a task that
        waits for input, ``docs/a2a-tasks.md#drain``): neither waited for nor cancelled, they close with
        ``Session.close(answer_pending=False)`` — the agent ended as a crash would leave it, its saved
        conversation still ending with the question."""
        self._admission.state = "draining"
        kept = {s.id for s in leave_waiting}
        with anyio.move_on_after(timeout):
            for session in self.sessions():
                if session.id not in kept:
                    await session.wait_turn_ended()
        running = [s for s in self.sessions() if s.running and s.id not in kept]
        async with anyio.create_task_group() as tg:
            for session in running:
                tg.start_soon(_cancel_quietly, session)
        with anyio.move_on_after(self.settings.close_grace):
            for session in running:
                await session.wait_turn_ended()
        async with anyio.create_task_group() as tg:
            for session in self.sessions():
                tg.start_soon(_close, session, session.id not in kept)

    # ----------------------------------------------------------------------------------------- generate

    async def generate(
        self, agent: AgentRef | dict[str, Any], dir: str | Path, prompt: str, **options: Unpack[OpenOptions]
    ) -> str:
        """One-shot text: a throwaway session (Ask mode, no tools where the agent allows), one prompt, the text of
        its top-level messages. Permission requests are denied; questions get empty text when every one allows
        free text. Raises ``InvalidConfiguration`` for resume/fork, ``ProtocolFailed`` when the agent uses a tool,
        asks what cannot be answered, or the turn does not complete."""
        if options.get("resume") or options.get("fork") or options.get("fork_at"):
            raise InvalidConfiguration("generate requires a new session")
        options["permission_mode"] = "Ask"
        session = await self.open(agent, dir, no_tools=True, **options)
        try:
            return await _collect_text(session, prompt)
        finally:
            await session.close()


async def _close(session: Session, answer_pending: bool) -> None:
    await session.close(answer_pending=answer_pending)


async def _cancel_quietly(session: Session) -> None:
    try:
        await session.cancel()
    except AnyagentError:
        pass  # it closed meanwhile: nothing left to cancel


async def _collect_text(session: Session, prompt: str) -> str:
    parts: list[str] = []
    await session.prompt(prompt)
    async for event in session.events():
        kind = event.kind
        top_level = event.turn_info is not None and event.turn_info.parent_tool_id is None
        if isinstance(kind, TextDelta):
            if top_level:
                parts.append(kind.text)
        elif isinstance(kind, ToolUpdated):
            await session.cancel(clear_queue=True)
            raise ProtocolFailed("the agent used a tool during generate", "generate must not use tools")
        elif isinstance(kind, RequestOpened):
            await _refuse(session, kind.value)
        elif isinstance(kind, TurnEnded):
            stop = kind.stop
            if isinstance(stop, CompletedStop):
                return "".join(parts)
            raise ProtocolFailed(f"generate's turn ended {kind_tag(stop)}", "the turn did not complete")
    raise ProtocolFailed("the session ended before the turn did", "generate got no TurnEnded")


async def _refuse(session: Session, request: Request) -> None:
    if isinstance(request, PermissionRequested):
        options = request.value.options
        choice = "DenyAlways" if "DenyOnce" not in options and "DenyAlways" in options else "DenyOnce"
        await session.answer(request.value.id, AnswerPermission(value=choice))
        return
    questions = request.value.questions
    if all(q.allows_free_text for q in questions):
        await session.answer(request.value.id, AnswerQuestion(value=[TextAnswer(value="") for _ in questions]))
        return
    await session.cancel(clear_queue=True)
    raise ProtocolFailed("the agent asked a question generate cannot answer", "question without free text")


__all__ = ["Runtime", "Session", "AnyagentError"]
