"""The console's Admin page and its device sign-in (issue 28) in a real headless Chromium against a real daemon:

- the operator approves a device sign-in waiting for a decision from the page (the device side driven with the
  OAuth endpoints, as a device would), sees its session and revokes it: the issued token is refused at once;
- pause and resume one agent, then the daemon (every agent), from the page, read back with ``GET /agents``; the
  introspection switch, read back with the ``config`` op;
- a plain user's page has no Admin link, and what she does on the Admin page is refused by the daemon;
- the sign-in page signs in by the device grant: it shows a user code, the operator approves it with
  ``auth.device.approve``, and the page polls ``/oauth2/token`` at the interval given and is signed in as that
  principal, its token in the tab's session storage.

Every wait is for a condition (an element, a state), never a sleep. The browser fixtures are the first slice's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import test_a2a_console as first_slice
from test_a2a_commands import command, reason, result_of, task_result
from test_a2a_device_grant import code_pair, poll

browser, page, screenshot = first_slice.browser, first_slice.page, first_slice.screenshot  # its fixtures

pytestmark = pytest.mark.timeout(120)

OPERATOR, ALICE = "op-secret-admin-4b1", "alice-secret-admin-7c2"
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE}
SIGNED = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
[a2a.device_grant]
enabled = true
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
"""
"""The operator's bearer, the device grant, and a plain user (no grants)."""
TWO = "".join(f'[[agents]]\nid = "{agent}"\nname = "mock"\nmock_script = "hello"\n' for agent in ("alpha", "beta"))


def states(daemon: Any) -> dict[str, str]:
    return {a["id"]: a["state"] for a in httpx.get(daemon.url + "/agents", timeout=30).json()["agents"]}


def sign_in_with(page: Any, daemon: Any, bearer: str, principal: str) -> None:
    """Paste ``bearer`` on the console's sign-in page; wait until the page is signed in as ``principal``."""
    page.goto(daemon.url + "/console/")
    page.locator("#token").fill(bearer)
    page.locator("#sign-in").click()
    page.locator("#principal", has_text=principal).wait_for()


def principal_of(daemon: Any, bearer: str) -> str:
    card = daemon.rpc("GetExtendedAgentCard", token=bearer).json()["result"]
    return str(card["capabilities"]["extensions"][0]["params"]["principal"])


# ------------------------------------------------------------------------------------ device sign-ins, sessions


def test_the_operator_approves_a_device_sign_in_and_revokes_its_session(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=SIGNED, env=ENV)
    sign_in_with(page, daemon, OPERATOR, "operator")
    page.locator("#nav-admin").click()
    page.locator(".no-pending").wait_for()
    pair = code_pair(daemon)  # a device asks to sign in
    row = page.locator(f'.device-pending[data-code="{pair["user_code"]}"]')
    row.wait_for()  # the page's next refresh shows it
    assert "anyagentd-test" in row.inner_text() and "user" in row.inner_text()
    assert row.locator("button.approve").is_disabled()  # no name yet
    row.locator(".device-name").fill("dev")
    row.locator("button.approve").click()
    page.locator(".no-pending").wait_for()
    issued = poll(daemon, pair["device_code"])  # the device's next poll gets its token
    assert issued.status_code == 200, issued.text
    device_token = issued.json()["access_token"]
    assert principal_of(daemon, device_token) == "user:dev"
    [session] = result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions")["sessions"]
    assert session["approved_by"] == "operator" and session["name"] == "dev"

    # the session shows on the page, and Revoke ends it
    row = page.locator(f'.session[data-sid="{session["sid"]}"]')
    row.wait_for()
    assert "user:dev" in row.inner_text()
    screenshot(page, "admin")
    row.locator("button.revoke").click()
    page.locator(".no-sessions").wait_for()
    refused = daemon.rpc("GetExtendedAgentCard", token=device_token)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == -31401
    assert result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions") == {"sessions": []}


def test_a_device_sign_in_denied_from_the_page_gets_no_token(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=SIGNED, env=ENV)
    sign_in_with(page, daemon, OPERATOR, "operator")
    page.goto(daemon.url + "/console/#/admin")
    pair = code_pair(daemon)
    row = page.locator(f'.device-pending[data-code="{pair["user_code"]}"]')
    row.locator("button.deny").click()
    page.locator(".no-pending").wait_for()
    answer = poll(daemon, pair["device_code"])
    assert answer.status_code == 400 and answer.json()["error"] == "access_denied"


# ------------------------------------------------------------------------------------ agents, introspection


def test_pause_and_resume_an_agent_and_the_daemon_from_the_page(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=TWO)
    page.goto(daemon.url + "/console/")
    page.locator("#nav-admin").click()  # the loopback operator has the Admin link
    alpha = page.locator('.admin-agent[data-agent="alpha"]')
    alpha.locator('[data-state="serving"]').wait_for()
    alpha.locator("button.pause").click()
    alpha.locator('[data-state="paused"]').wait_for()
    assert states(daemon) == {"alpha": "paused", "beta": "serving"}
    alpha.locator("button.resume").click()
    alpha.locator('[data-state="serving"]').wait_for()
    assert states(daemon) == {"alpha": "serving", "beta": "serving"}

    every = page.locator('.admin-agent[data-agent="*"]')  # the root: the daemon and every agent
    every.locator("button.pause").click()
    every.locator('[data-state="paused"]').wait_for()
    page.locator('.admin-agent[data-agent="beta"] [data-state="paused"]').wait_for()
    assert states(daemon) == {"alpha": "paused", "beta": "paused"}
    every.locator("button.resume").click()
    every.locator('[data-state="serving"]').wait_for()
    assert states(daemon) == {"alpha": "serving", "beta": "serving"}
    done = daemon.send_text("hi", agent="beta")  # serving again: a prompt runs
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_introspection_switch(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=TWO)
    page.goto(daemon.url + "/console/#/admin")
    page.locator('#introspection[data-on="false"]').wait_for()
    refused = command(daemon, "debug.events", token=None, limit=5)
    assert reason(refused)[1] == "INTROSPECTION_DISABLED", refused.text
    page.locator("#introspection-toggle").click()
    page.locator('#introspection[data-on="true"]').wait_for()
    config = result_of(command(daemon, "config", token=None), "config")["config"]
    assert config["a2a"]["introspection"] is True
    assert "result" in command(daemon, "debug.events", token=None, limit=5).json()
    page.locator("#introspection-toggle").click()
    page.locator('#introspection[data-on="false"]').wait_for()
    assert result_of(command(daemon, "config", token=None), "config")["config"]["a2a"]["introspection"] is False


# ------------------------------------------------------------------------------------ a plain user


def test_a_plain_users_page_has_no_admin_and_her_admin_ops_are_refused(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=SIGNED + TWO, env=ENV)
    sign_in_with(page, daemon, ALICE, "alice")
    principal = page.locator("#principal").inner_text()
    ops: list[str] = []
    page.on("request", lambda request: ops.append(request.post_data or "") if request.method == "POST" else None)
    page.goto(daemon.url + "/console/#/admin")  # not linked: typed by hand
    notice = page.locator("#not-operator")
    notice.wait_for()
    # a notice only (its words spaced: "… refuses its actions to user:alice."), no control, no admin op asked
    assert f"the daemon refuses its actions to {principal}." in notice.inner_text(), notice.inner_text()
    assert page.locator("#nav-admin").count() == 0
    assert page.locator("main.admin button, main.admin table, main.admin input").count() == 0
    # ops only the admin page asks (every page polls status; the overview's poll may still be in flight)
    admin_only = ('"op":"config"', '"op":"auth.device.pending"', '"op":"auth.sessions"', '"op":"admin.')
    assert not [body for body in ops if any(op in body for op in admin_only)], ops
    assert states(daemon) == {"alpha": "serving", "beta": "serving"}
    # the same op as she sends it outside the page: refused
    assert reason(command(daemon, "admin.pause", token=ALICE)) == (-31403, "PERMISSION_DENIED")
    # and the operator's own page has the link
    page.evaluate("sessionStorage.clear()")
    sign_in_with(page, daemon, OPERATOR, "operator")
    page.locator("#nav-admin").wait_for()


# ------------------------------------------------------------------------------------ device sign-in on the page


def test_the_sign_in_page_signs_in_by_the_device_grant(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=SIGNED, env=ENV)
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    page.goto(daemon.url + "/console/")
    page.locator("#device-start").click()
    code = page.locator("#user-code").inner_text()
    assert "(on the console's Admin page, or auth.device.approve)" in page.locator(".device-signin").inner_text()
    pending = result_of(command(daemon, "auth.device.pending", token=OPERATOR), "auth.device.pending")["pending"]
    assert [(p["user_code"], p["client_id"], p["scope"]) for p in pending] == [(code, "anyagentd-console", "user")]
    _, approved = task_result(
        command(daemon, "auth.device.approve", token=OPERATOR, user_code=code, **{"as": "browser"}),
        "auth.device.approve",
    )
    assert approved["approved"]["principal"] == "user:browser"
    page.locator("#principal", has_text="user:browser").wait_for()  # the page's next poll gets the token
    stored = page.evaluate("sessionStorage.getItem('anyagentd.console.token')")
    assert stored.startswith("agd_") and principal_of(daemon, stored) == "user:browser"
    assert page.locator("#nav-admin").count() == 0 and stored not in page.url and stored not in page.content()
    assert all(stored not in url and code not in url for url in seen)
    # the session is the operator's to see and end
    [session] = result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions")["sessions"]
    assert (session["name"], session["client_id"]) == ("browser", "anyagentd-console")


def test_no_device_sign_in_is_offered_without_the_grant(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config='[a2a]\nbearer = "{{secret:OP_TOKEN}}"\n', env=ENV)
    with page.expect_response(lambda r: "oauth-authorization-server" in r.url) as asked:
        page.goto(daemon.url + "/console/")
    assert asked.value.status == 404
    page.locator("#token").wait_for()
    assert page.locator("#device-start").count() == 0


def test_a_device_sign_in_refused_on_the_page_says_so(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=SIGNED, env=ENV)
    page.goto(daemon.url + "/console/")
    page.locator("#device-start").click()
    code = page.locator("#user-code").inner_text()
    task_result(command(daemon, "auth.device.deny", token=OPERATOR, user_code=code), "auth.device.deny")
    page.locator("#device-error", has_text="The operator refused this sign-in.").wait_for()
    page.locator("#device-start").wait_for()
    assert page.evaluate("sessionStorage.getItem('anyagentd.console.token')") is None


# ------------------------------------------------------------------------------------------------ a plain user's overview


def test_a_plain_users_overview_shows_no_blank_figures(a2a_daemon: Any, page: Any) -> None:
    """The status op's ``values`` (live agents, the pool's bound, tokens, cost) are the operator's: a plain user's
    overview leaves those figures out rather than show them blank."""
    daemon = a2a_daemon(config=SIGNED + TWO, env=ENV)
    sign_in_with(page, daemon, ALICE, "alice")
    figures = page.locator('.agent[data-agent="alpha"] dl.figures')
    figures.wait_for()
    text = figures.inner_text()
    assert "uptime" in text and "live agents" not in text and "undefined" not in text, text
    assert page.locator(".live-agents, .agent .tokens, .agent .cost").count() == 0


# ------------------------------------------------------------------------------------------------ a revoked session


def test_a_revoked_session_takes_the_page_back_to_sign_in(a2a_daemon: Any, page: Any) -> None:
    """The operator revokes the session the page signed in with: the page's next request (its push stream, ended by
    the revocation, reconnects) is refused, and the page forgets the token and shows the sign-in page saying so."""
    daemon = a2a_daemon(config=SIGNED + TWO, env=ENV)
    pair = code_pair(daemon)
    task_result(
        command(daemon, "auth.device.approve", token=OPERATOR, user_code=pair["user_code"], **{"as": "dev"}),
        "auth.device.approve",
    )
    issued = poll(daemon, pair["device_code"])
    assert issued.status_code == 200, issued.text
    device_token = issued.json()["access_token"]
    sign_in_with(page, daemon, device_token, "user:dev")
    page.locator('.live-state[data-live="true"]').wait_for()  # the push stream is open with the session's token
    [session] = result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions")["sessions"]
    task_result(command(daemon, "auth.sessions.revoke", token=OPERATOR, sid=session["sid"]), "auth.sessions.revoke")
    page.get_by_text("That token was refused.").wait_for()
    page.locator("#token").wait_for()
    assert page.locator("#principal").count() == 0
    assert page.evaluate("sessionStorage.getItem('anyagentd.console.token')") is None
