"""The operator's logs of a real ``anyagentd a2a``: an access line per HTTP request (principal, status, JSON-RPC
error, bytes, client; a streamed reply logged when it ends; 401 and 413 included; never a token) and an audit line
per operator action (an ``admin.*`` op, done or refused; a device approval, its user code redacted; a SIGHUP reload,
taken or refused); ``[a2a] access_log = false`` silences the access lines, and a reload turns them back on."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

URI = "https://agentd.dev/a2a/ext/command"
OPERATOR, ALICE, WRONG = "op-secret-5d1e", "alice-secret-77b9", "wrong-secret-c0ffee"
CONFIG = """
[a2a]
bearer = "{{secret:OP_TOKEN}}"
{extra}
[a2a.device_grant]
enabled = true
[a2a.limits]
body_bytes = 4096
part_bytes = 4096
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_TOKEN}}"
"""
ENV = {"OP_TOKEN": OPERATOR, "ALICE_TOKEN": ALICE}


def json_lines(daemon: Any) -> list[dict[str, Any]]:
    """Every stderr line of ``daemon`` that is a JSON object, in order."""
    found = []
    for raw in list(daemon.stderr):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            found.append(line)
    return found


def lines(daemon: Any, logger: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(daemon) if line.get("logger") == logger]


def wait_line(daemon: Any, logger: str, match: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> dict:
    """The first ``logger`` line that ``match`` accepts, polled from the captured stderr until ``timeout`` (s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in lines(daemon, logger):
            if match(line):
                return line
        time.sleep(0.02)
    raise AssertionError(f"no {logger} line matched; stderr: {''.join(daemon.stderr)[-3000:]}")


def access(daemon: Any, **want: Any) -> dict[str, Any]:
    return wait_line(daemon, "anyagentd.a2a.access", lambda line: all(line.get(k) == v for k, v in want.items()))


def post(daemon: Any, body: bytes, token: str | None, extensions: bool = False) -> httpx.Response:
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if extensions:
        headers["A2A-Extensions"] = URI
    return httpx.post(daemon.url + "/", content=body, headers=headers, timeout=60)


def rpc_body(method: str, params: dict[str, Any], request_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def message(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts, **extra}


def test_access_and_audit_lines_name_who_did_what_and_never_a_token(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG.replace("{extra}", ""), env=ENV, mock="hello")

    body = rpc_body("SendMessage", {"message": message([{"text": "hello"}])}, "send-1")
    sent = post(daemon, body, ALICE)
    assert sent.status_code == 200 and "result" in sent.json()
    line = access(daemon, rpc_method="SendMessage", principal="user:alice", status=200)
    assert line["method"] == "POST" and line["path"] == "/" and line["rpc_error"] is None and line["op"] is None
    assert line["bytes_in"] == len(body) and line["bytes_out"] == len(sent.content)
    assert line["client"] == "127.0.0.1" and line["duration_ms"] >= 0 and line["level"] == "info"

    streamed_body = rpc_body("SendStreamingMessage", {"message": message([{"text": "stream"}])}, "stream-1")
    streamed = post(daemon, streamed_body, ALICE)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    line = access(daemon, rpc_method="SendStreamingMessage", principal="user:alice")  # written when the stream ended
    assert line["status"] == 200 and line["bytes_out"] == len(streamed.content) > 0

    refused = post(daemon, rpc_body("ListTasks", {}, "bad-1"), WRONG)
    assert refused.status_code == 401
    line = access(daemon, status=401)
    assert line["principal"] is None and line["rpc_error"] == -31401

    big = rpc_body("SendMessage", {"message": message([{"text": "x" * 5000}])}, "big-1")
    assert post(daemon, big, ALICE).status_code == 413
    assert access(daemon, status=413)["principal"] == "user:alice"  # identified before the body was read

    card = httpx.get(daemon.url + "/.well-known/agent-card.json", timeout=30)
    assert card.status_code == 200
    line = access(daemon, path="/.well-known/agent-card.json", method="GET")
    assert line["principal"] is None and line["bytes_out"] == len(card.content) and line["rpc_method"] is None

    assert httpx.get(daemon.url + "/healthz", timeout=30).status_code == 200
    assert access(daemon, path="/healthz")["status"] == 200

    command = message(
        [{"data": {"agentd": {"op": "admin.pause", "reason": "maintenance"}}, "mediaType": "application/json"}],
        extensions=[URI],
    )
    paused = post(daemon, rpc_body("SendMessage", {"message": command}, "pause-1"), OPERATOR, extensions=True)
    assert paused.status_code == 200 and "result" in paused.json(), "".join(daemon.stderr)[-3000:]
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "admin.pause")
    assert audit["principal"] == "operator" and audit["outcome"] == "ok" and audit["reason"] is None
    assert audit["arguments"] == {"reason": "maintenance"}
    assert access(daemon, op="admin.pause")["principal"] == "operator"
    denied = post(daemon, rpc_body("SendMessage", {"message": command}, "pause-2"), ALICE, extensions=True)
    assert denied.status_code == 403
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("principal") == "user:alice")
    assert audit["action"] == "admin.pause" and audit["outcome"] == "refused"
    assert audit["reason"] == "PERMISSION_DENIED"
    assert access(daemon, op="admin.pause", principal="user:alice")["rpc_error"] is not None

    code = "WXYZ-QRST"  # a user code signs a device in: the audit line keeps it out
    approve = message(
        [
            {
                "data": {"agentd": {"op": "auth.device.approve", "user_code": code, "as": "bob"}},
                "mediaType": "application/json",
            }
        ],
        extensions=[URI],
    )
    post(daemon, rpc_body("SendMessage", {"message": approve}, "approve-1"), OPERATOR, extensions=True)
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "auth.device.approve")
    assert audit["outcome"] == "refused" and audit["reason"] == "INVALID_COMMAND_ARGS"  # no such code waits
    assert audit["arguments"] == {"user_code": "[redacted]", "as": "bob"}

    daemon.signal(signal.SIGHUP)  # the same file: taken
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "config.reload")
    assert audit["principal"] == "signal" and audit["outcome"] == "ok" and audit["arguments"]["signal"] == "SIGHUP"
    (tmp_path / "config0.toml").write_text("[a2a]\nbearer = 5\n")
    daemon.signal(signal.SIGHUP)  # a file that does not load: refused, the running configuration kept
    audit = wait_line(
        daemon,
        "anyagentd.a2a.audit",
        lambda line: line.get("action") == "config.reload" and line.get("outcome") == "refused",
    )
    assert audit["principal"] == "signal"

    text = "".join(daemon.stderr)
    for secret in (OPERATOR, ALICE, WRONG, code):
        assert secret not in text, f"a token reached the log: {secret}"
    assert not lines(daemon, "uvicorn.access"), "uvicorn's own access log is off: we log our own"


def test_access_log_false_silences_the_access_lines_until_a_reload_turns_them_on(
    a2a_daemon: Any, tmp_path: Path
) -> None:
    daemon = a2a_daemon(config=CONFIG.replace("{extra}", "access_log = false"), env=ENV, mock="hello")
    assert post(daemon, rpc_body("ListTasks", {}, "off-1"), ALICE).status_code == 200
    assert post(daemon, rpc_body("ListTasks", {}, "off-2"), WRONG).status_code == 401
    (tmp_path / "config0.toml").write_text(CONFIG.replace("{extra}", "access_log = true"))
    daemon.signal(signal.SIGHUP)
    wait_line(
        daemon,
        "anyagentd.a2a.audit",
        lambda line: line.get("action") == "config.reload" and line.get("outcome") == "ok",
    )
    assert post(daemon, rpc_body("ListTasks", {}, "on-1"), ALICE).status_code == 200
    access(daemon, rpc_method="ListTasks", principal="user:alice")
    assert len(lines(daemon, "anyagentd.a2a.access")) == 1, "the two requests before the reload were not logged"


def test_access_log_is_a_strict_bool_checked_as_the_start_checks(tmp_path: Path) -> None:
    import subprocess

    from a2a_helpers import ANYAGENTD

    def check(value: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / "c.toml"
        path.write_text(f"[a2a]\naccess_log = {value}\n")
        return subprocess.run(
            [ANYAGENTD, "a2a", "--check-config", str(path)], capture_output=True, text=True, timeout=60
        )

    assert check("false").returncode == 0
    refused = check('"off"')
    assert refused.returncode != 0 and "a2a.access_log" in refused.stdout + refused.stderr


def test_an_approval_and_each_revocation_are_audited_without_their_secrets(a2a_daemon: Any) -> None:
    """The audit lines of the operator's sign-in actions that succeed: a device approval (its user code redacted),
    a revocation by name, and one by the device's own token at ``POST /oauth2/revoke`` (RFC 7009)."""
    from test_a2a_device_grant import OPERATOR as DEVICE_OPERATOR
    from test_a2a_device_grant import code_pair, oauth, poll

    daemon = a2a_daemon(config=CONFIG.replace("{extra}", ""), env=ENV, mock="hello")
    assert DEVICE_OPERATOR != OPERATOR  # this file's operator token is the one configured here
    secrets: list[str] = []

    def signed_in(name: str) -> str:
        pair = code_pair(daemon)
        command = message(
            [
                {
                    "data": {"agentd": {"op": "auth.device.approve", "user_code": pair["user_code"], "as": name}},
                    "mediaType": "application/json",
                }
            ],
            extensions=[URI],
        )
        approved = post(
            daemon, rpc_body("SendMessage", {"message": command}, f"approve-{name}"), OPERATOR, extensions=True
        )
        assert "result" in approved.json(), approved.text
        token = poll(daemon, pair["device_code"]).json()["access_token"]
        secrets.extend([pair["user_code"], pair["device_code"], token])
        return token

    signed_in("dev")
    audit = wait_line(
        daemon,
        "anyagentd.a2a.audit",
        lambda line: line.get("action") == "auth.device.approve" and line.get("outcome") == "ok",
    )
    assert audit["principal"] == "operator" and audit["arguments"] == {"user_code": "[redacted]", "as": "dev"}

    revoke = message(
        [{"data": {"agentd": {"op": "auth.sessions.revoke", "name": "dev"}}, "mediaType": "application/json"}],
        extensions=[URI],
    )
    assert (
        "result"
        in post(daemon, rpc_body("SendMessage", {"message": revoke}, "revoke-1"), OPERATOR, extensions=True).json()
    )
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "auth.sessions.revoke")
    assert audit["principal"] == "operator" and audit["outcome"] == "ok" and audit["arguments"] == {"name": "dev"}

    token = signed_in("laptop")
    assert oauth(daemon, "/oauth2/revoke", token=token).status_code == 200
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "oauth2.revoke")
    assert audit["principal"] == "user:laptop" and audit["outcome"] == "ok"
    assert oauth(daemon, "/oauth2/revoke", token=token).status_code == 200  # again: not ours any more, no line
    assert oauth(daemon, "/oauth2/revoke", token="not-a-token").status_code == 200
    later = signed_in("after")  # a line after both: had either been audited, its line would be there by now
    wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("arguments", {}).get("as") == "after")
    assert (
        len(lines(daemon, "anyagentd.a2a.audit"))
        == len([1 for line in lines(daemon, "anyagentd.a2a.audit") if line["action"] != "oauth2.revoke"]) + 1
    )
    assert later not in "".join(daemon.stderr)
    text = "".join(daemon.stderr)
    for secret in secrets:
        assert secret not in text, "a code or token reached the log"


def test_every_refused_operator_op_is_audited_with_the_arguments_it_was_given(a2a_daemon: Any) -> None:
    """An operator op refused before it runs — not permitted, introspection off, a switch off (UNKNOWN_OP), an
    unknown argument — is audited with the arguments it was sent (secret-named ones redacted), as one refused by
    the op itself (``admin.set`` of a bad value) and one that ran are; nothing is changed and no task created."""
    config = CONFIG.replace("[a2a.device_grant]\nenabled = true\n", "").replace("{extra}", "")
    daemon = a2a_daemon(config=config, env=ENV, mock="hello")
    code = "QWER-ASDF"

    def command(request_id: str, token: str, op: str, **args: Any) -> dict[str, Any]:
        sent = message([{"data": {"agentd": {"op": op, **args}}, "mediaType": "application/json"}], extensions=[URI])
        return post(daemon, rpc_body("SendMessage", {"message": sent}, request_id), token, extensions=True).json()

    def audited(request_id: str, token: str, op: str, **args: Any) -> dict[str, Any]:
        """The audit line of this command (the next one: each is written before its answer)."""
        before = len(lines(daemon, "anyagentd.a2a.audit"))
        command(request_id, token, op, **args)
        wait_line(daemon, "anyagentd.a2a.audit", lambda _: len(lines(daemon, "anyagentd.a2a.audit")) > before)
        line = lines(daemon, "anyagentd.a2a.audit")[before]
        assert line["action"] == op, line
        return line

    line = audited("pause-alice", ALICE, "admin.pause", reason="by-alice")
    assert (line["principal"], line["outcome"], line["reason"]) == ("user:alice", "refused", "PERMISSION_DENIED")
    assert line["arguments"] == {"reason": "by-alice"}
    line = audited("events-op", OPERATOR, "debug.events", limit=1)
    assert (line["outcome"], line["reason"]) == ("refused", "INTROSPECTION_DISABLED")
    assert line["arguments"] == {"after": 0, "limit": 1}  # parsed, as the line of a run of it would have them
    line = audited("approve-op", OPERATOR, "auth.device.approve", user_code=code, **{"as": "bob"})
    assert (line["outcome"], line["reason"]) == ("refused", "UNKNOWN_OP")  # the device grant is off
    assert line["arguments"] == {"user_code": "[redacted]", "as": "bob"}
    line = audited("pause-zz", OPERATOR, "admin.pause", reason="typo", zz=1)
    assert (line["outcome"], line["reason"]) == ("refused", "INVALID_COMMAND_ARGS")
    assert line["arguments"] == {"reason": "typo", "zz": 1}  # as sent: they do not parse
    line = audited("set-bad", OPERATOR, "admin.set", path="agent.approval", value="sometimes")
    assert line["outcome"] == "refused" and line["arguments"] == {"path": "agent.approval", "value": "sometimes"}

    status = command("status", OPERATOR, "status")["result"]["message"]["parts"][0]["data"]
    assert status["paused"] is False  # no refused pause took
    listed = post(daemon, rpc_body("ListTasks", {}, "list"), OPERATOR).json()
    assert listed["result"].get("tasks", []) == [], listed
    line = audited("pause-op", OPERATOR, "admin.pause", reason="by-op")  # the same attempt, run: the same shape
    assert line["outcome"] == "ok" and line["arguments"] == {"reason": "by-op"}
    assert code not in "".join(daemon.stderr)


def test_a_secret_in_any_field_of_any_line_never_reaches_stderr(a2a_daemon: Any, tmp_path: Path) -> None:
    """Redaction by value, not only by argument name: a configured secret carried in an op's free-text argument,
    reads as its ``{{secret:…}}`` reference in the audit line, and an argument named ``authorization`` is
    redacted by its name."""
    daemon = a2a_daemon(config=CONFIG.replace("{extra}", ""), env=ENV, mock="hello")
    command = message(
        [{"data": {"agentd": {"op": "admin.pause", "note": f"Bearer {OPERATOR}"}}, "mediaType": "application/json"}],
        extensions=[URI],
    )
    post(daemon, rpc_body("SendMessage", {"message": command}, "leak-1"), ALICE, extensions=True)
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: line.get("action") == "admin.pause")
    assert audit["arguments"]["note"] == "Bearer {{secret:OP_TOKEN}}", audit
    named = message(
        [{"data": {"agentd": {"op": "admin.pause", "authorization": "x-y-z-w"}}, "mediaType": "application/json"}],
        extensions=[URI],
    )
    post(daemon, rpc_body("SendMessage", {"message": named}, "leak-2"), ALICE, extensions=True)
    audit = wait_line(daemon, "anyagentd.a2a.audit", lambda line: "authorization" in line.get("arguments", {}))
    assert audit["arguments"]["authorization"] == "[redacted]"
    assert OPERATOR not in "".join(daemon.stderr)
