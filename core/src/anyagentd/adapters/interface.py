"""The adapter plugin interface: what an agent adapter receives from the engine and what it reports back.

An adapter translates one agent protocol (Claude Code's stream-json, Codex's app-server, ACP, the scripted
``mock``) into the event model; the engine decides everything else (turn boundaries, steer vs queue, which
requests are open, status). See ``docs/engine.md#the-adapter-contract`` for the contract and the README's
"Writing an adapter" for a walk-through.

- :class:`AgentProfile` is one catalog entry: how discovery finds the executable (defined in :mod:`.profile`).
- :class:`AgentAdapter` (registered with the ``register_adapters`` hook) probes an installation and connects
  sessions; ``PLUGIN_NAME`` names it.
- :class:`AgentConnection` is one live session's agent; the engine calls it with StartTurn, Steer, Answer,
  Configure, Rollback, Compact, Cancel and Close, each of which must return promptly (send and return; results
  arrive as reports).
- :class:`AdapterLink` is how a connection reports: events, TurnAck, TurnEnded, Steered, info changes, auth lost,
  exited. Its ``await``-able methods apply backpressure (a bounded channel, 256 reports by default: ``EngineSettings.adapter_buffer``).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, Unpack

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ..errors import UnsupportedFeature
from ..model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    ConfigValue,
    LoginMethod,
    McpServer,
    PlanUsage,
    RollbackScope,
    SessionConfiguration,
    SessionOptions,
    StopReason,
)
from .profile import AgentProfile  # noqa: F401  (re-exported: the catalog entry adapters import from here)

if TYPE_CHECKING:
    from ..mcp.forwarding import Renderers
    from ..mcp.interface import McpTransportPlugin
    from ..model import EventKind

# ------------------------------------------------------------------------------------------------ reports


@dataclass(slots=True)
class EventReport:
    """An event the agent produced; ``kind`` is an ``EventKind`` value (not an engine-owned kind).

    Read-only by contract, like the other reports, but not a frozen dataclass: one is built per event, and a frozen
    one's ``__init__`` (``object.__setattr__`` per field) cost three times a plain one's (0.38 vs 0.12 us; issue 17).
    """

    kind: EventKind
    parent_tool_id: str | None = None
    extensions: dict[str, Any] | None = None  # the event's extensions: name -> arbitrary JSON


@dataclass(frozen=True, slots=True)
class TurnAck:
    """The agent has taken the last StartTurn: frames before this one belong to the previous turn."""


@dataclass(frozen=True, slots=True)
class TurnEndedReport:
    """The agent ended the running turn with ``stop`` (a ``StopReason``)."""

    stop: StopReason


@dataclass(frozen=True, slots=True)
class SteeredReport:
    """The answer to the last Steer: ``accepted`` into the running turn, or not (the engine queues it)."""

    accepted: bool


@dataclass(frozen=True, slots=True)
class InfoChanged:
    """Some session facts changed; fields left ``None`` are unchanged. The engine emits ``SessionUpdated``."""

    details: AgentDetails | None = None
    configuration: SessionConfiguration | None = None
    resume_token: str | None = None
    title: str | None = None
    deterministic_turn_end: bool | None = None
    deterministic_agent_turn_end: bool | None = None


@dataclass(frozen=True, slots=True)
class AuthLost:
    """The agent needs a login mid-session; the engine fails the turn and ends the session with AuthRequired."""

    login: list[LoginMethod] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Exited:
    """The agent process ended: ``status`` like ``"exit status: 3"`` or ``"signal: 9 (SIGKILL)"``, ``stderr``
    its last lines."""

    status: str
    stderr: str = ""


class InfoChanges(TypedDict, total=False):
    """The keyword arguments of :meth:`AdapterLink.info_changed`: the fields of :class:`InfoChanged`."""

    details: AgentDetails | None
    configuration: SessionConfiguration | None
    resume_token: str | None
    title: str | None
    deterministic_turn_end: bool | None
    deterministic_agent_turn_end: bool | None


Report = EventReport | TurnAck | TurnEndedReport | SteeredReport | InfoChanged | AuthLost | Exited


class AdapterLink:
    """The channel from an :class:`AgentConnection` to its session's engine.

    Every method awaits room in the bounded channel (backpressure: a fast agent waits for the engine, the engine
    never waits for the app). Reports sent after the session has ended are discarded.
    """

    def __init__(self, send: MemoryObjectSendStream[Report], start_soon: Callable[..., object]) -> None:
        self._send = send
        self._send_nowait = send.send_nowait  # bound once: emit's fast path runs per event
        self.start_soon = start_soon
        """Run an adapter task (a reader, a player) in the session's task group: ``start_soon(func, *args)``.
        Such tasks are cancelled when the session ends, after the connection's ``close``/``kill``."""

    async def report(self, report: Report) -> None:
        """Send one report, waiting only when the channel is full (so reports sent back to back, like the steps
        a script plays after ``End``, reach the engine together)."""
        try:
            self._send.send_nowait(report)
        except anyio.WouldBlock:
            try:
                await self._send.send(report)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def emit(
        self, kind: EventKind, *, parent_tool_id: str | None = None, extensions: dict[str, Any] | None = None
    ) -> None:
        """Report one event of ``kind`` (e.g. ``TextDelta(...)``); ``parent_tool_id`` for subagent events."""
        report = EventReport(kind, parent_tool_id, extensions)
        try:
            self._send_nowait(report)  # the common case, without a second coroutine per event (issue 17)
        except anyio.WouldBlock:
            await self.report(report)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def turn_ack(self) -> None:
        await self.report(TurnAck())

    async def turn_ended(self, stop: StopReason) -> None:
        await self.report(TurnEndedReport(stop))

    async def steered(self, accepted: bool) -> None:
        await self.report(SteeredReport(accepted))

    async def info_changed(self, **changes: Unpack[InfoChanges]) -> None:
        """Report changed session facts (keyword arguments of :class:`InfoChanged`)."""
        await self.report(InfoChanged(**changes))

    async def auth_lost(self, login: list[LoginMethod] | None = None) -> None:
        await self.report(AuthLost(list(login or [])))

    async def exited(self, status: str, stderr: str = "") -> None:
        await self.report(Exited(status, stderr))


def _no_tasks(*args: object) -> None:
    raise RuntimeError("this link runs no tasks")


class DiscardingLink(AdapterLink):
    """An :class:`AdapterLink` that drops every report: for a short-lived process no session owns (an adapter's
    ``probe`` or ``plan_usage`` handshake), where nobody consumes events, TurnEnded, info changes or exits.

    The connection code can then be the same one a session uses, with nothing to special-case. ``start_soon``
    runs the connection's tasks (e.g. its stdout reader) in the caller's task group, so they end with it; without
    one, starting a task raises ``RuntimeError``.
    """

    def __init__(self, start_soon: Callable[..., object] | None = None) -> None:
        self.start_soon = start_soon if start_soon is not None else _no_tasks

    async def report(self, report: Report) -> None:
        """Drop ``report``."""

    async def emit(
        self, kind: EventKind, *, parent_tool_id: str | None = None, extensions: dict[str, Any] | None = None
    ) -> None:
        """Drop the event (the base class's fast path writes to a channel this link does not have)."""


# ------------------------------------------------------------------------------------------------ session side


@dataclass(frozen=True, slots=True)
class PromptInput:
    """What a turn runs: the prompt text and attachment paths (or URLs) as the wire's ``prompt`` gave them."""

    text: str
    attachments: tuple[str, ...] = ()


class AgentConnection(ABC):
    """One session's agent, as an adapter drives it.

    Attributes read by the engine once connected (and updated through :meth:`AdapterLink.info_changed`):
    ``details`` (capabilities, config options, auth), ``configuration`` (current option values),
    ``resume_token``, ``title``, and whether turn ends are reported by the protocol
    (``deterministic_turn_end`` for prompted turns, ``deterministic_agent_turn_end`` for agent-originated ones;
    when false the engine infers completion after a quiet period).

    Every method must return promptly: send to the agent and return; outcomes arrive as reports. Errors are
    raised as :mod:`anyagentd.errors` types (e.g. ``UnsupportedFeature``, ``InvalidConfiguration``).
    """

    details: AgentDetails
    configuration: SessionConfiguration
    resume_token: str | None = None
    title: str | None = None
    deterministic_turn_end: bool = True
    deterministic_agent_turn_end: bool = True

    @abstractmethod
    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        """StartTurn: run ``prompt``. Report TurnAck once the agent has it, then events, then TurnEnded."""

    async def steer(self, prompt: PromptInput) -> None:
        """Steer: add ``prompt`` to the running turn; report Steered(accepted). Only with the Steer capability."""
        raise UnsupportedFeature("this agent cannot be steered")

    @abstractmethod
    async def answer(self, request_id: str, answer: Answer) -> None:
        """Answer: send the caller's (already validated) answer to an open request."""

    async def configure(self, option: str, value: ConfigValue) -> None:
        """Configure a live option; report the applied value with ``info_changed(configuration=...)``."""
        raise UnsupportedFeature(f"option {option!r} cannot be changed live")

    async def rollback(self, turns: int, scope: RollbackScope) -> None:
        """Rollback the last ``turns`` turns; raise on refusal. Only with the Rollback capability."""
        raise UnsupportedFeature("this agent cannot roll back")

    async def compact(self) -> None:
        """Compact the context; report ContextCompacted then a lower ContextUsage, then TurnEnded."""
        raise UnsupportedFeature("this agent cannot compact its context")

    @abstractmethod
    async def cancel(self) -> None:
        """Cancel the running turn; the agent reports TurnEnded (Cancelled) when it has stopped."""

    @abstractmethod
    async def close(self) -> None:
        """Shut the agent down gracefully and return once it is gone. The engine gives it ``close_grace`` seconds
        (``EngineSettings``, 5 s) and calls :meth:`kill` when it has not returned by then or raised; whatever of the
        agent's processes still runs once the grace has passed, the engine kills itself and reports
        (``Session.killed_at_close``, a Warning diagnostic; ``docs/engine.md#close``)."""

    async def close_unanswered(self) -> None:
        """Shut the agent down as :meth:`close` does, but leave what it waits for as a crash would: its open
        requests get no answer and its running turn no interrupt, so the conversation it saved still ends with the
        open question (``Session.close(answer_pending=False)``; ``docs/engine.md#close``). The engine bounds it as
        it bounds :meth:`close`. Default: :meth:`close` (an adapter whose close answers or interrupts nothing the
        agent records need not override it)."""
        await self.close()

    async def kill(self) -> None:  # noqa: B027 - optional hook, a no-op unless the adapter has a process
        """Stop the agent at once (SIGKILL to its process group). Default: nothing to kill."""


class AgentAdapter(ABC):
    """An agent protocol adapter, registered through ``register_adapters``.

    Class attributes: ``PLUGIN_NAME`` (unique), ``profiles`` (the catalog entries it drives). The runtime makes
    one instance per adapter with ``config``: the settings a caller gave for it (e.g. the mock's ``script``).
    """

    PLUGIN_NAME: ClassVar[str]
    profiles: ClassVar[tuple[AgentProfile, ...]] = ()
    acp_ref: ClassVar[bool] = False
    """True for the adapter that opens ``{"acp": {...}}`` AgentRefs (agents the catalog does not know)."""
    report_buffer: int | None = None
    """Size of the adapter→engine report channel for this adapter's sessions; ``None`` = the engine default."""

    mcp_transports: dict[str, McpTransportPlugin] = {}
    """The installed MCP transport plugins by transport tag; the runtime sets it on each instance."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = dict(config or {})  # the caller's settings for this adapter: name -> arbitrary JSON

    @property
    def handshake_timeout(self) -> float:
        """Seconds the agent gets for its handshake: ``config["handshake_timeout"]``, default
        ``EngineSettings.handshake_timeout``'s default (30 s; also named
        :data:`anyagentd.adapters.connection.HANDSHAKE_TIMEOUT`)."""
        from ..engine.settings import EngineSettings

        return float(self.config.get("handshake_timeout", EngineSettings.handshake_timeout))

    def render_mcp(self, servers: Sequence[McpServer], renderers: Renderers) -> list[tuple[McpServer, Any]]:
        """The ``mcp_servers`` of ``open`` in this agent's format (see :func:`anyagentd.mcp.render_mcp_servers`):
        each server with its rendering (the agent's own JSON for it). ``UnsupportedFeature`` for a transport not
        installed or not renderable, ``InvalidConfiguration`` for a bad server."""
        from ..mcp.forwarding import render_mcp_servers

        return render_mcp_servers(servers, renderers, self.mcp_transports, agent=self.PLUGIN_NAME)

    def effective_mcp_transports(self, supported: Iterable[str]) -> list[str]:
        """The transports this agent ``supported`` that have an installed plugin (for ``Capabilities``)."""
        from ..mcp.forwarding import effective_transports

        return effective_transports(supported, self.mcp_transports)

    def pinned_installations(self) -> list[AgentInstallation]:
        """Installations that need no discovery (source ``Pinned``), listed first by ``discover``."""
        return []

    @abstractmethod
    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        """What the agent is and can do (version, auth, capabilities, options, commands), without a session."""

    async def plan_usage(self, installation: AgentInstallation) -> PlanUsage:
        """The account's plan quota; raises ``UnsupportedFeature`` or ``AuthRequired`` when there is none."""
        raise UnsupportedFeature(f"{installation.name} does not report plan usage")

    @abstractmethod
    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        """Start the agent for a new session in ``options.dir`` and complete its handshake.

        ``no_tools`` asks for a launch without tools (``generate``) where the agent supports it. Raises
        ``SpawnFailed``, ``HandshakeTimeout``, ``AuthRequired``, ``ResumeFailed``, ``UnsupportedFeature``.
        """


def spawn_env(installation: AgentInstallation, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to start an agent with: ours, with the executable's directory first on PATH."""
    env = dict(os.environ)
    bindir = os.path.dirname(installation.executable_path)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "") if bindir else env.get("PATH", "")
    env.update(extra or {})
    return env
