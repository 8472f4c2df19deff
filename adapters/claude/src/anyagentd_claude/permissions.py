"""Claude Code's ``can_use_tool`` requests ↔ the engine's requests (``docs/agents/claude.md#permissions-and-questions``).

The path: the CLI's ``can_use_tool`` control request → :func:`engine_request` → the engine's Permission or
Question request, recorded in the session's open-request table (``ClaudeState.requests``, the toolkit's
:class:`~anyagentd.adapters.pending.PendingRequests`: control request id → the CLI's request body, its kind); the
engine's answer → the table's ``answer`` → :func:`reply` → the CLI's ``control_response``. A
``control_cancel_request`` withdraws an open request; a cancel denies them all (:func:`cancel_reply`). The engine
alone validates answers (their kind, the choices offered): what reaches :func:`reply` is an answer to the request
it names.

AskUserQuestion answers: the CLI reads them from the *allowed* tool input: ``updatedInput`` = the original input
plus ``answers: {question text: answer}``, where an answer is the chosen option's label (several labels joined
with ``", "`` for multi-select) or the free text. The tool result then reads
``Your questions have been answered: "Q"="A"``. (Verified against Claude Code 2.1.197.)
"""

from __future__ import annotations

from typing import Any, cast

from anyagentd.adapters.pending import PendingRequest
from anyagentd.model import (
    Answer,
    AnswerPermission,
    AnswerQuestion,
    Choice,
    PermissionRequest,
    PermissionRequested,
    Question,
    QuestionAsked,
    QuestionRequest,
    RequestOpened,
    ToolUpdate,
)

from .control import success
from .tools import QUESTION_TOOL, tool_update

DENY_MESSAGE = "The user denied this tool use."
"""The ``message`` of a deny answer (the CLI hands it to the model as the tool's error result)."""

CANCEL_DENY_MESSAGE = "The user cancelled the turn."
"""The ``message`` of the deny sent to pending permission requests when the turn is cancelled."""


def engine_request(
    request_id: str, req: dict[str, Any], known: ToolUpdate | None, cwd: str | None = None
) -> tuple[str, RequestOpened]:
    """The engine's request for the CLI's ``can_use_tool`` ``req`` (its control request ``request_id``), with its
    kind for the open-request table: ``("question", …)`` for ``AskUserQuestion``, else ``("permission", …)`` on
    ``known`` (the tool use's snapshot, when it was streamed) or a snapshot built from the request (``cwd``: the
    session directory)."""
    if req.get("tool_name") == QUESTION_TOOL:
        return "question", RequestOpened(value=question_request(request_id, req))
    tool_use_id = str(req.get("tool_use_id") or "")
    tool = known or tool_update(tool_use_id, str(req.get("tool_name") or "tool"), req.get("input"), cwd)
    return "permission", RequestOpened(value=permission_request(request_id, req, tool))


def reply(item: PendingRequest[dict[str, Any]], answer: Answer) -> dict[str, Any]:
    """The ``control_response`` frame answering the open request ``item`` with the engine's ``answer`` (the
    ``reply`` the connection gives :meth:`~anyagentd.adapters.pending.PendingRequests.answer`)."""
    if item.kind == "question":
        return success(item.id, question_response(cast(AnswerQuestion, answer), item.data))
    return success(item.id, permission_response(cast(AnswerPermission, answer), item.data))


def cancel_reply(item: PendingRequest[dict[str, Any]]) -> dict[str, Any]:
    """The ``control_response`` frame denying the open request ``item`` at a cancel (or close), with ``interrupt``
    (:meth:`~anyagentd.adapters.pending.PendingRequests.cancel_all`'s ``reply``)."""
    return success(item.id, deny_response(item.data))


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
        questions.append(
            Question(
                id=f"q{i}",
                text=str(q.get("question") or ""),
                header=q.get("header") or None,
                choices=choices,
                multi_select=bool(q.get("multiSelect")),
                allows_free_text=True,
            )
        )
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
