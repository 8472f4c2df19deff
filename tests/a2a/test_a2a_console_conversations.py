"""The console's Conversations list (issue 28: "list (principal, contextId, agent, phase, last activity, tokens),
filterable") in a real headless Chromium against a real daemon serving two agents:

- the operator sees every principal's conversations on both agents, with agent, principal, phase and tokens; the
  agent, principal, phase and contextId filters narrow the rows; a row links to its live conversation;
- a conversation started while the page is open appears on it without a reload (the push stream);
- a plain user sees her own conversations only.

A screenshot goes to ``tests/.artifacts/console/conversations.png``. Every wait is for a condition (an element, a
row count), never a sleep. The browser fixtures are the first slice's.
"""

from __future__ import annotations

from typing import Any

import pytest
import test_a2a_console as first_slice
from test_a2a_console_admin import sign_in_with

browser, page, screenshot = first_slice.browser, first_slice.page, first_slice.screenshot  # its fixtures

expect = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-dev.txt").expect

pytestmark = pytest.mark.timeout(120)

OPERATOR, ALICE, BOB = "op-secret-conv-61a", "alice-secret-conv-2b9", "bob-secret-conv-d47"
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
CONFIG = (
    '[a2a]\nbearer = "{{secret:OP_TOKEN}}"\n'
    '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE_TOKEN}}"\n'
    '[[a2a.principals]]\nid = "bob"\nbearer = "{{secret:BOB_TOKEN}}"\n'
    + "".join(f'[[agents]]\nid = "{agent}"\nname = "mock"\nmock_script = "hello"\n' for agent in ("alpha", "beta"))
)
WAIT_MS = first_slice.WAIT_MS


def converse(daemon: Any, token: str, agent: str) -> dict[str, Any]:
    """One completed hello turn of a new conversation on ``agent`` as ``token``'s principal; its task."""
    task = daemon.send_text("hello", token=token, agent=agent)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task


def rows(page: Any) -> Any:
    return page.locator("tr.conversation")


def row_of(page: Any, task: dict[str, Any], agent: str) -> Any:
    return page.locator(f'tr.conversation[data-agent="{agent}"][data-context="{task["contextId"]}"]')


def test_the_operator_lists_and_filters_everyones_conversations_and_a_user_sees_hers(
    a2a_daemon: Any, page: Any
) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV)
    alice_alpha = converse(daemon, ALICE, "alpha")
    alice_beta = converse(daemon, ALICE, "beta")
    bob_beta = converse(daemon, BOB, "beta")

    sign_in_with(page, daemon, OPERATOR, "operator")
    page.locator("#nav-conversations").click()
    page.locator('.live-state[data-live="true"]').wait_for()
    expect(rows(page)).to_have_count(3, timeout=WAIT_MS)
    for task, agent, principal in (
        (alice_alpha, "alpha", "user:alice"),
        (alice_beta, "beta", "user:alice"),
        (bob_beta, "beta", "user:bob"),
    ):
        row = row_of(page, task, agent)
        assert row.get_attribute("data-principal") == principal
        assert row.locator("td.principal").inner_text() == principal and row.locator("td.agent").inner_text() == agent
        assert "completed" in row.inner_text()
        assert int(row.locator("td.tokens").inner_text()) > 0
    header = page.locator("table.conversations tr").first.inner_text()
    for column in ("principal", "contextId", "agent", "phase", "last activity", "est. tokens"):
        assert column in header
    # the column says what it is: the status op's estimate of the transcript's size, not the tokens reported
    tokens_title = page.locator("table.conversations th", has_text="est. tokens").get_attribute("title")
    assert tokens_title and "estimate" in tokens_title

    # the filters narrow the rows, each on its own and together
    page.locator("#filter-agent").select_option("beta")
    expect(rows(page)).to_have_count(2, timeout=WAIT_MS)
    page.locator("#filter-principal").select_option("user:bob")
    expect(rows(page)).to_have_count(1, timeout=WAIT_MS)
    row_of(page, bob_beta, "beta").wait_for()
    page.locator("#filter-agent").select_option("")
    page.locator("#filter-principal").select_option("user:alice")
    expect(rows(page)).to_have_count(2, timeout=WAIT_MS)
    page.locator("#filter-principal").select_option("")
    page.locator("#filter-phase").select_option("TASK_STATE_COMPLETED")
    expect(rows(page)).to_have_count(3, timeout=WAIT_MS)
    page.locator("#filter-phase").select_option("")
    page.locator("#filter-text").fill(alice_alpha["contextId"][4:14].upper())  # part of it, any case
    expect(rows(page)).to_have_count(1, timeout=WAIT_MS)
    row_of(page, alice_alpha, "alpha").wait_for()
    page.locator("#filter-text").fill("")
    expect(rows(page)).to_have_count(3, timeout=WAIT_MS)

    # live: a conversation started while the page is open shows without a reload
    page.evaluate("window.__notReloaded = true")
    bob_alpha = converse(daemon, BOB, "alpha")
    page.locator(  # its phase follows the task to its end
        f'tr.conversation[data-context="{bob_alpha["contextId"]}"][data-state="TASK_STATE_COMPLETED"]'
    ).wait_for()
    assert row_of(page, bob_alpha, "alpha").get_attribute("data-principal") == "user:bob"
    expect(rows(page)).to_have_count(4, timeout=WAIT_MS)
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "conversations")

    # a row links to the live conversation of its latest task
    row_of(page, alice_alpha, "alpha").locator("a").click()
    page.wait_for_url(f"**/console/#/task/alpha/{alice_alpha['id']}")
    page.locator('.task-state[data-state="TASK_STATE_COMPLETED"]').wait_for()

    # a plain user sees her own conversations only
    page.locator("#sign-out").click()
    sign_in_with(page, daemon, ALICE, "alice")
    page.locator("#nav-conversations").click()
    page.locator('.live-state[data-live="true"]').wait_for()
    expect(rows(page)).to_have_count(2, timeout=WAIT_MS)
    for task, agent in ((alice_alpha, "alpha"), (alice_beta, "beta")):
        assert row_of(page, task, agent).get_attribute("data-principal") == "user:alice"
    for task in (bob_beta, bob_alpha):
        assert task["contextId"] not in page.content()
    options = page.locator("#filter-principal option")
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == ["", "user:alice"]
