"""The console live (issue 28): the push stream ``GET /console/events`` (``console/events.py``) and the pages that
update on it, in a real headless Chromium against a real daemon.

- a permission asked by a REAL Claude Code (the pinned CLI against the scripted model endpoint) shows on the
  Waiting page — pushed, no poll (how soon: bench/bench_console.py) — with its Write request; Allow lets it write
  the file and the conversation page shows the tool Completed; Deny leaves the file absent and the model is told;
- a plain user's pages (``alice``, bearer from ``{{secret:…}}``) show none of ``bob``'s conversations or waiting
  tasks, even those that start while her page is live; no Admin link; an admin op from her is refused (-31403);
- the stream itself, over raw HTTP: 401 without a credential or with a wrong one, and each principal's stream
  carries its own tasks only (the operator's every task), never a token.

Every wait is for a condition (an element, a task state, a frame), never a sleep.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import wait_state
from test_a2a_claude_live import WRITE_SCRIPT, claude_config, request_text
from test_a2a_commands import command, reason
from test_a2a_console import browser, page, screenshot  # noqa: F401 - the fixtures, shared

pytestmark = pytest.mark.timeout(240)

OPERATOR, ALICE, BOB = "live-op-secret-3d1e", "live-alice-secret-8a2c", "live-bob-secret-c47b"
USERS = (
    '[agent]\nname = "mock"\napproval = "ask"\n'
    '[a2a]\nbearer = "{{secret:OP_TOKEN}}"\n'
    '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE_TOKEN}}"\n'
    '[[a2a.principals]]\nid = "bob"\nbearer = "{{secret:BOB_TOKEN}}"\n'
)
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
WAIT_S = 30.0


def waiting_live(page: Any, url: str) -> None:  # noqa: F811
    """Open the Waiting page and wait until its push stream is connected."""
    page.goto(url + "/console/#/waiting")
    page.locator('.live-state[data-live="true"]').wait_for()


def ask(daemon: Any, token: str | None = None) -> str:
    """Send the permission script a prompt (as ``token``'s principal) without waiting for it; its task id."""
    return str(daemon.send_text("write hello.txt", token=token, configuration={"returnImmediately": True})["id"])


# ------------------------------------------------------------------------------------ a real Claude Code


@pytest.mark.parametrize("button", ["AllowOnce", "DenyOnce"])
def test_a_real_claude_permission_is_pushed_to_the_page_and_answered_there(
    claude: Any,
    a2a_daemon: Any,
    work: Path,
    page: Any,  # noqa: F811 - the fixture
    button: str,
) -> None:
    server = claude(WRITE_SCRIPT)
    daemon = a2a_daemon(config=claude_config(work))
    waiting_live(page, daemon.url)
    task_id = str(daemon.send_text("Write out.txt", configuration={"returnImmediately": True})["id"])
    card = page.locator(f'.waiting-task[data-task="{task_id}"]')
    card.wait_for(timeout=60_000)
    wait_state(daemon, task_id, "TASK_STATE_INPUT_REQUIRED")  # pushed: the Waiting page no longer polls
    assert "Write" in card.locator(".request-title").inner_text()
    assert "out.txt" in card.inner_text() and "hi" in card.inner_text()  # the request as the agent put it
    agent = card.get_attribute("data-agent")
    if button == "AllowOnce":
        screenshot(page, "waiting-claude")
    card.locator(f'button[data-option="{button}"]').click()
    page.locator(".nothing-waiting").wait_for()  # the answer's task change took it off the page
    done = wait_state(daemon, task_id, "TASK_STATE_COMPLETED", timeout=WAIT_S)
    answers = [p.get("data") for m in done["history"] if m["role"] == "ROLE_USER" for p in m["parts"]]
    assert {"Permission": button} in answers
    page.goto(f"{daemon.url}/console/#/task/{agent}/{task_id}")
    page.locator('.task-state[data-state="TASK_STATE_COMPLETED"]').wait_for()
    tool = page.locator(".transcript .tool").first
    tool.wait_for()
    if button == "AllowOnce":
        assert (work / "out.txt").read_text() == "hi\n"
        page.locator('.transcript .tool[data-status="Completed"]').wait_for()
        screenshot(page, "conversation-claude")
    else:
        assert not (work / "out.txt").exists()
        assert "The user denied this tool use." in request_text(server.main_requests()[-1])
        assert page.locator('.transcript .tool[data-status="Completed"]').count() == 0


# ------------------------------------------------------------------------------------ a plain user's pages


def sign_in(page: Any, url: str, bearer: str, hash_: str) -> None:  # noqa: F811
    page.goto(f"{url}/console/{hash_}")
    page.locator("#token").fill(bearer)
    page.locator("#sign-in").click()
    page.locator('.live-state[data-live="true"]').wait_for()


def test_a_plain_user_sees_only_her_own_work_and_no_admin(a2a_daemon: Any, page: Any) -> None:  # noqa: F811
    daemon = a2a_daemon(config=USERS, env=ENV, mock="permission")
    bobs = [ask(daemon, BOB)]
    hers = [ask(daemon, ALICE)]
    for task_id, token in ((bobs[0], BOB), (hers[0], ALICE)):
        wait_state(daemon, task_id, "TASK_STATE_INPUT_REQUIRED", token=token)
    sign_in(page, daemon.url, ALICE, "#/waiting")
    assert page.locator("#principal").inner_text().endswith("alice")
    page.locator(f'.waiting-task[data-task="{hers[0]}"]').wait_for()
    # live: bob's next task starts waiting, then hers; the stream is in order, so once hers shows, bob's would have
    bobs.append(ask(daemon, BOB))
    wait_state(daemon, bobs[1], "TASK_STATE_INPUT_REQUIRED", token=BOB)
    hers.append(ask(daemon, ALICE))
    page.locator(f'.waiting-task[data-task="{hers[1]}"]').wait_for()
    shown = {page.locator(".waiting-task").nth(i).get_attribute("data-task") for i in range(2)}
    assert page.locator(".waiting-task").count() == 2 and shown == set(hers)
    page.locator("#nav-overview").click()
    page.locator(".agent .task-counts").wait_for()
    page.get_by_text("input required 2").wait_for()  # her two, not bob's
    table = page.locator("table.tasks").inner_text()
    for task_id in hers:
        assert task_id[:8] in table
    for task_id in bobs:
        assert task_id[:8] not in table and task_id[:8] not in page.content()
    assert page.locator("#nav-admin").count() == 0  # no Admin link for her
    assert (
        page.get_by_role("button", name="Drain").count() == 0 and page.get_by_role("button", name="Pause").count() == 0
    )
    refused = command(daemon, "admin.pause", token=ALICE)
    assert refused.status_code == 403 and reason(refused) == (-31403, "PERMISSION_DENIED")
    got = daemon.rpc("GetTask", {"id": bobs[0]}, token=BOB).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # nothing of bob's was touched


# ------------------------------------------------------------------------------------ the stream, raw


@contextmanager
def stream(url: str, token: str | None) -> Iterator[queue.Queue[Any]]:
    """``GET /console/events`` as ``token``'s principal, read in a thread: a queue of its frames (JSON), its raw
    text lines as ``("raw", line)``, and ``("end", None)`` when it ends."""
    frames: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    headers = {"Accept": "text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    client = httpx.Client(timeout=httpx.Timeout(10, read=None))
    response = client.send(client.build_request("GET", url + "/console/events", headers=headers), stream=True)
    assert response.status_code == 200, response.read()
    assert response.headers["content-type"].startswith("text/event-stream")

    def read() -> None:
        try:
            for line in response.iter_lines():
                if stop.is_set():
                    return
                frames.put(("raw", line))
                if line.startswith("data:"):
                    frames.put(json.loads(line[5:]))
        except httpx.HTTPError:
            pass
        finally:
            frames.put(("end", None))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield frames
    finally:
        stop.set()
        response.close()
        client.close()


def frames_until(frames: queue.Queue[Any], done: Any, what: str) -> list[Any]:
    """Every item of ``frames`` up to and including the first frame ``done(frame)`` holds for."""
    got: list[Any] = []
    while True:
        try:
            item = frames.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no {what} in {WAIT_S} s; got {got}") from None
        got.append(item)
        assert item != ("end", None), f"the stream ended before {what}: {got}"
        if isinstance(item, dict) and done(item):
            return got


def waits(task_id: str) -> Any:
    return lambda f: f.get("id") == task_id and f.get("state") == "TASK_STATE_INPUT_REQUIRED"


def test_the_stream_refuses_strangers_and_tells_each_principal_its_own(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=USERS, env=ENV, mock="permission")
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Bearer {ALICE}x"}):
        refused = httpx.get(daemon.url + "/console/events", headers=headers, timeout=30)
        assert refused.status_code == 401, (headers, refused.text)
        assert refused.json()["error"]["code"] == -31401 and "www-authenticate" in refused.headers
    assert httpx.get(daemon.url + "/console/events?token=" + ALICE, timeout=30).status_code == 401  # never by URL
    with stream(daemon.url, ALICE) as hers, stream(daemon.url, BOB) as his, stream(daemon.url, OPERATOR) as every:
        for frames, who in ((hers, "alice"), (his, "bob"), (every, "operator")):
            (hello,) = [f for f in frames_until(frames, lambda f: f["type"] == "hello", "hello") if isinstance(f, dict)]
            assert hello["principal"].endswith(who)
        bob_task = ask(daemon, BOB)
        wait_state(daemon, bob_task, "TASK_STATE_INPUT_REQUIRED", token=BOB)
        alice_task = ask(daemon, ALICE)
        seen_by_alice = frames_until(hers, waits(alice_task), "alice's waiting task on her stream")
        seen_by_bob = frames_until(his, waits(bob_task), "bob's waiting task on his stream")
        seen_by_operator = frames_until(every, waits(alice_task), "alice's task on the operator's stream")
        assert any(waits(bob_task)(f) for f in seen_by_operator if isinstance(f, dict))  # the operator sees both
        # alice's own arrives with the request the agent asks, as A2A JSON
        request = [f for f in seen_by_alice if isinstance(f, dict) and waits(alice_task)(f)][0]
        assert request["agent"] == "mock" and request["message"]["role"] == "ROLE_AGENT"
        assert "RequestOpened" in json.dumps(request["message"])
        # bob's own: his task, nothing else; to be sure nothing of alice's follows, wait until bob's next change
        bob_next = ask(daemon, BOB)
        seen_by_bob += frames_until(his, waits(bob_next), "bob's second task on his stream")
        alice_next = ask(daemon, ALICE)
        seen_by_alice += frames_until(hers, waits(alice_next), "alice's second task on her stream")
    tasks_of = lambda seen: {f["id"] for f in seen if isinstance(f, dict) and f["type"] == "task"}  # noqa: E731
    assert tasks_of(seen_by_alice) == {alice_task, alice_next}, seen_by_alice
    assert tasks_of(seen_by_bob) == {bob_task, bob_next}, seen_by_bob
    raw = {
        who: "\n".join(i[1] for i in seen if isinstance(i, tuple))
        for who, seen in (("alice", seen_by_alice), ("bob", seen_by_bob), ("operator", seen_by_operator))
    }
    assert all(raw.values()) and not any(secret in text for text in raw.values() for secret in (OPERATOR, ALICE, BOB))
    assert "alice" not in raw["bob"] and "bob" not in raw["alice"]  # not even the other's name


def test_a_slow_subscriber_loses_the_oldest_changes_and_is_told_to_resync() -> None:
    """The broadcaster's bound (``QUEUED`` per subscriber): past it the oldest changes go and the next take starts
    with a resync marker; a save that changes nothing shown is not told; a principal is told its own tasks only."""
    from a2a.types import Task, TaskState, TaskStatus

    from anyagentd_a2a.console.events import TaskEvents
    from anyagentd_a2a.principals import OPERATOR, Principal

    events = TaskEvents(limit=3)
    alice = events.subscribe(Principal("user:alice", "user"))
    everyone = events.subscribe(OPERATOR)
    for n in range(5):
        task = Task(id=f"t{n}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
        events.publish("mock", task, "user:alice")
        events.publish("mock", task, "user:alice")  # the same state again: not a change
    events.publish(
        "mock", Task(id="b", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)), "user:bob"
    )
    assert [f.get("id", f["type"]) for f in alice.take()] == ["resync", "t2", "t3", "t4"]
    assert [f.get("id", f["type"]) for f in everyone.take()] == ["resync", "t3", "t4", "b"]
    assert alice.take() == [] and not alice.lost
    events.unsubscribe(alice)
    events.publish(
        "mock", Task(id="t0", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)), "user:alice"
    )
    assert alice.take() == [] and [f["state"] for f in everyone.take()] == ["TASK_STATE_COMPLETED"]
