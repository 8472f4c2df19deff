"""The front pipeline with raw HTTP (httpx) against a real daemon: each refusal, in order — a request that breaks
one step and every later one is refused by that step — and nothing refused creates a task."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

OP, ALICE, READER, SLOWPOKE = "op-token-1", "alice-token-1", "reader-token-1", "slow-token-1"
CONFIG = """
[a2a]
bearer = "{{secret:OP}}"
cors_origins = ["https://app.example"]
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE}}"
[[a2a.principals]]
id = "reader"
bearer = "{{secret:READER}}"
methods = ["Get*", "List*"]
[[a2a.principals]]
id = "slowpoke"
bearer = "{{secret:SLOWPOKE}}"
rate = "3/600s"
"""
ENV = {"OP": OP, "ALICE": ALICE, "READER": READER, "SLOWPOKE": SLOWPOKE}
COMMAND = "https://agentd.dev/a2a/ext/command"


def send_params() -> dict[str, Any]:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def post(
    url: str,
    body: Any,
    *,
    token: str | None = ALICE,
    version: str | None = "1.0",
    content_type: str = "application/json",
    **headers: str,
) -> httpx.Response:
    sent = {"Content-Type": content_type, **headers}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if version is not None:
        sent["A2A-Version"] = version
    content = body if isinstance(body, (bytes, str)) else httpx.Request("POST", url, json=body).content
    return httpx.post(url + "/", content=content, headers=sent, timeout=30)


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params if params is not None else {}}


def task_count(url: str) -> int:
    body = post(url, rpc("ListTasks"), token=OP).json()
    return len(body["result"]["tasks"])


@pytest.fixture
def daemon(a2a_daemon: Any) -> Any:
    return a2a_daemon(config=CONFIG, env=ENV, mock="hello")


def test_each_refusal_in_order_creates_nothing(daemon: Any) -> None:
    url = daemon.url
    send = rpc("SendMessage", send_params())
    # 1. CORS: a foreign origin is refused before anything else, with an empty body
    r = post(url, b"not json", token="wrong", version=None, content_type="text/plain", Origin="https://evil.example")
    assert r.status_code == 403 and r.content == b""
    # 3. Content-Type (before identity and everything after)
    r = post(url, b"not json", token="wrong", version=None, content_type="text/plain")
    assert r.status_code == 415  # A2A's ContentTypeNotSupportedError in the JSON-RPC body (TCK JSONRPC-SSE-002)
    assert r.json()["error"]["code"] == -32005 and r.json()["id"] is None
    # 4. identity: an unknown bearer is refused and never falls through to anonymous
    r = post(url, b"not json", token="wrong", version=None)
    assert r.status_code == 401 and r.json()["error"]["code"] == -31401 and r.json()["id"] is None
    assert r.headers["WWW-Authenticate"].startswith("Bearer realm=")
    r = post(url, send, token=None)
    assert r.status_code == 401  # credentials are configured: nobody is the implicit operator
    # 5. envelope
    assert post(url, b"{nope", version=None).json()["error"]["code"] == -32700
    assert post(url, [send], version=None).json()["error"]["code"] == -32600  # batch
    missing_id = {k: v for k, v in send.items() if k != "id"}
    assert post(url, missing_id, version=None).json()["error"]["code"] == -32600
    assert post(url, dict(send, jsonrpc="1.0"), version=None).json()["error"]["code"] == -32600
    assert post(url, dict(send, params=["x"]), version=None).json()["error"]["code"] == -32602
    # 6. A2A-Version: missing, 0.3 and 1.1 are refused — before routing (an unknown method gets -32009 too)
    for version in (None, "0.3", "1.1", "2.0"):
        error = post(url, rpc("message/send", {}), version=version).json()["error"]
        assert error["code"] == -32009, (version, error)
        assert error["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        assert error["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    # 8. exact route: 0.3 names and unknown methods
    for method in ("message/send", "tasks/get", "sendmessage", "SendMessage/"):
        assert post(url, rpc(method, {})).json()["error"]["code"] == -32601
    # 10. method authorization
    r = post(url, send, token=READER)
    assert r.status_code == 403 and r.json()["error"]["code"] == -31403
    assert post(url, rpc("ListTasks"), token=READER).json()["result"]["tasks"] == []
    # nothing refused created a task
    assert task_count(url) == 0
    # and a patch version of 1.0 is served
    assert post(url, send, version="1.0.2").json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task_count(url) == 1


def test_cors_allowed_origin_gets_the_header_and_a_preflight(daemon: Any) -> None:
    r = post(daemon.url, rpc("ListTasks"), Origin="https://app.example")
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
    pre = httpx.options(
        daemon.url + "/", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    )
    assert pre.status_code == 204 and "A2A-Version" in pre.headers["access-control-allow-headers"]
    assert httpx.options(daemon.url + "/", headers={"Origin": "https://evil.example"}).status_code == 403


def test_failed_credential_limiter_refuses_bad_credentials_not_good_ones(a2a_daemon: Any) -> None:
    # no refill while the test counts (a loaded machine can take seconds between two requests)
    daemon = a2a_daemon(config=CONFIG, env={**ENV, "ANYAGENTD_A2A_FAILED_CREDENTIAL_REFILL": "86400"}, mock="hello")
    codes = [post(daemon.url, rpc("ListTasks"), token=f"bad-{i}").status_code for i in range(20)]
    assert codes == [401] * 20
    while codes[-1] != 429:  # at the 21st (no refill here)
        assert len(codes) < 200, "the source was never limited"
        codes.append(post(daemon.url, rpc("ListTasks"), token=f"bad-{len(codes)}").status_code)
    assert post(daemon.url, rpc("ListTasks"), token=ALICE).status_code == 200  # a good credential is still served
    r = post(daemon.url, rpc("ListTasks"), token="bad-again")  # limited after it, so before it too
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    deadline = time.monotonic() + 20
    while "too many failed credentials" not in "".join(daemon.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    log = "".join(daemon.stderr)
    assert "refused" in log and "bad-1" not in log and ALICE not in log  # refusals are logged, credentials never


def test_per_principal_rate(daemon: Any) -> None:
    codes = [post(daemon.url, rpc("ListTasks"), token=SLOWPOKE).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert post(daemon.url, rpc("ListTasks"), token=ALICE).status_code == 200  # others are not affected


def test_extension_negotiation_echoes_activated_uris(daemon: Any) -> None:
    r = post(daemon.url, rpc("ListTasks"), **{"A2A-Extensions": f"https://other.example/ext, {COMMAND}"})
    assert r.status_code == 200 and r.headers["A2A-Extensions"] == COMMAND
    assert "A2A-Extensions" not in post(daemon.url, rpc("ListTasks")).headers


def test_trailing_slash_or_not_never_redirects(daemon: Any) -> None:
    for path in ("", "/"):
        r = httpx.post(
            daemon.url + path,
            json=rpc("ListTasks"),
            follow_redirects=False,
            headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"},
        )
        assert r.status_code == 200 and "result" in r.json()


def test_agent_card_is_public_with_etag_and_security(daemon: Any) -> None:
    r = httpx.get(daemon.url + "/.well-known/agent-card.json")
    assert r.status_code == 200 and r.headers["Cache-Control"] == "public, max-age=60" and r.headers["ETag"]
    card = r.json()
    assert card["supportedInterfaces"][0] == {"url": daemon.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    assert card["capabilities"]["streaming"] and card["capabilities"]["extendedAgentCard"]
    assert card["capabilities"]["extensions"][0]["uri"] == COMMAND
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert [s["id"] for s in card["skills"]] == ["mock"]
    again = httpx.get(daemon.url + "/.well-known/agent-card.json", headers={"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304
    extended = post(daemon.url, rpc("GetExtendedAgentCard"), token=READER).json()["result"]
    params = extended["capabilities"]["extensions"][0]["params"]
    assert params["principal"] == "user:reader" and params["methods"] == ["Get*", "List*"] and params["grants"] == []


def test_implicit_operator_only_without_credentials_and_origin(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello", config='[a2a]\ncors_origins = ["https://app.example"]\n')
    assert post(daemon.url, rpc("ListTasks"), token=None).status_code == 200
    r = post(daemon.url, rpc("ListTasks"), token=None, Origin="https://app.example")
    assert r.status_code == 401  # a browser page is never the implicit operator
    assert post(daemon.url, rpc("ListTasks"), token="anything").status_code == 401


def test_streaming_through_the_front_keeps_cors_and_extension_headers(daemon: Any) -> None:
    headers = {
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        "Authorization": f"Bearer {ALICE}",
        "Origin": "https://app.example",
        "A2A-Extensions": COMMAND,
    }
    body = rpc("SendStreamingMessage", send_params())
    with httpx.stream("POST", daemon.url + "/", json=body, headers=headers, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        assert response.headers["A2A-Extensions"] == COMMAND
        frames = [line for line in response.iter_lines() if line.startswith("data:")]
    results = [json.loads(f[5:])["result"] for f in frames]
    assert "task" in results[0] and results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_message_that_gives_no_prompt_is_refused_before_any_task(daemon: Any) -> None:
    """A send whose message would give the agent an empty prompt — no part, only empty or white-space text — is
    -32602 naming ``message.parts`` (google.rpc BadRequest, ErrorInfo EMPTY_MESSAGE) before a task exists,
    streaming or not; a data part alone, or some text, is a prompt."""

    def message(parts: list[dict[str, Any]] | None) -> dict[str, Any]:
        sent: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER"}
        return sent if parts is None else dict(sent, parts=parts)

    for method in ("SendMessage", "SendStreamingMessage"):
        for parts in ([{"text": ""}], [], [{"text": ""}, {"text": ""}], None, [{"text": "   "}], [{"text": "\n\t"}]):
            r = post(daemon.url, rpc(method, {"message": message(parts)}, request_id="empty"))
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
            error = r.json()["error"]
            assert error["code"] == -32602 and r.json()["id"] == "empty", (method, parts, error)
            details = {d["@type"].rsplit(".", 1)[-1]: d for d in error["data"]}
            assert [v["field"] for v in details["BadRequest"]["fieldViolations"]] == ["message.parts"]
            assert details["ErrorInfo"]["reason"] == "EMPTY_MESSAGE"
    assert task_count(daemon.url) == 0
    for parts in ([{"text": "hi"}], [{"text": ""}, {"text": "hi"}], [{"data": {"k": 1}}]):
        sent = post(daemon.url, rpc("SendMessage", {"message": message(parts)})).json()
        assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", (parts, sent)
    assert task_count(daemon.url) == 3


def test_an_empty_answer_to_a_waiting_task_is_read_as_an_answer(a2a_daemon: Any) -> None:
    """The empty-message refusal is for a send that would start a task: one naming a task that waits for input is
    its answer, and an empty one is "Not an answer" — the task keeps waiting, as before."""
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="permission")
    asked = post(
        daemon.url, rpc("SendMessage", {"message": dict(send_params()["message"], parts=[{"text": "write hello.txt"}])})
    ).json()
    task = asked["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    answer = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "taskId": task["id"],
        "contextId": task["contextId"],
        "parts": [{"text": ""}],
    }
    answered = post(daemon.url, rpc("SendMessage", {"message": answer})).json()
    status = answered["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED", answered
    assert status["message"]["parts"][0]["text"].startswith("Not an answer"), status
    assert task_count(daemon.url) == 1
