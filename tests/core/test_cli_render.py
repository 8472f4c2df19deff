"""The terminal renderer keeps up with any agent: text deltas are gathered and written at most once per frame,
and anything else (a tool line, a turn end) writes the gathered text first, so order holds."""

from __future__ import annotations

import io

from rich.console import Console

from anyagentd.cli.render import PendingAnswer, TurnRenderer
from anyagentd.model import (
    AnswerPermission,
    AnswerQuestion,
    Choices,
    Event,
    MessageEnded,
    PermissionRequested,
    QuestionAsked,
    TextAnswer,
    TextDelta,
    ToolUpdated,
    TurnEnded,
)


class CountingFile(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def _event(kind: object, sequence: int = 1) -> Event:
    return Event.model_validate(
        {
            "sequence": sequence,
            "occurred_at": {"secs_since_epoch": 0, "nanos_since_epoch": 0},
            "session_id": "s1",
            "turn_info": None,
            "kind": kind.model_dump(mode="json"),
            "extensions": {},
        }
    )


def _renderer() -> tuple[TurnRenderer, CountingFile, list[float]]:
    out = CountingFile()
    now = [100.0]
    console = Console(file=out, force_terminal=False, width=200, color_system=None)
    return TurnRenderer(console, frames_per_second=20, clock=lambda: now[0]), out, now


def test_text_is_written_once_per_frame_not_per_delta() -> None:
    renderer, out, now = _renderer()
    delta = _event(TextDelta(message_id="m", text="x"))
    for _ in range(10_000):
        renderer.show(delta)
        renderer.tick()
    assert out.writes == 1 and out.getvalue() == "x"  # the first frame; the rest waits for the next one
    now[0] += 0.06
    renderer.tick()
    assert out.writes == 2 and out.getvalue() == "x" * 10_000
    renderer.tick()
    assert out.writes == 2  # nothing new, nothing written


def test_other_output_flushes_the_gathered_text_first() -> None:
    renderer, out, now = _renderer()
    renderer.show(_event(TextDelta(message_id="m", text="hello ")))
    renderer.tick()
    renderer.show(_event(TextDelta(message_id="m", text="world")))
    renderer.show(_event(MessageEnded(message_id="m")))
    tool = {
        "id": "t",
        "kind": "Read",
        "title": "Read a.txt",
        "status": "Running",
        "input": {"Path": "a.txt"},
        "output": None,
        "diffs": [],
        "locations": [],
        "raw": None,
    }
    renderer.show(_event(ToolUpdated.model_validate({"ToolUpdated": tool})))
    renderer.show(_event(TurnEnded.model_validate({"TurnEnded": {"stop": "Cancelled", "background": []}})))
    assert out.getvalue().splitlines() == ["hello world", "⏺ Read Read a.txt (Running)", "■ Cancelled"]


def _permission() -> PermissionRequested:
    tool = {
        "id": "t",
        "kind": "Edit",
        "title": "Write x",
        "status": "Pending",
        "input": {"Path": "x"},
        "output": None,
        "diffs": [],
        "locations": [],
        "raw": None,
    }
    return PermissionRequested.model_validate(
        {"Permission": {"id": "r", "tool": tool, "options": ["AllowOnce", "DenyOnce"], "detail": None}}
    )


def test_permission_answers_by_key_or_name() -> None:
    out = io.StringIO()
    pending = PendingAnswer(_permission(), Console(file=out, width=200))
    assert pending.feed("maybe") is None and "type one of y, n" in out.getvalue()
    assert pending.feed("n") == AnswerPermission(value="DenyOnce")
    assert pending.feed("allowonce") == AnswerPermission(value="AllowOnce")


def test_questions_take_one_line_each() -> None:
    asked = QuestionAsked.model_validate(
        {
            "Question": {
                "id": "q",
                "questions": [
                    {
                        "id": "a",
                        "text": "Pick",
                        "header": None,
                        "choices": [
                            {"id": "c1", "label": "One", "description": None},
                            {"id": "c2", "label": "Two", "description": None},
                        ],
                        "multi_select": True,
                        "allows_free_text": False,
                    },
                    {
                        "id": "b",
                        "text": "Why?",
                        "header": None,
                        "choices": [],
                        "multi_select": False,
                        "allows_free_text": True,
                    },
                ],
            }
        }
    )
    out = io.StringIO()
    pending = PendingAnswer(asked, Console(file=out, width=200))
    assert pending.feed("3") is None  # out of range: asked again
    assert pending.feed("1,2") is None  # the first answer; the second question is asked
    assert "Why?" in out.getvalue()
    assert pending.feed("because") == AnswerQuestion(value=[Choices(value=["c1", "c2"]), TextAnswer(value="because")])
