"""Claude Code's control protocol over stream-json (``docs/agents/claude.md#control-protocol``).

Both directions send ``{"type": "control_request", "request_id": ID, "request": {"subtype": ...}}`` and answer
``{"type": "control_response", "response": {"subtype": "success"|"error", "request_id": ID,
"response"|"error": ...}}``.

- :class:`ControlChannel`: our requests to the CLI (``initialize``, ``interrupt``, ``set_permission_mode``,
  ``set_model``, ``rewind_conversation``, ``rewind_files``, ``get_binary_version``) and the matching of its
  responses. Responses to ids we never sent are ignored (with ``--replay-user-messages`` the CLI echoes our own
  ``control_response`` lines back on stdout).
- :func:`permission_request` / :func:`question_request`: the CLI's ``can_use_tool`` as a normalized request;
  :func:`permission_response` / :func:`question_response`: the caller's answer as the CLI's reply.

AskUserQuestion answers: the CLI reads them from the *allowed* tool input: ``updatedInput`` = the original input
plus ``answers: {question text: answer}``, where an answer is the chosen option's label (several labels
joined with ``", "`` for multi-select) or the free text. The tool result then reads
``Your questions have been answered: "Q"="A"``. (Verified against Claude Code 2.1.197.)
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from anyagentd.errors import ProtocolFailed
from anyagentd.model import (
    AnswerPermission,
    AnswerQuestion,
    Choice,
    PermissionRequest,
    PermissionRequested,
    Question,
    QuestionAsked,
    QuestionRequest,
    ToolUpdate,
)

DENY_MESSAGE = "The user denied this tool use."
"""The ``message`` of a deny answer (the CLI hands it to the model as the tool's error result)."""

CANCEL_DENY_MESSAGE = "The user cancelled the turn."
"""The ``message`` of the deny sent to pending permission requests when the turn is cancelled."""


class ControlError(ProtocolFailed):
    """The CLI answered a control request with ``subtype: "error"``; ``detail`` is its error text."""


class _Pending:
    __slots__ = ("done", "response", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.response: Any = None
        self.error: str | None = None


class ControlChannel:
    """Outgoing control requests and their responses.

    ``write`` sends one JSON frame to the CLI's stdin (the process's ``write_json``). Request ids are
    ``anyagentd-<n>``.
    """

    def __init__(self, write: Callable[[Any], Awaitable[None]]) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._closed: str | None = None

    async def send(self, subtype: str, **fields: Any) -> str:
        """Send a control request; return its id without waiting (see :meth:`wait`)."""
        request_id = f"anyagentd-{next(self._ids)}"
        self._pending[request_id] = _Pending()
        try:
            await self._write({"type": "control_request", "request_id": request_id,
                               "request": {"subtype": subtype, **fields}})  # fmt: skip
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return request_id

    async def wait(self, request_id: str, timeout: float | None = None) -> Any:
        """Wait for the response to ``request_id``; return its ``response`` payload (``None`` when empty).

        Raises :class:`ControlError` for an error response, ``TimeoutError`` after ``timeout`` seconds, and
        ``ProtocolFailed`` when the CLI's output ended first.
        """
        pending = self._pending.get(request_id)
        if pending is None:
            raise KeyError(request_id)
        try:
            with anyio.fail_after(timeout):
                await pending.done.wait()
        finally:
            if pending.done.is_set():
                self._pending.pop(request_id, None)
        if pending.error is not None:
            raise ControlError(pending.error)
        return pending.response

    async def request(self, subtype: str, timeout: float | None = None, **fields: Any) -> Any:
        """Send a control request and wait for its response (see :meth:`wait`)."""
        return await self.wait(await self.send(subtype, **fields), timeout)

    def resolve(self, frame: dict[str, Any]) -> bool:
        """Feed a ``control_response`` frame; ``True`` when it answered one of our requests."""
        response = frame.get("response") or {}
        pending = self._pending.get(str(response.get("request_id")))
        if pending is None or pending.done.is_set():
            return False
        if response.get("subtype") == "error":
            pending.error = str(response.get("error") or "control request failed")
        else:
            pending.response = response.get("response")
        pending.done.set()
        return True

    def close(self, reason: str) -> None:
        """Fail every pending request (the CLI's output ended)."""
        self._closed = reason
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = reason
                pending.done.set()


def success(request_id: str, response: Any = None) -> dict[str, Any]:
    """Our ``control_response`` frame answering the CLI's request ``request_id`` with success."""
    body: dict[str, Any] = {"subtype": "success", "request_id": request_id}
    if response is not None:
        body["response"] = response
    return {"type": "control_response", "response": body}


def failure(request_id: str, error: str) -> dict[str, Any]:
    """Our ``control_response`` frame answering the CLI's request ``request_id`` with an error."""
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": error}}


# ------------------------------------------------------------------------------------------------ permissions


def permission_request(request_id: str, req: dict[str, Any], tool: ToolUpdate) -> PermissionRequested:
    """A ``can_use_tool`` request as a Permission request: AllowOnce, AllowAlways (only when the CLI offers
    ``permission_suggestions``), DenyOnce. ``detail`` joins the CLI's description, decision reason and blocked
    path."""
    options = ["AllowOnce"]
    if req.get("permission_suggestions"):
        options.append("AllowAlways")
    options.append("DenyOnce")
    parts = [req.get("title"), req.get("description"), req.get("decision_reason")]
    if req.get("blocked_path"):
        parts.append(f"path: {req['blocked_path']}")
    if tool.raw is None and isinstance(req.get("input"), dict) and req.get("tool_name") == "ExitPlanMode":
        parts.append(str(req["input"].get("plan") or ""))
    detail = "\n".join(str(p) for p in parts if p) or None
    return PermissionRequested(value=PermissionRequest(id=request_id, tool=tool, options=options, detail=detail))


def permission_response(answer: AnswerPermission, req: dict[str, Any]) -> dict[str, Any]:
    """The ``can_use_tool`` reply for a Permission answer: allow with the unchanged input (AllowAlways adds
    ``updatedPermissions`` = the CLI's suggestions), or deny with :data:`DENY_MESSAGE`."""
    tool_use_id = req.get("tool_use_id")
    if answer.value in ("AllowOnce", "AllowAlways"):
        body: dict[str, Any] = {"behavior": "allow", "updatedInput": req.get("input") or {}}
        if answer.value == "AllowAlways" and req.get("permission_suggestions"):
            body["updatedPermissions"] = req["permission_suggestions"]
    else:
        body = {"behavior": "deny", "message": DENY_MESSAGE}
    if tool_use_id:
        body["toolUseID"] = tool_use_id
    return body


def deny_response(req: dict[str, Any], message: str = CANCEL_DENY_MESSAGE, interrupt: bool = True) -> dict[str, Any]:
    """A deny reply for a pending ``can_use_tool`` (cancel, close): ``interrupt`` also stops the turn."""
    body: dict[str, Any] = {"behavior": "deny", "message": message}
    if interrupt:
        body["interrupt"] = True
    if req.get("tool_use_id"):
        body["toolUseID"] = req["tool_use_id"]
    return body


# ------------------------------------------------------------------------------------------------ questions


def question_request(request_id: str, req: dict[str, Any]) -> QuestionAsked:
    """An ``AskUserQuestion`` permission request as a Question request.

    Question ids are ``q<i>``, choice ids ``q<i>.<j>`` (positions in the tool input). Every question allows free
    text: Claude Code always offers an "Other" answer.
    """
    questions = []
    raw = (req.get("input") or {}).get("questions")
    for i, q in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(q, dict):
            continue
        choices = [
            Choice(id=f"q{i}.{j}", label=str(o.get("label") or ""), description=o.get("description"))
            for j, o in enumerate(q.get("options") or [])
            if isinstance(o, dict)
        ]
        questions.append(Question(
            id=f"q{i}", text=str(q.get("question") or ""), header=q.get("header") or None, choices=choices,
            multi_select=bool(q.get("multiSelect")), allows_free_text=True,
        ))  # fmt: skip
    return QuestionAsked(value=QuestionRequest(id=request_id, questions=questions))


def question_response(answer: AnswerQuestion, req: dict[str, Any]) -> dict[str, Any]:
    """The ``can_use_tool`` reply for a Question answer: allow, with ``updatedInput`` = the tool input plus
    ``answers`` keyed by question text (labels of the chosen choices joined with ``", "``, or the free text)."""
    inp = dict(req.get("input") or {})
    raw = inp.get("questions") if isinstance(inp.get("questions"), list) else []
    answers: dict[str, str] = {}
    for i, reply in enumerate(answer.value):
        q = raw[i] if i < len(raw) and isinstance(raw[i], dict) else {}
        text = str(q.get("question") or f"q{i}")
        if reply.TAG == "Text":
            answers[text] = reply.value
            continue
        options = [o for o in q.get("options") or [] if isinstance(o, dict)]
        labels = []
        for choice_id in reply.value:
            _, _, index = choice_id.partition(".")
            if index.isdigit() and int(index) < len(options):
                labels.append(str(options[int(index)].get("label") or ""))
        answers[text] = ", ".join(labels)
    inp["answers"] = answers
    body: dict[str, Any] = {"behavior": "allow", "updatedInput": inp}
    if req.get("tool_use_id"):
        body["toolUseID"] = req["tool_use_id"]
    return body
