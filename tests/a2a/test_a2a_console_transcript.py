"""A conversation's transcript (issue 28) reads the same live and reloaded, in a real headless Chromium against a
real daemon: the live view is built from the SubscribeToTask stream, the reloaded one (the task ended) from GetTask,
where the daemon keeps the agent's text only in the ``response`` artifact and the wire events in the history's
status messages. The reloaded view puts each piece of text where it was said (not all at the end), keeps separate
agent messages separate, and both views say what was answered in words, not the answer's JSON.

Every wait is for a condition (an element, a task state), never a sleep.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a_helpers import wait_state
from test_a2a_console import browser, page  # noqa: F401 - the fixtures, shared

pytestmark = pytest.mark.timeout(120)

QUESTION = [
    "you: hi there",
    "Before I start, one question.",
    "question asked: Which language should the greeting be in?",
    "you answered: Klingon",
    "Thanks, noted.",
    "turn ended: Completed",
]
PERMISSION = [
    "you: hi there",
    "I am the scripted agent playing a demo",  # reasoning
    "plan",
    "I'll create hello.txt for you.",
    "Write hello.txt Completed",  # the tool, Completed in place
    "permission asked: Write hello.txt",
    "you allowed (always)",
    "plan",  # updated after the answer
    "You allowed it. A real agent would now have written hello.txt",
    "context 5400 of 200000 tokens",
    "turn ended: Completed",
]


def entries(page: Any) -> list[str]:  # noqa: F811 - the fixture's name
    """The transcript's entries as shown, in order."""
    return [" ".join(text.split()) for text in page.locator(".transcript > .entry").all_inner_texts()]


def ended(page: Any) -> list[str]:  # noqa: F811
    """Wait until the page shows the task completed and its turn's end; its entries then."""
    page.locator('.task-state[data-state="TASK_STATE_COMPLETED"]').wait_for()
    page.locator(".transcript > .entry", has_text="turn ended").wait_for()
    return entries(page)


def starts(shown: list[str], expected: list[str]) -> bool:
    return len(shown) == len(expected) and all(s.startswith(e) for s, e in zip(shown, expected, strict=True))


@pytest.mark.parametrize("script", ["question", "permission"])
def test_a_reloaded_conversation_reads_as_it_did_live(a2a_daemon: Any, page: Any, script: str) -> None:  # noqa: F811
    daemon = a2a_daemon(config=f'[[agents]]\nid = "asker"\nname = "mock"\nmock_script = "{script}"\napproval = "ask"\n')
    task_id = str(daemon.send_text("hi there", agent="asker", configuration={"returnImmediately": True})["id"])
    wait_state(daemon, task_id, "TASK_STATE_INPUT_REQUIRED", agent="asker")
    page.goto(f"{daemon.url}/console/#/task/asker/{task_id}")
    if script == "question":
        page.locator(".request .free-text").fill("Klingon")
        page.locator(".request .send-answer").click()
    else:
        page.locator('.request button[data-option="AllowAlways"]').click()
    page.locator(".transcript .answer", has_text="you ").wait_for()  # the answer in words, live too
    live = ended(page)
    wait_state(daemon, task_id, "TASK_STATE_COMPLETED", agent="asker")

    page.reload()
    reloaded = ended(page)
    assert reloaded == live  # the same entries in the same order
    assert starts(reloaded, QUESTION if script == "question" else PERMISSION), reloaded
    assert not any("{" in entry for entry in reloaded), reloaded  # no answer shown as raw JSON
