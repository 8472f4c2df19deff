"""One opencode session: its own ``opencode serve`` process on a loopback port, the event stream, the HTTP calls.

See ``docs/agents/opencode.md#handshake`` (and the page's other sections).

- Open: start ``opencode serve --port N`` in the session's directory (with ``OPENCODE_CONFIG_CONTENT``: the
  environment's settings plus the permission rules of the permission mode), wait for "listening", read the
  options it offers (``GET /config``, ``/config/providers``, ``/agent``), follow ``/event``, then create the
  session (``POST /session``), check the resumed one (``GET /session/{id}``) or fork one
  (``POST /session/{id}/fork``).
- A turn: ``POST /session/{id}/prompt_async`` with the text, the images as ``file`` parts, the ``agent`` (the
  ``mode`` option) and the ``model`` (TurnAck once accepted); the turn ends at ``session.idle``: Cancelled after
  our abort, Failed after a ``session.error``, else Completed.
- Answers: ``POST /session/{id}/permissions/{request}`` with ``once`` / ``always`` / ``reject``, for a request
  still open in :attr:`OpencodeConnection.requests` (the toolkit's
  :class:`~anyagentd.adapters.pending.PendingRequests`; another id is refused ``InvalidRequest``).
- Configure: ``mode`` and ``model`` apply from the next prompt; reported at once.
- Compact: ``POST /session/{id}/summarize`` with the current model (it answers once the compaction is queued):
  ``session.compacted`` → ContextCompacted, then its ``session.idle`` → TurnEnded(Completed).
- Cancel: ``POST /session/{id}/abort``; the open permission requests are forgotten (the abort ends them in
  opencode). Close/kill: the process (:class:`ProcessConnection`).
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, cast

import anyio

from anyagentd.adapters import attachments
from anyagentd.adapters.connection import HANDSHAKE_TIMEOUT, ProcessConnection
from anyagentd.adapters.http import HttpError, free_port, request_json, sse_events
from anyagentd.adapters.interface import PromptInput, spawn_env
from anyagentd.adapters.pending import PendingRequests
from anyagentd.adapters.process import AgentProcess, cli_version
from anyagentd.errors import InvalidConfiguration, ProtocolFailed, ResumeFailed, SpawnFailed
from anyagentd.model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    AnswerPermission,
    Authenticated,
    Capabilities,
    CompletedStop,
    ConfigChoice,
    ConfigOption,
    ConfigValue,
    FailedStop,
    Select,
    SessionConfiguration,
    SessionOptions,
    diagnostic,
)

from .mapping import SessionEvents

if TYPE_CHECKING:
    from anyagentd.adapters.interface import AdapterLink

FEATURES = ["Images", "Permissions", "Resume", "Fork", "Compact", "ContextUsage"]
"""What an opencode session can do here. Not advertised: Steer (a prompt during a turn is queued by opencode),
Questions (opencode's question requests are not mapped), Rollback (``/revert`` drops the later messages but also
restores the files its snapshots tracked: a rollback of the conversation alone cannot be asked for)."""

DEFAULT_MODE = "build"
"""opencode's default primary agent (the ``mode`` option)."""

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

    def __init__(self, process: AgentProcess, link: AdapterLink, port: int, options: SessionOptions) -> None:
        super().__init__(process, link)
        self.port = port
        self.session_options = options
        self.details = AgentDetails()
        self.resume_token: str | None = None
        self.title = None
        self.events: SessionEvents | None = None
        self.requests: PendingRequests[dict[str, Any]] = PendingRequests("opencode")
        """The ``permission.asked`` requests waiting for the engine, by permission id (data: the event's
        properties)."""
        self.options: dict[str, ConfigValue] = {"mode": DEFAULT_MODE}
        self._modes: list[ConfigChoice] = []
        self._models: list[ConfigChoice] = []
        self._listening = anyio.Event()
        self._stream_ready = anyio.Event()

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
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        session: bool = True,
    ) -> OpencodeConnection:
        """Start the server and (with ``session``) create or resume the session. Raises ``SpawnFailed``,
        ``HandshakeTimeout``, ``ResumeFailed``, ``ProtocolFailed``."""
        port = free_port()
        env = spawn_env(
            installation,
            {"OPENCODE_CONFIG_CONTENT": server_config(options.permission_mode), "OPENCODE_DISABLE_AUTOUPDATE": "1"},
        )
        argv = [installation.executable_path, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
        process = await AgentProcess.start(argv, cwd=options.dir, env=env)
        conn = cls(process, link, port, options)
        link.start_soon(conn._read_stdout)
        await conn.complete_handshake(
            lambda: conn._handshake(installation, session),
            handshake_timeout,
            "opencode's start (serving, then its session)",
        )
        return conn

    async def _handshake(self, installation: AgentInstallation, session: bool) -> None:
        with anyio.CancelScope() as scope:
            self._gone_scope = scope
            await self._listening.wait()
        if not self._listening.is_set():
            await self.process.stderr_drained()
            raise SpawnFailed(
                f"opencode exited before serving ({self.exit_status}): {self.process.stderr_tail() or 'no output'}"
            )
        self._version = await cli_version(installation.executable_path)
        await self._read_options()
        self.options.update({k: v for k, v in self.session_options.configure.items() if k in ("mode", "model")})
        self._refresh_details()
        if not session:
            return
        options = self.session_options
        if options.resume and options.fork:
            raise InvalidConfiguration("resume and fork are exclusive")
        if options.fork_at and not options.fork:
            raise InvalidConfiguration("fork_at needs fork")
        if options.resume:
            try:
                info = await request_json(self.port, "GET", f"/session/{options.resume}")
            except HttpError as err:
                raise ResumeFailed(f"opencode has no session {options.resume!r}: {err.body[:200]}") from None
        elif options.fork:
            info = await self._fork(options.fork, options.fork_at)
        else:
            info = await request_json(self.port, "POST", "/session", {})
        if not isinstance(info, dict) or not info.get("id"):
            raise ProtocolFailed(f"opencode answered {str(info)[:200]} for its session")
        self.resume_token = str(info["id"])
        self.title = info.get("title")
        self.events = SessionEvents(self.link, self.resume_token)
        self.link.start_soon(self._read_events)
        await self._stream_ready.wait()

    async def _read_options(self) -> None:
        """The ``mode`` choices (opencode's primary agents that are not hidden) and the ``model`` choices
        (``provider/model`` of each configured provider's models), with the configured model as current."""
        try:
            config = await request_json(self.port, "GET", "/config")
            providers = await request_json(self.port, "GET", "/config/providers")
            agents = await request_json(self.port, "GET", "/agent")
        except (OSError, HttpError) as err:
            raise ProtocolFailed(f"opencode did not list its options: {err}") from None
        if isinstance(config, dict) and isinstance(config.get("model"), str):
            self.options.setdefault("model", config["model"])
        for agent in agents if isinstance(agents, list) else []:
            if isinstance(agent, dict) and agent.get("mode") in ("primary", "all") and not agent.get("hidden"):
                name = str(agent.get("name"))
                self._modes.append(
                    ConfigChoice(value=name, label=name.capitalize(), description=agent.get("description"))
                )
        listed = providers.get("providers") if isinstance(providers, dict) else None
        for provider in listed if isinstance(listed, list) else []:
            models = provider.get("models") if isinstance(provider, dict) else None
            for model_id, model in (models or {}).items():
                name = model.get("name") if isinstance(model, dict) else None
                value = f"{provider.get('id')}/{model_id}"
                self._models.append(ConfigChoice(value=value, label=str(name or model_id)))

    def _refresh_details(self) -> None:
        modes, models = list(self._modes), list(self._models)
        for choices, current in ((modes, self.options.get("mode")), (models, self.options.get("model"))):
            if isinstance(current, str) and not any(c.value == current for c in choices):
                choices.append(ConfigChoice(value=current, label=current))
        config_options = [
            ConfigOption(
                id="mode",
                name="Agent",
                category="mode",
                kind=Select(choices=modes),
                current=self.options.get("mode"),
                live=True,
            )
        ]
        if models:
            config_options.append(
                ConfigOption(
                    id="model",
                    name="Model",
                    category="model",
                    kind=Select(choices=models),
                    current=self.options.get("model"),
                    live=True,
                )
            )
        self.details = AgentDetails(
            version=self._version,
            auth=Authenticated(kind="ApiKey"),
            capabilities=Capabilities(features=list(FEATURES)),
            config_options=config_options,
        )

    async def _fork(self, source: str, at: str | None) -> Any:
        """``POST /session/{source}/fork``: opencode copies the messages before its ``messageID``; ``at`` (a
        message id, as the ``opencode/fork_point`` of MessageEnded) is the last one kept, so the cut is at the
        message after it (none: the whole history)."""
        body: dict[str, Any] = {}
        try:
            if at:
                messages = await request_json(self.port, "GET", f"/session/{source}/message")
                ids = [str((m.get("info") or {}).get("id")) for m in messages if isinstance(m, dict)]
                if at not in ids:
                    raise ResumeFailed(f"opencode's session {source!r} has no message {at!r}")
                following = ids[ids.index(at) + 1 :]
                if following:
                    body["messageID"] = following[0]
            return await request_json(self.port, "POST", f"/session/{source}/fork", body)
        except HttpError as err:
            raise ResumeFailed(f"opencode could not fork {source!r}: {err.body[:200]}") from None

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
                    await self.link.emit(
                        diagnostic("Info", f"could not handle an opencode event ({type(exc).__name__}: {exc})")
                    )
        except OSError:
            pass  # the server went away: the stdout reader reports the exit

    async def _dispatch(self, event: dict[str, Any]) -> None:
        events = self.events
        assert events is not None
        if event.get("type") == "permission.asked" and events.ours(event.get("properties") or {}):
            props = event["properties"]
            request_id = str(props.get("id"))  # the engine's request id too (SessionEvents.permission)
            self.requests.open(request_id, props, agent_id=request_id)
            await self.link.emit(events.permission(props))
            return
        shown = await events.handle(event)
        if shown == "compacted" and events.turn:
            await self.link.emit("ContextCompacted")
        if shown == "idle" and events.turn:
            events.turn = False
            if events.cancelled:
                await self.link.turn_ended("Cancelled")
            elif events.error is not None:
                await self.link.turn_ended(FailedStop(message=events.error))
            else:
                await self.link.turn_ended(CompletedStop(source="Protocol"))
            events.error = None

    # ------------------------------------------------------------------------------------------- commands

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return await request_json(self.port, method, path, body)
        except (OSError, HttpError) as err:
            raise ProtocolFailed(f"opencode {method} {path} failed: {err}") from None

    def _model(self) -> dict[str, str] | None:
        """The ``model`` option as opencode's ``{providerID, modelID}`` (``None`` when not set)."""
        model = self.options.get("model")
        if not isinstance(model, str) or "/" not in model:
            return None
        provider, _, model_id = model.partition("/")
        return {"providerID": provider, "modelID": model_id}

    def prompt_body(self, prompt: PromptInput) -> dict[str, Any]:
        """The ``prompt_async`` body: a text part, each image file as a ``file`` part (a ``data:`` URL), anything
        else (other files, URLs, unreadable images) mentioned as ``Attached: ...``; the ``agent`` and ``model``."""
        text = prompt.text
        files: list[dict[str, Any]] = []
        mentions: list[str] = []
        for attachment in attachments.classify(prompt.attachments, image_urls=False):
            data = attachment.inline_data()
            if data is None:
                mentions.append(attachment.item)
                continue
            files.append(
                {
                    "type": "file",
                    "mime": attachment.media,
                    "filename": os.path.basename(attachment.item),
                    "url": f"data:{attachment.media};base64,{data}",
                }
            )
        if mentions:
            text += "\n\nAttached: " + ", ".join(mentions)
        body: dict[str, Any] = {"parts": [{"type": "text", "text": text}, *files], "agent": self.options["mode"]}
        model = self._model()
        if model is not None:
            body["model"] = model
        return body

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        assert self.events is not None
        self.events.turn, self.events.cancelled = True, False
        await self._call("POST", f"/session/{self.resume_token}/prompt_async", self.prompt_body(prompt))
        await self.link.turn_ack()

    async def answer(self, request_id: str, answer: Answer) -> None:
        # the engine validated the answer: a Permission choice among the options the request offered
        item = self.requests.answer(request_id, lambda item: REPLIES[cast(AnswerPermission, answer).value])
        await self._call("POST", f"/session/{self.resume_token}/permissions/{item.agent_id}", {"response": item.reply})

    async def cancel(self) -> None:
        if self.events is not None and self.events.turn:
            self.events.cancelled = True
            self.requests.cancel_all()  # the abort ends them in opencode: no reply is sent
            await self._call("POST", f"/session/{self.resume_token}/abort")

    async def configure(self, option: str, value: ConfigValue) -> None:
        if option not in ("mode", "model"):
            raise InvalidConfiguration(f"option {option!r} cannot be changed live")
        # the engine checked the value against the option's choices
        self.options[option] = value
        self._refresh_details()
        await self.link.info_changed(configuration=self.configuration)

    async def compact(self) -> None:
        model = self._model()
        if model is None:
            raise InvalidConfiguration("opencode compacts with a model: set the model option")
        assert self.events is not None
        self.events.turn, self.events.cancelled = True, False  # ends at the compaction's session.idle
        self.link.start_soon(self._summarize, model)

    async def _summarize(self, model: dict[str, str]) -> None:
        """``summarize`` answers ``true`` once the compaction is queued; anything else fails the compact turn."""
        try:
            done: Any = await self._call("POST", f"/session/{self.resume_token}/summarize", model)
        except ProtocolFailed as err:
            done = err.message
        if done is not True and self.events is not None and self.events.turn:
            self.events.turn = False
            await self.link.turn_ended(FailedStop(message=f"opencode did not compact: {str(done)[:200]}"))
