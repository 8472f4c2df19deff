"""One Codex session: the ``codex app-server`` process, its stdout pump, and the engine's commands as JSON-RPC.

:class:`CodexConnection` is created by :meth:`CodexConnection.open` (spawn, handshake ``initialize`` →
``initialized``, then ``account/read``, ``model/list``, ``config/read``, ``skills/list`` and ``thread/start`` |
``thread/resume`` | ``thread/fork`` written together and their answers read in that order; the resume token is the
thread id, known at open). Its stdout pump (run with
``link.start_soon``) routes every line by shape (:func:`.rpc.classify`): responses to our requests →
:class:`.rpc.RpcChannel`, server requests → Permission / Question requests, notifications →
:class:`.mapping.NotificationMapper`. When stdout ends it reports ``exited(status, stderr tail)``.

MCP servers forwarded at ``open`` (``-c mcp_servers.<name>...``) start in the background once the thread exists:
``thread/start`` is answered while they are ``starting``, and a turn whose model request Codex builds before a server
is ready runs without that server's tools (issue 32). Codex reports each server's startup for the thread with
``mcpServer/startupStatus/updated`` (``starting`` → ``ready`` | ``failed`` | ``cancelled``; Codex itself gives up on a
server after its ``startup_timeout_sec``, 30 s by default). Until every forwarded server is settled, or until the
handshake timeout after the spawn, prompts are held and sent then; a server that failed or was cancelled is a
Warning diagnostic naming it (with Codex's error), and so is one still starting at the deadline
(``docs/agents/codex.md#the-first-prompt-waits-for-the-servers``). What is pending, the held prompts and the Warning
texts are :class:`~anyagentd.adapters.mcp_startup.McpStartup`'s (:attr:`CodexConnection.mcp_startup`); this module
maps Codex's statuses (:data:`.protocol.MCP_STARTUP_STATUS`).

Commands (each returns promptly; outcomes arrive through the pump):

- StartTurn: ``turn/start`` with the live settings (model, effort, approval policy); its result → TurnAck, an error
  → TurnAck + TurnEnded(Failed). Held until the forwarded MCP servers are settled (above);
- Steer: ``turn/steer`` with ``expectedTurnId`` — only once the turn's ``turn/started`` arrived; a steer that
  comes earlier is held and sent then. Result → Steered(true), error or turn end first → Steered(false);
- Answer: the reply to the server request (``accept`` / ``acceptForSession`` / ``decline``; answers by question id);
- Cancel: a prompt still held for the MCP servers is dropped (TurnAck, then TurnEnded Cancelled: Codex never had
  it); otherwise open approvals answered ``cancel``, then ``turn/interrupt`` (sent once the turn id is known). Codex
  ends an interrupted turn without stopping the commands it runs: at ``turn/completed`` (interrupted) each command
  still running is found under the app-server by its command line and its process tree killed (sandbox wrapper
  included, :func:`anyagentd.adapters.lineage.stop_command`); one that cannot be stopped stays Running (listed
  in TurnEnded.background);
- Configure: ``model``, ``effort``, ``mode`` apply from the next ``turn/start``; reported at once;
- Compact: ``thread/compact/start`` (Codex runs it as a turn: ``contextCompaction`` item, ``turn/completed``);
- Close: ``turn/interrupt`` if a turn runs, stdin closed, SIGTERM / SIGKILL to the process group.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import TYPE_CHECKING, Any, cast

import anyio

from anyagentd.adapters import attachments, lineage
from anyagentd.adapters.connection import EXIT_WAIT, HANDSHAKE_TIMEOUT, INTERRUPT_ON_CLOSE, ProcessConnection
from anyagentd.adapters.interface import PromptInput
from anyagentd.adapters.jsonrpc import RpcChannel, RpcError, classify
from anyagentd.adapters.mcp_startup import McpStartup
from anyagentd.adapters.pending import PendingRequest
from anyagentd.adapters.process import AgentProcess, InputClosed, cli_version, json_frames
from anyagentd.errors import (
    AuthRequired,
    InvalidConfiguration,
    ProtocolFailed,
    ResumeFailed,
    SpawnFailed,
)
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    AnswerPermission,
    AnswerQuestion,
    Choice,
    Choices,
    Command,
    ConfigValue,
    FailedStop,
    PermissionRequest,
    PermissionRequested,
    Question,
    QuestionAsked,
    QuestionRequest,
    RequestOpened,
    SessionConfiguration,
    SessionOptions,
    TextAnswer,
    ToolUpdate,
    Unauthenticated,
    diagnostic,
)

from . import protocol as p
from .launch import (
    DEFAULT_MODE,
    DEFAULT_SANDBOX,
    agent_details,
    creation_settings,
    launch_argv,
    launch_env,
    login_methods,
    skill_commands,
    version_from_user_agent,
)
from .mapping import RAW, NotificationMapper, tool_update
from .state import ThreadState

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink

CLIENT_INFO = p.ClientInfo(name="anyagentd", title="anyagentd", version="0.1.0")


class CodexConnection(ProcessConnection):
    """A live Codex app-server session (see the module doc). Build with :meth:`open`."""

    deterministic_turn_end = True
    deterministic_agent_turn_end = True

    def __init__(
        self,
        process: AgentProcess,
        link: AdapterLink,
        *,
        installation: AgentInstallation,
        options: SessionOptions,
        settings: dict[str, Any],
        codex_home: str | None = None,
        owned_home: bool = False,
    ) -> None:
        super().__init__(process, link)
        self.installation = installation
        self.session_options = options
        self.state = ThreadState({"mode": DEFAULT_MODE, "sandbox": DEFAULT_SANDBOX, **settings})
        self.channel = RpcChannel(process.write_json)
        self.mapper = NotificationMapper(
            link, self.state, cwd=options.dir, login=login_methods(installation.executable_path)
        )
        self.details = AgentDetails()
        self.resume_token = None
        self.title = None
        self.codex_home = codex_home
        self._owned_home = owned_home
        self._skills: dict[str, str] = {}
        self.init_response: dict[str, Any] = {}
        self._mcp_transports: list[str] | None = None
        self._models: p.ModelListResponse | None = None
        self._account: p.GetAccountResponse | None = None
        self._skills_raw: Any = None
        self._version: str | None = None
        self.mcp_startup: McpStartup[PromptInput] = McpStartup()
        """The MCP servers forwarded at ``open``, their startup on the session's thread and the prompts held until
        they are settled (set by :meth:`open`)."""

    @property  # type: ignore[override]
    def configuration(self) -> SessionConfiguration:
        return SessionConfiguration(options={k: v for k, v in self.options.items() if v is not None})

    @property
    def options(self) -> dict[str, Any]:
        """The live settings (model, effort, mode, sandbox): the protocol state's, updated in place."""
        return self.state.options

    @property
    def thread_id(self) -> str:
        return self.state.thread_id

    # ------------------------------------------------------------------------------------------- opening

    @classmethod
    async def open(
        cls,
        installation: AgentInstallation,
        options: SessionOptions,
        link: AdapterLink,
        *,
        extra_args: list[str] | None = None,
        mcp: list[str] | None = None,
        codex_home: str | None = None,
        start_thread: bool = True,
        require_auth: bool = True,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        mcp_transports: list[str] | None = None,
    ) -> CodexConnection:
        """Spawn ``codex app-server`` and complete the handshake (and the thread unless ``start_thread`` is
        false, as for ``probe``). ``codex_home``: ``"per-session"`` (a fresh directory, removed at close) or a
        path for ``CODEX_HOME``; ``None`` leaves Codex's own default.

        Raises ``SpawnFailed``, ``HandshakeTimeout``, ``AuthRequired``, ``ResumeFailed`` (resume or fork refused),
        ``InvalidConfiguration``. With MCP servers (``options.mcp_servers``, rendered in ``mcp``) prompts are held
        until Codex reports them started, for at most ``handshake_timeout`` seconds after the spawn (see the module
        doc); ``open`` itself does not wait for them.
        """
        spawned = anyio.current_time()
        if options.resume and options.fork:
            raise InvalidConfiguration("resume and fork are exclusive")
        if options.fork_at and not options.fork:
            raise InvalidConfiguration("fork_at needs fork")
        settings = creation_settings(options)
        owned = codex_home == "per-session"
        home = tempfile.mkdtemp(prefix="anyagentd-codex-home-") if owned else codex_home
        argv = launch_argv(installation.executable_path, extra=extra_args, mcp=mcp)
        try:
            process = await AgentProcess.start(argv, cwd=options.dir, env=launch_env(installation, home))
        except BaseException:
            if owned and home:
                shutil.rmtree(home, ignore_errors=True)
            raise
        conn = cls(
            process,
            link,
            installation=installation,
            options=options,
            settings=settings,
            codex_home=home,
            owned_home=owned,
        )
        conn._mcp_transports = mcp_transports
        conn.mcp_startup = McpStartup(
            [server.name for server in options.mcp_servers],
            handshake_timeout,
            since=spawned,
            agent="Codex",
            waiting="starting",
            failure="did not start",
        )
        link.start_soon(conn._pump)
        await conn.complete_handshake(
            lambda: conn._handshake(require_auth, start_thread), handshake_timeout, "Codex's handshake"
        )
        if conn.mcp_startup.holding:
            link.start_soon(conn._settle_mcp)
        return conn

    async def _call(self, method: str, params: Any) -> Any:
        return await self._result(await self._send(method, params))

    async def _send(self, method: str, params: Any) -> int:
        """Write a handshake request without waiting for its result (:meth:`_result`); ``SpawnFailed`` when the
        app-server's input is gone."""
        try:
            return await self.channel.send(method, params)
        except InputClosed:
            raise await self._gone("its input closed") from None

    async def _result(self, request_id: int) -> Any:
        """The result of a handshake request; ``RpcError`` for an error answer, ``SpawnFailed`` when the app-server
        went away first."""
        try:
            return await self.channel.wait(request_id)
        except RpcError as err:
            if self.output_done or err.code is None:
                raise await self._gone(err.message) from None
            raise

    async def _gone(self, fallback: str) -> SpawnFailed:
        """The error for an app-server that went away during the handshake: its exit status (waited for, up to
        ``EXIT_WAIT``: the output can end before the exit is reaped) and its last stderr lines, e.g.
        ``exit status: 127`` and ``/usr/bin/env: 'node': No such file or directory``."""
        with anyio.move_on_after(EXIT_WAIT):
            self.exit_status = await self.process.wait()
        await self.process.stderr_drained()
        detail = self.process.stderr_tail() or fallback
        if self.exit_status is None:
            return SpawnFailed(f"Codex stopped answering during the handshake: {detail}")
        return SpawnFailed(f"Codex exited during the handshake ({self.exit_status}): {detail}")

    async def _handshake(self, require_auth: bool, start_thread: bool) -> None:
        try:
            init = await self._call(p.M_INITIALIZE, p.InitializeParams(clientInfo=CLIENT_INFO).params())
        except RpcError as err:
            raise ProtocolFailed(f"initialize failed: {err.message}") from None
        self.init_response = init if isinstance(init, dict) else {}
        await self.channel.notify(p.M_INITIALIZED)
        # The reads and the thread are asked for at once, then their results taken in this order: one round trip
        # before the first prompt instead of five (none of these requests needs another's result).
        cwd = self.session_options.dir
        account_id = await self._send(p.M_ACCOUNT_READ, p.GetAccountParams().params())
        models_id = await self._send(p.M_MODEL_LIST, p.ModelListParams().params())
        config_id = await self._send(p.M_CONFIG_READ, p.ConfigReadParams(cwd=cwd).params())
        skills_id = await self._send(p.M_SKILLS_LIST, p.SkillsListParams(cwds=[cwd]).params())
        thread = await self._start_thread() if start_thread else None
        account = None
        try:
            account = p.GetAccountResponse.model_validate(await self._result(account_id))
        except (RpcError, ValueError):
            account = None
        models = None
        try:
            models = p.ModelListResponse.model_validate(await self._result(models_id))
        except (RpcError, ValueError):
            models = None
        try:
            config = p.ConfigReadResponse.model_validate(await self._result(config_id)).config
            if config.model and not self.options.get("model"):
                self.options["model"] = config.model
            if config.model_reasoning_effort and not self.options.get("effort"):
                self.options["effort"] = config.model_reasoning_effort
        except (RpcError, ValueError):
            pass
        skills = None
        try:
            skills = await self._result(skills_id)
        except RpcError:
            skills = None
        _, self._skills = skill_commands(skills)
        self._models, self._account, self._skills_raw = models, account, skills
        version = version_from_user_agent(self.init_response.get("userAgent"))
        version = version or await cli_version(self.installation.executable_path)
        self._version = version
        self._refresh_details()
        if require_auth and isinstance(self.details.auth, Unauthenticated):
            raise AuthRequired(login_methods(self.installation.executable_path), "Codex is not logged in")
        if thread is not None:
            await self._thread_opened(*thread)

    def _refresh_details(self) -> None:
        self.details = agent_details(
            version=self._version,
            account=self._account,
            models=self._models,
            skills=self._skills_raw,
            executable=self.installation.executable_path,
            current=self.options,
            mcp_transports=self._mcp_transports,
        )

    async def _start_thread(self) -> tuple[str, int]:
        """Send ``thread/start`` | ``thread/resume`` | ``thread/fork``; returns (method, request id) for
        :meth:`_thread_opened`. The model is the caller's only (``None``: the one Codex's config names, which
        ``config/read`` reports at the same time)."""
        options = self.session_options
        common = {
            "cwd": options.dir,
            "model": self.options.get("model"),
            "approvalPolicy": self.options["mode"],
            "sandbox": self.options["sandbox"],
        }
        if options.resume:
            method, params = p.M_THREAD_RESUME, p.ThreadResumeParams(threadId=options.resume, **common)
        elif options.fork:
            method, params = (
                p.M_THREAD_FORK,
                p.ThreadForkParams(threadId=options.fork, lastTurnId=options.fork_at, **common),
            )
        else:
            method, params = p.M_THREAD_START, p.ThreadStartParams(**common)
        return method, await self._send(method, params.params())

    async def _thread_opened(self, method: str, request_id: int) -> None:
        """Take the thread from the answer to :meth:`_start_thread`'s request. Raises ``ResumeFailed`` (a resume or
        fork refused), ``ProtocolFailed``."""
        options = self.session_options
        try:
            result = await self._result(request_id)
        except RpcError as err:
            if options.resume or options.fork:
                raise ResumeFailed(f"Codex refused {method}: {err.message}") from None
            raise ProtocolFailed(f"{method} failed: {err.message}") from None
        opened = p.ThreadOpened.model_validate(result)
        self.state.thread_id = opened.thread.id
        self.resume_token = opened.thread.id
        self.title = opened.thread.name
        if opened.model:
            self.options["model"] = opened.model
        if opened.reasoningEffort and not self.options.get("effort"):
            self.options["effort"] = opened.reasoningEffort
        self._refresh_details()

    # ------------------------------------------------------------------------------------------- MCP servers

    async def _on_mcp_startup(self, params: Any) -> None:
        """``mcpServer/startupStatus/updated`` for a forwarded server on the session's thread (any thread while the
        thread id is not known yet: the app-server has no other): report it to :attr:`mcp_startup`; a server that
        failed or was cancelled is a Warning diagnostic; the last forwarded server to settle releases the held
        prompts."""
        startup = self.mcp_startup
        if not isinstance(params, dict) or params.get("name") not in startup.servers:
            return
        thread = params.get("threadId")
        if self.state.thread_id and thread and thread != self.state.thread_id:
            return  # a subagent's thread
        name, status = str(params["name"]), str(params.get("status"))
        warning = startup.settle(name, p.MCP_STARTUP_STATUS.get(status, "pending"), params.get("error") or status)
        if warning is not None:
            await self.link.emit(diagnostic("Warning", warning))

    async def _settle_mcp(self) -> None:
        """Wait until no forwarded MCP server is starting, or until :attr:`mcp_startup`'s deadline (then a Warning
        names those still starting), then send the held prompts."""
        late = await self.mcp_startup.settled()
        if late is not None and not self.output_done:
            await self.link.emit(diagnostic("Warning", late))
        await self.mcp_startup.release(self._send_turn)

    # ------------------------------------------------------------------------------------------- stdout

    async def _pump(self) -> None:
        try:
            async for frame in json_frames(self.process, self.link, agent="Codex", raw_key=RAW):
                try:
                    await self._dispatch(frame)
                except Exception as exc:  # noqa: BLE001 - never crash on a frame
                    await self.link.emit(
                        diagnostic("Info", f"could not handle a Codex frame ({type(exc).__name__}: {exc})"),
                        extensions={RAW: frame},
                    )
        finally:
            await self.output_ended()

    async def on_output_end(self) -> None:
        await self.channel.close("Codex's output ended")
        self.mcp_startup.stop()  # nothing will start any more

    async def _dispatch(self, frame: Any) -> None:
        shape = classify(frame)
        if shape == "response":
            if not await self.channel.resolve(frame):
                await self.link.emit(
                    diagnostic("Info", "Codex answered a request we did not send"), extensions={RAW: frame}
                )
        elif shape == "request":
            await self._incoming(frame)
        elif shape == "notification":
            method = frame["method"]
            params = frame.get("params")
            state = self.state
            if method == p.N_MCP_STARTUP:
                await self._on_mcp_startup(params)
            if method == p.N_TURN_COMPLETED and state.is_session_turn(params):
                if state.turn_ending() is not None:
                    await self.link.steered(False)
                if (params.get("turn") or {}).get("status") == "interrupted":
                    state.survivors = await self._stop_commands()
            await self.mapper.handle(method, params, frame)
            if method == p.N_TURN_STARTED and state.is_session_turn(params) and state.held_steer is not None:
                held, state.held_steer = state.held_steer, None
                await self._send_steer(held)
            if method == p.N_TURN_STARTED and state.is_session_turn(params) and state.cancel_requested:
                await self._interrupt()
        else:
            await self.link.emit(
                diagnostic("Info", "Codex wrote a frame that is not JSON-RPC"), extensions={RAW: frame}
            )

    async def _stop_commands(self) -> set[str]:
        """Kill the process trees of the commands still running at an interrupt; the tool ids of those that
        could not be stopped. Each search reads all of ``/proc`` (tens of ms with a thousand processes): it runs in
        a worker thread, shielded, so the loop serving every session does not stall and a kill is not lost."""
        survivors = set()
        for tool_id, update in list(self.state.tools.items()):
            if update.status not in ("Pending", "Running") or not isinstance(update.input, Command):
                continue
            with anyio.CancelScope(shield=True):
                killed = await anyio.to_thread.run_sync(lineage.stop_command, self.process.pid, update.input.command)
            if killed:
                self.link.start_soon(lineage.reap, killed)  # orphans of the killed tree may re-parent to us
            elif killed is not None:
                survivors.add(tool_id)  # found, but could not be signalled
        return survivors

    # ------------------------------------------------------------------------------------------- requests

    async def _incoming(self, frame: dict[str, Any]) -> None:
        method, rpc_id = frame["method"], frame["id"]
        params = frame.get("params") if isinstance(frame.get("params"), dict) else {}
        request_id = str(rpc_id)
        parent = self.state.parent_of(params.get("threadId") or params.get("conversationId"))
        if method == p.M_COMMAND_APPROVAL:
            req = p.CommandApprovalParams.model_validate(params)
            tool = self.state.tools.get(req.itemId) or tool_update(
                {
                    "type": "commandExecution",
                    "id": req.itemId,
                    "command": req.command or "",
                    "cwd": req.cwd,
                    "commandActions": params.get("commandActions"),
                    "status": "inProgress",
                },
                self.session_options.dir,
            )
            tool = tool.model_copy(update={"status": "Pending"})
            decisions = params.get("availableDecisions")
            options = ["AllowOnce"]
            if (
                decisions is None
                or "acceptForSession" in decisions
                or _amendment(decisions)
                or req.proposedExecpolicyAmendment
            ):
                options.append("AllowAlways")
            options.append("DenyOnce")
            await self._open_permission("command", rpc_id, params, tool, options, req.reason, parent)
        elif method == p.M_FILE_APPROVAL:
            req = p.FileChangeApprovalParams.model_validate(params)
            tool = self.state.tools.get(req.itemId) or ToolUpdate(id=req.itemId, kind="Edit", title="Edit files")
            tool = tool.model_copy(update={"status": "Pending"})
            await self._open_permission(
                "file", rpc_id, params, tool, ["AllowOnce", "AllowAlways", "DenyOnce"], req.reason, parent
            )
        elif method in (p.M_LEGACY_EXEC_APPROVAL, p.M_LEGACY_PATCH_APPROVAL):
            call_id = str(params.get("callId") or params.get("approvalId") or request_id)
            if method == p.M_LEGACY_EXEC_APPROVAL:
                command = params.get("command")
                text = " ".join(command) if isinstance(command, list) else str(command or "")
                tool = tool_update(
                    {"type": "commandExecution", "id": call_id, "command": text, "cwd": params.get("cwd")},
                    self.session_options.dir,
                )
            else:
                changes = params.get("fileChanges") if isinstance(params.get("fileChanges"), dict) else {}
                tool = ToolUpdate(id=call_id, kind="Edit", title="Edit " + ", ".join(changes), locations=list(changes))
            tool = tool.model_copy(update={"status": "Pending"})
            await self._open_permission(
                "legacy", rpc_id, params, tool, ["AllowOnce", "AllowAlways", "DenyOnce"], params.get("reason"), parent
            )
        elif method == p.M_USER_INPUT:
            req = p.UserInputParams.model_validate(params)
            questions = []
            for q in req.questions:
                choices = [
                    Choice(id=o.label, label=o.label, description=o.description or None) for o in q.options or []
                ]
                questions.append(
                    Question(
                        id=q.id,
                        text=q.question,
                        header=q.header or None,
                        choices=choices,
                        allows_free_text=q.isOther or not choices,
                    )
                )
            self.state.requests.open(request_id, params, kind="question", agent_id=rpc_id)
            await self.link.emit(
                RequestOpened(value=QuestionAsked(value=QuestionRequest(id=request_id, questions=questions))),
                parent_tool_id=parent,
            )
        elif method == p.M_ELICITATION:
            await self._reply(rpc_id, {"action": "decline", "content": None})
            await self.link.emit(
                diagnostic("Info", "declined an MCP elicitation request (not supported)"), extensions={RAW: frame}
            )
        else:
            try:
                await self.channel.reply_error(rpc_id, -32601, f"anyagentd does not handle {method}")
            except InputClosed:
                pass
            await self.link.emit(
                diagnostic("Info", f"refused Codex's {method!r} request (not supported)"), extensions={RAW: frame}
            )

    async def _open_permission(
        self,
        kind: str,
        rpc_id: object,
        params: dict[str, Any],
        tool: ToolUpdate,
        options: list[str],
        detail: str | None,
        parent: str | None,
    ) -> None:
        request_id = str(rpc_id)
        self.state.requests.open(request_id, params, kind=kind, agent_id=rpc_id)
        request = PermissionRequest(id=request_id, tool=tool, options=options, detail=detail)  # type: ignore[arg-type]
        await self.link.emit(RequestOpened(value=PermissionRequested(value=request)), parent_tool_id=parent)

    async def _reply(self, rpc_id: object, result: Any) -> bool:  # the request's JSON-RPC id, a JSON result
        try:
            await self.channel.reply(rpc_id, result)
            return True
        except InputClosed:
            return False

    # ------------------------------------------------------------------------------------------- commands

    def turn_input(self, prompt: PromptInput) -> list[dict[str, Any]]:
        """``UserInput`` items for a prompt: a ``skill`` item when it starts with ``/<skill>``, the text, then
        attachments (image files → ``localImage``, image URLs → ``image``, anything else mentioned by path)."""
        items: list[dict[str, Any]] = []
        text = prompt.text
        if text.startswith("/"):
            name = text[1:].split(maxsplit=1)[0] if len(text) > 1 else ""
            if name in self._skills:
                items.append({"type": "skill", "name": name, "path": self._skills[name]})
                text = "$" + text[1:]
        mentions = []
        images = []
        for attachment in attachments.classify(prompt.attachments, max_image_bytes=None):
            if attachment.kind == "image_url":
                images.append({"type": "image", "url": attachment.item})
            elif attachment.kind == "image_file":
                images.append({"type": "localImage", "path": attachment.path})
            else:
                mentions.append(attachment.item)
        if mentions:
            text += "\n\nAttached: " + ", ".join(mentions)
        items.append(p.TextInput(text=text).params())
        return items + images

    def _turn_params(self, prompt: PromptInput) -> dict[str, Any]:
        return p.TurnStartParams(
            threadId=self.thread_id,
            input=self.turn_input(prompt),
            model=self.options.get("model"),
            effort=self.options.get("effort"),
            approvalPolicy=self.options.get("mode"),
        ).params()

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        if self.mcp_startup.holding:
            self.state.turn_requested()  # a steer meanwhile is held for the turn, as before turn/started
            waits = self.mcp_startup.hold(prompt)  # sent by _settle_mcp
            if waits:
                await self.link.emit(diagnostic("Info", waits))
            return
        await self._send_turn(prompt)

    async def _send_turn(self, prompt: PromptInput) -> None:
        """Send ``turn/start`` for ``prompt`` (its result or error comes to :meth:`_on_turn_start`). Raises
        ``ProtocolFailed`` when the app-server's input is closed."""
        self.state.turn_requested()
        try:
            await self.channel.send(p.M_TURN_START, self._turn_params(prompt), callback=self._on_turn_start)
        except InputClosed:
            self.state.requested = False
            raise ProtocolFailed("Codex's input is closed") from None

    async def _on_turn_start(self, result: Any, error: RpcError | None) -> None:
        if error is not None:
            held = self.state.turn_refused()
            await self.link.turn_ack()
            if held is not None:
                await self.link.steered(False)
            await self.link.turn_ended(_failed(f"Codex refused the turn: {error.message}"))
            return
        turn = result.get("turn") if isinstance(result, dict) else None
        if isinstance(turn, dict) and isinstance(turn.get("id"), str) and self.state.turn_id is None:
            self.state.turn_id = turn["id"]
        await self.link.turn_ack()
        if self.state.cancel_requested:
            await self._interrupt()

    async def steer(self, prompt: PromptInput) -> None:
        if self.state.turn_started and self.state.turn_id:
            await self._send_steer(prompt)
        elif self.state.requested:
            self.state.held_steer = prompt  # sent when turn/started arrives
        else:
            await self.link.steered(False)

    async def _send_steer(self, prompt: PromptInput) -> None:
        params = p.TurnSteerParams(
            threadId=self.thread_id, expectedTurnId=str(self.state.turn_id), input=self.turn_input(prompt)
        ).params()

        async def done(result: Any, error: RpcError | None) -> None:
            await self.link.steered(error is None)
            if error is not None:
                await self.link.emit(diagnostic("Info", f"Codex refused the steer: {error.message}"))

        try:
            await self.channel.send(p.M_TURN_STEER, params, callback=done)
        except InputClosed:
            await self.link.steered(False)

    async def answer(self, request_id: str, answer: Answer) -> None:
        # the engine validated the answer against the request (its kind, the choices offered)
        def result(item: PendingRequest[dict[str, Any]]) -> dict[str, Any]:
            if item.kind == "question":
                return question_response(cast(AnswerQuestion, answer), item.data)
            choice = cast(AnswerPermission, answer).value
            return {"decision": permission_decision(item.kind, choice, item.data)}

        pending = self.state.requests.answer(request_id, result)  # InvalidRequest when not open
        if not await self._reply(pending.agent_id, pending.reply):
            raise ProtocolFailed("Codex's input is closed")

    async def cancel(self) -> None:
        if self.mcp_startup.drop():  # Codex never had the prompt: it ends here
            steer = self.state.turn_refused()
            await self.link.turn_ack()
            if steer is not None:
                await self.link.steered(False)
            await self.link.turn_ended("Cancelled")
            return
        for item in self.state.cancel_requests(cancel_result):
            await self._reply(item.agent_id, item.reply)
        if self.state.turn_id:
            await self._interrupt()
        # else: interrupted once turn/start's result (or turn/started) names the turn

    async def _interrupt(self) -> None:
        turn_id = self.state.turn_id
        if not turn_id:
            return
        params = p.TurnInterruptParams(threadId=self.thread_id, turnId=turn_id).params()

        async def done(result: Any, error: RpcError | None) -> None:
            if error is not None and not self.closing:
                await self.link.emit(diagnostic("Info", f"Codex refused turn/interrupt: {error.message}"))

        try:
            await self.channel.send(p.M_TURN_INTERRUPT, params, callback=done)
        except InputClosed:
            pass

    async def configure(self, option: str, value: ConfigValue) -> None:
        if option not in ("model", "effort", "mode"):
            raise InvalidConfiguration(f"option {option!r} cannot be changed live")
        if not isinstance(value, str) or not value:
            raise InvalidConfiguration(f"{option} must be a non-empty string")
        await self.mapper.set_options(**{option: value})
        self._refresh_details()

    async def compact(self) -> None:
        self.state.turn_requested()

        async def done(result: Any, error: RpcError | None) -> None:
            if error is not None:
                self.state.requested = False
                await self.link.turn_ended(_failed(f"Codex refused to compact: {error.message}"))

        try:
            await self.channel.send(
                p.M_COMPACT, p.ThreadCompactStartParams(threadId=self.thread_id).params(), callback=done
            )
        except InputClosed:
            raise ProtocolFailed("Codex's input is closed") from None

    async def close(self) -> None:
        self.closing = True
        self.mcp_startup.drop()
        if self.state.turn_id and not self.output_done:
            with anyio.move_on_after(INTERRUPT_ON_CLOSE):
                await self._interrupt()
        await super().close()

    async def release(self) -> None:
        """Remove the per-session ``CODEX_HOME`` this connection made."""
        self._remove_home()

    def _remove_home(self) -> None:
        if self._owned_home and self.codex_home:
            shutil.rmtree(self.codex_home, ignore_errors=True)
            self._owned_home = False


# ------------------------------------------------------------------------------------------------ replies


def _amendment(decisions: Any) -> Any:
    for d in decisions or []:
        if isinstance(d, dict) and "acceptWithExecpolicyAmendment" in d:
            return d["acceptWithExecpolicyAmendment"]
    return None


def permission_decision(kind: str, choice: str, params: dict[str, Any]) -> Any:
    """The ``decision`` for a permission answer.

    v2 approvals: AllowOnce → ``accept``; AllowAlways → ``acceptForSession`` (for a command whose
    ``availableDecisions`` does not offer it, ``acceptWithExecpolicyAmendment`` with the proposed amendment);
    DenyOnce/DenyAlways → ``decline`` (the turn goes on); ``Cancel`` (our cancel) → ``cancel``. Legacy
    ``execCommandApproval``/``applyPatchApproval``: ``approved`` / ``approved_for_session`` / ``denied`` /
    ``abort``.
    """
    if kind == "legacy":
        return {"AllowOnce": "approved", "AllowAlways": "approved_for_session", "Cancel": "abort"}.get(choice, "denied")
    if choice == "AllowOnce":
        return "accept"
    if choice == "AllowAlways":
        decisions = params.get("availableDecisions")
        if kind == "command" and decisions is not None and "acceptForSession" not in decisions:
            amendment = _amendment(decisions)
            proposed = params.get("proposedExecpolicyAmendment")
            if amendment is None and isinstance(proposed, list):
                amendment = {"execpolicy_amendment": proposed}
            if amendment is not None:
                return {"acceptWithExecpolicyAmendment": amendment}
        return "acceptForSession"
    if choice == "Cancel":
        return "cancel"
    return "decline"


def cancel_result(item: PendingRequest[dict[str, Any]]) -> dict[str, Any]:
    """The reply to an open server request at a cancel: no answers for a question, the ``Cancel`` decision of its
    kind for an approval (:meth:`~anyagentd.adapters.pending.PendingRequests.cancel_all`'s ``reply``)."""
    if item.kind == "question":
        return {"answers": {}}
    return {"decision": permission_decision(item.kind, "Cancel", item.data)}


def question_response(answer: AnswerQuestion, params: dict[str, Any]) -> dict[str, Any]:
    """``{"answers": {question id: {"answers": [labels or text]}}}`` — answers in question order."""
    questions = params.get("questions") if isinstance(params.get("questions"), list) else []
    answers: dict[str, Any] = {}
    for question, value in zip(questions, answer.value, strict=False):
        qid = str(question.get("id")) if isinstance(question, dict) else ""
        if isinstance(value, Choices):
            answers[qid] = {"answers": list(value.value)}
        elif isinstance(value, TextAnswer):
            answers[qid] = {"answers": [value.value]}
    return {"answers": answers}


def _failed(message: str) -> Any:
    return FailedStop(message=message)


__all__ = ["CodexConnection", "permission_decision", "question_response"]
