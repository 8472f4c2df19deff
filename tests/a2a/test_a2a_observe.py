"""Health probes and Prometheus metrics of ``anyagentd a2a`` (issue 26): ``/healthz`` and ``/readyz`` without
credentials, ``/metrics`` behind the operator or the scrape token, its series after a real turn; the scrape token
checked like every secret; ``anyagentd serve`` never loading the Prometheus client."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import ANYAGENTD, wait_state
from prometheus_client.parser import text_string_to_metric_families
from test_a2a_device_grant import OPERATOR, sign_in
from test_a2a_logs import lines, wait_line

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]

COMMAND = "https://agentd.dev/a2a/ext/command"
TOKENS = {"OP_T": OPERATOR, "ALICE_T": "alice-secret-1", "SCRAPE_T": "scrape-secret-1"}
CONFIG = """
[a2a]
bearer = "{{secret:OP_T}}"
[a2a.metrics]
token = "{{secret:SCRAPE_T}}"
[a2a.device_grant]
enabled = true
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_T}}"
[subagents]
enabled = true
[[workflows]]
name = "delegate"
[workflows.steps.ask]
kind = "subagent"
agent = "mock"
instruction = "Say hello"
[workflows.steps.done]
kind = "finish"
depends_on = ["ask"]
output = "x"
"""
# one turn that reports its context usage and tokens (as the adapters put them on), then answers
USAGE = {
    "turns": [
        [
            {
                "EmitWith": {
                    "event": {"ContextUsage": {"used_tokens": 1234, "window_tokens": 200000}},
                    "extensions": {"anyagentd/tokens": {"in": 1200, "out": 34}},
                }
            },
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "hi"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ]
    ]
}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape (parsed by prometheus_client), keyed (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_probes_and_metrics_of_a_served_daemon(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "usage.json"
    script.write_text(json.dumps(USAGE))
    daemon = a2a_daemon(config=CONFIG, env=TOKENS, mock=str(script))
    for probe in ("/healthz", "/readyz"):  # no credential needed
        answer = httpx.get(daemon.url + probe)
        assert (answer.status_code, answer.json()) == (200, {"status": "ok"}), probe
    bare = httpx.get(daemon.url + "/metrics")
    assert bare.status_code == 401 and bare.headers["WWW-Authenticate"].startswith("Bearer")
    assert httpx.get(daemon.url + "/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(daemon.url + "/metrics", headers={"Authorization": "Bearer alice-secret-1"}).status_code == 403

    task = daemon.send_text("hello", token=TOKENS["ALICE_T"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert daemon.rpc("ListTasks", token="wrong").status_code == 401  # the front's HTTP refusals count too
    assert daemon.rpc("ListTasks", token=TOKENS["ALICE_T"], headers={"Content-Type": "text/plain"}).status_code == 415
    assert daemon.rpc("NoSuchMethod", token=TOKENS["ALICE_T"]).json()["error"]["code"] == -32601
    run = daemon.rpc(
        "SendMessage",
        {
            "message": {
                "messageId": "run-1",
                "role": "ROLE_USER",
                "extensions": [COMMAND],
                "parts": [{"data": {"agentd": {"op": "workflow.run", "workflow": "delegate", "inputs": {}}}}],
            },
            "configuration": {"returnImmediately": True},
        },
        token=TOKENS["OP_T"],
        headers={"A2A-Extensions": COMMAND},
    ).json()["result"]["task"]
    wait_state(daemon, run["id"], "TASK_STATE_COMPLETED", token=TOKENS["OP_T"])
    signed_in, _ = sign_in(daemon, "carol")  # a live device session (its approval is one more command)

    scraped = httpx.get(daemon.url + "/metrics", headers={"Authorization": f"Bearer {OPERATOR}"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    got = samples(scraped.text)
    assert got[("anyagentd_a2a_requests_total", (("method", "SendMessage"), ("outcome", "ok")))] == 3
    assert got[("anyagentd_a2a_requests_total", (("method", "none"), ("outcome", "-31401")))] == 1
    assert got[("anyagentd_a2a_requests_total", (("method", "none"), ("outcome", "-32005")))] == 1
    assert got[("anyagentd_a2a_requests_total", (("method", "other"), ("outcome", "-32601")))] == 1
    assert got[("anyagentd_a2a_request_duration_seconds_count", (("method", "SendMessage"),))] == 3
    assert got[("anyagentd_a2a_tasks", (("state", "completed"),))] == 3  # the turn's, the run's, the approval's
    assert got[("anyagentd_a2a_tasks", (("state", "working"),))] == 0
    assert got[("anyagentd_a2a_context_tokens_count", ())] == 1
    assert got[("anyagentd_a2a_context_tokens_sum", ())] == 1234
    assert got[("anyagentd_a2a_tokens_total", (("direction", "in"),))] == 1200
    assert got[("anyagentd_a2a_tokens_total", (("direction", "out"),))] == 34
    assert got[("anyagentd_a2a_live_agents", ())] == 1
    assert got[("anyagentd_a2a_pool_evictions_total", ())] == 0
    assert got[("anyagentd_a2a_workflow_runs", (("status", "completed"),))] == 1
    assert got[("anyagentd_a2a_workflow_runs", (("status", "running"),))] == 0
    assert got[("anyagentd_a2a_device_sessions", ())] == 1
    assert got[("anyagentd_a2a_subagents", (("state", "completed"),))] == 1  # the run's subagent step
    assert got[("anyagentd_a2a_subagents", (("state", "running"),))] == 0

    by_token = httpx.get(daemon.url + "/metrics", headers={"Authorization": "Bearer scrape-secret-1"})
    assert by_token.status_code == 200
    # the scrape itself is no JSON-RPC request: the counts are as they were
    assert samples(by_token.text)[("anyagentd_a2a_requests_total", (("method", "SendMessage"), ("outcome", "ok")))] == 3
    as_user = httpx.get(daemon.url + "/metrics", headers={"Authorization": f"Bearer {signed_in}"})
    assert as_user.status_code == 403  # a signed-in user is not the operator
    # each scrape's access line names who scraped (the scrape token by its fixed name), or null: no credential
    wait_line(daemon, "anyagentd.a2a.access", lambda _: len(metrics_lines(daemon)) >= 6)
    scrapes = [(line["status"], line["principal"]) for line in metrics_lines(daemon)]
    assert Counter(scrapes) == Counter(
        [(401, None), (401, None), (403, "user:alice"), (200, "operator"), (200, "metrics"), (403, "user:carol")]
    ), scrapes
    assert not any(secret in line for line in daemon.stderr for secret in [*TOKENS.values(), signed_in])


def metrics_lines(daemon: Any) -> list[dict[str, Any]]:
    """The access lines of ``GET /metrics`` logged so far."""
    return [line for line in lines(daemon, "anyagentd.a2a.access") if line["path"] == "/metrics"]


async def test_readyz_is_503_while_draining_and_when_the_store_does_not_answer(tmp_path: Path) -> None:
    """The readiness rule on a real SQLite store, in process (a mock agent's drain is too short to probe from
    outside): draining → 503 ``draining``; a store that cannot be opened → 503 ``store unavailable``."""
    from starlette.applications import Starlette

    from anyagentd_a2a.lifecycle import Lifecycle
    from anyagentd_a2a.observe.health import health_routes
    from anyagentd_a2a.store import PrincipalTaskStore, engine_for

    good = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'a2a.db'}")
    gone = engine_for(f"sqlite+aiosqlite:///{tmp_path / 'no-such-dir' / 'a2a.db'}")
    try:
        await PrincipalTaskStore(good).initialize()  # the probe reads the task table
        for engine, ready in ((good, 200), (gone, 503)):
            lifecycle = Lifecycle()  # the probe reads its latch, which the test sets below
            app = Starlette(routes=health_routes(engine, lifecycle))
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                answer = await client.get("/readyz")
                assert answer.status_code == ready
                assert answer.json() == {"status": "ok" if ready == 200 else "store unavailable"}
                lifecycle.request_drain("SIGTERM")
                answer = await client.get("/readyz")
                assert (answer.status_code, answer.json()) == (503, {"status": "draining"})
                assert (await client.get("/healthz")).json() == {"status": "ok"}  # alive all the while
    finally:
        await good.dispose()
        await gone.dispose()


def test_metrics_off_and_an_unresolvable_scrape_token(a2a_daemon: Any, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[a2a.metrics]\ntoken = "{{secret:NO_SUCH_SCRAPE_T}}"\n')
    env = {k: v for k, v in __import__("os").environ.items() if k != "NO_SUCH_SCRAPE_T"}
    checked = subprocess.run(
        [ANYAGENTD, "a2a", "--check-config", str(config)], capture_output=True, text=True, timeout=60, env=env
    )
    assert checked.returncode != 0 and "a2a.metrics.token" in checked.stderr and "NO_SUCH_SCRAPE_T" in checked.stderr
    assert "Traceback" not in checked.stderr
    config.write_text('[a2a.metrics]\ntoken = "scrape-me"\n')  # a literal is refused like any credential
    checked = subprocess.run(
        [ANYAGENTD, "a2a", "--check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode != 0 and "a2a.metrics.token" in checked.stderr and "scrape-me" not in checked.stderr
    daemon = a2a_daemon(config="[a2a.metrics]\nenabled = false\n", mock="hello")
    assert httpx.get(daemon.url + "/metrics").status_code == 404
    assert httpx.get(daemon.url + "/readyz").json() == {"status": "ok"}


def test_usage_counts_the_tokens_extension() -> None:
    """A ContextUsage event's ``anyagentd/tokens`` extension adds to ``tokens_total``; a malformed one adds
    nothing."""
    from prometheus_client import generate_latest

    from anyagentd.model import ContextUsage
    from anyagentd_a2a.observe.metrics import Metrics

    metrics = Metrics()  # nothing to read: only the event path counts
    metrics.usage(ContextUsage(used_tokens=900), {"anyagentd/tokens": {"in": 700, "out": 200}})
    metrics.usage(ContextUsage(used_tokens=950), {"anyagentd/tokens": {"in": 40, "out": True}})
    metrics.usage(ContextUsage(used_tokens=990), {})
    got = samples(generate_latest(metrics.registry).decode())
    assert got[("anyagentd_a2a_tokens_total", (("direction", "in"),))] == 740
    assert got[("anyagentd_a2a_tokens_total", (("direction", "out"),))] == 200
    assert got[("anyagentd_a2a_context_tokens_count", ())] == 3


def test_serve_does_not_import_prometheus(tmp_path: Path) -> None:
    """A guard for the lazy-import rule: ``anyagentd serve`` opening a mock session loads neither the Prometheus
    client nor the observe package (serve ends with os._exit: the wrapper reports just before)."""
    wrapper = tmp_path / "serve.py"
    wrapper.write_text(
        textwrap.dedent("""
        import json, os, sys
        real_exit = os._exit

        def report_and_exit(code):
            found = sorted(m for m in sys.modules if m.split(".")[0] == "prometheus_client"
                           or m.startswith("anyagentd_a2a.observe"))
            os.write(2, ("LOADED " + json.dumps(found) + "\\n").encode())
            real_exit(code)

        os._exit = report_and_exit
        from anyagentd.cli import main
        main(["serve"], prog_name="anyagentd")
    """)
    )
    frame = {"id": 1, "cmd": "open", "agent": "mock", "dir": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(wrapper)], input=json.dumps(frame) + "\n", capture_output=True, text=True, timeout=60
    )
    assert '"id": 1' in result.stdout or '"id":1' in result.stdout, result.stdout[-500:]
    line = next(l for l in result.stderr.splitlines() if l.startswith("LOADED "))
    assert json.loads(line.removeprefix("LOADED ")) == []


def test_the_pool_metrics_count_what_the_pool_did(a2a_daemon: Any) -> None:
    """``anyagentd_a2a_pool_evictions_total`` counts each idle agent closed to make room under ``max_live``, and
    ``live_agents`` what is open after it."""
    config = '[a2a]\nbearer = "{{secret:OP_T}}"\n[a2a.pool]\nmax_live = 1\n'
    daemon = a2a_daemon(config=config, env=TOKENS, mock="hello")

    def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        answer = httpx.get(daemon.url + "/metrics", headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        return samples(answer.text)

    assert scraped()[("anyagentd_a2a_pool_evictions_total", ())] == 0
    for n, context in enumerate(("one", "two", "three")):
        task = daemon.send_text("hi", token=OPERATOR, context_id=context)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        got = scraped()
        assert got[("anyagentd_a2a_pool_evictions_total", ())] == n  # each new one closed the one before
        assert got[("anyagentd_a2a_live_agents", ())] == 1
