"""Request and task limits (``[a2a.limits]``, :class:`.config.LimitsSection`): the front's refusals for a request
too large, the ``historyLength`` a read-out is held to, and the rule a task's stored history is trimmed by.

- :func:`read_body` — a ``POST /`` body read up to ``body_bytes``: a ``Content-Length`` over the limit is refused
  before a byte is read, a body without one (chunked) as soon as what came passes the limit; nothing over it is
  ever held in memory. The refusal, :func:`body_too_large`, is HTTP 413 (RFC 9110 §15.5.14) with ``Connection:
  close`` (so the rest of the body is never read) and JSON-RPC ``-32600`` Invalid Request in its body, the code
  the a2a-sdk's own dispatcher answers a 413 with (A2A 1.0 has no error of its own for size); ``id`` is null,
  as the body was never parsed.
- :func:`message_refusal` — a sent message with more than ``message_parts`` parts or a part over ``part_bytes``:
  ``-32602`` Invalid params (JSON-RPC 2.0 §5.1; A2A 1.0 §5.4 maps it to InvalidParams) with a google.rpc
  ``BadRequest`` naming the field and a google.rpc ``ErrorInfo`` (reason ``LIMIT_EXCEEDED``, domain
  ``agentd.dev``) whose metadata names the limit's key and value.
- :func:`empty_message_refusal` — a sent message that would start a task with an empty prompt (no text, data or
  file: :func:`.translate.empty_prompt`, the rule ``prompt_of`` refuses by): ``-32602`` with a google.rpc
  ``BadRequest`` naming ``message.parts`` and an ``ErrorInfo`` (reason ``EMPTY_MESSAGE``), before any task exists.
- :func:`held_history` — the params of GetTask, ListTasks and a send with ``historyLength`` at most
  ``task_history`` (an absent one becomes it): A2A 1.0 §3.2.4, an unset length is the server's default and a
  server may return fewer messages than asked.
- :func:`bound_history` — the rule for trimming the history a task store keeps to ``task_history`` messages.

The refusals are pure: each is decided from the request alone and changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from .config import LimitsSection

AGENTD_DOMAIN = "agentd.dev"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
REQUEST_OPENED = "RequestOpened"


class TooLarge(Exception):
    """A body over ``limit`` bytes; ``declared`` says the ``Content-Length`` said so (nothing of it was read)."""

    def __init__(self, limit: int, *, declared: bool) -> None:
        super().__init__(f"the request body is larger than a2a.limits.body_bytes ({limit} bytes)")
        self.limit = limit
        self.declared = declared


async def read_body(request: Request, limit: int) -> bytes:
    """The body of ``request``, at most ``limit`` bytes, left where Starlette caches it (``request.body()`` and
    ``request.json()`` read it again without reading the connection). Raises :class:`TooLarge` for a
    ``Content-Length`` over ``limit`` before reading anything, and as soon as the chunks received pass ``limit``
    (the rest is never read); raises Starlette's ``ClientDisconnect`` when the client goes away meanwhile."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:  # the server (h11) refuses a malformed Content-Length itself
        raise TooLarge(limit, declared=True)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(limit, declared=False)
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # Starlette's cache of request.body(), which the SDK's dispatcher reads
    return body


def body_too_large(err: TooLarge) -> JSONResponse:
    """The refusal of a body over the limit (see the module docstring)."""
    error = {
        "code": -32600,
        "message": f"Invalid Request: {err}",
        "data": [
            {
                "@type": ERROR_INFO,
                "reason": "LIMIT_EXCEEDED",
                "domain": AGENTD_DOMAIN,
                "metadata": {"limit": "a2a.limits.body_bytes", "max": str(err.limit)},
            }
        ],
    }
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": error}, status_code=413, headers={"Connection": "close"}
    )


def part_size(part: Any) -> int | None:
    """A part's content in bytes as ``part_bytes`` measures it, from its proto3 JSON: a text part's UTF-8 bytes,
    ``raw`` (base64) its decoded bytes (computed from its length, nothing decoded), a data part's compact JSON,
    a URL's UTF-8 bytes; ``None`` for what is not a well-formed part (the SDK refuses it)."""
    if not isinstance(part, dict):
        return None
    if isinstance(part.get("text"), str):
        return len(part["text"].encode("utf-8", "surrogatepass"))
    if isinstance(part.get("raw"), str):
        raw = part["raw"].strip().rstrip("=")
        return len(raw) * 3 // 4
    if "data" in part:
        return len(json.dumps(part["data"], ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    if isinstance(part.get("url"), str):
        return len(part["url"].encode("utf-8", "surrogatepass"))
    return None


def _exceeded(request_id: Any, field: str, description: str, key: str, limit: int) -> JSONResponse:
    error = {
        "code": -32602,
        "message": f"Invalid params: {field}: {description}",
        "data": [
            {"@type": BAD_REQUEST, "fieldViolations": [{"field": field, "description": description}]},
            {
                "@type": ERROR_INFO,
                "reason": "LIMIT_EXCEEDED",
                "domain": AGENTD_DOMAIN,
                "metadata": {"limit": key, "max": str(limit)},
            },
        ],
    }
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


def message_refusal(request_id: Any, params: dict[str, Any], limits: LimitsSection) -> JSONResponse | None:
    """The refusal of a send (``SendMessage``/``SendStreamingMessage`` params) whose message has more than
    ``limits.message_parts`` parts or a part over ``limits.part_bytes`` (the first such part), or ``None``. A
    message that is not an object with a list of parts is left for the SDK to refuse."""
    message = params.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return None
    if len(parts) > limits.message_parts:
        return _exceeded(
            request_id,
            "message.parts",
            f"{len(parts)} parts, more than a2a.limits.message_parts ({limits.message_parts})",
            "a2a.limits.message_parts",
            limits.message_parts,
        )
    for index, part in enumerate(parts):
        size = part_size(part)
        if size is not None and size > limits.part_bytes:
            return _exceeded(
                request_id,
                f"message.parts[{index}]",
                f"{size} bytes, more than a2a.limits.part_bytes ({limits.part_bytes})",
                "a2a.limits.part_bytes",
                limits.part_bytes,
            )
    return None


def wire_content(part: Any) -> tuple[str | None, str] | None:
    """A part's proto3 JSON as :func:`.translate.empty_prompt` reads a part: (the field its content is in, its text);
    ``None`` for what is not a well-formed part (not an object, two contents, a text that is not a string: the SDK
    refuses it). A ``null`` text, raw or url is no content (proto3 JSON); a ``null`` data is a JSON null, which is."""
    from .translate import PROMPT_CONTENTS

    if not isinstance(part, dict):
        return None
    kinds = [k for k in PROMPT_CONTENTS if (k in part if k == "data" else part.get(k) is not None)]
    if len(kinds) > 1:
        return None
    if not kinds:
        return (None, "")
    if kinds[0] == "text":
        return ("text", part["text"]) if isinstance(part["text"], str) else None
    return (kinds[0], "")


def empty_message_refusal(request_id: Any, params: dict[str, Any]) -> JSONResponse | None:
    """The refusal of a send (``SendMessage``/``SendStreamingMessage`` params) whose message would start a task
    with an empty prompt (:func:`.translate.empty_prompt`: no part, or only text parts without text), or ``None``.
    Not refused here: a message naming a ``taskId`` (a follow-up to a task, read as an answer, not a prompt), and
    one that is not an object whose ``parts`` (absent: none) is a list of well-formed parts (:func:`wire_content`),
    left for the SDK to refuse. A command's message has its data part: never refused here."""
    from .translate import EMPTY_PROMPT, empty_prompt

    message = params.get("message")
    if not isinstance(message, dict) or message.get("taskId"):
        return None
    parts = message.get("parts")
    parts = [] if parts is None else parts  # proto3 JSON: absent or null, a repeated field is empty
    if not isinstance(parts, list):
        return None
    contents = [wire_content(part) for part in parts]
    if any(c is None for c in contents) or not empty_prompt(c for c in contents if c is not None):
        return None
    description = f"{EMPTY_PROMPT}: the agent would be given an empty prompt"
    violation = {"field": "message.parts", "description": description}
    info = {"@type": ERROR_INFO, "reason": "EMPTY_MESSAGE", "domain": AGENTD_DOMAIN, "metadata": {}}
    error = {
        "code": -32602,
        "message": f"Invalid params: message.parts: {description}",
        "data": [{"@type": BAD_REQUEST, "fieldViolations": [violation]}, info],
    }
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


HISTORY_METHODS = frozenset({"GetTask", "ListTasks", "SendMessage", "SendStreamingMessage"})
"""The methods whose answer carries tasks' histories and whose params say a ``historyLength``."""


def held_history(method: str, params: dict[str, Any], kept: int) -> dict[str, Any] | None:
    """``params`` of ``method`` with ``historyLength`` (a send's in ``configuration``) at most ``kept``: absent,
    it is ``kept``; larger, it is ``kept``. Returns the new params, or ``None`` when nothing changes (another
    method, a length already within, a value that is not a non-negative integer — the SDK refuses that, or a
    ``configuration`` that is not an object)."""
    if method not in HISTORY_METHODS:
        return None
    sending = method in ("SendMessage", "SendStreamingMessage")
    holder = params.get("configuration", {}) if sending else params
    if not isinstance(holder, dict):
        return None
    asked = holder.get("historyLength")
    if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool) or asked < 0 or asked <= kept):
        return None
    held = dict(holder, historyLength=kept)
    return dict(params, configuration=held) if sending else held


def opens_request(message: Any) -> bool:
    """Whether a history ``Message`` (a2a-sdk protobuf) carries a ``RequestOpened`` event part — a permission or a
    question — as :func:`.translate.opened_request` reads it (the reader ``executor.replay_refusal`` uses); an
    event part whose text does not even name ``RequestOpened`` is passed over without parsing it."""
    from .translate import EVENT_MEDIA_TYPE, opened_request

    if not any(
        p.media_type == EVENT_MEDIA_TYPE and (p.WhichOneof("content") != "text" or REQUEST_OPENED in p.text)
        for p in message.parts
    ):
        return False
    return opened_request(message) is not None


def bound_history(task: Any, kept: int) -> int:
    """Trim ``task.history`` (an a2a-sdk ``Task``, changed in place) to at most ``kept`` messages (``kept`` >= 2);
    returns how many were dropped (0, without looking at any message, when it holds no more than ``kept``).

    Kept: the first message — the one that started the task: a replay after a restart gives it again and a
    workflow run's recovery reads it (``executor.ConversationExecutor._replay``, ``daemon``) — and the newest.
    Of the others the oldest go first, except that messages opening a request (a permission, a question) go only
    when nothing else is left to drop: a replay is refused when the turn had asked before
    (``executor.replay_refusal`` reads those from the history), and trimming must not turn that answer round.
    Called on every save, a task over the limit loses its oldest message each time, so each call looks at a
    message or two."""
    history = task.history
    excess = len(history) - kept
    if excess <= 0:
        return 0
    drop: list[int] = []
    requests: list[int] = []
    for index in range(1, len(history) - 1):  # kept >= 2: the first and the newest are never candidates
        if len(drop) == excess:
            break
        (requests if opens_request(history[index]) else drop).append(index)
    drop += requests[: excess - len(drop)]
    for index in sorted(drop, reverse=True):
        del history[index]
    return len(drop)


__all__ = [
    "TooLarge",
    "body_too_large",
    "bound_history",
    "empty_message_refusal",
    "held_history",
    "message_refusal",
    "opens_request",
    "part_size",
    "read_body",
    "wire_content",
]
