"""One opencode session: its own ``opencode serve`` process on a loopback port, the event stream, the HTTP calls.

- Open: start ``opencode serve --port N`` in the session's directory (with ``OPENCODE_CONFIG_CONTENT``: the
  environment's settings plus the permission rules of the permission mode), wait for "listening", follow
  ``/event``, then create the session (``POST /session``) or check the resumed one (``GET /session/{id}``).
- A turn: ``POST /session/{id}/prompt_async`` (TurnAck once accepted); the turn ends at ``session.idle``:
  Cancelled after our abort, Failed after a ``session.error``, else Completed.
- Answers: ``POST /session/{id}/permissions/{request}`` with ``once`` / ``always`` / ``reject``.
- Cancel: ``POST /session/{id}/abort``. Close/kill: the process (:class:`ProcessConnection`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, cast

import anyio

from anyagentd.adapters.connection import HANDSHAKE_TIMEOUT, ProcessConnection
from anyagentd.adapters.http import HttpError, free_port, request_json, sse_events
from anyagentd.adapters.interface import PromptInput, spawn_env
from anyagentd.adapters.process import AgentProcess, cli_version
from anyagentd.errors import ProtocolFailed, ResumeFailed, SpawnFailed
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    AnswerPermission,
    Authenticated,
    Capabilities,
    CompletedStop,
    FailedStop,
    SessionConfiguration,
    SessionOptions,
    diagnostic,
)

from .mapping import SessionEvents

FEATURES = ["Permissions", "Resume", "ContextUsage"]
"""What an opencode session can do here. Not advertised: Steer (a prompt during a turn is queued by opencode),
Questions, Rollback (``/revert`` exists; not mapped yet), Fork, Compact, Images."""

REPLIES = {"AllowOnce": "once", "AllowAlways": "always", "DenyOnce": "reject", "DenyAlways": "reject"}
LISTENING = re.compile(r"listening on (http://\S+)")


def server_config(permission_mode: str | None) -> str:
    """``OPENCODE_CONFIG_CONTENT``: the environment's own (a provider, a model) with the permission rules of
    ``permission_mode`` (``Ask``: edits, commands and fetches ask; ``AutoApprove``: they are allowed)."""
    try:
        config = json.loads(os.environ.get("OPENCODE_CONFIG_CONTENT") or "{}")
    except ValueError:
        config = {}
    rule = "allow" if permission_mode == "AutoApprove" else "ask"
    config["permission"] = {**(config.get("permission") or {}), "edit": rule, "bash": rule, "webfetch": rule}
    config.setdefault("autoupdate", False)
    config.setdefault("share", "disabled")
    return json.dumps(config)


class OpencodeConnection(ProcessConnection):
    """A live opencode session (see the module doc). Build with :meth:`open`."""

    deterministic_turn_end = True
    deterministic_agent_turn_end = True

    def __init__(self, process: AgentProcess, link: Any, port: int, options: SessionOptions) -> None:
        super().__init__(process, link)
        self.port = port
        self.session_options = options
        self.details = AgentDetails()
        self.resume_token: str | None = None
        self.title = None
        self.events: SessionEvents | None = None
        self._listening = anyio.Event()
        self._stream_ready = anyio.Event()
        self._turn = False
        self._cancelled = False

    @property  # type: ignore[override]
    def configuration(self) -> SessionConfiguration:
        return SessionConfiguration(options={})

    # ------------------------------------------------------------------------------------------- opening

    @classmethod
    async def open(cls, installation: AgentInstallation, options: SessionOptions, link: Any, *,
                   handshake_timeout: float = HANDSHAKE_TIMEOUT, session: bool = True) -> OpencodeConnection:  # fmt: skip
        """Start the server and (with ``session``) create or resume the session. Raises ``SpawnFailed``,
        ``HandshakeTimeout``, ``ResumeFailed``, ``ProtocolFailed``."""
        port = free_port()
        env = spawn_env(installation, {"OPENCODE_CONFIG_CONTENT": server_config(options.permission_mode),
                                       "OPENCODE_DISABLE_AUTOUPDATE": "1"})  # fmt: skip
        argv = [installation.executable_path, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
        process = await AgentProcess.start(argv, cwd=options.dir, env=env)
        conn = cls(process, link, port, options)
        link.start_soon(conn._read_stdout)
        await conn.complete_handshake(lambda: conn._handshake(installation, session), handshake_timeout,
                                      "opencode's start (serving, then its session)")  # fmt: skip
        return conn

    async def _handshake(self, installation: AgentInstallation, session: bool) -> None:
        with anyio.CancelScope() as scope:
            self._gone_scope = scope
            await self._listening.wait()
        if not self._listening.is_set():
            await self.process.stderr_drained(1.0)
            raise SpawnFailed(f"opencode exited before serving ({self.exit_status}): "
                              f"{self.process.stderr_tail() or 'no output'}")  # fmt: skip
        version = await cli_version(installation.executable_path)
        self.details = AgentDetails(version=version, auth=Authenticated(kind="ApiKey"),
                                    capabilities=Capabilities(features=list(FEATURES)))  # fmt: skip
        if not session:
            return
        options = self.session_options
        if options.resume:
            try:
                info = await request_json(self.port, "GET", f"/session/{options.resume}")
            except HttpError as err:
                raise ResumeFailed(f"opencode has no session {options.resume!r}: {err.body[:200]}") from None
        else:
            info = await request_json(self.port, "POST", "/session", {})
        if not isinstance(info, dict) or not info.get("id"):
            raise ProtocolFailed(f"opencode answered {str(info)[:200]} for its session")
        self.resume_token = str(info["id"])
        self.title = info.get("title")
        self.events = SessionEvents(self.link, self.resume_token)
        self.link.start_soon(self._read_events)
        await self._stream_ready.wait()

    # ------------------------------------------------------------------------------------------- readers

    async def _read_stdout(self) -> None:
        try:
            async for line in self.process.lines():
                if isinstance(line, str) and LISTENING.search(line):
                    self._listening.set()
        finally:
            scope = getattr(self, "_gone_scope", None)
            if scope is not None and not self._listening.is_set():
                scope.cancel()
            await self.output_ended()

    async def _read_events(self) -> None:
        assert self.events is not None
        try:
            async for event in sse_events(self.port, "/event"):
                self._stream_ready.set()
                if not isinstance(event, dict):
                    continue
                try:
                    await self._dispatch(event)
                except Exception as exc:  # noqa: BLE001 - never crash on an event
                    await self.link.emit(diagnostic("Info", f"could not handle an opencode event "
                                                            f"({type(exc).__name__}: {exc})"))  # fmt: skip
        except OSError:
            pass  # the server went away: the stdout reader reports the exit

    async def _dispatch(self, event: dict[str, Any]) -> None:
        assert self.events is not None
        if event.get("type") == "permission.asked" and self.events.ours(event.get("properties") or {}):
            await self.link.emit(self.events.permission(event["properties"]))
            return
        if await self.events.handle(event) == "idle" and self._turn:
            self._turn = False
            if self._cancelled:
                await self.link.turn_ended("Cancelled")
            elif self.events.error is not None:
                await self.link.turn_ended(FailedStop(message=self.events.error))
            else:
                await self.link.turn_ended(CompletedStop(source="Protocol"))
            self.events.error = None

    # ------------------------------------------------------------------------------------------- commands

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return await request_json(self.port, method, path, body)
        except (OSError, HttpError) as err:
            raise ProtocolFailed(f"opencode {method} {path} failed: {err}") from None

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        self._turn, self._cancelled = True, False
        parts: list[dict[str, Any]] = [{"type": "text", "text": prompt.text}]
        if prompt.attachments:
            parts[0]["text"] += "\n\nAttached: " + ", ".join(prompt.attachments)
        await self._call("POST", f"/session/{self.resume_token}/prompt_async", {"parts": parts})
        await self.link.turn_ack()

    async def answer(self, request_id: str, answer: Answer) -> None:
        # the engine validated the answer: a Permission choice among the options the request offered
        reply = REPLIES[cast(AnswerPermission, answer).value]
        await self._call("POST", f"/session/{self.resume_token}/permissions/{request_id}", {"response": reply})

    async def cancel(self) -> None:
        if self._turn:
            self._cancelled = True
            await self._call("POST", f"/session/{self.resume_token}/abort")
