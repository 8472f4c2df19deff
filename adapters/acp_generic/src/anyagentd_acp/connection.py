"""One ACP agent session: the process, the ``acp`` library's client connection over it, and the engine's commands.

:meth:`AcpConnection.open` spawns the agent (own process group), runs ``initialize`` then ``session/new`` (or
``session/load`` / ``session/fork`` for resume / fork) and returns the live connection.

- Client capabilities sent: no ``fs``, no ``terminal`` (the agents write files themselves; we serve neither),
  ``auth.terminal`` (so agents list their terminal login methods, which AuthRequired carries).
- StartTurn: TurnAck, then ``session/prompt`` in a task; its ``stopReason`` ends the turn (end_turn → Completed
  Protocol, cancelled → Cancelled, refusal → Refused, else Failed), after the tools the agent left open are
  ended (``UpdateMapper.end_turn``). Prompted turn ends are deterministic; content between turns opens
  agent-originated turns that end by inferred completion.
- ``session/request_permission`` → a Permission request (ACP option kinds → choices); the answer selects the
  exact option offered for that kind. Cancel = ``session/cancel`` notification, then every pending permission
  is answered ``cancelled`` (the engine ends a turn the agent does not end within its ``cancel_grace``).
- After a cancel the agent still owes the cancelled prompt's answer, and what it sends until then belongs to the
  cancelled turn: the next ``session/prompt`` waits for that answer (up to :data:`SETTLE_LIMIT` seconds), message
  chunks arriving meanwhile are dropped, and its late stop is not reported. Some agents leave more behind:
  claude-agent-acp 0.23.1 answers the cancelled prompt at once but keeps the interrupted query's end, which ends
  the *next* prompt at once with nothing (and from then on each prompt gets the previous one's answer, a slow
  reply streaming into a later turn). For such an agent (catalog :data:`RESYNC_AFTER_CANCEL`, adapter config
  ``resync_after_cancel``, or one seen doing it: a first prompt after a cancel ending ``end_turn`` with no update
  at all) the session is closed and loaded again (``session/close`` + ``session/load``, replay suppressed) before
  the next prompt, so every prompt gets its own answer; when it is only seen doing it, the prompt is sent again
  after the reload.
- A cancelled turn's commands: an agent may answer the cancel while a command it runs for a tool goes on
  (codex-acp 0.16.0 does). Before such a turn's end is reported, the commands of its open Execute tools are stopped
  (:mod:`anyagentd.adapters.cancelled_commands`: only processes started during the turn that run the tool's
  command, SIGTERM then SIGKILL after :attr:`stop_grace`); the tool's end says so (``acp/stopped_processes``). A
  tool whose processes outlive that stays Running (in ``TurnEnded.background``) and is ended when they are gone.
- Configure: ``mode`` (from ``modes``) → ``session/set_mode``; config options → ``session/set_config_option``;
  the applied value is reported with ``info_changed`` (a refusal is a Warning diagnostic).
- Close: cancel a running turn, stop the library connection, then stdin closed / SIGTERM / SIGKILL to the whole
  process group, :attr:`close_step` seconds apart (ACP agents ignore EOF; npm wrappers don't forward signals).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypeVar, cast

import anyio
from acp import PROTOCOL_VERSION, RequestError
from acp import schema as acp
from acp.client.connection import ClientSideConnection
from pydantic import ValidationError

from anyagentd.adapters import cancelled_commands, lineage
from anyagentd.adapters.attachments import classify
from anyagentd.adapters.connection import (
    EXIT_WAIT,
    HANDSHAKE_TIMEOUT,
    INTERRUPT_ON_CLOSE,
    REQUEST_TIMEOUT,
    ProcessConnection,
)
from anyagentd.adapters.interface import PromptInput
from anyagentd.adapters.pending import PendingRequests
from anyagentd.adapters.process import DEFAULT_MAX_LINE_BYTES, AgentProcess
from anyagentd.errors import (
    AnyagentError,
    AuthRequired,
    InvalidConfiguration,
    ProtocolFailed,
    ResumeFailed,
    SpawnFailed,
    UnsupportedFeature,
)
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    AnswerPermission,
    ConfigValue,
    EnvVar,
    FailedStop,
    Http,
    PermissionRequest,
    PermissionRequested,
    RequestOpened,
    SessionConfiguration,
    SessionOptions,
    Sse,
    Stdio,
    Terminal,
    diagnostic,
)

from .launch import launch_argv, launch_env
from .mapping import PERMISSION_KINDS, SessionState, UpdateMapper, stop_reason
from .transport import ProcessTransport

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink, AgentAdapter
    from anyagentd.model import LoginMethod, McpServer, StopReason

T = TypeVar("T")

ContentBlock: TypeAlias = (
    "acp.TextContentBlock | acp.ImageContentBlock | acp.AudioContentBlock | acp.ResourceContentBlock"
    " | acp.EmbeddedResourceContentBlock"
)
"""A block of a ``session/prompt``'s content."""
SessionMcpServer: TypeAlias = "acp.HttpMcpServer | acp.SseMcpServer | acp.AcpMcpServer | acp.McpServerStdio"
"""An MCP server as ACP's ``session/new`` takes it."""

SETTLE_LIMIT = 10.0
"""Seconds the first ``session/prompt`` after a cancel waits for the cancelled prompt's answer before it is sent
anyway."""

STOP_GRACE = 1.0
"""Seconds a cancelled turn's commands get between SIGTERM and SIGKILL (adapter config ``stop_grace``)."""

RESYNC_AFTER_CANCEL = frozenset({"claude-acp"})
"""Catalog agents whose session is reloaded after a cancel (see the module doc)."""

CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"})


AUTH_REQUIRED = -32000
RAW_LINE = "acp/raw_line"
"""Extension key of a line from the agent that is not a JSON-RPC message (first 4 KiB)."""


class _Client:
    """The ``acp`` Client the library dispatches agent→client requests to."""

    def __init__(self, conn: AcpConnection) -> None:
        self._conn = conn

    async def request_permission(
        self, session_id: str, tool_call: acp.ToolCallUpdate, options: list[acp.PermissionOption], **kwargs: object
    ) -> acp.RequestPermissionResponse:
        return await self._conn.ask_permission(tool_call, options)

    async def session_update(self, session_id: str, update: object, **kwargs: object) -> None:
        await self._conn.mapper.apply(update)  # not reached: updates are intercepted by the transport

    async def write_text_file(self, *args: object, **kwargs: object) -> NoReturn:
        raise RequestError.method_not_found("fs/write_text_file")  # fs is not advertised

    async def read_text_file(self, *args: object, **kwargs: object) -> NoReturn:
        raise RequestError.method_not_found("fs/read_text_file")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:  # JSON params and result
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        await self._conn.link.emit(
            diagnostic("Info", f"ACP extension notification _{method}"),
            extensions={"acp/raw_notification": {"method": method, "params": params}},
        )


def login_methods(executable: str, init: acp.InitializeResponse | None) -> list[LoginMethod]:
    """``LoginMethod``s from ``initialize.authMethods``: terminal methods (run the agent with their args) and
    environment-variable methods. Agent-handled methods have no client-side form and are left out."""
    out: list[LoginMethod] = []
    for method in (init.auth_methods if init else None) or []:
        if isinstance(method, acp.TerminalAuthMethod):
            out.append(
                Terminal(
                    command=[executable, *(method.args or [])],
                    env=dict(method.env or {}),
                    description=method.description or method.name,
                )
            )
        elif isinstance(method, acp.EnvVarAuthMethod):
            out += [EnvVar(name=v.name) for v in method.vars if not v.optional]
    return out


def mcp_renderers(caps: acp.McpCapabilities | None) -> dict[str, Callable[[McpServer], SessionMcpServer]]:
    """Renderers of ``McpServer`` → ACP's ``McpServer`` shape: stdio always, http / sse when the agent's
    ``mcpCapabilities`` offer them."""

    def stdio(server: McpServer) -> SessionMcpServer:
        c = cast(Stdio, server.connection)  # (the renderer of its transport)
        return acp.McpServerStdio(
            name=server.name,
            command=c.command,
            args=list(c.args),
            env=[acp.EnvVariable(name=k, value=v) for k, v in c.env.items()],
        )

    def http(server: McpServer) -> SessionMcpServer:
        c = cast(Http, server.connection)
        return acp.HttpMcpServer(
            type="http",
            name=server.name,
            url=c.url,
            headers=[acp.HttpHeader(name=k, value=v) for k, v in c.headers.items()],
        )

    def sse(server: McpServer) -> SessionMcpServer:
        c = cast(Sse, server.connection)
        return acp.SseMcpServer(
            type="sse",
            name=server.name,
            url=c.url,
            headers=[acp.HttpHeader(name=k, value=v) for k, v in c.headers.items()],
        )

    renderers: dict[str, Callable[[McpServer], SessionMcpServer]] = {"Stdio": stdio}
    if caps is not None and caps.http:
        renderers["Http"] = http
    if caps is not None and caps.sse:
        renderers["Sse"] = sse
    return renderers


def prompt_blocks(prompt: PromptInput, caps: acp.PromptCapabilities | None) -> list[ContentBlock]:
    """The ``session/prompt`` content: the text, then each attachment — an image (png/jpeg/gif/webp file up to
    ``MAX_IMAGE_BYTES``) inline when the agent takes images, anything else as a resource link."""
    blocks: list[ContentBlock] = [acp.TextContentBlock(type="text", text=prompt.text)]
    for attachment in classify(prompt.attachments, images=bool(caps and caps.image), image_urls=False):
        item, media = attachment.item, attachment.media
        data = attachment.inline_data()
        if data is not None:
            uri = Path(item).resolve().as_uri()
            blocks.append(acp.ImageContentBlock(type="image", data=data, mime_type=media, uri=uri))
            continue
        uri = item if attachment.is_url else Path(item).resolve().as_uri()
        name = os.path.basename(item.split("?")[0].rstrip("/")) or item
        blocks.append(acp.ResourceContentBlock(type="resource_link", uri=uri, name=name, mime_type=media))
    return blocks


class AcpConnection(ProcessConnection):
    """A live ACP session (see the module doc). Build with :meth:`open`."""

    deterministic_turn_end = True
    deterministic_agent_turn_end = False
    close_step = 1.5

    def __init__(
        self, process: AgentProcess, link: AdapterLink, installation: AgentInstallation, options: SessionOptions
    ) -> None:
        super().__init__(process, link)
        self.installation = installation
        self.session_options = options
        self.state = SessionState()
        self.mapper = UpdateMapper(link, self.state)
        self.details = AgentDetails()
        self.resume_token: str | None = None
        self.title = None
        self.init: acp.InitializeResponse | None = None
        self.session_id: str | None = None
        self._pending: PendingRequests[dict[str, str]] = PendingRequests("the ACP agent")
        """The agent's permission requests waiting for the engine: data = choice -> ACP optionId; the reply, the
        selected optionId (``None``: cancelled). The agent's request handler waits on it (:meth:`ask_permission`)."""
        self._request_ids = itertools.count(1)
        self._opened = False
        self._running: int | None = None  # token of the running prompt
        self._turn_tokens = itertools.count(1)
        self._cancel_requested = False
        self._cancelled: tuple[int, anyio.Event] | None = None  # a cancelled prompt not answered yet
        self._after_cancel = False  # the next prompt follows a cancel: watch for a leftover stop
        self.resync_after_cancel = installation.id in RESYNC_AFTER_CANCEL
        self._resync_pending = False
        self._updates = 0  # session/update notifications of our session so far
        self._mcp_servers: list[SessionMcpServer] = []
        self.stop_grace = STOP_GRACE
        self._turn_started_with: frozenset[int] = frozenset()  # the agent's lineage when the prompt was sent
        self.transport = ProcessTransport(
            process, link, raw_key=RAW_LINE, intercept=self._intercept, on_eof=self.output_ended
        )
        self.rpc = ClientSideConnection(_Client(self), self.transport)

    @property  # type: ignore[override]
    def configuration(self) -> SessionConfiguration:
        return self.state.configuration()

    # ------------------------------------------------------------------------------------------- opening

    @classmethod
    async def open(
        cls,
        installation: AgentInstallation,
        options: SessionOptions,
        link: AdapterLink,
        *,
        config: dict[str, Any],
        adapter: AgentAdapter,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        session: bool = True,
    ) -> AcpConnection:
        """Spawn the agent in ``options.dir``, ``initialize``, and (with ``session``) create, load or fork the
        session. Raises ``SpawnFailed``, ``HandshakeTimeout``, ``AuthRequired``, ``ResumeFailed``,
        ``UnsupportedFeature``, ``InvalidConfiguration``, ``ProtocolFailed``."""
        argv = launch_argv(installation, config)
        # the longest agent line accepted; longer ones become diagnostics
        max_line = int(config.get("max_line_bytes", DEFAULT_MAX_LINE_BYTES))
        process = await AgentProcess.start(
            argv, cwd=options.dir, env=launch_env(installation, config), max_line_bytes=max_line
        )
        conn = cls(process, link, installation, options)
        conn.resync_after_cancel = bool(config.get("resync_after_cancel", conn.resync_after_cancel))
        conn.stop_grace = float(config.get("stop_grace", STOP_GRACE))
        await conn.complete_handshake(
            lambda: conn._handshake(adapter, session), handshake_timeout, f"{installation.name}'s ACP handshake"
        )
        conn._opened = True
        return conn

    async def abandon(self, grace: float = 0.5) -> None:
        self.closing = True
        with anyio.CancelScope(shield=True):
            await self.rpc.close()
        await super().abandon(grace)

    async def _exited_detail(self) -> str:
        with anyio.move_on_after(EXIT_WAIT):
            await self.wait_output_done()
            await self.process.wait()
        await self.process.stderr_drained()
        return self.process.stderr_tail() or f"exited ({self.exit_status or 'unknown'})"

    async def _call(self, what: str, coro: Awaitable[T], *, resume: bool = False) -> T:
        """Await an ACP request of the handshake, turning failures into typed errors."""
        try:
            return await coro
        except ConnectionError:
            detail = await self._exited_detail()
            if resume:
                raise ResumeFailed(detail) from None
            raise SpawnFailed(f"{self.installation.name} exited during {what}: {detail}") from None
        except RequestError as err:
            if err.code == AUTH_REQUIRED:
                raise AuthRequired(
                    login_methods(self.installation.executable_path, self.init),
                    f"{self.installation.name} needs login: {err}",
                ) from None
            detail = f"{err}" + (f" ({err.data})" if err.data else "")
            if resume:
                raise ResumeFailed(f"{what} failed: {detail}") from None
            raise ProtocolFailed(f"{what} failed: {detail}") from None

    async def _handshake(self, adapter: AgentAdapter, session: bool) -> None:
        from . import __version__

        init = await self._call(
            "initialize",
            self.rpc.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=acp.ClientCapabilities(
                    fs=acp.FileSystemCapabilities(read_text_file=False, write_text_file=False),
                    terminal=False,
                    auth=acp.AuthCapabilities(terminal=True),
                ),
                client_info=acp.Implementation(name="anyagentd", title="anyagentd", version=__version__),
            ),
        )
        self.init = init
        caps = init.agent_capabilities or acp.AgentCapabilities()
        session_caps = caps.session_capabilities or acp.SessionCapabilities()
        state = self.state
        state.version = init.agent_info.version if init.agent_info else None
        features = ["Permissions", "Plan", "ContextUsage"]
        if caps.prompt_capabilities and caps.prompt_capabilities.image:
            features.append("Images")
        if caps.load_session:
            features.append("Resume")
        if session_caps.fork is not None:
            features.append("Fork")
        state.features = features
        supported = [
            "Stdio",
            *(["Http"] if caps.mcp_capabilities and caps.mcp_capabilities.http else []),
            *(["Sse"] if caps.mcp_capabilities and caps.mcp_capabilities.sse else []),
        ]
        state.mcp_transports = adapter.effective_mcp_transports(supported)
        self.details = state.details()
        if not session:
            return
        options = self.session_options
        if options.resume and (options.fork or options.fork_at):
            raise InvalidConfiguration("resume and fork are exclusive")
        if options.fork_at:
            raise UnsupportedFeature("ACP cannot fork at a message")
        if options.fork and session_caps.fork is None:
            raise UnsupportedFeature(f"{self.installation.name} cannot fork sessions")
        if options.resume and not caps.load_session:
            raise ResumeFailed(f"{self.installation.name} cannot load sessions (no loadSession capability)")
        servers = [r for _, r in adapter.render_mcp(options.mcp_servers, mcp_renderers(caps.mcp_capabilities))]
        self._mcp_servers = servers
        cwd = os.path.abspath(options.dir)
        if options.resume:
            self.mapper.suppress_content = True  # session/load replays the conversation: not re-emitted
            try:
                loaded = await self._call(
                    "session/load",
                    self.rpc.load_session(cwd=cwd, session_id=options.resume, mcp_servers=servers),
                    resume=True,
                )
            finally:
                self.mapper.suppress_content = False
            self.session_id = options.resume
            modes, config = (loaded.modes, loaded.config_options) if loaded is not None else (None, None)
        elif options.fork:
            forked = await self._call(
                "session/fork",
                self.rpc.fork_session(session_id=options.fork, cwd=cwd, mcp_servers=servers),
                resume=True,
            )
            self.session_id = forked.session_id
            modes, config = forked.modes, forked.config_options
        else:
            created = await self._call("session/new", self.rpc.new_session(cwd=cwd, mcp_servers=servers))
            self.session_id = created.session_id
            modes, config = created.modes, created.config_options
        self.resume_token = self.session_id
        if modes is not None:
            state.modes = modes
        if config is not None:
            state.config = list(config)
        self.details = state.details()
        for option_id, value in options.configure.items():
            await self._apply_option(option_id, value, during_open=True)

    # ------------------------------------------------------------------------------------------- incoming

    async def _intercept(self, message: dict[str, Any]) -> bool:
        if message.get("method") == "session/update" and "id" not in message:
            params = message.get("params")
            other = params.get("sessionId") if isinstance(params, dict) else None
            if isinstance(other, str) and self.session_id is not None and other != self.session_id:
                return True  # another session's update (agents may host several)
            self._updates += 1
            update = params.get("update") if isinstance(params, dict) else None
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            if self._cancelled is not None and kind in CHUNKS:
                return True  # the cancelled prompt's words, after the cancel: not the turn's any more
            await self.mapper.handle(params)
            return True
        return False

    def reports_exit(self) -> bool:
        return self._opened and not self.closing

    async def on_output_end(self) -> None:
        self._release_pending()

    async def ask_permission(
        self, tool_call: acp.ToolCallUpdate, options: list[acp.PermissionOption]
    ) -> acp.RequestPermissionResponse:
        """The agent's ``session/request_permission`` (its ``tool_call`` and ACP ``options``) as a Permission
        request to the engine; returns the selected option once answered, ``cancelled`` after a cancel, a close,
        or when no option maps to a choice. Waits for the answer (the library runs it as its own task)."""
        cancelled = acp.RequestPermissionResponse(outcome=acp.DeniedOutcome(outcome="cancelled"))
        if self.closing or self._cancel_requested:
            return cancelled
        choices: dict[str, str] = {}
        for option in options:
            choice = PERMISSION_KINDS.get(option.kind)
            if choice is not None and choice not in choices:
                choices[choice] = option.option_id
        if not choices:
            await self.link.emit(diagnostic("Warning", "the ACP agent asked permission without usable options"))
            return cancelled
        request_id = f"acp-perm-{next(self._request_ids)}"
        pending = self._pending.open(request_id, choices)
        tool = self.mapper.permission_tool(tool_call)
        await self.mapper.end_message()
        detail = "; ".join(f"{o.name} ({o.kind})" for o in options)
        request = PermissionRequest(id=request_id, tool=tool, options=list(choices), detail=detail)
        await self.link.emit(RequestOpened(value=PermissionRequested(value=request)))
        try:
            option_id = await pending.wait()
        finally:
            self._pending.withdraw(request_id)  # the library cancelled this handler: nobody waits for an answer
        if option_id is None:
            return cancelled
        return acp.RequestPermissionResponse(outcome=acp.AllowedOutcome(outcome="selected", option_id=option_id))

    def _release_pending(self) -> None:
        self._pending.cancel_all()  # each waiting ask_permission answers cancelled

    # ------------------------------------------------------------------------------------------- commands

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        if self.output_done:
            raise ProtocolFailed("the ACP agent has exited")
        caps = self.init.agent_capabilities if self.init else None
        blocks = prompt_blocks(prompt, caps.prompt_capabilities if caps else None)
        self._cancel_requested = False
        token = next(self._turn_tokens)
        self._running = token
        await self.mapper.new_turn()
        await self.link.turn_ack()
        self.link.start_soon(self._run_prompt, blocks, token)

    @property
    def _turn_running(self) -> bool:
        return self._running is not None

    def _finish(self, token: int) -> bool:
        """Mark the turn ``token`` ended; False when a later turn has started since (the engine ended a cancelled
        turn the agent had not ended)."""
        if self._running != token:
            return False
        self._running = None
        return True

    async def _run_prompt(self, blocks: list[ContentBlock], token: int) -> None:
        process = self.process
        self._turn_started_with = await anyio.to_thread.run_sync(cancelled_commands.snapshot, process.pid, process.mark)
        try:
            response = await self._prompt(blocks, token)
        except ConnectionError:
            return  # the agent exited: Exited ends the turn
        except RequestError as err:
            if not self._finish(token):
                return
            if err.code == AUTH_REQUIRED and not self._cancel_requested:
                await self.link.auth_lost(login_methods(self.installation.executable_path, self.init))
            else:
                detail = f"{err}" + (f" ({err.data})" if err.data else "")
                await self._end_turn(FailedStop(message=f"session/prompt failed: {detail}"))
            return
        except Exception as err:  # noqa: BLE001 - e.g. a response the schema refuses
            if self._finish(token):
                await self._end_turn(FailedStop(message=f"session/prompt failed: {err}"))
            return
        if not self._finish(token):
            return
        await self._end_turn(stop_reason(response.stop_reason))

    async def _end_turn(self, stop: StopReason) -> None:
        """Report the prompt's end: the tools the agent left open are ended first (``UpdateMapper.end_turn``),
        in a cancelled turn once the commands they left running are stopped (see the module doc)."""
        stopped: dict[str, cancelled_commands.Stopped] = {}
        commands = self.mapper.open_commands() if stop == "Cancelled" else {}
        if commands:
            process = self.process
            stopped = await cancelled_commands.stop_commands(
                process.pid, process.mark, commands, before=self._turn_started_with, grace=self.stop_grace
            )
        lingering = await self.mapper.end_turn(stop, stopped)
        for done in stopped.values():
            self.link.start_soon(lineage.reap, [p for p in done.pids if p not in done.survivors])
        for tool_id in lingering:
            self.link.start_soon(self._end_when_gone, tool_id, stopped[tool_id])
        await self.link.turn_ended(stop)

    async def _end_when_gone(self, tool_id: str, stopped: cancelled_commands.Stopped) -> None:
        await cancelled_commands.wait_gone(stopped.survivors)
        await self.mapper.end_lingering(tool_id, stopped)

    async def _prompt(self, blocks: list[ContentBlock], token: int) -> acp.PromptResponse:
        """``session/prompt`` once the agent is settled after a cancel (see the module doc); its response."""
        cancelled = self._cancelled
        if cancelled is not None:  # its words are dropped while we wait
            with anyio.move_on_after(SETTLE_LIMIT):
                await cancelled[1].wait()
            if self._cancelled is cancelled:
                self._cancelled = None
        watch, self._after_cancel = self._after_cancel, False
        if self._resync_pending:
            self._resync_pending = False
            await self._resync()
        before = self._updates
        try:
            response = await self.rpc.prompt(session_id=self.session_id, prompt=blocks)
        finally:
            if self._cancelled is not None and self._cancelled[0] == token:  # the cancelled prompt has answered
                self._cancelled[1].set()
                self._cancelled = None
        if watch and response.stop_reason == "end_turn" and self._updates == before and self._running == token:
            # The cancelled prompt's leftover end, not this prompt's: the agent still holds this prompt.
            await self.link.emit(
                diagnostic(
                    "Warning",
                    "the ACP agent ended the first prompt after a cancel at once "
                    "and empty; its session is reloaded and the prompt sent "
                    "again",
                )
            )
            self.resync_after_cancel = True
            await self._resync()
            response = await self.rpc.prompt(session_id=self.session_id, prompt=blocks)
        return response

    async def _resync(self) -> None:
        """Close the agent-side session and load it again (its history replay suppressed): a fresh session
        without what a cancelled prompt left behind. Failures are Warning diagnostics."""
        self.mapper.suppress_content = True
        try:
            await self.rpc.close_session(session_id=self.session_id)
            await self.rpc.load_session(
                cwd=os.path.abspath(self.session_options.dir), session_id=self.session_id, mcp_servers=self._mcp_servers
            )
        except (RequestError, ValidationError) as err:  # an agent without session/close, or refusing it
            await self.link.emit(diagnostic("Warning", f"could not reload the ACP session after a cancel: {err}"))
        finally:
            self.mapper.suppress_content = False

    @property
    def _can_resync(self) -> bool:
        caps = self.init.agent_capabilities if self.init else None
        session_caps = caps.session_capabilities if caps else None
        return bool(caps and caps.load_session and session_caps and session_caps.close is not None)

    async def answer(self, request_id: str, answer: Answer) -> None:
        # the engine validated the answer: a Permission choice among the options the request offered; the waiting
        # ask_permission sends the option selected (InvalidRequest when no such request is open)
        self._pending.answer(request_id, lambda item: item.data[cast(AnswerPermission, answer).value])

    async def cancel(self) -> None:
        self._cancel_requested = True
        if self._running is not None and self._cancelled is None:
            self._cancelled = (self._running, anyio.Event())
            self._after_cancel = True
            self._resync_pending = self.resync_after_cancel and self._can_resync
        if self.session_id is not None and not self.output_done:
            try:
                await self.rpc.cancel(session_id=self.session_id)
            except (ConnectionError, OSError):
                pass
        self._release_pending()

    async def configure(self, option: str, value: ConfigValue) -> None:
        kind = self.state.option_kind(option)
        if kind is None:
            raise InvalidConfiguration(f"option {option!r} cannot be changed live")
        self.link.start_soon(self._configure, option, value)

    async def _configure(self, option: str, value: ConfigValue) -> None:
        try:
            with anyio.fail_after(REQUEST_TIMEOUT):
                await self._apply_option(option, value)
        except (AnyagentError, TimeoutError, ConnectionError, RequestError) as err:
            reason = getattr(err, "message", None) or str(err) or "no answer"
            await self.link.emit(diagnostic("Warning", f"the ACP agent refused {option}={value!r}: {reason}"))
            return
        await self.link.info_changed(details=self.state.details(), configuration=self.state.configuration())

    async def _apply_option(self, option: str, value: ConfigValue, *, during_open: bool = False) -> None:
        kind = self.state.option_kind(option)
        if kind is None:
            raise InvalidConfiguration(f"unknown option {option!r}")
        spec = self.state.details().option(option)
        if spec is not None and not spec.accepts(value):
            raise InvalidConfiguration(f"value {value!r} does not fit option {option!r}")
        try:
            if kind == "mode":
                await self.rpc.set_session_mode(session_id=self.session_id, mode_id=str(value))
                self.state.set_mode(str(value))
            else:
                reply = await self.rpc.set_config_option(config_id=option, session_id=self.session_id, value=value)
                if reply is not None and reply.config_options:
                    self.state.config = list(reply.config_options)
                else:
                    self.state.config = [
                        o.model_copy(update={"current_value": value}) if o.id == option else o
                        for o in self.state.config
                    ]
        except RequestError as err:
            if during_open:
                raise InvalidConfiguration(f"the agent refused {option}={value!r}: {err}") from None
            raise
        self.details = self.state.details()

    async def close(self) -> None:
        self.closing = True
        if self._turn_running and not self.output_done:
            with anyio.move_on_after(INTERRUPT_ON_CLOSE):
                await self.cancel()
        self._release_pending()
        await self.rpc.close()
        await super().close()

    async def kill(self) -> None:
        self.closing = True
        self._release_pending()
        await super().kill()
        with anyio.move_on_after(1.0):
            await self.rpc.close()


__all__ = ["AcpConnection", "login_methods", "mcp_renderers", "prompt_blocks"]
