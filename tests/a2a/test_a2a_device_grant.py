"""Sign-in by the device grant over a real ``anyagentd a2a`` (uvicorn on 127.0.0.1): the whole grant end to end
(the token endpoint's answers in order, approvals refused and accepted, the token as its principal, single use),
revocation closing an open stream under the token at once and refusing later calls, the card's device-code scheme,
sessions surviving a restart, a live session served past the failed-credential limiter, and the ``anyagentd a2a
login``/``send``/``status`` commands driven as a person would. Every reply is validated against the seed schema;
no issued token or code reaches a log line or ``debug.events``."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import ANYAGENTD, wait_state
from test_a2a_commands import command, reason, result_of, task_result, validate_result

pytestmark = pytest.mark.timeout(180)

OPERATOR, ALICE = "op-secret-d3v1", "alice-secret-d3v2"
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE}
CONFIG = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
[a2a.device_grant]
enabled = true
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
grants = ["*"]
"""
QUICK_THEN_SLOW = {
    "turns": [
        [
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "hi there"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {"Emit": {"TextDelta": {"message_id": "m2", "text": "working"}}},
            {"Sleep": 60000},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
    ]
}
"""A conversation's first turn completes at once; its second runs a minute (a stream to hold open)."""


def oauth(daemon: Any, path: str, **form: str) -> httpx.Response:
    return httpx.post(daemon.url + path, data=form, timeout=30)


def code_pair(daemon: Any, scope: str = "user") -> dict[str, Any]:
    answer = oauth(daemon, "/oauth2/device_authorization", client_id="anyagentd-test", scope=scope)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store", answer.text
    return answer.json()


def poll(daemon: Any, device_code: str) -> httpx.Response:
    return oauth(
        daemon,
        "/oauth2/token",
        grant_type="urn:ietf:params:oauth:grant-type:device_code",
        device_code=device_code,
        client_id="anyagentd-test",
    )


def oauth_error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    return response.json()["error"]


def approve(daemon: Any, user_code: str, name: str, **args: Any) -> dict[str, Any]:
    _, value = task_result(
        command(daemon, "auth.device.approve", token=OPERATOR, user_code=user_code, **{"as": name}, **args),
        "auth.device.approve",
    )
    return value["approved"]


def sign_in(daemon: Any, name: str) -> tuple[str, dict[str, Any]]:
    """A quick sign-in as ``name`` (approved before the first poll, so no wait); returns (token, code pair)."""
    pair = code_pair(daemon)
    approve(daemon, pair["user_code"], name)
    answer = poll(daemon, pair["device_code"])
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"], pair


def unauthorized(response: httpx.Response) -> bool:
    return response.status_code == 401 and response.json()["error"]["code"] == -31401


def no_secret_logged(daemon: Any, secrets: list[str]) -> None:
    """Neither the daemon's stderr nor ``debug.events`` holds any of ``secrets``."""
    command(daemon, "admin.set", token=OPERATOR, path="a2a.introspection.enabled", value=True)
    events = result_of(command(daemon, "debug.events", token=OPERATOR, limit=500), "debug.events")
    config = result_of(command(daemon, "config", token=OPERATOR), "config")
    texts = {"stderr": "".join(daemon.stderr), "debug.events": json.dumps(events), "config": json.dumps(config)}
    assert len(events["events"]) > 5  # the ring did record the sign-ins
    for secret in secrets:
        for where, text in texts.items():
            assert secret not in text, f"a secret reached {where}"


class Stream:
    """A streaming JSON-RPC call read on a thread: its ``frames`` (parsed ``data:`` lines) and when it closed."""

    def __init__(self, daemon: Any, method: str, params: dict[str, Any], token: str) -> None:
        self.frames: list[dict[str, Any]] = []
        self.closed_at: float | None = None
        self.error: BaseException | None = None
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}", "Accept": "text/event-stream"}

        def read() -> None:
            try:
                with httpx.stream("POST", daemon.url + "/", json=body, headers=headers, timeout=120) as response:
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            self.frames.append(json.loads(line[5:]))
            except BaseException as err:  # noqa: BLE001 - kept for the assertion
                self.error = err
            self.closed_at = time.monotonic()

        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def wait_frames(self, count: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.frames) < count and self.closed_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.frames) >= count, (self.frames, self.error)


def test_the_grant_end_to_end_and_revocation_closes_streams(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "quick-then-slow.json"
    script.write_text(json.dumps(QUICK_THEN_SLOW))
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock=str(script))

    card = httpx.get(daemon.url + "/.well-known/agent-card.json").json()
    flow = card["securitySchemes"]["device"]["oauth2SecurityScheme"]["flows"]["deviceCode"]
    assert flow["deviceAuthorizationUrl"] == daemon.url + "/oauth2/device_authorization"
    assert flow["tokenUrl"] == daemon.url + "/oauth2/token"
    assert {"device": {"list": ["user"]}} in [r["schemes"] for r in card["securityRequirements"]]
    meta = httpx.get(daemon.url + "/.well-known/oauth-authorization-server").json()
    assert meta["token_endpoint"] == flow["tokenUrl"]

    pair = code_pair(daemon)
    assert pair["verification_uri"] == daemon.url + "/oauth2/device"
    page = httpx.get(pair["verification_uri"])
    assert page.status_code == 200 and "operator" in page.text
    assert oauth_error(poll(daemon, pair["device_code"])) == "authorization_pending"
    pending = result_of(command(daemon, "auth.device.pending", token=OPERATOR), "auth.device.pending")
    assert [p["user_code"] for p in pending["pending"]] == [pair["user_code"]]

    by_user = command(daemon, "auth.device.approve", token=ALICE, user_code=pair["user_code"], **{"as": "dev"})
    assert by_user.status_code == 403 and reason(by_user) == (-31403, "PERMISSION_DENIED")
    without_as = command(daemon, "auth.device.approve", token=OPERATOR, user_code=pair["user_code"])
    assert reason(without_as) == (-32602, "INVALID_COMMAND_ARGS")
    assert result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions") == {"sessions": []}

    typed = pair["user_code"].lower().replace("-", " ")  # as a person might type it
    approved = approve(daemon, typed, "dev")
    assert approved["principal"] == "user:dev" and approved["scope"] == "user" and approved["existing"] is False

    early = poll(daemon, pair["device_code"])  # sooner than the 5 s interval
    slowed_at = time.monotonic()
    assert oauth_error(early) == "slow_down"
    time.sleep(max(0.0, slowed_at + 10.2 - time.monotonic()))  # the interval grew to 10 s
    answer = poll(daemon, pair["device_code"])
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store", answer.text
    body = answer.json()
    token = body["access_token"]
    assert token.startswith("agd_") and body["token_type"] == "Bearer" and body["scope"] == "user"
    assert body["expires_in"] == 30 * 86400
    assert oauth_error(poll(daemon, pair["device_code"])) == "invalid_grant"  # single use

    # the token is its session's principal and owns what it makes
    done = daemon.send_text("hello", token=token, context_id="c")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert daemon.rpc("GetTask", {"id": done["id"]}, token=token).json()["result"]["id"] == done["id"]
    assert daemon.rpc("GetTask", {"id": done["id"]}, token=ALICE).json()["error"]["code"] == -32001
    extended = daemon.rpc("GetExtendedAgentCard", token=token).json()["result"]
    params = extended["capabilities"]["extensions"][0]["params"]
    assert (params["principal"], params["role"], params["grants"]) == ("user:dev", "user", [])
    status = result_of(command(daemon, "status", token=token), "status")
    assert [c["contextId"] for c in status["conversations"]] == ["c"]  # its own conversation
    refused = command(daemon, "auth.sessions", token=token)
    assert reason(refused) == (-31403, "PERMISSION_DENIED")
    [row] = result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions")["sessions"]
    assert (row["kind"], row["name"], row["principal"], row["approved_by"]) == ("device", "dev", "user:dev", "operator")

    # a stream open under the token closes at once when the session is revoked
    slow = daemon.send_text("go", token=token, context_id="c", configuration={"returnImmediately": True})
    wait_state(daemon, slow["id"], "TASK_STATE_WORKING", token=token)
    stream = Stream(daemon, "SubscribeToTask", {"id": slow["id"]}, token)
    stream.wait_frames(1)
    assert stream.closed_at is None, "the subscription is open while the task runs"
    revoking_at = time.monotonic()
    _, revoked = task_result(
        command(daemon, "auth.sessions.revoke", token=OPERATOR, name="dev"), "auth.sessions.revoke"
    )
    answered_at = time.monotonic()
    assert revoked == {"revoked": 1}
    stream.thread.join(timeout=10)
    assert stream.closed_at is not None and stream.error is None, stream.error
    figure = stream.closed_at - revoking_at
    print(
        f"\nstream closed {figure * 1000:.0f} ms after the revoke was sent "
        f"({(stream.closed_at - answered_at) * 1000:.0f} ms after its answer)"
    )
    assert figure < 2.0  # the design target is 200 ms; generous for a loaded CI machine
    assert stream.frames[-1]["error"]["code"] == -31401

    # later calls answer 401; what the principal owns is kept
    assert unauthorized(daemon.rpc("GetTask", {"id": done["id"]}, token=token))
    assert unauthorized(command(daemon, "status", token=token))
    assert result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions") == {"sessions": []}
    kept = daemon.rpc("GetTask", {"id": slow["id"]}, token=OPERATOR).json()["result"]
    assert kept["status"]["state"] == "TASK_STATE_WORKING"
    again, again_pair = sign_in(daemon, "dev")  # the same name is the same principal: its tasks are still there
    assert daemon.rpc("GetTask", {"id": done["id"]}, token=again).json()["result"]["id"] == done["id"]

    # a streaming send under the token is cut the same way
    streamed = Stream(
        daemon,
        "SendStreamingMessage",
        {"message": {"messageId": "s1", "role": "ROLE_USER", "contextId": "c2", "parts": [{"text": "hello"}]}},
        again,
    )
    streamed.wait_frames(1)
    streamed.thread.join(timeout=10)  # the quick first turn: the stream ends by itself, unharmed
    assert streamed.frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    second = Stream(
        daemon,
        "SendStreamingMessage",
        {"message": {"messageId": "s2", "role": "ROLE_USER", "contextId": "c2", "parts": [{"text": "go"}]}},
        again,
    )
    second.wait_frames(2)
    # and a unary send blocked on its task answers 401 at once, its task going on
    daemon.send_text("hello", token=again, context_id="c3")
    blocked: dict[str, Any] = {}

    def send_blocking() -> None:
        message = {"messageId": "b1", "role": "ROLE_USER", "contextId": "c3", "parts": [{"text": "go"}]}
        blocked["response"] = daemon.rpc("SendMessage", {"message": message}, token=again)
        blocked["at"] = time.monotonic()

    blocker = threading.Thread(target=send_blocking, daemon=True)
    blocker.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = daemon.rpc("ListTasks", {}, token=again).json()["result"].get("tasks", [])
        waiting = [t for t in listed if t["contextId"] == "c3" and t["status"]["state"] == "TASK_STATE_WORKING"]
        if waiting:
            break
        time.sleep(0.05)
    [blocked_task] = waiting
    assert "response" not in blocked, "the unary send waits for its task"
    revoking_at = time.monotonic()
    _, revoked = task_result(command(daemon, "auth.sessions.revoke", token=OPERATOR, all=True), "auth.sessions.revoke")
    assert revoked == {"revoked": 1}
    second.thread.join(timeout=10)
    assert second.closed_at is not None and second.error is None, second.error
    print(f"streaming send closed {(second.closed_at - revoking_at) * 1000:.0f} ms after the revoke was sent")
    assert second.closed_at - revoking_at < 2.0 and second.frames[-1]["error"]["code"] == -31401
    blocker.join(timeout=10)
    print(f"blocked send answered {(blocked['at'] - revoking_at) * 1000:.0f} ms after the revoke was sent")
    assert unauthorized(blocked["response"]) and blocked["at"] - revoking_at < 2.0
    kept = daemon.rpc("GetTask", {"id": blocked_task["id"]}, token=OPERATOR).json()["result"]
    assert kept["status"]["state"] == "TASK_STATE_WORKING"

    no_secret_logged(
        daemon,
        [token, again, pair["device_code"], pair["user_code"], again_pair["device_code"], again_pair["user_code"]],
    )
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    for secret in (token, again, pair["device_code"], pair["user_code"]):
        assert secret not in "".join(daemon.stderr)


def test_sessions_survive_a_restart_and_a_live_one_passes_the_limiter(a2a_daemon: Any) -> None:
    env = {**ENV, "ANYAGENTD_A2A_FAILED_CREDENTIAL_REFILL": "86400"}  # no refill while the test counts
    daemon = a2a_daemon(config=CONFIG, env=env, mock="hello")
    kept, _ = sign_in(daemon, "keeper")
    gone, _ = sign_in(daemon, "leaver")
    task = daemon.send_text("hello", token=kept, context_id="c")
    _, revoked = task_result(
        command(daemon, "auth.sessions.revoke", token=OPERATOR, name="leaver"), "auth.sessions.revoke"
    )
    assert revoked == {"revoked": 1}
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0

    restarted = a2a_daemon(config=CONFIG, env=env, mock="hello", state_dir=daemon.state_dir)
    assert restarted.rpc("GetTask", {"id": task["id"]}, token=kept).json()["result"]["id"] == task["id"]
    assert unauthorized(restarted.rpc("GetTask", {"id": task["id"]}, token=gone))  # revoked stays revoked
    rows = result_of(command(restarted, "auth.sessions", token=OPERATOR), "auth.sessions")["sessions"]
    assert [r["name"] for r in rows] == ["keeper"]
    restarted.signal(signal.SIGHUP)  # a reload keeps the sessions
    deadline = time.monotonic() + 20
    while "configuration reloaded" not in "".join(restarted.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert restarted.rpc("GetTask", {"id": task["id"]}, token=kept).json()["result"]["id"] == task["id"]

    for n in range(19):  # with the revoked one above: 20 bad credentials from this source
        assert unauthorized(restarted.rpc("GetTask", {"id": task["id"]}, token=f"agd_unknown{n}"))
    limited, n = restarted.rpc("GetTask", {"id": task["id"]}, token="agd_unknown"), 0
    while limited.status_code != 429:  # at once (no refill here)
        assert unauthorized(limited) and n < 200, limited.text
        limited, n = restarted.rpc("GetTask", {"id": task["id"]}, token=f"agd_more{n}"), n + 1
    assert "retry-after" in limited.headers
    served = restarted.rpc("GetTask", {"id": task["id"]}, token=kept)  # a live session is still served
    assert served.status_code == 200 and served.json()["result"]["id"] == task["id"]
    assert restarted.rpc("GetTask", {"id": task["id"]}, token=OPERATOR).status_code == 200  # and a configured bearer
    assert restarted.rpc("GetTask", {"id": task["id"]}, token=gone).status_code == 429  # a revoked one is bad


def test_login_send_and_status_from_the_command_line(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("ANYAGENTD_A2A_TOKEN", None)
    login = subprocess.Popen(
        [ANYAGENTD, "a2a", "login", daemon.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert login.stderr is not None
    shown = login.stderr.readline()
    user_code = shown.split("the code ")[1].split(" ")[0]
    assert "verification URI: " + daemon.url in shown
    approve(daemon, user_code, "cli-user")  # the operator, from another client
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    path = tmp_path / "xdg" / "anyagentd" / "credentials.json"
    assert f"token stored in {path}" in err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = json.loads(path.read_text())[daemon.url]["access_token"]
    assert token.startswith("agd_") and token not in out + err + shown

    sent = subprocess.run(
        [ANYAGENTD, "a2a", "send", daemon.url, "hello"], capture_output=True, text=True, env=env, timeout=60
    )
    assert sent.returncode == 0, sent.stderr
    assert "scripted agent" in sent.stdout and ": completed (contextId " in sent.stderr
    task_id = sent.stderr.split("task ")[1].split(":")[0]
    owned = daemon.rpc("GetTask", {"id": task_id}, token=token).json()["result"]
    assert owned["status"]["state"] == "TASK_STATE_COMPLETED"  # sent as the signed-in principal

    shown_status = subprocess.run(
        [ANYAGENTD, "a2a", "status", daemon.url], capture_output=True, text=True, env=env, timeout=60
    )
    assert shown_status.returncode == 0, shown_status.stderr
    status = json.loads(shown_status.stdout)
    validate_result("status", status)
    assert [c["contextId"] for c in status["conversations"]] == [owned["contextId"]]

    by_env = subprocess.run(
        [ANYAGENTD, "a2a", "status", daemon.url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "ANYAGENTD_A2A_TOKEN": OPERATOR},
    )
    assert by_env.returncode == 0 and json.loads(by_env.stdout)["instance"] == status["instance"]
    task_result(command(daemon, "auth.sessions.revoke", token=OPERATOR, name="cli-user"), "auth.sessions.revoke")
    for argv in (["status", daemon.url], ["send", daemon.url, "hi"], ["status", daemon.url, "--token", "nope"]):
        refused = subprocess.run([ANYAGENTD, "a2a", *argv], capture_output=True, text=True, env=env, timeout=60)
        assert refused.returncode == 1 and refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "anyagentd a2a login" in refused.stderr
    no_secret_logged(daemon, [token, user_code])


def test_without_the_device_grant_no_session_is_listed_or_revoked(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config='[a2a]\nbearer = "{{secret:OP_TOKEN}}"\n', env=ENV, mock="hello")
    assert result_of(command(daemon, "auth.sessions", token=OPERATOR), "auth.sessions") == {"sessions": []}
    _, revoked = task_result(command(daemon, "auth.sessions.revoke", token=OPERATOR, all=True), "auth.sessions.revoke")
    assert revoked == {"revoked": 0}
    card = httpx.get(daemon.url + "/.well-known/agent-card.json").json()
    assert "device" not in card["securitySchemes"]
    assert httpx.post(daemon.url + "/oauth2/device_authorization", data={"client_id": "x"}).status_code == 404
    assert unauthorized(daemon.rpc("GetTask", {"id": "x"}, token="agd_" + "x" * 43))


def test_login_waits_the_interval_and_honours_slow_down(a2a_daemon: Any) -> None:
    from anyagentd_a2a.client import login

    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    said: list[str] = []
    asked: list[float] = []

    def sleep(seconds: float) -> None:
        """Polls early twice (the second answers slow_down), then approves and waits what was asked."""
        asked.append(seconds)
        if len(asked) == 3:
            user_code = said[0].split("the code ")[1].split(" ")[0]
            approve(daemon, user_code, "polite")
            time.sleep(seconds)

    body = login(daemon.url, say=said.append, sleep=sleep)
    assert asked == [5, 5, 10]  # the interval, then 5 s more after slow_down
    assert body["access_token"].startswith("agd_") and body["scope"] == "user"
    assert (
        daemon.rpc("GetExtendedAgentCard", token=body["access_token"]).json()["result"]["capabilities"]["extensions"][
            0
        ]["params"]["principal"]
        == "user:polite"
    )
