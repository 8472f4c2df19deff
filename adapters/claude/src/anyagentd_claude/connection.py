"""One Claude Code session: the CLI process, its stdout pump, and the engine's commands as stream-json frames.

:class:`ClaudeConnection` is created by :meth:`ClaudeConnection.open` (spawn + ``initialize`` handshake). Its
stdout pump (run with ``link.start_soon``) routes every line: ``control_response`` → :class:`ControlChannel`,
``control_request`` → requests (``can_use_tool`` → Permission or Question; anything else is answered success
and noted as an Info diagnostic), everything else → :class:`FrameMapper`. When stdout ends it reports
``exited(status, stderr tail)``.

MCP servers forwarded at ``open`` (``--mcp-config``) connect in the background: the CLI answers ``initialize``
before they are up, and a prompt it gets while one is still ``pending`` runs without that server's tools ("No such
tool available", issue 32). The CLI sends no notification when a server connects, so the connection asks
``mcp_status`` (first with the handshake, then every :data:`MCP_STATUS_INTERVAL` seconds while a forwarded server is
``pending``) until every forwarded server is settled (``connected``, ``failed``, ``needs-auth``, ``disabled``), or
until the handshake timeout after the spawn; then it sends the prompts held meanwhile. A server that did not connect
is a Warning diagnostic naming it (with the CLI's error, for ``failed``); so is one still pending at the deadline.
What is pending, the held prompts and the Warning texts are :class:`~anyagentd.adapters.mcp_startup.McpStartup`'s
(:attr:`ClaudeConnection.mcp_startup`); this module asks and maps the CLI's statuses.

The protocol state the connection and the mapper share (the turn, the session id, the options, the tool
snapshots, the open requests) is one :class:`~.state.ClaudeState`, :attr:`ClaudeConnection.state`.

Commands (each returns promptly):

- StartTurn: one ``user`` frame with a fresh uuid, then TurnAck (the CLI handles its input in order, one
  ``result`` per user frame). Until the forwarded MCP servers are settled (above) the frame is held, and written
  (then TurnAck) once they are. When an interrupted turn has not had its ``result`` yet (the engine ended a
  cancelled turn the CLI never confirmed), the TurnAck waits for that result: what comes before it is the old
  turn's;
- Answer: the ``can_use_tool`` reply (:mod:`.permissions` builds it; the open requests are
  :attr:`ClaudeState.requests <.state.ClaudeState.requests>`, the toolkit's
  :class:`~anyagentd.adapters.pending.PendingRequests`);
- Cancel: ``interrupt``, then pending permission requests denied (with ``interrupt: true``). A prompt still held
  for the MCP servers is dropped instead (TurnAck, then TurnEnded Cancelled: the CLI never had it);
- Configure: ``set_permission_mode`` (mode) / ``set_model`` (model); the applied value is reported with
  ``info_changed(configuration=...)`` once the CLI confirms, a refusal as a Warning diagnostic;
- Compact: the user message ``/compact`` (the engine runs it as an agent-originated turn); the CLI reports
  ``compact_boundary`` (→ ContextCompacted) and a ``result``;
- Rollback: ``rewind_files`` (ConversationAndFiles) then ``rewind_conversation`` to the uuid of the prompt
  ``turns`` back. Only prompts sent by this process can be targeted, and Claude Code 2.1.197 refuses to rewind
  past the first prompt ("no preceding assistant");
- Close: ``interrupt`` if a turn runs (the CLI otherwise waits up to 30 s for it on EOF), then stdin closed,
  SIGTERM / SIGKILL to the process group after ``CLOSE_STEP`` seconds each (the interrupt gets
  ``INTERRUPT_ON_CLOSE`` seconds)
  (:class:`~anyagentd.adapters.connection.ProcessConnection`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from anyagentd.adapters.attachments import classify
from anyagentd.adapters.connection import HANDSHAKE_TIMEOUT, INTERRUPT_ON_CLOSE, REQUEST_TIMEOUT, ProcessConnection
from anyagentd.adapters.interface import PromptInput
from anyagentd.adapters.mcp_startup import McpStartup
from anyagentd.adapters.process import AgentProcess, InputClosed, cli_version, json_frames
from anyagentd.errors import (
    AuthRequired,
    HandshakeTimeout,
    InvalidConfiguration,
    InvalidRequest,
    ProtocolFailed,
    ResumeFailed,
    SpawnFailed,
)
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    ConfigValue,
    McpServer,
    RollbackScope,
    SessionConfiguration,
    SessionOptions,
    diagnostic,
)

from . import control, permissions
from .launch import MCP_TRANSPORTS, agent_details, is_authenticated, launch_argv, launch_env, login_methods
from .mapping import RAW, FrameMapper
from .state import ClaudeState

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink

MCP_STATUS_INTERVAL = 0.1
"""Seconds between two ``mcp_status`` requests while a forwarded MCP server is ``pending`` (Claude Code 2.1.197
reports a server's connection in no frame before the first prompt's ``system/init``; ``mcp_status`` answers at once
with each server's current ``status``: ``docs/agents/claude.md#the-first-prompt-waits-for-the-servers``)."""

MCP_SETTLED = ("connected", "failed", "needs-auth", "disabled")
"""The ``mcp_status`` statuses of a server that is done connecting (the other one is ``pending``)."""


class ClaudeConnection(ProcessConnection):
    """A live Claude Code session (see the module doc). Build with :meth:`open`."""

    deterministic_turn_end = True
    deterministic_agent_turn_end = True

    def __init__(
        self,
        process: AgentProcess,
        link: AdapterLink,
        *,
        installation: AgentInstallation,
        options: SessionOptions,
        session_token: str,
    ) -> None:
        super().__init__(process, link)
        self.installation = installation
        self.session_options = options
        self.state = ClaudeState({"mode": "default", "model": "default", **options.configure}, session_token)
        """The session's protocol state, shared with :attr:`mapper` (see the module doc)."""
        self.title = None
        self.channel = control.ControlChannel(process.write_json)
        self.mapper = FrameMapper(link, self.state, cwd=options.dir, login=login_methods(installation.executable_path))
        self.init_response: dict[str, Any] = {}
        self.details = AgentDetails()
        self.mcp_transports: list[str] = list(MCP_TRANSPORTS)
        self.mcp_startup: McpStartup[dict[str, Any]] = McpStartup()
        """The MCP servers forwarded in ``--mcp-config`` and the user frames held until they are settled (set by
        :meth:`open`)."""
        self._mcp_request: str | None = None  # the mcp_status request sent with the handshake

    @property
    def options(self) -> dict[str, Any]:
        """The live configuration values (:attr:`state`'s)."""
        return self.state.options

    @property  # type: ignore[override]
    def resume_token(self) -> str | None:
        """The CLI's session id (:attr:`state`'s; a ``system/init`` naming another one changes it)."""
        return self.state.session_id

    @property  # type: ignore[override]
    def configuration(self) -> SessionConfiguration:
        return SessionConfiguration(options=dict(self.options))

    # ------------------------------------------------------------------------------------------- opening

    @classmethod
    async def open(
        cls,
        installation: AgentInstallation,
        options: SessionOptions,
        link: AdapterLink,
        *,
        no_tools: bool = False,
        persist: bool = True,
        require_auth: bool = True,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        mcp: Sequence[tuple[McpServer, Any]] | None = None,
        mcp_transports: Sequence[str] = MCP_TRANSPORTS,
    ) -> ClaudeConnection:
        """Spawn Claude Code for ``options`` and complete the ``initialize`` handshake.

        ``link.start_soon`` runs the stdout pump. Raises ``SpawnFailed`` (cannot start, or exited before the
        handshake), ``ResumeFailed`` (a resume/fork the CLI refused), ``HandshakeTimeout``, ``AuthRequired``
        (``require_auth`` and no credentials), ``InvalidConfiguration`` (bad creation options). ``mcp``: the
        servers as ``AgentAdapter.render_mcp`` rendered them; ``mcp_transports``: what ``details`` advertises.

        With ``mcp``, prompts are held until Claude Code reports those servers settled, for at most
        ``handshake_timeout`` seconds after the spawn (see the module doc); ``open`` itself does not wait for them.
        """
        spawned = anyio.current_time()
        token = options.resume or str(uuid.uuid4())
        argv = launch_argv(
            installation.executable_path, options, session_id=token, no_tools=no_tools, persist=persist, mcp=mcp
        )
        process = await AgentProcess.start(argv, cwd=options.dir, env=launch_env(installation))
        conn = cls(process, link, installation=installation, options=options, session_token=token)
        conn.mcp_transports = list(mcp_transports)
        conn.mcp_startup = McpStartup(
            [server.name for server, _ in mcp or ()], handshake_timeout, since=spawned, agent="Claude Code"
        )
        link.start_soon(conn._pump)
        try:
            await conn._handshake(handshake_timeout, require_auth)
        except BaseException:
            await conn.abandon()
            raise
        if conn.mcp_startup.holding:
            link.start_soon(conn._settle_mcp)
        return conn

    async def _handshake(self, timeout: float, require_auth: bool) -> None:
        # Both requests are written at once: the CLI reads its input only once it has started, then answers both
        # together; asking for the version after the initialize answer cost a round trip before the first prompt.
        options = self.session_options
        try:
            with anyio.fail_after(timeout):
                init_request = await self.channel.send("initialize")
                version_request = await self.channel.send("get_binary_version")
                if self.mcp_startup.servers:
                    self._mcp_request = await self.channel.send("mcp_status")
                init = await self.channel.wait(init_request)
        except TimeoutError:
            raise HandshakeTimeout(f"Claude Code did not answer initialize within {timeout:g} s") from None
        except (control.ControlError, InputClosed) as err:
            # ControlError: it answered with an error or its stdout ended; the others: it was already gone when
            # initialize was written (a binary that exits at once).
            await self.process.stderr_drained()
            if not isinstance(err, control.ControlError):
                status = await self.process.wait()
                detail = self.process.stderr_tail() or "no output"
                if options.resume or options.fork:
                    raise ResumeFailed(detail) from None
                raise SpawnFailed(f"Claude Code exited during the handshake ({status}): {detail}") from None
            detail = self.process.stderr_tail() or err.detail
            if self.output_done and (options.resume or options.fork):
                raise ResumeFailed(detail) from None
            if self.output_done:
                raise SpawnFailed(f"Claude Code exited during the handshake ({self.exit_status}): {detail}") from None
            raise ProtocolFailed(f"initialize failed: {err.detail}") from None
        self.init_response = init if isinstance(init, dict) else {}
        version = None
        try:
            reply = await self.channel.wait(version_request, timeout=REQUEST_TIMEOUT)
            version = reply.get("version") if isinstance(reply, dict) else None
        except (control.ControlError, TimeoutError):
            pass
        version = version or await cli_version(self.installation.executable_path)
        if version and " " in version:
            version = version.split()[0]
        self.details = agent_details(
            self.init_response,
            version=version,
            executable=self.installation.executable_path,
            current=self.options,
            mcp_transports=self.mcp_transports,
        )
        if require_auth and not is_authenticated(self.details.auth):
            raise AuthRequired(login_methods(self.installation.executable_path), "Claude Code is not logged in")

    # ------------------------------------------------------------------------------------------- MCP servers

    async def _settle_mcp(self) -> None:
        """Ask ``mcp_status`` until it reports no forwarded server ``pending`` (again every
        :data:`MCP_STATUS_INTERVAL` seconds while one is), or until :attr:`mcp_startup`'s deadline (then a Warning
        names the servers still pending), then write the held prompts. A CLI that refuses ``mcp_status`` (an error
        answer) holds nothing (Info diagnostic); a CLI whose input or output ended releases at once."""
        startup = self.mcp_startup
        request_id, self._mcp_request = self._mcp_request, None
        try:
            with anyio.move_on_after(startup.remaining()):
                while startup.pending:
                    if request_id is None:
                        await anyio.sleep(MCP_STATUS_INTERVAL)
                        request_id = await self.channel.send("mcp_status")
                    reply = await self.channel.wait(request_id)
                    request_id = None
                    await self._note_mcp_status(reply)
        except control.ControlError as err:
            if not self.output_done:
                await self.link.emit(
                    diagnostic(
                        "Info",
                        f"Claude Code did not answer mcp_status ({err.detail}); "
                        "prompts do not wait for its MCP servers",
                    )
                )
            startup.stop()
        except InputClosed:
            startup.stop()
        late = await startup.settled()
        if late is not None and not self.output_done:
            await self.link.emit(diagnostic("Warning", late))
        await startup.release(self._send_prompt)

    async def _note_mcp_status(self, reply: Any) -> None:
        """Report to :attr:`mcp_startup` each pending server the ``mcp_status`` ``reply`` (``{"mcpServers": [{name,
        status, error?, ...}]}``) shows settled: ``connected``; ``failed`` (with the CLI's error); ``needs-auth``,
        ``disabled``, another status or none (a server the reply does not list) as failed, "is not connected". Each
        failure is a Warning diagnostic (the server's ``config``, which may hold secrets, is never reported)."""
        servers = reply.get("mcpServers") if isinstance(reply, dict) else None
        listed = {s.get("name"): s for s in servers or () if isinstance(s, dict)}
        for name in self.mcp_startup.pending:
            entry = listed.get(name) or {}
            status = entry.get("status")
            if status == "pending":
                continue
            if status == "connected":
                warning = self.mcp_startup.settle(name, "connected")
            elif status == "failed":
                warning = self.mcp_startup.settle(name, "failed", entry.get("error"))
            else:
                reason = status if status in MCP_SETTLED else f"Claude Code reports {status or 'nothing'} for it"
                warning = self.mcp_startup.settle(name, "failed", reason, failure="is not connected")
            if warning is not None:
                await self.link.emit(diagnostic("Warning", warning))

    # ------------------------------------------------------------------------------------------- stdout

    async def _pump(self) -> None:
        try:
            async for frame in json_frames(self.process, self.link, agent="Claude Code", raw_key=RAW):
                await self._dispatch(frame)
        finally:
            await self.output_ended()

    async def on_output_end(self) -> None:
        self.channel.close("Claude Code's output ended")

    async def _dispatch(self, frame: Any) -> None:
        kind = frame.get("type") if isinstance(frame, dict) else None
        if kind == "control_response":
            self.channel.resolve(frame)  # unknown ids: our own replies echoed back by --replay-user-messages
        elif kind == "control_request":
            await self._incoming(frame)
        elif kind == "control_cancel_request":
            if self.state.requests.withdraw(str(frame.get("request_id"))) is not None:
                await self.link.emit(
                    diagnostic("Info", "Claude Code withdrew a pending request"), extensions={RAW: frame}
                )
        elif kind == "result":
            self.state.result_arrived()
            await self.mapper.handle(frame)
            if self.state.deferred_ack_due():  # the held turn is the one the CLI now runs
                await self.link.turn_ack()
        else:
            await self.mapper.handle(frame)

    async def _incoming(self, frame: dict[str, Any]) -> None:
        request_id = str(frame.get("request_id"))
        req = frame.get("request") or {}
        subtype = req.get("subtype")
        if subtype == "can_use_tool":
            tool_use_id = str(req.get("tool_use_id") or "")
            kind, opened = permissions.engine_request(
                request_id, req, self.state.tools.get(tool_use_id), self.session_options.dir
            )
            self.state.requests.open(request_id, req, kind=kind, agent_id=request_id)
            await self.link.emit(opened, parent_tool_id=self.state.tool_parents.get(tool_use_id))
            return
        reply: Any = {"action": "decline"} if subtype == "elicitation" else {}
        await self._write(control.success(request_id, reply))
        await self.link.emit(
            diagnostic("Info", f"answered Claude Code's {subtype!r} control request with defaults"),
            extensions={RAW: frame},
        )

    async def _write(self, frame: Any) -> bool:
        try:
            await self.process.write_json(frame)
            return True
        except InputClosed:
            return False

    # ------------------------------------------------------------------------------------------- commands

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        frame = {
            "type": "user",
            "message": {"role": "user", "content": user_content(prompt)},
            "parent_tool_use_id": None,
            "session_id": "",
            "uuid": str(uuid.uuid4()),
        }
        if self.mcp_startup.holding:
            if self.output_done:
                raise ProtocolFailed("Claude Code's input is closed")
            waits = self.mcp_startup.hold(frame)  # written by _settle_mcp
            if waits:
                await self.link.emit(diagnostic("Info", waits))
            return
        await self._send_prompt(frame)

    async def _send_prompt(self, frame: dict[str, Any]) -> None:
        """Write the user ``frame`` of a prompt and report TurnAck (deferred after an unconfirmed interrupt).
        Raises ``ProtocolFailed`` when the CLI's input is closed."""
        state = self.state
        state.turn_begins()
        deferred = state.owes_earlier_result()
        if not await self._write(frame):
            raise ProtocolFailed("Claude Code's input is closed")
        state.prompt_written(frame["uuid"], deferred=deferred)
        if not deferred:
            await self.link.turn_ack()

    async def answer(self, request_id: str, answer: Answer) -> None:
        item = self.state.requests.answer(request_id, lambda item: permissions.reply(item, answer))
        if not await self._write(item.reply):
            raise ProtocolFailed("Claude Code's input is closed")

    async def cancel(self) -> None:
        if self.mcp_startup.drop():  # the CLI never had the prompt: it ends here
            await self.link.turn_ack()
            await self.link.turn_ended("Cancelled")
            return
        try:
            await self.channel.send("interrupt")
        except InputClosed:
            return
        self.state.interrupt_sent()
        await self._deny_pending()

    async def _deny_pending(self) -> None:
        for item in self.state.requests.cancel_all(permissions.cancel_reply):
            await self._write(item.reply)

    async def configure(self, option: str, value: ConfigValue) -> None:
        if option == "mode":
            request_id = await self._send_control("set_permission_mode", mode=value)
        elif option == "model":
            request_id = await self._send_control("set_model", model=value)
        else:
            raise InvalidConfiguration(f"option {option!r} cannot be changed live")
        self.link.start_soon(self._confirm, request_id, option, value)

    async def _send_control(self, subtype: str, **fields: Any) -> str:
        try:
            return await self.channel.send(subtype, **fields)
        except InputClosed:
            raise ProtocolFailed("Claude Code's input is closed") from None

    async def _confirm(self, request_id: str, option: str, value: ConfigValue) -> None:
        try:
            await self.channel.wait(request_id, timeout=REQUEST_TIMEOUT)
        except (control.ControlError, TimeoutError) as err:
            reason = getattr(err, "detail", None) or "no answer"
            await self.link.emit(diagnostic("Warning", f"Claude Code refused {option}={value!r}: {reason}"))
            return
        await self.mapper.set_options(**{option: value})

    async def compact(self) -> None:
        frame = {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": "/compact"}]},
            "parent_tool_use_id": None,
            "session_id": "",
            "uuid": str(uuid.uuid4()),
        }
        self.state.turn_begins()
        if not await self._write(frame):
            raise ProtocolFailed("Claude Code's input is closed")
        self.state.compact_written()

    async def rollback(self, turns: int, scope: RollbackScope) -> None:
        if turns < 1:
            raise InvalidRequest("rollback needs turns >= 1")
        if turns > len(self.state.prompt_uuids):
            raise InvalidRequest(
                f"only the {len(self.state.prompt_uuids)} prompt(s) sent in this session can be rolled back"
            )
        target = self.state.prompt_uuids[-turns]
        if scope == "ConversationAndFiles":
            try:
                await self.channel.request("rewind_files", timeout=REQUEST_TIMEOUT, user_message_id=target)
            except control.ControlError as err:
                raise InvalidRequest(f"Claude Code could not rewind files: {err.detail}") from None
            except TimeoutError:
                raise ProtocolFailed("Claude Code did not answer rewind_files") from None
        try:
            reply = await self.channel.request(
                "rewind_conversation", timeout=REQUEST_TIMEOUT, target_message_uuid=target
            )
        except control.ControlError as err:
            raise InvalidRequest(f"Claude Code could not rewind the conversation: {err.detail}") from None
        except TimeoutError:
            raise ProtocolFailed("Claude Code did not answer rewind_conversation") from None
        if not (isinstance(reply, dict) and reply.get("rewound")):
            reason = reply.get("error") if isinstance(reply, dict) else None
            raise InvalidRequest(f"Claude Code refused to rewind: {reason or 'unknown reason'}")
        self.state.rolled_back(turns)

    async def close(self) -> None:
        self.closing = True
        self.mcp_startup.drop()
        if self.state.turn_running and not self.output_done:
            try:
                with anyio.move_on_after(INTERRUPT_ON_CLOSE):
                    await self.channel.send("interrupt")
                    await self._deny_pending()
            except InputClosed:
                pass
        await super().close()

    async def close_unanswered(self) -> None:
        """End the CLI leaving its open permission unanswered and its turn uninterrupted, as a kill -9 of the
        daemon would (its parent-death signal is a SIGKILL): no interrupt, no denial, the process group killed at
        once. Its transcript holds no answer to the tool call that waited (the CLI may not have recorded the
        unfinished turn at all: the resumed agent then asks again and gets the stored answer), never a rejection
        followed by "allow" (issue 25). Not the graceful :meth:`close`: a CLI whose stdin
        closes fails its open permission itself ("Tool permission stream closed before response received", an
        error tool_result it sends the model and records)."""
        self.closing = True
        self.mcp_startup.drop()
        await self.kill()


def user_content(prompt: PromptInput) -> list[dict[str, Any]]:
    """The ``message.content`` of a user frame: the text, then each attachment — images (png/jpeg/gif/webp
    paths up to ``MAX_IMAGE_BYTES``, or image URLs) as image blocks, anything else mentioned by path."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": prompt.text}]
    mentions = []
    for attachment in classify(prompt.attachments):
        if attachment.kind == "image_url":
            blocks.append({"type": "image", "source": {"type": "url", "url": attachment.item}})
            continue
        data = attachment.inline_data()
        if data is not None:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": attachment.media, "data": data}})
            continue
        mentions.append(attachment.item)
    if mentions:
        blocks.append({"type": "text", "text": "Attached: " + ", ".join(f"@{m}" for m in mentions)})
    return blocks


__all__ = ["ClaudeConnection", "user_content"]
