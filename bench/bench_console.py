"""The web console (``/console/``, issue 28) in headless Chromium against a real daemon: page load, and an event's
delay from the daemon to the screen. Prints figures against the issue's targets; asserts nothing.

Usage: .venv/bin/python bench/bench_console.py [--loads N] [--events N] [--quick] [--chromium PATH]

The daemon: ``anyagentd a2a --mock permission`` (``approval = "ask"``: each ``write hello.txt`` waits for a
permission), on loopback without credentials (the console's page is the implicit operator). The browser: Debian's
``/usr/bin/chromium``, headless, driven by Playwright for Python through ``executable_path``. A script added to
every page before its own (Playwright's init script) watches the DOM and stamps, in the frame that first shows it
(``requestAnimationFrame`` after the mutation: the next paint), when each watched element appeared.

- **Page load** (target 300 ms): from navigation start (``performance.timeOrigin``) to the overview rendered with
  the agent's figures (the ``status`` op answered: ``.agent .live-agents`` on screen), and to the shell (the
  header naming the principal). **cold**: a fresh browser context each time (empty cache); **warm**: a reload in
  the same context (the page and the console's modules revalidated by ETag, ``Cache-Control: no-cache``; the
  vendored libraries reused from the cache). Median, min and max of N.
- **Event → screen** (target 250 ms): the daemon's own time of the event (the task status's ``timestamp``, set by
  the daemon when it emitted the update; the same machine's wall clock as the browser's) to the frame that shows it:
  **conversation**: a task's conversation page open (live over ``SubscribeToTask``), the permission answered over
  A2A by the bench, the task's Completed state on screen; **waiting**: the Waiting page open, a new prompt sent, its
  permission request (the task's INPUT_REQUIRED) on screen. Median, min and max of N; ``x target`` is the median
  over the target (under 1.0 meets it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

LOAD_TARGET_MS = 300.0
EVENT_TARGET_MS = 250.0
WAIT_MS = 30_000
CONFIG = '[agent]\nname = "mock"\napproval = "ask"\n'

WATCH = """
(() => {
  window.__seen = {};
  const stamp = (key) => {
    if (key in window.__seen) return;
    window.__seen[key] = null;
    requestAnimationFrame(() => { window.__seen[key] = performance.timeOrigin + performance.now(); });
  };
  const look = () => {
    if (document.querySelector('#principal')) stamp('shell');
    if (document.querySelector('.agent .live-agents')) stamp('overview');
    for (const el of document.querySelectorAll('.waiting-task[data-task]')) stamp('waiting:' + el.dataset.task);
    for (const el of document.querySelectorAll('.task-state[data-state]')) stamp('state:' + el.dataset.state);
  };
  new MutationObserver(look).observe(document, {childList: true, subtree: true, attributes: true});
})();
"""
"""Stamps (epoch ms, sub-ms precision) of the first frame showing each watched element, in ``window.__seen``."""


@dataclass
class Daemon:
    process: subprocess.Popen[str]
    url: str
    work: Path

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"A2A-Version": "1.0"}
        answer = httpx.post(self.url + "/", json=body, headers=headers, timeout=30).json()
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        return answer["result"]

    def send(self, text: str, task: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        if task is not None:
            message.update(taskId=task["id"], contextId=task["contextId"])
            message["parts"] = [{"data": {"Permission": "AllowOnce"}, "mediaType": "application/json"}]
        result = self.rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}})
        return result["task"]

    def until(self, task_id: str, state: str, within: float = 30.0) -> dict[str, Any]:
        """The task once it is in ``state`` (polled)."""
        deadline = time.monotonic() + within
        while True:
            task = self.rpc("GetTask", {"id": task_id, "historyLength": 0})
            if task["status"]["state"] == state:
                return task
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task_id} not {state} within {within} s: {task['status']['state']}")
            time.sleep(0.01)


@contextmanager
def daemon() -> Iterator[Daemon]:
    """``anyagentd a2a --mock permission`` on 127.0.0.1:0 in a temporary directory; stopped (SIGTERM) at the end."""
    work = Path(tempfile.mkdtemp(prefix="anyagentd-bench-console-"))
    (work / "agentd.toml").write_text(CONFIG)
    argv = [
        str(Path(sys.executable).with_name("anyagentd")),
        "a2a",
        "--listen",
        "127.0.0.1:0",
        "--mock",
        "permission",
        "--config",
        str(work / "agentd.toml"),
        "--state-dir",
        str(work / "state"),
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=work)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the daemon printed no listening line")
        yield Daemon(process, json.loads(line)["listening"], work)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)


def stamp_of(page: Any, key: str) -> float:
    """The epoch ms at which the watched ``key`` was first on screen (waits for it)."""
    page.wait_for_function("(key) => window.__seen && window.__seen[key] > 0", arg=key, timeout=WAIT_MS)
    return float(page.evaluate("(key) => window.__seen[key]", key))


def since_navigation(page: Any, key: str) -> float:
    return stamp_of(page, key) - float(page.evaluate("performance.timeOrigin"))


def epoch_ms(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


def page_loads(browser: Any, url: str, n: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"cold shell": [], "cold overview": [], "warm shell": [], "warm overview": []}
    for _ in range(n):
        context = browser.new_context()
        context.add_init_script(WATCH)
        page = context.new_page()
        page.goto(url + "/console/")
        figures["cold shell"].append(since_navigation(page, "shell"))
        figures["cold overview"].append(since_navigation(page, "overview"))
        page.reload()
        figures["warm shell"].append(since_navigation(page, "shell"))
        figures["warm overview"].append(since_navigation(page, "overview"))
        context.close()
    return figures


def event_delays(browser: Any, daemon: Daemon, n: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"conversation": [], "waiting": []}
    context = browser.new_context()
    context.add_init_script(WATCH)
    waiting = context.new_page()
    waiting.goto(daemon.url + "/console/#/waiting")
    waiting.locator(".nothing-waiting, .waiting-task").first.wait_for(timeout=WAIT_MS)
    conversation = context.new_page()
    for _ in range(n):
        task = daemon.send("write hello.txt")
        opened = daemon.until(task["id"], "TASK_STATE_INPUT_REQUIRED")
        shown = stamp_of(waiting, "waiting:" + task["id"])
        figures["waiting"].append(shown - epoch_ms(opened["status"]["timestamp"]))

        conversation.goto("about:blank")  # then a fresh document (and stamps) for this task
        conversation.goto(f"{daemon.url}/console/#/task/mock/{task['id']}")
        stamp_of(conversation, "state:TASK_STATE_INPUT_REQUIRED")  # the stream is open
        daemon.send("", task=opened)
        done = daemon.until(task["id"], "TASK_STATE_COMPLETED")
        shown = stamp_of(conversation, "state:TASK_STATE_COMPLETED")
        figures["conversation"].append(shown - epoch_ms(done["status"]["timestamp"]))
    context.close()
    return figures


def run(loads: int, events: int, chromium: str = "/usr/bin/chromium") -> dict[str, list[float]]:
    """The figures (ms) by name: page loads and event delays."""
    from playwright.sync_api import sync_playwright

    with daemon() as served, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()  # a first load, not measured: the daemon's first answers warm it
            page.goto(served.url + "/console/")
            page.locator(".agent .live-agents").wait_for(timeout=WAIT_MS)
            page.close()
            figures = page_loads(browser, served.url, loads)
            figures.update(event_delays(browser, served, events))
        finally:
            browser.close()
    return figures


def line(name: str, values: list[float], target: float | None) -> str:
    median = statistics.median(values)
    text = f"{name:22s} median {median:7.1f} ms   min {min(values):7.1f}   max {max(values):7.1f}   (n={len(values)})"
    if target is not None:
        text += f"   x target {median / target:.2f} (target {target:.0f} ms)"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="3 loads, 3 events")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    loads, events = (3, 3) if args.quick else (args.loads, args.events)
    print(f"bench_console: {loads} page loads, {events} events, load average {os.getloadavg()[0]:.2f}")
    figures = run(loads, events, args.chromium)
    print("page load (navigation start -> on screen)")
    for name in ("cold shell", "cold overview", "warm shell", "warm overview"):
        print("  " + line(name, figures[name], LOAD_TARGET_MS if name.endswith("overview") else None))
    print("event -> screen (the daemon's status timestamp -> the frame showing it)")
    for name in ("conversation", "waiting"):
        print("  " + line(name, figures[name], EVENT_TARGET_MS))


if __name__ == "__main__":
    main()
