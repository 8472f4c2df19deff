"""Rendering a session for a person on stderr, and reading their answers to its questions.

:class:`TurnRenderer` keeps up with any agent: it is fed whole batches of events (``Session.event_batches``),
does no terminal output per text delta, and writes the text gathered since the last frame at most
:data:`FRAMES_PER_SECOND` times a second (tools, plans, prompts and turn ends flush it first, so order holds).
:class:`PendingAnswer` turns lines typed at the terminal into the ``Answer`` of a permission or question request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ..model import AnswerPermission, AnswerQuestion, Choices, PermissionRequested, TextAnswer, kind_tag

if TYPE_CHECKING:
    from ..model import Answer, ContextUsage, Event, Question, QuestionAnswer, Request, StopReason, ToolUpdate

FRAMES_PER_SECOND = 20
"""Upper bound on terminal writes of streamed text per second."""

_TOOL_STYLE = {"Pending": "yellow", "Running": "cyan", "Completed": "green", "Failed": "red", "Cancelled": "dim"}
_PLAN_MARK = {"Pending": "☐", "InProgress": "▶", "Completed": "☑"}
_CHOICE_KEYS = {"AllowOnce": "y", "AllowAlways": "a", "DenyOnce": "n", "DenyAlways": "N"}


def tool_line(tool: ToolUpdate) -> str:
    kind = tool.kind if isinstance(tool.kind, str) else f"{tool.kind.server}/{tool.kind.tool}"
    style = _TOOL_STYLE.get(tool.status, "white")
    return f"[{style}]⏺ {escape(kind)}[/] {escape(tool.title)} [dim]({tool.status})[/]"


def stop_label(stop: StopReason) -> str:
    return kind_tag(stop)


def parse_value(text: str) -> str | bool:
    """A ConfigValue typed by a person: ``true``/``false`` (any case) are booleans, anything else a string."""
    lowered = text.strip().lower()
    return {"true": True, "false": False}.get(lowered, text.strip())


def show_value(value: object) -> str:
    """A ConfigValue as JSON writes it (``true``, not ``True``)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


class TurnRenderer:
    """Turns events into terminal output: streamed text and reasoning, tool status changes, plans, usage, turn
    ends. Call :meth:`show` per event, then :meth:`tick` per batch (and now and then) and :meth:`flush` before
    writing anything else to the console."""

    def __init__(
        self,
        console: Console,
        frames_per_second: float = FRAMES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.frame = 1.0 / frames_per_second
        self.clock = clock
        self.current: str | None = None  # the message (or tool output) being streamed
        self.pending: list[str] = []  # text of ``current`` not written yet
        self.style: str | None = None
        self.tool_status: dict[str, str] = {}
        self.usage: ContextUsage | None = None
        self.last_write = 0.0

    # text ----------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the text gathered so far."""
        if self.pending:
            self.console.print(
                "".join(self.pending), end="", style=self.style, markup=False, highlight=False, soft_wrap=True
            )
            self.pending.clear()
            self.last_write = self.clock()

    def tick(self) -> None:
        """Write the gathered text if a frame has passed since the last write."""
        if self.pending and self.clock() - self.last_write >= self.frame:
            self.flush()

    def _break(self) -> None:
        """End the streamed message's line (writing what is left of it) before other output."""
        self.flush()
        if self.current is not None:
            self.console.print()
            self.current = None

    def _line(self, text: str) -> None:
        self._break()
        self.console.print(text, soft_wrap=True)

    # events --------------------------------------------------------------------------------------------

    def show(self, event: Event) -> None:
        kind: Any = event.kind  # dispatched on its tag below (each branch reads its tag's kind)
        tag = kind_tag(kind)
        nested = "  " if event.turn_info and event.turn_info.parent_tool_id else ""
        if tag in ("TextDelta", "ReasoningDelta", "ToolOutputDelta"):
            stream = f"tool:{kind.tool_id}" if tag == "ToolOutputDelta" else kind.message_id
            if self.current != stream:
                self._break()
                self.current = stream
                self.style = {"ReasoningDelta": "dim italic", "ToolOutputDelta": "dim"}.get(tag)
                self.pending.append(nested + ("  " if tag == "ToolOutputDelta" else ""))
            self.pending.append(kind.text)
        elif tag == "MessageEnded":
            if self.current == kind.message_id:
                self._break()
        elif tag == "ToolUpdated":
            tool = kind.value
            if self.tool_status.get(tool.id) != tool.status:
                self.tool_status[tool.id] = tool.status
                self._line(nested + tool_line(tool))
                if tool.output and tool.status in ("Completed", "Failed"):
                    self.console.print(f"{nested}  [dim]{escape(tool.output.strip()[:400])}[/]", soft_wrap=True)
        elif tag == "PlanUpdated":
            self._line("[bold]Plan[/]")
            for entry in kind.entries:
                self.console.print(f"  {_PLAN_MARK.get(entry.status, '-')} {escape(entry.text)}", soft_wrap=True)
        elif tag == "ContextUsage":
            self.usage = kind
        elif tag == "Diagnostic":
            self._line(f"[dim]{kind.value.level}: {escape(kind.value.message)}[/]")
        elif tag == "UserMessage":
            self._line(f"{nested}[blue]user:[/] {escape(kind.text)}")
        elif tag == "TurnEnded":
            self._break()
            stop = kind.stop
            label = stop_label(stop)
            detail = f": {escape(stop.message)}" if label == "Failed" else ""
            style = "green" if label == "Completed" else "red"
            usage = ""
            if self.usage is not None:
                window = f"/{self.usage.window_tokens}" if self.usage.window_tokens else ""
                cost = f", ${self.usage.cost_usd:.4f}" if self.usage.cost_usd is not None else ""
                usage = f" [dim]({self.usage.used_tokens}{window} tokens{cost})[/]"
            self.console.print(f"[{style}]■ {label}{detail}[/]{usage}", soft_wrap=True)
        elif tag == "RequestOpened":
            self._break()


# ------------------------------------------------------------------------------------------------ answers


class PendingAnswer:
    """An open request waiting for lines typed at the terminal.

    :meth:`show` prints the request and the prompt for its first answer; :meth:`feed` takes one line and returns
    the finished ``Answer`` (``AnswerPermission`` or ``AnswerQuestion``), or None after printing why the line was
    not an answer or the next question.
    """

    def __init__(self, request: Request, console: Console) -> None:
        self.request = request
        self.id = request.value.id
        self.console = console
        self.answers: list[QuestionAnswer] = []
        if isinstance(request, PermissionRequested):
            self.keys = {_CHOICE_KEYS[o]: o for o in request.value.options}

    def show(self) -> None:
        if isinstance(self.request, PermissionRequested):
            req = self.request.value
            self.console.print(f"[bold yellow]Permission[/] {tool_line(req.tool)}", soft_wrap=True)
            if req.detail:
                self.console.print(f"  {escape(req.detail)}", soft_wrap=True)
            for diff in req.tool.diffs:
                shown = escape(repr(diff.new_text[:300]))
                self.console.print(f"  [dim]{escape(diff.path)}:[/] {shown}", soft_wrap=True)
        self._ask()

    def _ask(self) -> None:
        if isinstance(self.request, PermissionRequested):
            legend = ", ".join(f"{k}={v}" for k, v in self.keys.items())
            self.console.print(f"  Allow? ({legend}) [{'/'.join(self.keys)}]: ", end="", markup=False)
            return
        question = self.request.value.questions[len(self.answers)]
        self.console.print(
            f"[bold yellow]Question[/] {escape(question.header or '')} {escape(question.text)}", soft_wrap=True
        )
        for number, choice in enumerate(question.choices, 1):
            description = f" [dim]{escape(choice.description)}[/]" if choice.description else ""
            self.console.print(f"  {number}. {escape(choice.label)}{description}", soft_wrap=True)
        hint = "numbers, comma-separated" if question.multi_select else "a number"
        hint += " or text" if question.allows_free_text else ""
        self.console.print(f"  Answer ({hint}): ", end="", markup=False)

    def feed(self, line: str) -> Answer | None:
        reply = line.strip()
        if isinstance(self.request, PermissionRequested):
            choice = self.keys.get(reply) or next((o for o in self.keys.values() if o.lower() == reply.lower()), None)
            if choice is None:
                self.console.print(f"  [red]type one of {', '.join(self.keys)}[/]")
                self._ask()
                return None
            return AnswerPermission(value=choice)
        question = self.request.value.questions[len(self.answers)]
        answer = _question_answer(question, reply)
        if answer is None:
            self.console.print("  [red]not an answer to this question[/]")
            self._ask()
            return None
        self.answers.append(answer)
        if len(self.answers) < len(self.request.value.questions):
            self._ask()
            return None
        return AnswerQuestion(value=self.answers)


def _question_answer(question: Question, reply: str) -> QuestionAnswer | None:
    """The answer ``reply`` gives to ``question``: choice numbers, or free text where allowed; None if neither."""
    picks = [p.strip() for p in reply.split(",")] if question.choices else []
    if picks and all(p.isdigit() and 1 <= int(p) <= len(question.choices) for p in picks):
        if len(picks) == 1 or question.multi_select:
            return Choices(value=[question.choices[int(p) - 1].id for p in picks])
        return None
    if reply and not reply.replace(",", "").strip().isdigit() and (question.allows_free_text or not question.choices):
        return TextAnswer(value=reply)
    return None
