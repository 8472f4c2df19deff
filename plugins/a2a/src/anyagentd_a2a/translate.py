"""Pure mappings between the engine's model and A2A 1.0 objects (a2a-sdk protobuf types).

- :func:`prompt_of` — a user Message's parts → the prompt's text and attachments (file parts saved to a
  directory, data parts given as JSON text); :func:`empty_prompt`, the rule of a message that gives none.
- :func:`event_part` — an engine ``Event`` → a text Part holding the wire's own event JSON (:func:`wire_part`);
  :func:`wire_of_part` reads it back.
- :func:`request_text` — an open request rendered for a person.
- :func:`answer_of` — a follow-up Message → an engine ``Answer`` for the open request, or the reason it is not one.

How a ``TurnEnded`` stop maps to a terminal task state is a task-state rule: :func:`.tasks.state.from_stop`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.types import Message, Part, Role
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from anyagentd.model import (
    ANSWER,
    REQUEST,
    AnswerPermission,
    AnswerQuestion,
    Choices,
    PermissionRequested,
    TextAnswer,
    kind_tag,
)

from .tasks.state import INPUT_REQUIRED

EVENT_MEDIA_TYPE = "application/vnd.anyagent.event+json"
"""Media type of a text Part that carries one wire ``Event`` as its JSON text (:func:`wire_part`)."""
DELIVERY_MEDIA_TYPE = "application/vnd.anyagent.delivery+json"
"""Media type of a text Part that carries the engine's delivery of a prompt as wire JSON (``{"Steered": …}``)."""
REASONING_MEDIA_TYPE = "application/vnd.anyagent.reasoning+json"
"""Media type of a text Part that carries one reasoning message, whole, as ``{"ReasoningDelta": …}`` wire JSON."""
RESPONSE_ARTIFACT = "response"
"""Artifact id of a task's streamed response text."""


def camel(name: str) -> str:
    """``snake_case`` → ``lowerCamelCase``, as proto3 JSON names fields (``used_tokens`` → ``usedTokens``)."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def turn_metadata(stop: Any, usage: Any = None, resume_token: str | None = None) -> dict[str, Any]:
    """A task's ``metadata`` when its turn ends, every key lowerCamelCase (A2A 1.0 is proto3 JSON): ``stopReason``
    (Completed, Cancelled, Refused, Failed), ``stopSource`` (Protocol / Inferred, for Completed), ``stopMessage``
    (for Failed), ``usage`` (the turn's last ``ContextUsage``: ``usedTokens``, ``windowTokens``), ``costUsd`` and
    ``resumeToken`` when known. DataParts carrying wire events keep the wire's own keys; this is not one."""
    tag = kind_tag(stop)
    found: dict[str, Any] = {"stopReason": tag}
    if tag == "Completed":
        found["stopSource"] = stop.source
    elif tag == "Failed":
        found["stopMessage"] = stop.message
    if usage is not None:
        found["usage"] = {
            camel(k): v
            for k, v in (("used_tokens", usage.used_tokens), ("window_tokens", usage.window_tokens))
            if v is not None
        }
        if usage.cost_usd is not None:
            found["costUsd"] = usage.cost_usd
    if resume_token:
        found["resumeToken"] = resume_token
    return found


def wire_json(value: Any) -> Any:
    """The wire's JSON for an engine model value (the shape ``anyagent-wire.schema.json`` describes)."""
    return to_jsonable_python(value)


def wire_part(value: Any, media_type: str = EVENT_MEDIA_TYPE) -> Part:
    """A text Part of ``media_type`` (``application/vnd.anyagent.*+json``) whose text is ``value``'s wire JSON,
    compact, exactly as the wire writes it.

    Not a DataPart: a DataPart's ``data`` is a protobuf ``Value``, whose numbers are all doubles (``"sequence": 7.0``)
    and whose keys an A2A reader takes for A2A's own (A2A 1.0 §5.5 wants them lowerCamelCase: the TCK's
    DM-SERIAL-001); the wire's keys are snake_case and its integers integers (anyagent-wire.schema.json). In a text
    part both stay the wire's, and ``json.loads(part.text)`` is the wire's object."""
    return Part(text=json.dumps(wire_json(value), separators=(",", ":"), ensure_ascii=False), media_type=media_type)


def event_part(event: Any) -> Part:
    """A text Part (:data:`EVENT_MEDIA_TYPE`) holding one engine ``Event`` as the wire writes it (:func:`wire_part`)."""
    return wire_part(event)


def wire_of_part(part: Part) -> Any:
    """The wire JSON a Part of media type ``application/vnd.anyagent.*+json`` holds: its text parsed (as
    :func:`wire_part` writes it), or the DataPart that daemons before it wrote (their stored tasks are still read;
    its numbers are doubles). ``None`` for a part holding neither."""
    content = part.WhichOneof("content")
    if content == "text":
        try:
            return json.loads(part.text)
        except ValueError:
            return None
    if content == "data":
        return MessageToDict(part.data)
    return None


def agent_message(parts: list[Part], *, context_id: str, task_id: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=parts, context_id=context_id, task_id=task_id
    )


# ------------------------------------------------------------------------------------------------ prompts


MAX_FILE_BYTES = 20 * 1024 * 1024
"""Largest file part (inline bytes or fetched URL) saved for a prompt, in bytes."""


@dataclass(frozen=True)
class PromptIn:
    """What a user Message asks: the prompt ``text`` and the ``attachments`` (paths of saved files)."""

    text: str
    attachments: tuple[str, ...]


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def file_name(part: Part, index: int) -> str:
    """A safe file name for a file part: its ``filename`` (or the URL's last segment), reduced to one path segment
    of ``[A-Za-z0-9._-]``, prefixed by a random tag so two parts never collide."""
    raw = part.filename or (part.url.rsplit("/", 1)[-1].split("?")[0] if part.url else "")
    name = _SAFE_NAME.sub("_", Path(raw).name).lstrip(".") if raw else ""
    return f"{uuid.uuid4().hex[:8]}-{name or f'part-{index}'}"


EMPTY_PROMPT = "the message has no text, data or file part"
"""Why a message that gives no prompt (:func:`empty_prompt`) is refused."""

PROMPT_CONTENTS = ("text", "raw", "url", "data")
"""The fields a Part's ``content`` is in (its proto3 JSON keys too)."""


def empty_prompt(parts: Iterable[tuple[str | None, str]]) -> bool:
    """Whether a message of ``parts`` — each as (the field its content is in, one of :data:`PROMPT_CONTENTS`, or
        ``None`` for none; its text, ``""`` for other content) — gives the agent an empty prompt: no data part (its JSON
        is prompt text), no file (``raw`` or ``url``: an attachment) and no text part with anything but white space in
    it (``str.isspace``: spaces, tabs, newlines — what an agent would be sent as a prompt of nothing).

        The rule's one statement: :func:`prompt_of` refuses such a message, and the front refuses a send of one before a
        task exists (:func:`.limits.empty_message_refusal`, from the proto3 JSON). Pure."""
    return not any(
        kind in ("raw", "url", "data") or (kind == "text" and text and not text.isspace()) for kind, text in parts
    )


def prompt_of(message: Message, files_dir: Path, fetched: dict[int, bytes] | None = None) -> PromptIn:
    """Text parts joined by newlines; each data part as its JSON text; each file part — ``raw`` bytes, or a ``url``
    whose content the caller fetched (``fetched``: part index → bytes) — saved under ``files_dir`` and attached.
    Raises ``ValueError`` for a message that gives an empty prompt (:func:`empty_prompt`; nothing is saved) or a
    file over ``MAX_FILE_BYTES``."""
    if empty_prompt((part.WhichOneof("content"), part.text) for part in message.parts):
        raise ValueError(EMPTY_PROMPT)
    texts: list[str] = []
    attachments: list[str] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif kind in ("raw", "url"):
            content = part.raw if kind == "raw" else (fetched or {}).get(index)
            if content is None:
                raise ValueError(f"the file at {part.url} was not fetched")
            if len(content) > MAX_FILE_BYTES:
                raise ValueError(f"file part {index} is larger than {MAX_FILE_BYTES} bytes")
            files_dir.mkdir(parents=True, exist_ok=True)
            path = files_dir / file_name(part, index)
            path.write_bytes(content)
            attachments.append(str(path))
    return PromptIn("\n".join(t for t in texts if t), tuple(attachments))


# ------------------------------------------------------------------------------------------------ requests


def request_text(request: Any) -> str:
    """An open ``Request`` (``PermissionRequested`` / ``QuestionAsked``) as one paragraph for a person, ending with
    how to answer it in plain text."""
    if isinstance(request, PermissionRequested):
        value = request.value
        words = {"AllowOnce": "allow", "AllowAlways": "always", "DenyOnce": "deny", "DenyAlways": "deny"}
        offered = sorted({words[o] for o in value.options}, key=["allow", "always", "deny"].index)
        detail = f" ({value.detail})" if value.detail else ""
        return f"Permission requested: {value.tool.title}{detail}. Reply {', '.join(offered)}."
    lines = []
    for question in request.value.questions:
        choices = ", ".join(c.label for c in question.choices)
        free = " or free text" if question.allows_free_text else ""
        lines.append(f"Question: {question.text}" + (f" Choices: {choices}{free}." if choices else ""))
    return " ".join(lines)


_ALLOW = {"allow", "yes", "y", "ok", "allow once"}
_ALWAYS = {"always", "allow always"}
_DENY = {"deny", "no", "n", "deny once"}


def _permission_from_text(text: str, options: list[str]) -> AnswerPermission | str:
    word = text.strip().lower().rstrip(".!")
    if word in _ALLOW:
        wanted = ["AllowOnce", "AllowAlways"]
    elif word in _ALWAYS:
        wanted = ["AllowAlways"]
    elif word in _DENY:
        wanted = ["DenyOnce", "DenyAlways"]
    else:
        return f"{text.strip()!r} is not an answer to the permission request: reply allow, always or deny"
    choice = next((w for w in wanted if w in options), None)
    if choice is None:
        return f"{word!r} is not among the offered options {options}"
    return AnswerPermission(value=choice)


def _question_from_text(text: str, request: Any) -> AnswerQuestion | str:
    questions = request.value.questions
    if len(questions) != 1:
        return "this request asks several questions: answer with a DataPart holding the Answer JSON"
    question = questions[0]
    wanted = text.strip().lower()
    for choice in question.choices:
        if wanted in (choice.label.lower(), choice.id.lower()):
            return AnswerQuestion(value=[Choices(value=[choice.id])])
    if question.allows_free_text and text.strip():
        return AnswerQuestion(value=[TextAnswer(value=text.strip())])
    labels = ", ".join(c.label for c in question.choices)
    return f"{text.strip()!r} is not one of the choices ({labels})"


def answer_of(message: Message, request: Any) -> Any:
    """The ``Answer`` a follow-up message gives the open ``request``, or a ``str`` saying why it gives none.

    A DataPart holding the wire's Answer JSON (``{"Permission": "AllowOnce"}``, ``{"Question": [...]}``) wins;
    otherwise the text parts: allow/yes, always, deny/no for a permission; a choice's label or id, or free text
    where allowed, for a single question."""
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            value = MessageToDict(part.data)
            try:
                return ANSWER.validate_python(value)
            except ValidationError:
                return (
                    f'the DataPart is not an Answer ({json.dumps(value)[:120]}): expected {{"Permission": ...}} '
                    'or {"Question": [...]}'
                )
    text = " ".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip()
    if not text:
        return "the message carries no answer: send text or a DataPart holding the Answer JSON"
    if isinstance(request, PermissionRequested):
        return _permission_from_text(text, list(request.value.options))
    return _question_from_text(text, request)


def opened_request(message: Any) -> dict[str, Any] | None:
    """The wire JSON of the request (``{"Permission": {...}}`` / ``{"Question": {...}}``) that a ``RequestOpened``
    event part of ``message`` (a2a-sdk ``Message``) opens, as :func:`event_part` wrote it; ``None`` when it has none."""
    for part in message.parts:
        if part.media_type == EVENT_MEDIA_TYPE:
            event = wire_of_part(part)
            kind = event.get("kind") if isinstance(event, dict) else None
            if isinstance(kind, dict) and isinstance(kind.get("RequestOpened"), dict):
                return kind["RequestOpened"]  # type: ignore[no-any-return]
    return None


def asking_message(task: Any) -> Any:
    """The message (a2a-sdk ``Message``) of ``task`` whose ``RequestOpened`` event part opens the request it waits
    on: its status message, or — while it waits for input with a status message that opens none (an answer that
    was not one replaced it with words saying so, and the SDK moved the asking one into the history) — the newest
    agent message of its history that opens one. ``None`` when there is none. The client reads a task the same
    way (:func:`.client.open_request`)."""
    if opened_request(task.status.message) is not None:
        return task.status.message
    if task.status.state != INPUT_REQUIRED:
        return None
    for message in reversed(task.history):
        if message.role == Role.ROLE_AGENT and opened_request(message) is not None:
            return message
    return None


def parked_request(task: Any) -> Any:
    """The open ``Request`` a task waiting for input holds, read back from the event part of its
    :func:`asking_message` (:func:`opened_request`); ``None`` when there is none."""
    message = asking_message(task)
    opened = opened_request(message) if message is not None else None
    return REQUEST.validate_python(opened) if opened is not None else None


def same_request(before: Any, after: Any) -> bool:
    """Whether ``after`` (opened by a resumed agent) asks what ``before`` (open when the daemon stopped) asked: the
    same kind and the same words for a person (the ids are the new process's)."""
    return type(before) is type(after) and request_text(before) == request_text(after)


def resumed_answer_prompt(request: Any, answer: Any) -> str:
    """The prompt that carries an answer into a resumed conversation, the request itself having died with the
    agent process: what was asked and what the person answered, for the agent to act on."""
    if isinstance(answer, AnswerPermission):
        given = {
            "AllowOnce": "allow (once)",
            "AllowAlways": "allow (always)",
            "DenyOnce": "deny",
            "DenyAlways": "deny (always)",
        }[answer.value]
    else:
        given = json.dumps(to_jsonable_python(answer), ensure_ascii=False)
    return (
        f"[anyagentd] The daemon restarted while your request waited for an answer. Your request was: "
        f"{request_text(request)} The answer is: {given}. Carry on from there."
    )


OUTPUT_MODES = ("text/plain", "application/json")
"""What a task's artifacts and messages carry: text parts and JSON data parts."""


def accepts_our_output(modes: list[Any]) -> bool:
    """Whether a client's ``acceptedOutputModes`` admit one of :data:`OUTPUT_MODES` (``*/*`` and ``text/*``
    wildcards included)."""
    for mode in modes:
        mode = str(mode).split(";")[0].strip().lower()
        if mode in OUTPUT_MODES or mode in ("*/*", "*", "text/*", "application/*"):
            return True
    return False


async def url_violations(params: dict[str, Any], *, allow_private: bool) -> list[tuple[str, str]]:
    """The send check for file URLs in ``params.message.parts`` (the JSON-RPC params, before the SDK parses them):
    (field, why) for each URL that is not http(s), or points at a loopback/private address unless
    ``allow_private``."""
    from a2a.utils.push_url_validator import validate_push_notification_url

    message = params.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    found: list[tuple[str, str]] = []
    for index, part in enumerate(parts if isinstance(parts, list) else []):
        url = part.get("url") if isinstance(part, dict) else None
        if not isinstance(url, str):
            continue
        field_name = f"message.parts[{index}].url"
        if not url.startswith(("http://", "https://")):
            found.append((field_name, "a file URL must be http or https"))
        elif not allow_private and not await validate_push_notification_url(url):
            found.append((field_name, "a file URL must not point at a loopback or private address"))
    return found


async def fetch_url_parts(message: Message, *, allow_private: bool) -> dict[int, bytes]:
    """Fetch every ``url`` file part (http/https; loopback and private addresses only when ``allow_private``,
    else the SDK's push URL guard refuses them), at most ``MAX_FILE_BYTES`` each, 30 s each. Returns part index →
    bytes; raises ``ValueError`` naming the URL when one cannot be fetched."""
    import httpx
    from a2a.utils.push_url_validator import validate_push_notification_url

    urls = {i: p.url for i, p in enumerate(message.parts) if p.WhichOneof("content") == "url"}
    if not urls:
        return {}
    found: dict[int, bytes] = {}
    async with httpx.AsyncClient(timeout=30.0, follow_redirects=False) as client:
        for index, url in urls.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"file URL {url!r} is not http(s)")
            if not allow_private and not await validate_push_notification_url(url):
                raise ValueError(f"file URL {url!r} points at a private or loopback address")
            try:
                async with client.stream("GET", url) as response:
                    response.raise_for_status()
                    chunks, size = [], 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_FILE_BYTES:
                            raise ValueError(f"file URL {url!r} is larger than {MAX_FILE_BYTES} bytes")
                        chunks.append(chunk)
            except httpx.HTTPError as err:
                raise ValueError(f"file URL {url!r} could not be fetched: {err}") from None
            found[index] = b"".join(chunks)
    return found


__all__ = [
    "DELIVERY_MEDIA_TYPE",
    "EVENT_MEDIA_TYPE",
    "MAX_FILE_BYTES",
    "OUTPUT_MODES",
    "REASONING_MEDIA_TYPE",
    "RESPONSE_ARTIFACT",
    "PromptIn",
    "accepts_our_output",
    "agent_message",
    "camel",
    "empty_prompt",
    "EMPTY_PROMPT",
    "PROMPT_CONTENTS",
    "turn_metadata",
    "answer_of",
    "opened_request",
    "asking_message",
    "parked_request",
    "resumed_answer_prompt",
    "same_request",
    "event_part",
    "fetch_url_parts",
    "file_name",
    "prompt_of",
    "request_text",
    "url_violations",
    "wire_json",
    "wire_of_part",
    "wire_part",
]
