"""``anyagentd run``: one turn rendered live for a person on stderr, questions asked at the terminal."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.prompt import Prompt

from ..model import AnswerPermission, AnswerQuestion, Choices, PermissionRequested, TextAnswer

console = Console(stderr=True, highlight=False)

_TOOL_STYLE = {"Pending": "yellow", "Running": "cyan", "Completed": "green", "Failed": "red", "Cancelled": "dim"}
_PLAN_MARK = {"Pending": "☐", "InProgress": "▶", "Completed": "☑"}
_CHOICE_KEYS = {"AllowOnce": "y", "AllowAlways": "a", "DenyOnce": "n", "DenyAlways": "N"}


def _tool_line(tool: Any) -> str:
    kind = tool.kind if isinstance(tool.kind, str) else f"{tool.kind.server}/{tool.kind.tool}"
    return f"[{_TOOL_STYLE.get(tool.status, 'white')}]⏺ {kind}[/] {tool.title} [dim]({tool.status})[/]"


class TurnRenderer:
    """Turns events into terminal output: streamed text and reasoning, tool status changes, plans, usage."""

    def __init__(self) -> None:
        self.current: str | None = None  # the message being streamed
        self.tool_status: dict[str, str] = {}
        self.usage: Any = None

    def _break(self) -> None:
        if self.current is not None:
            console.print()
            self.current = None

    def show(self, event: Any) -> None:
        kind = event.kind
        tag = kind if isinstance(kind, str) else kind.TAG
        nested = "  " if event.turn_info and event.turn_info.parent_tool_id else ""
        if tag in ("TextDelta", "ReasoningDelta"):
            if self.current != kind.message_id:
                self._break()
                self.current = kind.message_id
                console.print(nested, end="")
            console.print(kind.text, end="", style="dim italic" if tag == "ReasoningDelta" else None)
        elif tag == "MessageEnded":
            if self.current == kind.message_id:
                self._break()
        elif tag == "ToolUpdated":
            tool = kind.value
            if self.tool_status.get(tool.id) != tool.status:
                self._break()
                self.tool_status[tool.id] = tool.status
                console.print(nested + _tool_line(tool))
                if tool.output and tool.status in ("Completed", "Failed"):
                    console.print(f"{nested}  [dim]{tool.output.strip()[:400]}[/]")
        elif tag == "ToolOutputDelta":
            self._break()
            console.print(f"{nested}  [dim]{kind.text}[/]", end="")
        elif tag == "PlanUpdated":
            self._break()
            console.print("[bold]Plan[/]")
            for entry in kind.entries:
                console.print(f"  {_PLAN_MARK.get(entry.status, '-')} {entry.text}")
        elif tag == "ContextUsage":
            self.usage = kind
        elif tag == "Diagnostic":
            self._break()
            console.print(f"[dim]{kind.value.level}: {kind.value.message}[/]")
        elif tag == "UserMessage":
            self._break()
            console.print(f"{nested}[blue]user:[/] {kind.text}")
        elif tag == "TurnEnded":
            self._break()
            stop = kind.stop
            label = stop if isinstance(stop, str) else stop.TAG
            detail = f": {stop.message}" if label == "Failed" else ""
            style = "green" if label == "Completed" else "red"
            usage = ""
            if self.usage is not None:
                window = f"/{self.usage.window_tokens}" if self.usage.window_tokens else ""
                cost = f", ${self.usage.cost_usd:.4f}" if self.usage.cost_usd is not None else ""
                usage = f" [dim]({self.usage.used_tokens}{window} tokens{cost})[/]"
            console.print(f"[{style}]■ {label}{detail}[/]{usage}")


def _ask_permission(request: Any) -> Any:
    req = request.value
    console.print(f"[bold yellow]Permission[/] {_tool_line(req.tool)}")
    if req.detail:
        console.print(f"  {req.detail}")
    for diff in req.tool.diffs:
        console.print(f"  [dim]{diff.path}:[/] {diff.new_text[:300]!r}")
    keys = {_CHOICE_KEYS[o]: o for o in req.options}
    legend = ", ".join(f"{k}={v}" for k, v in keys.items())
    key = Prompt.ask(f"  Allow? ({legend})", choices=list(keys), console=console)
    return AnswerPermission(value=keys[key])


def _ask_question(request: Any) -> Any:
    answers: list[Any] = []
    for question in request.value.questions:  # an empty reply or a number out of range is asked again
        console.print(f"[bold yellow]Question[/] {question.header or ''} {question.text}")
        for number, choice in enumerate(question.choices, 1):
            console.print(f"  {number}. {choice.label}" + (f" [dim]{choice.description}[/]" if choice.description else ""))
        hint = "numbers, comma-separated" if question.multi_select else "a number"
        hint += " or text" if question.allows_free_text else ""
        while True:
            reply = Prompt.ask(f"  Answer ({hint})", console=console).strip()
            picks = [p.strip() for p in reply.split(",")] if question.choices else []
            if picks and all(p.isdigit() and 1 <= int(p) <= len(question.choices) for p in picks):
                if len(picks) == 1 or question.multi_select:
                    answers.append(Choices(value=[question.choices[int(p) - 1].id for p in picks]))
                    break
            elif reply and not reply.replace(",", "").strip().isdigit() and (
                question.allows_free_text or not question.choices
            ):
                answers.append(TextAnswer(value=reply))
                break
            console.print("  [red]not an answer to this question[/]")
    return AnswerQuestion(value=answers)


class Terminated(Exception):
    """``run`` was stopped by SIGTERM or SIGHUP; its session was closed (the agent shut down) first."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


async def run_turn(runtime: Any, agent: str, prompt: str, directory: Path, auto_approve: bool, as_json: bool) -> bool:
    """Open a session, run ``prompt``, render until the turn ends, close. Returns True when it Completed.

    Raises :class:`Terminated` on SIGTERM/SIGHUP, after closing the session (so the agent is not left running)."""
    stopped_by: list[int] = []
    async with runtime, anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    stopped_by.append(signum)
                    tg.cancel_scope.cancel()  # leaving `async with runtime` closes the session
                    return

        tg.start_soon(watch_signals)
        completed = await _run_turn(runtime, agent, prompt, directory, auto_approve, as_json)
        tg.cancel_scope.cancel()
    if stopped_by:
        raise Terminated(stopped_by[0])
    return completed


async def _run_turn(runtime: Any, agent: str, prompt: str, directory: Path, auto_approve: bool, as_json: bool) -> bool:
    renderer = TurnRenderer()
    session = await runtime.open(agent, directory.resolve(), permission_mode="AutoApprove" if auto_approve else None)
    mode = ", permissions allowed automatically" if auto_approve else ""
    console.print(f"[dim]session {session.id} with {session.installation.name} in {directory.resolve()}{mode}[/]")
    delivery = await session.prompt(prompt)
    completed = finished = False
    async for event in session.events():
        if finished:
            continue  # what the agent says after our turn is not this command's output
        if as_json:
            click.echo(json.dumps(event.model_dump(mode="json")))
        renderer.show(event)
        kind = event.kind
        tag = kind if isinstance(kind, str) else kind.TAG
        if tag == "RequestOpened":
            ask = _ask_permission if isinstance(kind.value, PermissionRequested) else _ask_question
            answer = await anyio.to_thread.run_sync(ask, kind.value, abandon_on_cancel=True)
            await session.answer(kind.value.value.id, answer)
        elif tag == "TurnEnded" and event.turn_info and event.turn_info.id == getattr(delivery.kind, "turn_id", None):
            completed = not isinstance(kind.stop, str) and kind.stop.TAG == "Completed"
            finished = True
            await session.close()
    sys.stderr.flush()
    return completed
