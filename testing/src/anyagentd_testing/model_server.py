"""A scripted model endpoint on loopback that real agent CLIs (Claude Code, Codex, ACP agents) talk to.

:class:`ModelServer` serves a :class:`~anyagentd_testing.model_script.Script` over HTTP, speaking:

- the Anthropic Messages API: ``POST /v1/messages`` (also ``?beta=true``), SSE or JSON, and
  ``POST /v1/messages/count_tokens`` (rendering in :mod:`anyagentd_testing.anthropic_api`);
- the OpenAI Responses API: ``POST /v1/responses``, SSE or JSON (:mod:`anyagentd_testing.responses_api`);
- ``GET /v1/models`` and ``GET /v1/models/{id}``: a harmless list.

Which turn answers a request is decided by the request itself, never by a cursor: the turn index is the
number of model replies already in the conversation it carries. Retries, a ``--resume``d process and
repeated runs against one server therefore all get the right turn. Side requests (no tools offered,
``max_tokens <= 16``, a forced single-tool helper, a Codex ``request_kind`` other than ``turn``) get the
script's ``side_reply`` — or the smallest instance of the JSON schema they ask for — and consume nothing.
Past the end of the script a main request gets the text ``(script exhausted)``.

Every request is logged in :attr:`ModelServer.requests` and, with ``log_path``, appended to a JSONL file.

Uvicorn runs in a background thread with its own event loop, so the server works the same from sync
tests, async code and a CLI. The design follows the scripted endpoint described in
``docs/testing.md#the-scripted-model-endpoint``
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from . import anthropic_api, responses_api
from .model_script import EXHAUSTED_TEXT, Script, ScriptedError, ToolCall, Turn, minimal_instance, new_id

__all__ = ["ModelServer", "Script", "Turn"]

_HEADER_VALUE_MAX = 120
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"}
_MODELS = ("claude-opus-4-8", "claude-sonnet-4-6", "claude-haiku-4-5", "gpt-5.5", "gpt-5.4")


@dataclass(frozen=True)
class _Wire:
    """How one model API reads requests and renders replies (adapts the two API modules to one shape)."""

    api: str
    turn_index: Callable[[Mapping[str, Any]], int]
    side_reason: Callable[[Mapping[str, Any], Mapping[str, str]], str | None]
    working_directory: Callable[[Mapping[str, Any]], str | None]
    forced_tool: Callable[[Mapping[str, Any]], tuple[str, Mapping[str, Any]] | None]
    requested_schema: Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
    input_tokens: Callable[[bytes], int]
    error_body: Callable[[ScriptedError], dict[str, Any]]
    whole: Callable[..., dict[str, Any]]
    events: Callable[..., Iterator[tuple[dict[str, Any], bool]]]


_ANTHROPIC = _Wire(
    api=anthropic_api.API,
    turn_index=anthropic_api.turn_index,
    side_reason=lambda body, headers: anthropic_api.side_reason(body),
    working_directory=anthropic_api.working_directory,
    forced_tool=anthropic_api.forced_tool,
    requested_schema=anthropic_api.requested_schema,
    input_tokens=anthropic_api.input_tokens,
    error_body=anthropic_api.error_body,
    whole=lambda turn, model, usage, body: anthropic_api.message(turn, model, usage),
    events=lambda turn, model, usage, body: anthropic_api.stream_events(turn, model, usage),
)
_RESPONSES = _Wire(
    api=responses_api.API,
    turn_index=responses_api.turn_index,
    side_reason=responses_api.side_reason,
    working_directory=responses_api.working_directory,
    forced_tool=responses_api.forced_tool,
    requested_schema=responses_api.requested_schema,
    input_tokens=responses_api.input_tokens,
    error_body=responses_api.error_body,
    whole=responses_api.response,
    events=responses_api.stream_events,
)


class ModelServer:
    """An HTTP model endpoint playing a script of model turns (see the module docstring).

    ``script``: a :class:`Script`, a dict in the script format, a JSON string or a path to a JSON file
    (``None``: no turns; every main request gets ``(script exhausted)``). ``host``/``port``: where to
    listen (port 0 picks a free port). ``log_path``: a JSONL file every request is appended to.

    Use ``with ModelServer(script) as srv:`` (or ``async with``), or ``start()``/``stop()``; ``srv.url``
    (e.g. ``http://127.0.0.1:40123``, no ``/v1``) is valid once started.
    """

    def __init__(
        self,
        script: Script | Mapping[str, Any] | str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
    ) -> None:
        self._script = Script.load(script)
        self._host = host
        self._port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._log: list[dict[str, Any]] = []
        self._log_cond = threading.Condition()
        self._errors_served: dict[int, int] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._uvicorn: Any = None
        self._socket: socket.socket | None = None
        self.app = self._build_app()
        """The Starlette ASGI app (usable in-process, e.g. with ``httpx.ASGITransport``)."""

    # -- lifecycle -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, ``http://HOST:PORT`` without ``/v1`` (what ``ANTHROPIC_BASE_URL`` wants)."""
        if self._socket is None and self._port == 0:
            raise RuntimeError("the model server has no port yet: call start() first")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def port(self) -> int:
        """The TCP port listened on (the one picked when constructed with port 0), valid once started."""
        return self._port

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> ModelServer:
        """Bind the socket and serve in a background thread; returns ``self`` once accepting connections.

        Waits up to ``timeout`` seconds for uvicorn to start; raises ``RuntimeError`` if it does not and
        ``OSError`` if the address cannot be bound. Calling it on a running server does nothing.
        """
        if self.running:
            return self
        import uvicorn  # imported here so that reading scripts does not pull in the server stack

        from anyagentd.listen import listening_socket

        sock = listening_socket(self._host, self._port)  # connections with TCP_NODELAY, as a real API's are
        self._port = sock.getsockname()[1]
        self._socket = sock
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._uvicorn = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"model-server:{self._port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the model server did not start on {self._host}:{self._port}")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, waiting up to ``timeout`` seconds.

        Replies still waiting out a ``delay`` get a 503 error and open streams are cut short (within about
        0.05 s), so a stuck client does not hold the shutdown.
        """
        thread, server = self._thread, self._uvicorn
        self._stopping.set()
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._thread = self._uvicorn = self._socket = None
        self._stopping.clear()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ModelServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        where = self.url if self.running else "stopped"
        return f"<ModelServer {where} turns={len(self._script.turns)} requests={len(self._log)}>"

    # -- script ----------------------------------------------------------------------------------------

    @property
    def script(self) -> Script:
        """The script being played."""
        return self._script

    def set_script(self, script: Script | Mapping[str, Any] | str | Path | None) -> None:
        """Play another script from now on (same forms as the constructor); resets ``error.times`` counters."""
        self._script = Script.load(script)
        self._errors_served = {}

    # -- request log -----------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the request log, oldest first.

        Each entry: ``seq`` (1-based), ``ts`` (epoch seconds), ``method``, ``path`` (with query),
        ``api`` (``anthropic``, ``responses``, ``models`` or ``other``), ``kind`` (``main``, ``side``,
        ``count_tokens``, ``models``, ``other``), ``reason`` (why side/main), ``turn`` (scripted turn index
        for main requests, else ``None``), ``model``, ``stream``, ``cwd`` (as found in the request),
        ``headers`` (values truncated, secrets shortened), ``body`` (parsed JSON) and ``reply`` (a summary
        of what was answered).
        """
        with self._log_cond:
            return list(self._log)

    def main_requests(self) -> list[dict[str, Any]]:
        """The logged requests that were answered from the script (``kind == "main"``)."""
        return [r for r in self.requests if r["kind"] == "main"]

    def side_requests(self) -> list[dict[str, Any]]:
        """The logged side requests (answered with ``side_reply``, consuming no turn)."""
        return [r for r in self.requests if r["kind"] == "side"]

    def clear_requests(self) -> None:
        """Forget the in-memory request log (the JSONL file is kept)."""
        with self._log_cond:
            self._log.clear()

    def wait_for_requests(
        self, count: int, *, kind: str | None = "main", timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """Block until at least ``count`` requests of ``kind`` (``None``: any) are logged; returns them.

        Raises ``TimeoutError`` after ``timeout`` seconds. Useful to wait until an agent is inside a
        (delayed) model call before interrupting it.
        """
        deadline = time.monotonic() + timeout
        with self._log_cond:
            while True:
                found = [r for r in self._log if kind is None or r["kind"] == kind]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(found)} of {count} {kind or 'any'} requests after {timeout} s")
                self._log_cond.wait(left)

    def _record(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self._log_cond:
            entry = {"seq": len(self._log) + 1, "ts": round(time.time(), 3), **entry}
            self._log.append(entry)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as fh:
                    fh.write(_json_text(entry, default=str) + "\n")
            self._log_cond.notify_all()
        return entry

    # -- HTTP ------------------------------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._anthropic_messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._anthropic_count_tokens, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
                Route("/{path:path}", self._other, methods=["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]),
            ]
        )

    async def _anthropic_messages(self, request: Request) -> Response:
        return await self._model_call(request, _ANTHROPIC)

    async def _responses(self, request: Request) -> Response:
        return await self._model_call(request, _RESPONSES)

    async def _anthropic_count_tokens(self, request: Request) -> Response:
        raw = await request.body()
        body = _parse(raw)
        reply = anthropic_api.count_tokens_reply(raw)
        self._record(_entry(request, body, api="anthropic", kind="count_tokens", reply=reply))
        return _Quiet(reply)

    async def _models(self, request: Request) -> Response:
        data = [_model_info(m) for m in _MODELS]
        self._record(_entry(request, None, api="models", kind="models", reply={"count": len(data)}))
        return _Quiet(
            {"object": "list", "data": data, "has_more": False, "first_id": _MODELS[0], "last_id": _MODELS[-1]}
        )

    async def _model(self, request: Request) -> Response:
        model_id = request.path_params["model_id"]
        self._record(_entry(request, None, api="models", kind="models", reply={"id": model_id}))
        return _Quiet(_model_info(model_id))

    async def _other(self, request: Request) -> Response:
        raw = await request.body()
        found = request.url.path in ("/", "")
        self._record(_entry(request, _parse(raw), api="other", kind="other", reply={"status": 200 if found else 404}))
        if found:
            return _Quiet({"ok": True, "server": "anyagentd scripted model server"})
        error = {"type": "not_found_error", "message": f"no such endpoint: {request.method} {request.url.path}"}
        return _Quiet({"type": "error", "error": error}, status_code=404)

    async def _model_call(self, request: Request, wire: _Wire) -> Response | _EventStream:
        """Answer one model request: pick the turn, log, wait ``delay``, then reply (error, SSE or JSON)."""
        raw = await request.body()
        body = _parse(raw)
        if not isinstance(body, dict):
            self._record(_entry(request, body, api=wire.api, kind="other", reply={"status": 400}))
            error = ScriptedError(400, "invalid_request_error", "request body is not a JSON object")
            return _Quiet(wire.error_body(error), status_code=400)
        headers = dict(request.headers)
        model = str(body.get("model") or "mock-model")
        stream = bool(body.get("stream"))
        cwd = wire.working_directory(body)
        side = wire.side_reason(body, headers)
        if side is not None:
            index, reason, turn = None, side, self._side_turn(wire, body)
        else:
            index = wire.turn_index(body)
            turn, reason = self._main_turn(index)
        turn = turn.with_cwd(cwd)
        self._record(
            _entry(
                request,
                body,
                api=wire.api,
                kind="side" if side else "main",
                reason=reason,
                turn=index,
                model=model,
                stream=stream,
                cwd=cwd,
                reply=_summary(turn),
            )
        )
        ids = {"request-id": new_id("req"), "x-request-id": new_id("req")}
        if turn.delay and not await self._pause(turn.delay):
            error = ScriptedError(503, "api_error", "the scripted model server is stopping")
            return _Quiet(wire.error_body(error), status_code=503, headers=ids)
        if turn.error is not None:
            return _Quiet(wire.error_body(turn.error), status_code=turn.error.status, headers=ids)
        usage = turn.usage_for(wire.input_tokens(raw))
        if stream:
            return _EventStream(wire.events(turn, model, usage, body), turn.chunk_delay, ids, self._pause)
        return _Quiet(wire.whole(turn, model, usage, body), headers=ids)

    async def _pause(self, seconds: float) -> bool:
        """Sleep ``seconds`` without blocking other requests; ``False`` if cut short because the server stops."""
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            await asyncio.sleep(min(left, 0.05))
        return False

    def _main_turn(self, index: int) -> tuple[Turn, str]:
        """The turn for a main request at ``index``, with the reason logged (handles ``error.times``)."""
        turn = self._script.turn(index)
        if turn is None:
            return Turn(text=EXHAUSTED_TEXT), f"script exhausted ({len(self._script.turns)} turns)"
        if turn.error is not None and turn.error.times is not None:
            served = self._errors_served.get(index, 0)
            if served >= turn.error.times:
                return turn.without_error(), f"turn {index} (error already served {served}x)"
            self._errors_served[index] = served + 1
        return turn, f"turn {index}"

    def _side_turn(self, wire: _Wire, body: Mapping[str, Any]) -> Turn:
        """The reply to a side request: the forced tool, the schema's smallest instance, or ``side_reply``."""
        filler = self._script.side_reply
        forced = wire.forced_tool(body)
        if forced is not None:
            name, schema = forced
            return Turn(tools=(ToolCall(name=name, input=minimal_instance(schema, filler)),))
        schema = wire.requested_schema(body)
        if schema is not None:
            return Turn(text=json.dumps(minimal_instance(schema, filler)))
        return Turn(text=filler)


class _Quiet(JSONResponse):
    """A JSON response that ignores a client which has already gone away."""

    def render(self, content: Any) -> bytes:
        return _json_text(content, allow_nan=False, separators=(",", ":")).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with contextlib.suppress(OSError, ClientDisconnect):
            await super().__call__(scope, receive, send)


class _EventStream:
    """An ASGI response streaming ``(data, is_delta)`` events as server-sent events, pausing ``chunk_delay``
    seconds before each delta with ``pause`` (which returns ``False`` when the stream must be cut short).

    Each event is written as ``event: <data["type"]>`` + ``data: <json>``. A client that disconnects
    mid-stream just ends the stream.
    """

    def __init__(
        self,
        events: Iterator[tuple[dict[str, Any], bool]],
        chunk_delay: float,
        headers: dict[str, str],
        pause: Callable[[float], Awaitable[bool]],
    ):
        fields = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", **headers}
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields.items()]
        self._events = events
        self._chunk_delay = chunk_delay
        self._pause = pause

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            for data, is_delta in self._events:
                if is_delta and self._chunk_delay and not await self._pause(self._chunk_delay):
                    break
                line = f"event: {data['type']}\ndata: {_json_text(data)}\n\n"
                await send({"type": "http.response.body", "body": line.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # uvicorn raises ClientDisconnected (an OSError) when the client has gone
            return


def _json_text(data: Any, **options: Any) -> str:
    """``data`` as JSON text (UTF-8 as is). A lone surrogate, which no UTF-8 encoder takes, is written as its
    ``\\ud83d`` escape instead: valid JSON syntax, and what a careless upstream sends, so a script can hand one to
    an agent."""
    text = json.dumps(data, ensure_ascii=False, **options)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, **options)
    return text


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw[:2000].decode("utf-8", "replace")


def _entry(request: Request, body: Any, **fields: Any) -> dict[str, Any]:
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    base = {
        "method": request.method,
        "path": path,
        "api": None,
        "kind": None,
        "reason": None,
        "turn": None,
        "model": None,
        "stream": False,
        "cwd": None,
        "headers": _headers(request.headers),
        "body": body,
        "reply": None,
    }
    return {**base, **fields}


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        if name.lower() in _SECRET_HEADERS:
            value = value[:10] + "…" if len(value) > 10 else value
        elif len(value) > _HEADER_VALUE_MAX:
            value = value[:_HEADER_VALUE_MAX] + "…"
        out[name.lower()] = value
    return out


def _summary(turn: Turn) -> dict[str, Any]:
    """What a reply contains, for the log."""
    out: dict[str, Any] = {}
    if turn.error is not None:
        out["error"] = {"status": turn.error.status, "type": turn.error.type, "message": turn.error.message}
    else:
        if turn.thinking is not None:
            out["thinking"] = turn.thinking
        if turn.text is not None:
            out["text"] = turn.text
        if turn.tools:
            out["tools"] = [
                {"name": t.name, "input": t.input, **({"custom": True} if t.custom else {})} for t in turn.tools
            ]
    if turn.delay:
        out["delay"] = turn.delay
    return out


def _model_info(model_id: str) -> dict[str, Any]:
    """One model entry, with both Anthropic (``type``, ``display_name``, ``created_at``) and OpenAI fields."""
    return {
        "id": model_id,
        "type": "model",
        "object": "model",
        "display_name": model_id,
        "created_at": "2025-01-01T00:00:00Z",
        "created": 1735689600,
        "owned_by": "anyagentd-mock",
    }
