"""Issue 26: the daemon as a service an operator runs — request and task limits (``[a2a.limits]``), a
failed-credential limiter that bad tokens cannot turn against a valid credential, and the client address behind
``[a2a] trusted_proxies``. Raw HTTP (sockets, httpx) against a real daemon; every wait is for a condition, the
socket timeouts only bound a failure."""

from __future__ import annotations

import base64
import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from a2a_helpers import wait_state

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
OP, ALICE = "op-token-26", "alice-token-26"
CREDENTIALS = """
[a2a]
bearer = "{{secret:OP}}"
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE}}"
"""
ENV = {"OP": OP, "ALICE": ALICE}
FAILURE_BOUND = 60.0
"""Seconds a raw socket waits for an answer before the test fails (a bound on a failure, never asserted)."""


def message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": list(parts)}}


def listed(daemon: Any) -> list[dict[str, Any]]:
    return daemon.rpc("ListTasks", {}, token=OP).json()["result"].get("tasks", [])


def raw_exchange(url: str, head: list[str], body: list[bytes]) -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` (request line and header lines) and the ``body`` pieces on one connection — without ever
    completing a body longer than what is sent — and read the answer: (status, headers lower-cased, body). The
    answer must come while the request is still incomplete, else the socket times out and the test fails."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=FAILURE_BOUND) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for piece in body:
            sock.sendall(piece)
        received = b""
        try:
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(65536)
                assert chunk, f"the daemon closed the connection without an answer: {received!r}"
                received += chunk
            head_bytes, _, rest = received.partition(b"\r\n\r\n")
            lines = head_bytes.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers.get("content-length", "0"))
            while len(rest) < length:
                chunk = sock.recv(65536)
                assert chunk, "the answer's body was cut short"
                rest += chunk
        except ConnectionResetError:  # a reset (unread bytes of ours at the daemon's close) lost the answer
            raise AssertionError(f"the connection was reset before the whole answer came: {received!r}") from None
    return int(lines[0].split()[1]), headers, rest[:length]


def post_head(url: str, token: str, *extra: str) -> list[str]:
    host = urlsplit(url).netloc
    return [
        "POST / HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        "A2A-Version: 1.0",
        f"Authorization: Bearer {token}",
        *extra,
    ]


def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock="hello")
    # 40 MB announced, 12 bytes sent: the answer can only come if the daemon decides from the header alone
    status, headers, body = raw_exchange(
        daemon.url, post_head(daemon.url, ALICE, "Content-Length: 40000000"), [b'{"jsonrpc":"']
    )
    assert status == 413 and headers.get("connection") == "close"
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and "a2a.limits.body_bytes" in error["message"] and str(4 * MIB) in error["message"]
    assert error["data"][0]["metadata"] == {"limit": "a2a.limits.body_bytes", "max": str(4 * MIB)}
    # identity comes first: an unknown bearer is 401 however large its body (the body is never read either)
    status, _, _ = raw_exchange(daemon.url, post_head(daemon.url, "nobody", "Content-Length: 40000000"), [b"{"])
    assert status == 401
    assert listed(daemon) == []


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock="hello")
    piece = b"x" * 65536
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * 64 + [b"1\r\nx\r\n"]  # 4 MiB + 1 byte, never terminated
    status, headers, body = raw_exchange(daemon.url, post_head(daemon.url, ALICE, "Transfer-Encoding: chunked"), chunks)
    assert status == 413 and headers.get("connection") == "close"
    assert json.loads(body)["error"]["data"][0]["metadata"]["limit"] == "a2a.limits.body_bytes"
    assert listed(daemon) == []
    # a body within the limit is read and served as before
    assert daemon.rpc("ListTasks", {}, token=ALICE).status_code == 200


def test_too_many_parts_or_a_part_too_large_is_refused_naming_the_limit(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock="hello")
    cases = [
        (message(*[{"text": "p"}] * 65), "message.parts", "a2a.limits.message_parts", 64),
        (message({"text": "a"}, {"text": "x" * (2 * MIB + 1)}), "message.parts[1]", "a2a.limits.part_bytes", 2 * MIB),
        (message({"text": "é" * (MIB + 1)}), "message.parts[0]", "a2a.limits.part_bytes", 2 * MIB),  # UTF-8 bytes
        (
            message({"raw": base64.b64encode(b"\0" * (2 * MIB + 3)).decode(), "filename": "big.bin"}),
            "message.parts[0]",
            "a2a.limits.part_bytes",
            2 * MIB,
        ),  # an inline file's bytes, not its base64
    ]
    for params, field, key, limit in cases:
        for method in ("SendMessage", "SendStreamingMessage"):
            response = daemon.rpc(method, params, token=ALICE)
            assert response.status_code == 200 and "application/json" in response.headers["content-type"]
            error = response.json()["error"]
            assert error["code"] == -32602 and key in error["message"], error["message"][:300]
            bad_request, info = error["data"]
            assert bad_request["fieldViolations"][0]["field"] == field
            assert info["reason"] == "LIMIT_EXCEEDED" and info["metadata"] == {"limit": key, "max": str(limit)}
    assert listed(daemon) == []  # nothing refused was stored
    # at the limits, a message is served
    fits = message(*[{"text": "p"}] * 63, {"raw": base64.b64encode(b"\0" * (2 * MIB)).decode(), "filename": "f.bin"})
    task = daemon.rpc("SendMessage", fits, token=ALICE).json()["result"]["task"]
    wait_state(daemon, task["id"], "TASK_STATE_COMPLETED", token=ALICE)


def test_configured_limits_are_the_ones_applied_and_named(a2a_daemon: Any) -> None:
    config = CREDENTIALS.replace(
        "[[a2a.principals]]",
        """[a2a.limits]
body_bytes = 8192
message_parts = 2
part_bytes = 100
[[a2a.principals]]""",
    )
    daemon = a2a_daemon(config=config, env=ENV, mock="hello")
    over = daemon.rpc("SendMessage", message({"text": "x" * 9000}), token=ALICE)
    assert over.status_code == 413 and "(8192 bytes)" in over.json()["error"]["message"]
    error = daemon.rpc("SendMessage", message(*[{"text": "p"}] * 3), token=ALICE).json()["error"]
    assert error["data"][1]["metadata"] == {"limit": "a2a.limits.message_parts", "max": "2"}
    error = daemon.rpc("SendMessage", message({"data": {"k": "v" * 100}}), token=ALICE).json()["error"]
    assert error["data"][1]["metadata"] == {"limit": "a2a.limits.part_bytes", "max": "100"}
    assert listed(daemon) == []


def tools_script(path: Path, count: int) -> str:
    """A mock turn that reports ``count`` tools (each a status update whose message lands in the history)."""
    tool = {"kind": "Read", "status": "Completed"}
    steps: list[dict[str, Any]] = [
        {"Emit": {"ToolUpdated": {**tool, "id": f"t{n}", "title": f"Read {n}"}}} for n in range(count)
    ]
    steps += [
        {"Emit": {"TextDelta": {"message_id": "m1", "text": "done"}}},
        {"End": {"Completed": {"source": "Protocol"}}},
    ]
    path.write_text(json.dumps({"turns": [steps]}))
    return str(path)


def test_a_task_answers_at_most_task_history_messages(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock=tools_script(tmp_path / "tools.json", 130))
    sent = daemon.rpc("SendMessage", message({"text": "go"}), token=ALICE).json()["result"]["task"]
    assert len(sent["history"]) == 100  # the blocking send's task: its history held to the default
    task = wait_state(daemon, sent["id"], "TASK_STATE_COMPLETED", token=ALICE)
    assert len(task["history"]) == 100  # GetTask without historyLength: the limit, not the 130 and more behind it
    assert (
        len(daemon.rpc("GetTask", {"id": sent["id"], "historyLength": 500}, token=ALICE).json()["result"]["history"])
        == 100
    )  # asking for more gets no more (A2A 1.0 §3.2.4: a server may return fewer)
    assert (
        len(daemon.rpc("GetTask", {"id": sent["id"], "historyLength": 3}, token=ALICE).json()["result"]["history"]) == 3
    )
    assert "history" not in daemon.rpc("GetTask", {"id": sent["id"], "historyLength": 0}, token=ALICE).json()["result"]
    assert [len(t["history"]) for t in listed(daemon)] == [100]
    negative = daemon.rpc("GetTask", {"id": sent["id"], "historyLength": -1}, token=ALICE).json()
    assert negative["error"]["code"] == -32602  # the SDK's own refusal, untouched


def call(client: httpx.Client, daemon: Any, token: str | None, **headers: str) -> int:
    """The HTTP status of a ListTasks as ``token`` (none: no Authorization header) with ``headers``."""
    sent = {"A2A-Version": "1.0", **headers, **({"Authorization": f"Bearer {token}"} if token else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    return client.post(daemon.url + "/", json=body, headers=sent).status_code


def bad(client: httpx.Client, daemon: Any, **headers: str) -> int:
    return call(client, daemon, f"bad-{uuid.uuid4()}", **headers)


def limit(client: httpx.Client, daemon: Any, **headers: str) -> None:
    """Present bad tokens until the source is refused (429): the first 20 are 401, and the allowance refills one
    token every 3 s, so on a slow machine a few more may be needed — a condition, not a count in time."""
    codes = [bad(client, daemon, **headers) for _ in range(20)]
    assert codes == [401] * 20
    while codes[-1] != 429:
        assert len(codes) < 200, "the source was never limited"
        codes.append(bad(client, daemon, **headers))


def test_bad_tokens_from_a_source_do_not_lock_out_a_valid_credential(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock="hello")
    with httpx.Client(timeout=60) as client:
        limit(client, daemon)
        assert call(client, daemon, ALICE) == 200  # valid credentials are served from a limited source
        assert call(client, daemon, OP) == 200
        assert call(client, daemon, None) == 429  # no credential is no valid credential
        assert bad(client, daemon) == 429  # still limited afterwards, so it was before: bad ones still count
        limited = client.post(
            daemon.url + "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks"},
            headers={"A2A-Version": "1.0", "Authorization": "Bearer bad"},
        )
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1


def test_bad_tokens_do_not_lock_out_the_implicit_loopback_operator(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello")  # no credential configured: the loopback caller is the operator
    with httpx.Client(timeout=60) as client:
        limit(client, daemon)
        assert call(client, daemon, None) == 200
        assert bad(client, daemon) == 429


PROXIED = CREDENTIALS.replace(
    'bearer = "{{secret:OP}}"', 'bearer = "{{secret:OP}}"\ntrusted_proxies = ["127.0.0.1", "10.0.0.0/8"]'
)


def test_behind_a_trusted_proxy_the_forwarded_client_is_the_source(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=PROXIED, env=ENV, mock="hello")
    client_7 = {"X-Forwarded-For": "203.0.113.7"}
    with httpx.Client(timeout=60) as client:
        limit(client, daemon, **client_7)
        # the right-most address that is not a trusted proxy: a client's own left-most claim is not believed
        assert bad(client, daemon, **{"X-Forwarded-For": "198.51.100.9, 203.0.113.7, 10.1.2.3"}) == 429
        assert bad(client, daemon, **{"X-Forwarded-For": "203.0.113.8"}) == 401  # another client, its own count
        assert bad(client, daemon) == 401  # the proxy itself, without the header
        assert call(client, daemon, ALICE, **client_7) == 200
        assert bad(client, daemon, **client_7) == 429
    deadline = time.monotonic() + 20
    while "from 203.0.113.7" not in "".join(daemon.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "from 203.0.113.7" in "".join(daemon.stderr)  # the refusal's log line names the client


def test_an_untrusted_peer_cannot_name_its_own_address(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock="hello")  # no trusted_proxies: the header is ignored
    with httpx.Client(timeout=60) as client:
        codes = [bad(client, daemon, **{"X-Forwarded-For": f"203.0.113.{n}"}) for n in range(200)]
    assert 429 in codes  # one source however the header varies


def test_the_x_forwarded_for_chain_is_read_right_to_left() -> None:
    from anyagentd_a2a.proxies import client_address, parse_proxy

    proxies = [parse_proxy(p) for p in ("127.0.0.1", "10.0.0.0/8", "::1")]
    assert client_address("127.0.0.1", ["1.1.1.1, 2.2.2.2, 10.0.0.5"], proxies) == "2.2.2.2"
    assert client_address("127.0.0.1", ["1.1.1.1", "2.2.2.2:4711"], proxies) == "2.2.2.2"  # lines joined in order
    assert client_address("::1", ["[2001:db8::1]:80"], proxies) == "2001:db8::1"
    assert client_address("127.0.0.1", ["10.0.0.9, 10.0.0.5"], proxies) == "10.0.0.9"  # all trusted: the left-most
    assert client_address("127.0.0.1", [], proxies) == "127.0.0.1"
    assert client_address("127.0.0.1", ["::ffff:192.0.2.1"], proxies) == "192.0.2.1"
    assert client_address("127.0.0.1", ["unknown"], proxies) == "unknown"
    assert client_address("192.0.2.50", ["1.1.1.1"], proxies) == "192.0.2.50"  # an untrusted peer's header: ignored
    assert client_address("127.0.0.1", ["1.1.1.1"], []) == "127.0.0.1"


def test_limits_and_trusted_proxies_are_checked_at_load() -> None:
    from anyagentd_a2a.config import FILE_BYTES, ConfigError, parse
    from anyagentd_a2a.translate import MAX_FILE_BYTES

    assert FILE_BYTES == MAX_FILE_BYTES  # part_bytes can never allow a file the prompt would refuse
    limits = parse({}, env={}).config.a2a.limits
    assert (limits.body_bytes, limits.message_parts, limits.part_bytes, limits.task_history) == (
        4 * MIB,
        64,
        2 * MIB,
        100,
    )
    refused = [
        ({"limits": {"part_bytes": 5 * MIB}}, "a2a.limits.part_bytes", "more than a2a.limits.body_bytes"),
        ({"limits": {"part_bytes": 21 * MIB, "body_bytes": 64 * MIB}}, "a2a.limits.part_bytes", "less than"),
        ({"limits": {"body_bytes": 65 * MIB}}, "a2a.limits.body_bytes", "less than"),
        ({"limits": {"task_history": 1}}, "a2a.limits.task_history", "greater than"),
        ({"limits": {"message_parts": "64"}}, "a2a.limits.message_parts", "integer"),
        ({"limits": {"history": 5}}, "a2a.limits.history", "unknown key"),
        ({"trusted_proxies": ["127.0.0.1", "10.0.0.1/8"]}, "a2a.trusted_proxies.1", "10.0.0.0/8"),
        ({"trusted_proxies": ["proxy.example"]}, "a2a.trusted_proxies.0", "neither an IP address"),
    ]
    for a2a, key, said in refused:
        with pytest.raises(ConfigError) as err:
            parse({"a2a": a2a}, env={})
        assert err.value.key == key and said in err.value.message, (key, err.value)


def test_bound_history_keeps_the_prompt_the_requests_and_the_newest() -> None:
    from a2a.types import Message, Part, Role, Task

    from anyagentd_a2a.limits import bound_history
    from anyagentd_a2a.translate import EVENT_MEDIA_TYPE

    def text(label: str) -> Message:
        tool = {"kind": {"ToolUpdated": {"id": label}}}  # an event part that opens nothing
        return Message(
            message_id=label,
            role=Role.ROLE_AGENT,
            parts=[Part(text=label), Part(text=json.dumps(tool), media_type=EVENT_MEDIA_TYPE)],
        )

    def asks(label: str, *, stored_before: bool = False) -> Message:
        opened = {"kind": {"RequestOpened": {"Permission": {"id": label}}}}
        part = Part(text=json.dumps(opened), media_type=EVENT_MEDIA_TYPE)
        if stored_before:  # as daemons before the wire's text parts stored it: a DataPart
            part = Part(media_type=EVENT_MEDIA_TYPE)
            part.data.struct_value.update(opened)
        return Message(message_id=label, role=Role.ROLE_AGENT, parts=[part])

    task = Task(
        id="t",
        history=[
            text("prompt"),
            text("a"),
            asks("q1"),
            text("b"),
            asks("q2", stored_before=True),
            text("c"),
            text("d"),
        ],
    )
    assert bound_history(task, 7) == 0
    assert bound_history(task, 5) == 2
    assert [m.message_id for m in task.history] == ["prompt", "q1", "q2", "c", "d"]
    assert bound_history(task, 4) == 1
    assert [m.message_id for m in task.history] == ["prompt", "q1", "q2", "d"]  # requests go last
    assert bound_history(task, 3) == 1
    assert [m.message_id for m in task.history] == ["prompt", "q2", "d"]  # the oldest request first
    assert bound_history(task, 2) == 1  # never the prompt nor the newest
    assert [m.message_id for m in task.history] == ["prompt", "d"]


def test_the_store_keeps_at_most_task_history_messages(a2a_daemon: Any, tmp_path: Path) -> None:
    import sqlite3

    daemon = a2a_daemon(config=CREDENTIALS, env=ENV, mock=tools_script(tmp_path / "tools.json", 130))
    sent = daemon.rpc("SendMessage", message({"text": "the prompt"}), token=ALICE).json()["result"]["task"]
    wait_state(daemon, sent["id"], "TASK_STATE_COMPLETED", token=ALICE)
    with sqlite3.connect(daemon.state_dir / "a2a.db") as db:
        (history,) = db.execute("SELECT history FROM tasks WHERE id = ?", (sent["id"],)).fetchone()
    kept = json.loads(history)
    assert len(kept) == 100 and kept[0]["parts"] == [{"text": "the prompt"}]  # the prompt, then the newest


def test_an_oauth_form_over_its_bound_is_refused_before_it_is_read(a2a_daemon: Any) -> None:
    from anyagentd_a2a.auth.routes import FORM_BYTES

    daemon = a2a_daemon(config=CREDENTIALS + "[a2a.device_grant]\nenabled = true\n", env=ENV, mock="hello")
    host = urlsplit(daemon.url).netloc
    for path in ("/oauth2/device_authorization", "/oauth2/token", "/oauth2/revoke"):
        head = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/x-www-form-urlencoded"]
        # 40 MB announced, a few bytes sent: only a decision from the header alone answers
        status, headers, body = raw_exchange(daemon.url, head + ["Content-Length: 40000000"], [b"token="])
        assert status == 413 and headers.get("connection") == "close", (path, status, body)
        assert json.loads(body) == {
            "error": "invalid_request",
            "error_description": f"the body is larger than {FORM_BYTES} bytes",
        }
        piece = b"a" * 4096
        chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * (FORM_BYTES // 4096 + 1)  # past the bound, unterminated
        status, headers, _ = raw_exchange(daemon.url, head + ["Transfer-Encoding: chunked"], chunks)
        assert status == 413 and headers.get("connection") == "close", path
    # a form within the bound is served as before
    answer = httpx.post(
        daemon.url + "/oauth2/device_authorization", data={"client_id": "cli", "scope": "user"}, timeout=FAILURE_BOUND
    )
    assert answer.status_code == 200 and "device_code" in answer.json(), answer.text
