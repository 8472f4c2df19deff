"""Issue #19 against a real ``anyagentd a2a``: conversations stay warm and bounded (``[a2a.pool]``: idle close,
a cap with least-recently-used eviction, all in ``status.values``), drain closes many agents at once, the listener
cannot be driven by a web page (Host gate, Origin gate, nothing created), the card is strict A2A 1.0, and every
key anyagentd writes is lowerCamelCase."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict

pytestmark = pytest.mark.timeout(180)

ECHO = {
    "turns": [
        [{"Emit": {"TextDelta": {"message_id": "m1", "text": "ok"}}}, {"End": {"Completed": {"source": "Protocol"}}}]
    ]
    * 20
}


def script(tmp_path: Any, value: dict[str, Any]) -> str:
    """A mock script file for ``--mock`` (a session plays its turns in order)."""
    import json

    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(value))
    return str(path)


URI = "https://agentd.dev/a2a/ext/command"
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
WIRE_MEDIA = "application/vnd.anyagent."


def status_values(daemon: Any, token: str | None = None) -> dict[str, Any]:
    """``status.values`` through the command extension (the implicit loopback operator without ``token``)."""
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "extensions": [URI],
        "parts": [{"data": {"agentd": {"op": "status"}}, "mediaType": "application/json"}],
    }
    body = daemon.rpc("SendMessage", {"message": message}, token=token, headers={"A2A-Extensions": URI}).json()
    return body["result"]["message"]["parts"][0]["data"]["values"]


def task_ids(daemon: Any) -> set[str]:
    return {t["id"] for t in daemon.rpc("ListTasks").json()["result"]["tasks"]}


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parents[int(entry)] = int(stat.read().rpartition(b")")[2].split()[1])
            except OSError:
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def wait_log(daemon: Any, text: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = next((line for line in daemon.stderr if text in line), None)
        if line is not None:
            return line
        time.sleep(0.05)
    raise AssertionError(f"no log line with {text!r}: {''.join(daemon.stderr)[-2000:]}")


# ------------------------------------------------------------------------------------------- the pool


def test_a_later_turn_reuses_the_live_agent(a2a_daemon: Any, tmp_path: Any) -> None:
    daemon = a2a_daemon(mock=script(tmp_path, ECHO))
    first = daemon.send_text("hi", context_id="warm")
    assert status_values(daemon)["liveAgents"] == 1
    second = daemon.send_text("again", context_id="warm")
    sessions = {json.loads(t["status"]["message"]["parts"][1]["text"])["session_id"] for t in (first, second)}
    assert len(sessions) == 1  # no spawn: the same engine session took the second turn
    assert status_values(daemon)["liveAgents"] == 1


def test_an_idle_agent_that_cannot_resume_stays_open(a2a_daemon: Any) -> None:
    """Closing an idle session whose agent cannot resume (the mock) would lose the conversation: it stays open, said
    once in the log; the idle close of an agent that resumes is tested with Claude Code (test_a2a_claude_live)."""
    daemon = a2a_daemon(mock="hello", config="[a2a.pool]\nidle_close = 0.4\n")
    daemon.send_text("hi", context_id="idle")
    wait_log(daemon, "conversation idle is idle, but its agent cannot resume: its session stays open")
    time.sleep(1.0)  # two more reaper rounds
    values = status_values(daemon)
    assert values["liveAgents"] == 1 and values["idleCloses"] == 0 and values["idleCloseSeconds"] == 0.4
    assert sum("cannot resume: its session stays open" in line for line in daemon.stderr) == 1


def test_past_the_cap_the_least_recently_used_idle_agent_is_evicted(a2a_daemon: Any, tmp_path: Any) -> None:
    daemon = a2a_daemon(mock=script(tmp_path, ECHO), config="[a2a.pool]\nmax_live = 2\nidle_close = 0\n")
    daemon.send_text("one", context_id="a")
    daemon.send_text("two", context_id="b")
    daemon.send_text("a again", context_id="a")  # b is now the least recently used
    assert status_values(daemon)["liveAgents"] == 2
    daemon.send_text("three", context_id="c")
    line = wait_log(daemon, "evicting the least recently used conversation")
    assert line.rstrip().endswith('conversation b"}'), line
    values = status_values(daemon)
    assert values["liveAgents"] == 2 and values["maxLive"] == 2 and values["evictions"] == 1
    assert any(
        "the agent of conversation b cannot resume; its next message starts a fresh" in line for line in daemon.stderr
    )
    back = daemon.send_text("b is back", context_id="b")  # reopens, evicting a (the oldest now)
    assert back["status"]["state"] == "TASK_STATE_COMPLETED"
    assert status_values(daemon)["evictions"] == 2 and status_values(daemon)["liveAgents"] == 2
    # the mock cannot resume: b's agent starts afresh, and its task says so
    assert back["metadata"]["freshSession"] is True
    said = [p.get("text", "") for m in back.get("history", []) for p in m.get("parts", [])]
    assert any("could not be resumed; this turn starts a fresh agent conversation" in t for t in said), said
    c_again = daemon.send_text("c again", context_id="c")  # never closed: no such note
    assert "freshSession" not in c_again.get("metadata", {})


def test_pool_settings_are_validated(tmp_path: Any) -> None:
    from anyagentd_a2a.config import ConfigError, parse

    assert parse({"a2a": {"pool": {"max_live": 8, "max_rss_mb": 2048}}}, env={}).config.a2a.pool.max_live == 8
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"pool": {"max_live": -1}}}, env={})
    assert err.value.key == "a2a.pool.max_live"
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"pool": {"idle": 3}}}, env={})
    assert err.value.key == "a2a.pool.idle" and err.value.message == "unknown key"


def test_drain_with_many_live_agents_exits_cleanly(a2a_daemon: Any, tmp_path: Any) -> None:
    slow = {
        "turns": [
            [
                {"Emit": {"TextDelta": {"message_id": "m1", "text": "working"}}},
                {"Sleep": 60000},
                {"End": {"Completed": {"source": "Protocol"}}},
            ]
        ]
    }
    daemon = a2a_daemon(mock=script(tmp_path, slow), config="[a2a.pool]\nmax_live = 0\n")
    running = [daemon.send_text("go", context_id=f"c{i}", configuration={"returnImmediately": True}) for i in range(30)]
    deadline = time.monotonic() + 30
    while status_values(daemon)["liveAgents"] < 30 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status_values(daemon)["liveAgents"] == 30
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    assert any("drain: closed 30 of 30 live agent session(s)" in line for line in daemon.stderr)
    assert len(running) == 30


class NeverOpens:
    """The conversations' agent sessions where nothing opens a session (``Conversations(sessions=…)``)."""

    async def open(self, conversation: Any, opening: str = "resume") -> Any:
        raise AssertionError("nothing opens here")

    def remember(self, conversation: Any, token: str | None) -> None:
        return None


@pytest.mark.anyio
async def test_the_drain_leaves_only_a_parked_questions_session_waiting(tmp_path: Any) -> None:
    """Issue 25.6: at drain, the session of a conversation whose task waits for input (and can resume) is left
    waiting — ``Runtime.drain(leave_waiting=…)`` closes it with ``answer_pending=False``, the agent ended as a kill
    -9 would leave it (tests/core/test_admission.py) — and no other: one waiting without a resume token, one
    working, one idle are cancelled and closed as ever."""
    from types import SimpleNamespace

    from a2a.types import TaskState

    from anyagentd_a2a.conversations import Conversations

    class Session:
        def __init__(self, token: str | None) -> None:
            self.closed, self.status, self.token = False, "NeedsInput", token

        def snapshot(self) -> Any:
            return SimpleNamespace(resume_token=self.token)

    pool = Conversations(tmp_path, sessions=NeverOpens(), start_pump=lambda *a: None)
    sessions = {}
    for name, token, state in [
        ("parked", "tok", TaskState.TASK_STATE_INPUT_REQUIRED),
        ("no-token", None, TaskState.TASK_STATE_INPUT_REQUIRED),  # cancelled by on_drain
        ("working", "tok", TaskState.TASK_STATE_WORKING),
        ("idle", "tok", None),
    ]:
        conversation = pool.conversation("operator", name)
        conversation.session = sessions[name] = Session(token)
        if state is not None:
            pool.new_run(conversation, f"task-{name}").state = state
    assert pool.left_waiting() == [sessions["parked"]]


# -------------------------------------------------------------------------------- no driving from a web page


def test_the_rebinding_request_is_refused_and_nothing_is_created(claude: Any, a2a_daemon: Any, work: Any) -> None:
    server = claude({"turns": [{"text": "should never run"}]})
    daemon = a2a_daemon(config=f'[agent]\nname = "claude"\ndir = "{work}"\n')
    port = daemon.url.rsplit(":", 1)[1]
    evil = {
        "Host": f"rebind.attacker.example:{port}",
        "Origin": f"http://rebind.attacker.example:{port}",
        "Content-Type": "text/plain",
    }
    for method in ("message/send", "SendMessage"):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": "rm -rf ~"}],
                    "kind": "message",
                }
            },
        }
        import json

        r = httpx.post(daemon.url + "/", content=json.dumps(body), headers=evil, timeout=30)
        assert r.status_code == 421 and r.headers["content-type"].startswith("text/plain"), r
        assert "not served here" in r.text
        # with a loopback Host the foreign Origin is refused before any parsing (empty body, no JSON-RPC)
        r = httpx.post(
            daemon.url + "/", content=json.dumps(body), timeout=30, headers={**evil, "Host": f"127.0.0.1:{port}"}
        )
        assert r.status_code == 403 and r.content == b""
    r = httpx.get(daemon.url + "/.well-known/agent-card.json", headers={"Host": "rebind.attacker.example"})
    assert r.status_code == 421
    assert task_ids(daemon) == set()
    assert status_values(daemon)["liveAgents"] == 0
    assert descendants(daemon.process.pid) == set()  # no agent process was spawned
    assert server.main_requests() == []


def test_the_implicit_operator_needs_a_loopback_host(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello", config='[a2a]\nurl = "https://agents.example/a2a"\n')
    public = daemon.rpc("ListTasks", headers={"Host": "agents.example"})
    assert public.status_code == 401 and public.json()["error"]["code"] == -31401  # the public name: a credential
    assert daemon.rpc("ListTasks", headers={"Host": "localhost"}).status_code == 200
    assert daemon.rpc("ListTasks", headers={"Host": "elsewhere.example"}).status_code == 421


# -------------------------------------------------------------------------------------- strict A2A 1.0 JSON


def test_the_card_is_strict_a2a_1_0_with_caching_headers(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello")
    r = httpx.get(daemon.url + "/.well-known/agent-card.json")
    assert r.status_code == 200
    served = r.json()
    ParseDict(served, AgentCard(), ignore_unknown_fields=False)  # raises on any field A2A 1.0 does not define
    for legacy in (
        "url",
        "protocolVersion",
        "preferredTransport",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
        "security",
    ):
        assert legacy not in served, legacy
    assert re.search(r"max-age=\d+", r.headers["Cache-Control"])
    modified = parsedate_to_datetime(r.headers["Last-Modified"])
    assert r.headers["ETag"].startswith('W/"')
    again = httpx.get(
        daemon.url + "/.well-known/agent-card.json",
        headers={"If-Modified-Since": format_datetime(modified, usegmt=True)},
    )
    assert again.status_code == 304 and again.content == b""
    assert (
        httpx.get(daemon.url + "/.well-known/agent-card.json", headers={"If-None-Match": r.headers["ETag"]}).status_code
        == 304
    )
    stale = httpx.get(
        daemon.url + "/.well-known/agent-card.json", headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}
    )
    assert stale.status_code == 200 and stale.json() == served


def non_camel_keys(value: Any, where: str = "") -> list[str]:
    """Every object key in ``value`` that is not lowerCamelCase (``@type`` aside), with where it is (A2A 1.0 §5.5,
    the TCK's DM-SERIAL-001); nothing is skipped."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "@type" and not CAMEL.match(key):
                found.append(f"{where}.{key}")
            found.extend(non_camel_keys(item, f"{where}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(non_camel_keys(item, f"{where}[{index}]"))
    return found


def test_every_key_written_is_lower_camel_case_metadata_included(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="permission")
    task = daemon.send_text("write hello.txt", context_id="camel")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = daemon.send_text("allow", task_id=task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    metadata = done["metadata"]
    assert metadata["stopReason"] == "Completed" and metadata["stopSource"] == "Protocol"
    assert metadata["usage"] == {"usedTokens": 5400, "windowTokens": 200000} and metadata["costUsd"] == 0.03
    written = [
        task,
        done,
        daemon.rpc("GetTask", {"id": task["id"]}).json(),
        daemon.rpc("ListTasks").json(),
        daemon.rpc("GetExtendedAgentCard").json(),
        httpx.get(daemon.url + "/.well-known/agent-card.json").json(),
        {"values": status_values(daemon)},
    ]
    assert non_camel_keys(written) == []  # the wire's event parts included: their JSON is their text, not A2A keys
    # the wire's own event JSON is kept as the wire writes it (snake_case, integers), the text of a typed part
    wire = [p for p in done["status"]["message"]["parts"] if p.get("mediaType", "").startswith(WIRE_MEDIA)]
    assert wire and set(wire[0]) == {"text", "mediaType"}
    event = json.loads(wire[0]["text"])
    assert "session_id" in event and type(event["sequence"]) is int


# ------------------------------------------------------------------------------------ restart without surprises


def test_a_waiting_task_of_an_agent_that_cannot_resume_reads_failed_and_its_answer_is_refused(
    a2a_daemon: Any, tmp_path: Any
) -> None:
    state = tmp_path / "state"
    daemon = a2a_daemon(mock="permission", state_dir=state)
    task = daemon.send_text("write hello.txt", context_id="paused")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    again = a2a_daemon(mock="permission", state_dir=state)
    got = again.rpc("GetTask", {"id": task["id"]}).json()["result"]
    assert got["status"]["state"] == "TASK_STATE_FAILED"
    why = got["status"]["message"]["parts"][0]["text"]
    assert "waited for input" in why and "cannot resume" in why
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "taskId": task["id"], "parts": [{"text": "allow"}]}
    refused = again.rpc("SendMessage", {"message": message}).json()
    assert refused["error"]["code"] == -32004 and why in refused["error"]["message"], refused
    assert status_values(again)["liveAgents"] == 0  # nothing was opened for it
    assert again.rpc("GetTask", {"id": task["id"]}).json()["result"]["status"]["state"] == "TASK_STATE_FAILED"
