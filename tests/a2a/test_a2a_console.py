"""The web console (``/console/``, issue 28's first slice) in a real headless Chromium (Debian's ``chromium``, driven
by Playwright for Python through ``executable_path``: no browser download) against a real daemon.

- a task waiting for a permission (the shipped ``permission`` mock script, ``approval = "ask"``) shows on the
  Waiting page with the agent's request; Allow once completes it down the allowed branch, Deny down the denied one
  (both read back with GetTask);
- one conversation live: the transcript streams (SubscribeToTask) and the tool goes from Pending to Completed
  after Allow is clicked in place;
- the overview lists every agent ``GET /agents`` names, with the ``status`` op's figures;
- signing in with a bearer: a wrong one is refused, the right one kept in the tab's session storage and never in a
  URL or any console response;
- the pages carry the strict CSP and no inline script; ``[a2a.console] enabled = false`` serves none; a foreign
  Host gets 421 and a foreign Origin nothing, in the browser too.

Screenshots of the overview, a live conversation and the waiting list go to ``tests/.artifacts/console/`` (kept
out of git) for a reviewer. Every wait is for a condition (an element, a task state), never a sleep.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import wait_state

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-dev.txt")

pytestmark = pytest.mark.timeout(120)

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts" / "console"
"""Where the screenshots go (tests/.artifacts/ is in .gitignore)."""

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
ASK = '[agent]\nname = "mock"\napproval = "ask"\n'
TOKEN = "console-test-operator-token-5f1c"
WAIT_MS = 20_000
"""How long a page may take to show what is waited for (a condition: met at once when all is well)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright (``.ci/run`` installs the package)."""
    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is needed: apt-get install chromium"
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context's page (its own session storage); page errors fail the test."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda err: errors.append(str(err)))
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()
    assert errors == [], errors


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def waiting_task(daemon: Any, **kwargs: Any) -> str:
    """Send the permission script a prompt without waiting; return the task id once it waits for input."""
    task = daemon.send_text("write hello.txt", configuration={"returnImmediately": True}, **kwargs)
    wait_state(daemon, task["id"], "TASK_STATE_INPUT_REQUIRED", token=kwargs.get("token"), agent=kwargs.get("agent"))
    return str(task["id"])


def final_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"] if not p.get("mediaType"))


# ------------------------------------------------------------------------------------ waiting for a person


@pytest.mark.parametrize(
    "button, said", [("AllowOnce", "You allowed it."), ("DenyOnce", "You denied it, so I did not write hello.txt.")]
)
def test_a_waiting_permission_is_answered_from_the_waiting_page(
    a2a_daemon: Any, page: Any, button: str, said: str
) -> None:
    daemon = a2a_daemon(config=ASK, mock="permission")
    task_id = waiting_task(daemon)
    page.goto(daemon.url + "/console/#/waiting")
    card = page.locator(f'.waiting-task[data-task="{task_id}"]')
    card.wait_for()
    # the request as the agent put it: the tool, its detail, the diff, the offered options
    assert card.locator(".request-title").inner_text() == "Write hello.txt"
    assert "Write a new file hello.txt" in card.inner_text() and "hello, world" in card.inner_text()
    options = card.locator("button[data-option]")
    assert [options.nth(i).get_attribute("data-option") for i in range(options.count())] == [
        "AllowOnce",
        "AllowAlways",
        "DenyOnce",
    ]
    if button == "AllowOnce":
        screenshot(page, "waiting")
    # the card's line reads with its spaces ("task 1a2b3c4d · asks permission · since …")
    line = card.locator(".muted").first.inner_text()
    assert re.search(rf"task {task_id[:8]} · asks permission · since \S", line), line
    card.locator(f'button[data-option="{button}"]').click()
    done = wait_state(daemon, task_id, "TASK_STATE_COMPLETED")
    assert said in final_text(done)
    answers = [p.get("data") for m in done["history"] if m["role"] == "ROLE_USER" for p in m["parts"]]
    assert {"Permission": button} in answers  # the page answered with the wire's Answer JSON, by SendMessage
    page.locator(".nothing-waiting").wait_for()  # and the task left the page


def test_the_waiting_page_gathers_every_agent(a2a_daemon: Any, page: Any) -> None:
    config = "".join(
        f'[[agents]]\nid = "{agent}"\nname = "mock"\nmock_script = "permission"\napproval = "ask"\n'
        for agent in ("alpha", "beta")
    )
    daemon = a2a_daemon(config=config)
    waiting = {agent: waiting_task(daemon, agent=agent) for agent in ("alpha", "beta")}
    page.goto(daemon.url + "/console/#/waiting")
    for agent, task_id in waiting.items():
        page.locator(f'.waiting-task[data-task="{task_id}"][data-agent="{agent}"]').wait_for()
    page.locator('.waiting-task[data-agent="beta"] button[data-option="DenyOnce"]').click()
    assert "You denied it" in final_text(wait_state(daemon, waiting["beta"], "TASK_STATE_COMPLETED", agent="beta"))
    got = daemon.rpc("GetTask", {"id": waiting["alpha"]}, agent="alpha").json()["result"]
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the other agent's task is untouched


# ------------------------------------------------------------------------------------ one conversation live


def test_a_conversation_streams_live_and_is_answered_in_place(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=ASK, mock="permission")
    task_id = waiting_task(daemon)
    page.goto(f"{daemon.url}/console/#/task/mock/{task_id}")
    page.locator('.transcript .tool[data-tool="tool1"][data-status="Pending"]').wait_for()
    page.locator('.task-state[data-state="TASK_STATE_INPUT_REQUIRED"]').wait_for()
    transcript = page.locator(".transcript").inner_text()
    assert "I am the scripted agent" in transcript and "Write hello.txt" in transcript  # reasoning, plan, tool
    page.locator('button[data-option="AllowOnce"]').click()
    # what the agent does after the answer arrives over the open SubscribeToTask stream
    page.locator('.transcript .tool[data-tool="tool1"][data-status="Completed"]').wait_for()
    page.locator('.task-state[data-state="TASK_STATE_COMPLETED"]').wait_for()
    page.get_by_text("You allowed it. A real agent would now have written hello.txt").wait_for()
    screenshot(page, "conversation")
    wait_state(daemon, task_id, "TASK_STATE_COMPLETED")


# ------------------------------------------------------------------------------------ overview


def costly_script(path: Path) -> Path:
    """A mock script of two turns whose session reports a running cost: $0.25, then $0.50."""
    turns = [
        [
            {"Emit": {"TextDelta": {"message_id": f"m{n}", "text": "spent"}}},
            {"Emit": {"ContextUsage": {"used_tokens": 100 * n, "cost_usd": 0.25 * n}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ]
        for n in (1, 2)
    ]
    path.write_text(json.dumps({"turns": turns}))
    return path


def test_the_overview_lists_every_agent_with_its_figures(a2a_daemon: Any, page: Any, tmp_path: Path) -> None:
    config = (
        '[[agents]]\nid = "alpha"\nname = "mock"\nmock_script = "permission"\n'
        f'[[agents]]\nid = "beta"\nname = "mock"\nmock_script = "{costly_script(tmp_path / "cost.json")}"\n'
        "default = true\n"
    )
    daemon = a2a_daemon(config=config)
    waiting_task(daemon, agent="alpha")
    first = daemon.send_text("one", agent="beta")
    wait_state(daemon, first["id"], "TASK_STATE_COMPLETED", agent="beta")
    second = daemon.send_text("two", agent="beta", context_id=first["contextId"])
    wait_state(daemon, second["id"], "TASK_STATE_COMPLETED", agent="beta")
    page.goto(daemon.url + "/console/")
    for agent in ("alpha", "beta"):
        page.locator(f'.agent[data-agent="{agent}"] .live-agents').wait_for()
    alpha = page.locator('.agent[data-agent="alpha"]')
    assert re.search(r"live agents\s*1 of \d+", alpha.inner_text()), alpha.inner_text()
    alpha.locator(".task-counts").get_by_text("input required 1").wait_for()
    assert "default" in page.locator('.agent[data-agent="beta"] h3').inner_text()
    # what beta's conversation spent so far: its session's running cost, counted once ($0.25, then $0.50 in all)
    assert page.locator('.agent[data-agent="beta"] .cost').inner_text() == "$0.5000"
    assert page.locator("#principal").inner_text() == "operator"  # the implicit loopback operator, no token
    page.locator("table.tasks a").first.wait_for()
    screenshot(page, "overview")


# ------------------------------------------------------------------------------------ signing in


def test_sign_in_keeps_the_token_out_of_urls_and_responses(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(
        config=ASK + '[a2a]\nbearer = "{{secret:CONSOLE_TOKEN}}"\n', env={"CONSOLE_TOKEN": TOKEN}, mock="permission"
    )
    task_id = waiting_task(daemon, token=TOKEN)
    seen: list[Any] = []
    page.on("response", lambda response: seen.append(response))
    page.goto(daemon.url + "/console/#/waiting")
    page.locator("#token").fill("not-the-token")
    page.locator("#sign-in").click()
    page.get_by_text("That token was refused.").wait_for()
    page.locator("#token").fill(TOKEN)
    page.locator("#sign-in").click()
    page.locator(f'.waiting-task[data-task="{task_id}"]').wait_for()
    assert page.locator("#principal").inner_text() == "operator"
    assert page.evaluate("sessionStorage.getItem('anyagentd.console.token')") == TOKEN
    assert TOKEN not in page.url and TOKEN not in page.content()
    for response in seen:
        assert TOKEN not in response.url
        streamed = "text/event-stream" in (response.headers.get("content-type") or "")  # the push stream never ends
        if "/console/" in response.url and not streamed:
            assert TOKEN.encode() not in response.body(), response.url
    page.locator("#sign-out").click()
    page.locator("#token").wait_for()
    assert page.evaluate("sessionStorage.getItem('anyagentd.console.token')") is None


# ------------------------------------------------------------------------------------ safe by default


def test_every_console_response_carries_the_policy_and_no_secret(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config='[a2a]\nbearer = "{{secret:CONSOLE_TOKEN}}"\n', env={"CONSOLE_TOKEN": TOKEN})
    index = httpx.get(daemon.url + "/console/", timeout=30)
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    scripts = re.findall(r"<script\b[^>]*>", index.text)
    assert scripts and all(" src=" in s for s in scripts)  # no inline script
    assets = re.findall(r'(?:src|href)="(static/[^"]+)"', index.text)
    assert "static/app.js" in assets and "static/console.css" in assets
    modules = ["app.js", "api.js", "wire.js", "vendor/preact.module.js", "vendor/hooks.module.js"]
    for path in ["/console/", *(f"/console/{a}" for a in assets), *(f"/console/static/{m}" for m in modules)]:
        response = httpx.get(daemon.url + path, timeout=30)
        assert response.status_code == 200, path
        assert response.headers["content-security-policy"] == CSP, path
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert TOKEN not in response.text
    assert httpx.get(daemon.url + "/console/static/app.js").headers["content-type"].startswith("text/javascript")
    for outside in ("/console/static/../routes.py", "/console/static/%2e%2e/routes.py", "/console/static/nope.js"):
        assert httpx.get(daemon.url + outside, timeout=30).status_code == 404, outside
    redirect = httpx.get(daemon.url + "/console", timeout=30)
    assert redirect.status_code == 308 and redirect.headers["location"] == "console/"


def test_every_console_answer_carries_the_security_headers(a2a_daemon: Any) -> None:
    """Not only the files: the redirect, a 304, the push stream's 401 (no credential, a wrong one, one in the URL),
    the router's own 404 and 405 — every answer under /console carries the policy headers."""
    daemon = a2a_daemon(config='[a2a]\nbearer = "{{secret:CONSOLE_TOKEN}}"\n', env={"CONSOLE_TOKEN": TOKEN})
    etag = httpx.get(daemon.url + "/console/static/app.js", timeout=30).headers["etag"]
    asked = [
        ("GET", "/console/", {}, 200),
        ("GET", "/console/static/app.js", {"If-None-Match": etag}, 304),
        ("GET", "/console", {}, 308),
        ("GET", "/console/events", {}, 401),
        ("GET", "/console/events", {"Authorization": "Bearer not-the-token"}, 401),
        ("GET", f"/console/events?token={TOKEN}", {}, 401),
        ("GET", "/console/static/nope.js", {}, 404),
        ("GET", "/console/nope", {}, 404),
        ("POST", "/console/", {}, 405),
        ("POST", "/console/static/app.js", {}, 405),
        ("POST", "/console/events", {}, 405),
    ]
    for method, path, headers, status in asked:
        response = httpx.request(method, daemon.url + path, headers=headers, timeout=30)
        assert response.status_code == status, (method, path, response.status_code)
        assert response.headers.get("content-security-policy") == CSP, (method, path)
        assert response.headers.get("x-content-type-options") == "nosniff", (method, path)
        assert response.headers.get("referrer-policy") == "no-referrer", (method, path)
        assert response.headers.get("cache-control"), (method, path)


def test_the_page_preloads_its_whole_module_graph_and_is_cached_with_validators(a2a_daemon: Any) -> None:
    """Page load: ``index.html`` names every module of ``static/`` (``app.js`` as its script, the rest as
    ``modulepreload``: fetched at once, not import level by import level); every file carries an ETag and answers a
    matching ``If-None-Match`` with 304 and no body, the policy headers kept; the page and the console's own modules
    are revalidated each time (``no-cache``), the vendored libraries may be reused for a day."""
    daemon = a2a_daemon()
    index = httpx.get(daemon.url + "/console/", timeout=30)
    static = Path(__file__).resolve().parents[2] / "plugins/a2a/src/anyagentd_a2a/console/static"
    on_disk = {p.relative_to(static).as_posix() for p in static.rglob("*.js")}
    preloaded = set(re.findall(r'<link rel="modulepreload" href="static/([^"]+)">', index.text))
    assert preloaded | {"app.js"} == on_disk and "app.js" not in preloaded
    for path, cache in (
        ("/console/", "no-cache"),
        ("/console/static/app.js", "no-cache"),
        ("/console/static/pages/conversations.js", "no-cache"),
        ("/console/static/vendor/preact.module.js", "max-age=86400"),
    ):
        first = httpx.get(daemon.url + path, timeout=30)
        etag = first.headers["etag"]
        assert first.status_code == 200 and first.headers["cache-control"] == cache and etag.startswith('"'), path
        again = httpx.get(daemon.url + path, headers={"If-None-Match": f'"other", {etag}'}, timeout=30)
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag, path
        assert again.headers["content-security-policy"] == CSP and again.headers["cache-control"] == cache, path
        stale = httpx.get(daemon.url + path, headers={"If-None-Match": '"stale"'}, timeout=30)
        assert stale.status_code == 200 and stale.content == first.content, path


def test_the_console_is_off_when_disabled_and_its_url_logged_when_on(a2a_daemon: Any) -> None:
    """``[a2a.console] enabled = false`` serves no page and takes no same-origin request for the operator; on (the
    loopback default) the daemon logs the console's URL at start."""
    on = a2a_daemon()
    assert httpx.get(on.url + "/console/", timeout=30).status_code == 200
    off = a2a_daemon(config="[a2a.console]\nenabled = false\n")
    assert httpx.get(off.url + "/console/", timeout=30).status_code == 404
    # the console's own page (same origin) is the implicit loopback operator; without the console, nothing on this
    # origin is a page, and a request naming it is not
    listing = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    for daemon, status in ((on, 200), (off, 401)):
        got = httpx.post(daemon.url + "/", json=body, headers={**listing, "Origin": daemon.url}, timeout=30)
        assert got.status_code == status, got.text
    for daemon in (on, off):
        daemon.signal(15)
        daemon.wait()
    logged = [line for line in on.all_stderr() if '"console: ' in line]
    assert logged and f"{on.url}/console/" in logged[0]
    assert not [line for line in off.all_stderr() if '"console: ' in line]


def test_a_foreign_host_or_origin_gets_nothing(a2a_daemon: Any, page: Any) -> None:
    daemon = a2a_daemon(config=ASK, mock="permission")
    port = daemon.url.rsplit(":", 1)[1]
    assert httpx.get(daemon.url + "/console/", timeout=30).status_code == 200
    rebound = httpx.get(daemon.url + "/console/", headers={"Host": f"rebind.attacker.example:{port}"}, timeout=30)
    assert rebound.status_code == 421 and "<script" not in rebound.text
    foreign = httpx.get(daemon.url + "/console/", headers={"Origin": "https://evil.example"}, timeout=30)
    assert foreign.status_code == 403 and foreign.content == b""
    # a page of another origin in the same browser: its requests to the daemon get nothing, and start nothing
    task_id = waiting_task(daemon)
    with foreign_site() as site:
        page.goto(site)
        outcome = page.evaluate(FOREIGN_SCRIPT, {"url": daemon.url, "task": task_id})
    assert outcome == ["refused", "refused", "refused"], outcome
    got = daemon.rpc("GetTask", {"id": task_id}).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the foreign page answered nothing


FOREIGN_SCRIPT = """async ({url, task}) => {
  const tries = [
    () => fetch(url + "/console/"),
    () => fetch(url + "/", {method: "POST", headers: {"Content-Type": "application/json", "A2A-Version": "1.0"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "ListTasks", params: {}})}),
    () => fetch(url + "/", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage", params: {message: {
        messageId: "m", role: "ROLE_USER", taskId: task, parts: [{text: "allow"}]}}})})
        .then((r) => { if (r.type === "opaque") throw new Error("opaque"); return r; }),
  ];
  const out = [];
  for (const attempt of tries) {
    try { await attempt(); out.push("answered"); } catch (err) { out.push("refused"); }
  }
  return out;
}"""


class _Blank(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>elsewhere</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class foreign_site:
    """A blank page served on another loopback port: another origin than the daemon's."""

    def __enter__(self) -> str:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Blank)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://localhost:{self.server.server_address[1]}/"

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
