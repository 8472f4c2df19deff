"""The scripted agent as a person and a wire client meet it: answers that branch the script, option ``current``
values that follow the configuration (in ``SessionUpdated`` and ``info``, over the wire), and script errors that
name the place in the script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from wire_client import child_env

from anyagentd.errors import InvalidConfiguration
from anyagentd.mock.script import load_script
from anyagentd.model import AnswerPermission, AnswerQuestion, TextAnswer
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.timeout(60)

_END = {"End": {"Completed": {"source": "Protocol"}}}


def _say(text: str) -> dict[str, Any]:
    return {"Emit": {"TextDelta": {"message_id": "m", "text": text}}}


_ASK = {
    "Emit": {
        "RequestOpened": {
            "Permission": {
                "id": "r1",
                "tool": {
                    "id": "t1",
                    "kind": "Edit",
                    "title": "Write x",
                    "status": "Pending",
                    "input": {"Path": "x"},
                    "output": None,
                    "diffs": [],
                    "locations": [],
                    "raw": None,
                },
                "options": ["AllowOnce", "DenyOnce"],
                "detail": None,
            }
        }
    }
}
_QUESTION = {
    "Emit": {
        "RequestOpened": {
            "Question": {
                "id": "q1",
                "questions": [
                    {
                        "id": "a",
                        "text": "Why?",
                        "header": None,
                        "choices": [],
                        "multi_select": False,
                        "allows_free_text": True,
                    }
                ],
            }
        }
    }
}
BRANCHING = {
    "turns": [
        [_ASK, {"AwaitAnswer": {"allow": [_say("allowed")], "deny": [_say("denied")]}}, _say(" then on"), _END],
        [_QUESTION, {"AwaitAnswer": {"allow": [_say("answered")], "deny": [_say("never")]}}, _END],
    ]
}


async def _turn_text(session: Any, events: Any, prompt: str, answer: Any) -> str:
    await session.prompt(prompt)
    text = []
    async for event in events:
        if event.tag == "RequestOpened":
            await session.answer(event.kind.value.value.id, answer)
        elif event.tag == "TextDelta":
            text.append(event.kind.text)
        elif event.tag == "TurnEnded":
            return "".join(text)
    raise AssertionError("no TurnEnded")


@pytest.mark.anyio
@pytest.mark.parametrize(("choice", "expected"), [("AllowOnce", "allowed then on"), ("DenyOnce", "denied then on")])
async def test_await_answer_plays_the_branch_the_answer_chose(tmp_path: Path, choice: str, expected: str) -> None:
    async with Runtime(mock_script=BRANCHING) as rt:
        session = await rt.open("mock", tmp_path)
        events = session.events()
        assert await _turn_text(session, events, "go", AnswerPermission(value=choice)) == expected
        answered = await _turn_text(session, events, "again", AnswerQuestion(value=[TextAnswer(value="because")]))
        assert answered == "answered"  # a question's answer plays allow
        await session.close()


def test_shipped_permission_example_branches() -> None:
    script = load_script("permission")
    branches = [step for step in script.turns[0] if hasattr(step, "allow")]
    assert len(branches) == 1 and branches[0].allow and branches[0].deny


@pytest.mark.anyio
async def test_current_follows_configuration_in_info_and_session_updated(tmp_path: Path) -> None:
    async with Runtime(mock_script="model-option") as rt:
        session = await rt.open("mock", tmp_path, configure={"fast": True})
        currents = {o.id: o.current for o in session.info().details.config_options}
        assert currents == {"model": "small", "fast": True}  # creation options show in details too
        await session.configure("model", "large")
        async for event in session.events():
            if event.tag == "SessionUpdated":
                info = event.kind.value
                break
        assert info.configuration.options["model"] == "large"
        assert info.details.option("model").current == "large"
        assert session.info().details.option("model").current == "large"
        await session.close()


def test_current_follows_configuration_over_the_wire(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "model-option")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    assert client.ok("configure", session=s, option="model", value="large") is None
    lines = client.events(s, until=lambda l: "event" in l and "SessionUpdated" in l["event"]["kind"])
    updated = lines[-1]["event"]["kind"]["SessionUpdated"]
    assert updated["configuration"]["options"]["model"] == "large"
    assert {o["id"]: o["current"] for o in updated["details"]["config_options"]}["model"] == "large"
    info = client.ok("info", session=s)
    assert {o["id"]: o["current"] for o in info["details"]["config_options"]} == {"model": "large", "fast": False}


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            {"turns": [[{"Emit": {"TextDelta": {"text": "x"}}}]]},
            "turns[0][0].Emit.TextDelta.message_id: missing (required)",
        ),
        ({"turns": [[{"Sleep": -1}]]}, "turns[0][0].Sleep: Input should be greater than or equal to 0 (got -1)"),
        ({"bufer": 3}, "bufer: unknown field"),
        (
            {"turns": [[{"AwaitAnswer": {"deny": ["Bogus"]}}]]},
            "turns[0][0].AwaitAnswer.deny[0]: unknown step 'Bogus' (expected one of Emit, EmitWith, AwaitAnswer, Die, "
            "End, Sleep, Repeat)",
        ),
        (
            {"turns": [[{"EmitWith": {"event": {"ContextUsage": {}}}}]]},
            "turns[0][0].EmitWith.event.ContextUsage.used_tokens: missing (required)",
        ),
        (
            {"turns": [[{"A": 1, "B": 2}]]},
            "turns[0][0]: expected an object with one key naming the variant, or a bare name",
        ),
        (
            {"turns": [[{"Repeat": {"times": -1, "steps": [{"Repeat": {"times": 1, "steps": ["Bogus"]}}]}}]]},
            "turns[0][0].Repeat.times: Input should be greater than or equal to 0 (got -1); "
            "turns[0][0].Repeat.steps[0].Repeat.steps[0]: unknown step 'Bogus' (expected one of Emit, EmitWith, "
            "AwaitAnswer, Die, End, Sleep, Repeat)",
        ),
        (
            {"turns": [[{"AwaitAnswer": {"allow": [{"End": "Bogus"}]}}]]},
            "turns[0][0].AwaitAnswer.allow[0].End: unknown kind 'Bogus' (expected one of Cancelled, Refused, "
            "Completed, Failed)",
        ),
    ],
)
def test_script_errors_name_the_place(script: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        load_script(script)
    assert caught.value.message == f"invalid mock script: {expected}"


@pytest.mark.anyio
async def test_repeats_play_in_order_nested_or_flat(tmp_path: Path) -> None:
    # Repeat is played from an iterator (no coroutine per repeated step): nested and flat repeats keep their order.
    script = {
        "turns": [
            [
                {
                    "Repeat": {
                        "times": 2,
                        "steps": [_say("a"), {"Repeat": {"times": 3, "steps": [_say("b")]}}, _say("c")],
                    }
                },
                {"Repeat": {"times": 0, "steps": [_say("never")]}},
                {"Repeat": {"times": 2, "steps": [_say("d"), _say("e")]}},
                _END,
            ]
        ]
    }
    async with Runtime(mock_script=script) as rt:
        session = await rt.open("mock", tmp_path)
        assert await _turn_text(session, session.events(), "go", None) == "abbbcabbbcdede"
        await session.close()


@pytest.mark.anyio
async def test_emit_with_puts_the_extensions_on_the_event(tmp_path: Path) -> None:
    # EmitWith reports tokens as the real adapters do: on the event, where the engine's usage projection sums them
    usage = {
        "EmitWith": {
            "event": {"ContextUsage": {"used_tokens": 50}},
            "extensions": {"anyagentd/tokens": {"in": 40, "out": 10}},
        }
    }
    async with Runtime(mock_script={"turns": [[usage, usage, _END]]}) as rt:
        session = await rt.open("mock", tmp_path)
        events = session.events()
        await session.prompt("go")
        seen = []
        async for event in events:
            seen.append(event)
            if event.tag == "TurnEnded":
                break
        tokens = [e.extensions for e in seen if e.tag == "ContextUsage"]
        assert tokens == [{"anyagentd/tokens": {"in": 40, "out": 10}}] * 2
        assert (session.projections.usage.tokens_in, session.projections.usage.tokens_out) == (80, 20)
        await session.close()


def test_a_script_builds_the_schemas_of_the_steps_it_uses_only() -> None:
    # Each step is validated by its own kind (issue 31: the union of every kind of step, two of them recursive, was
    # most of the first `open`'s script schema): the `hello` example plays Emit and End steps only.
    code = (
        "from anyagentd.mock import script\n"
        "script.load_script('hello')\n"
        "built = sorted(script._STEP_ADAPTERS)\n"
        "print(built, script.Repeat.__pydantic_complete__, script.AwaitBranch.__pydantic_complete__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=child_env()
    )
    assert out.stdout.strip() == "['Emit', 'End'] False False"
