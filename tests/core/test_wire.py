"""The JSON-lines wire over a real ``anyagentd serve --mock SCRIPT`` process (``docs/wire.md#guarantees``).

Every line these tests read goes through :class:`wire_client.WireClient`, which validates it against the vendored
schema and checks the ordering guarantees (hello first, ``ok`` to ``open`` before the session's lines, per-session
``sequence`` increasing, ``closed`` once and last) as it is read.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from wire_client import kind_tag, session_of
from wire_schema import validate_def

import anyagentd

pytestmark = pytest.mark.timeout(60)


def _events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["event"] for line in lines if "event" in line]


def _tags(lines: list[dict[str, Any]]) -> list[str]:
    return [kind_tag(line) for line in lines if "event" in line]


def _turn_ended(line: dict[str, Any]) -> bool:
    return "event" in line and kind_tag(line) == "TurnEnded"


def _index(client: Any, line: dict[str, Any]) -> int:
    return next(i for i, seen in enumerate(client.lines) if seen is line)


# A script exercising every command in one session (plus generate's own throwaway session):
# turn 1 text only (what generate returns), turn 2 waits on a permission answer, turn 3 runs until cancelled.
ALL_COMMANDS_SCRIPT = {
    "options": [
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "live": True,
            "current": "small",
            "kind": {
                "Select": {
                    "choices": [
                        {"value": "small", "label": "Small", "description": None},
                        {"value": "large", "label": "Large", "description": None},
                    ]
                }
            },
        },
        {"id": "fast", "name": "Fast mode", "category": None, "kind": "Boolean", "current": False, "live": False},
    ],
    "turns": [
        [
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "Hello from "}}},
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "the script."}}},
            {"Emit": {"MessageEnded": {"message_id": "m1"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {
                "Emit": {
                    "RequestOpened": {
                        "Permission": {
                            "id": "req1",
                            "options": ["AllowOnce", "DenyOnce"],
                            "detail": "Run ls",
                            "tool": {
                                "id": "tool1",
                                "kind": "Execute",
                                "title": "ls",
                                "status": "Pending",
                                "input": {"Command": {"command": "ls", "cwd": None}},
                                "output": None,
                                "diffs": [],
                                "locations": [],
                                "raw": None,
                            },
                        }
                    }
                }
            },
            "AwaitAnswer",
            {"Emit": {"TextDelta": {"message_id": "m2", "text": "Allowed."}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {"Emit": {"TextDelta": {"message_id": "m3", "text": "Thinking for a long time"}}},
            {"Sleep": 30000},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
    ],
}


def _script(tmp_path: Path, script: dict[str, Any], name: str = "script.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(script))
    return str(path)


# ------------------------------------------------------------------------------------------------ basics


def test_hello_is_first_and_discover_lists_mock_first(wire: Any) -> None:
    client = wire("--mock", "hello")
    frame_id = client.send("discover")  # sent before reading anything: hello still comes first
    hello = client.next_line()
    assert hello == {"hello": {"protocol": 1, "anyagent": anyagentd.__version__}}
    assert client.lines[0] is hello
    report = client.reply(frame_id)["ok"]
    assert report["agents"], report
    first = report["agents"][0]
    assert first["id"] == "mock"
    assert first["source"] == "Pinned"
    assert first["executable_path"] == "mock"  # the scripted agent runs in-process; its script is no executable


def test_open_reply_precedes_events_and_sequence_increases(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello")
    open_id = client.send("open", agent="mock", dir=str(tmp_path))
    open_reply = client.reply(open_id)
    info = open_reply["ok"]
    session = info["id"]
    assert info["agent"]["id"] == "mock"
    assert info["status"] == "Idle"
    assert info["details"]["version"] == "mock"
    delivery = client.ok("prompt", session=session, text="hi")
    assert delivery["kind"] == {"Started": {"turn_id": "t1"}}
    assert delivery["prompt_id"] == "p1"
    lines = client.events(session, until=lambda l: _turn_ended(l) and _events([l])[0]["turn_info"] is not None)
    # a trailing StatusChanged Idle follows the turn end
    lines += client.events(session, until=lambda l: "event" in l and l["event"]["kind"] == {"StatusChanged": "Idle"})
    open_at = _index(client, open_reply)
    assert all(_index(client, line) > open_at for line in lines)
    events = _events(lines)
    seqs = [e["sequence"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert all(e["session_id"] == session for e in events)
    now = time.time()
    assert all(abs(e["occurred_at"]["secs_since_epoch"] - now) < 60 for e in events)
    tags = _tags(lines)
    assert tags[0] == "TurnStarted"
    assert events[0]["kind"] == {"TurnStarted": {"origin": {"Prompt": "p1"}}}
    assert tags.count("TextDelta") == 2
    assert "".join(e["kind"]["TextDelta"]["text"] for e in events if "TextDelta" in e["kind"]).startswith("Hello!")
    assert {"ContextUsage": {"used_tokens": 1200, "window_tokens": 200000, "cost_usd": 0.0}} in [
        e["kind"] for e in events
    ]
    ended = next(e for e in events if "TurnEnded" in e["kind"])
    assert ended["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    assert ended["turn_info"]["id"] == "t1"
    statuses = [e["kind"]["StatusChanged"] for e in events if "StatusChanged" in e["kind"]]
    assert statuses == ["Working", "Idle"]
    assert all(e["turn_info"] is None for e in events if "StatusChanged" in e["kind"])
    assert all(e["turn_info"] == {"id": "t1", "parent_tool_id": None} for e in events if "TextDelta" in e["kind"])


def test_two_sessions_interleave_and_each_stays_ordered(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "chatter")  # 20 deltas 20 ms apart, then an unprompted agent turn
    s1 = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    s2 = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    assert s1 != s2
    p1 = client.send("prompt", session=s1, text="one")
    p2 = client.send("prompt", session=s2, text="two")
    assert "ok" in client.reply(p1) and "ok" in client.reply(p2)
    per_session = {}
    for session in (s1, s2):
        ends = 0

        def second_end(line: dict[str, Any]) -> bool:
            nonlocal ends
            ends += _turn_ended(line)
            return ends == 2

        per_session[session] = client.events(session, until=second_end)
    for session, lines in per_session.items():
        events = _events(lines)
        seqs = [e["sequence"] for e in events]
        assert seqs == sorted(set(seqs)) and seqs[0] == 1, (session, seqs)
        origins = [e["kind"]["TurnStarted"]["origin"] for e in events if "TurnStarted" in e["kind"]]
        assert origins == [{"Prompt": "p1"}, "Agent"]
        text = "".join(e["kind"]["TextDelta"]["text"] for e in events if "TextDelta" in e["kind"])
        assert text == "chatter " * 20 + "(and one more thing, unprompted)"
    # the sessions' lines interleave on the wire
    owners = [session_of(line) for line in client.lines if session_of(line) in (s1, s2)]
    first_s2, last_s1 = owners.index(s2), len(owners) - 1 - owners[::-1].index(s1)
    assert first_s2 < last_s1, "the two sessions' events did not interleave"
    switches = sum(1 for a, b in itertools.pairwise(owners) if a != b)
    assert switches >= 4, owners


# ------------------------------------------------------------------------------------------------ commands


def test_every_command_is_reachable(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", _script(tmp_path, ALL_COMMANDS_SCRIPT))
    work = str(tmp_path)

    report = client.ok("discover")
    assert [a["id"] for a in report["agents"]][:1] == ["mock"]
    details = client.ok("probe", agent="mock")
    assert details["version"] == "mock"
    assert details["auth"] == {"Authenticated": {"kind": "ApiKey", "account": None}}
    assert details["capabilities"]["features"] == ["Permissions", "Questions"]
    assert [o["id"] for o in details["config_options"]] == ["model", "fast"]
    usage = client.error("plan_usage", agent="mock")
    assert usage["kind"] == "UnsupportedFeature" and usage["detail"]
    assert client.ok("generate", agent="mock", dir=work, prompt="say hello") == "Hello from the script."

    info = client.ok("open", agent="mock", dir=work)
    s = info["id"]
    assert info["configuration"] == {"options": {"model": "small", "fast": False}}
    # turn 1: plain text
    assert client.ok("prompt", session=s, text="first")["kind"] == {"Started": {"turn_id": "t1"}}
    client.events(s, until=_turn_ended)
    # turn 2: waits for a permission answer; meanwhile queue, dequeue, configure, info
    assert client.ok("prompt", session=s, text="second") == {"prompt_id": "p2", "kind": {"Started": {"turn_id": "t2"}}}
    opened = client.events(s, until=lambda l: "event" in l and kind_tag(l) == "RequestOpened")[-1]
    assert opened["event"]["kind"]["RequestOpened"]["Permission"]["id"] == "req1"
    assert client.ok("prompt", session=s, text="third") == {"prompt_id": "p3", "kind": {"Queued": {"position": 0}}}
    assert client.ok("dequeue", session=s, prompt="p3") is None
    again = client.error("dequeue", session=s, prompt="p3")
    assert again["kind"] == "InvalidRequest"
    assert client.ok("configure", session=s, option="model", value="large") is None
    updated = client.events(s, until=lambda l: "event" in l and kind_tag(l) == "SessionUpdated")[-1]
    assert updated["event"]["kind"]["SessionUpdated"]["configuration"]["options"]["model"] == "large"
    live = client.ok("info", session=s)
    assert live["status"] == "NeedsInput"
    assert live["configuration"]["options"] == {"model": "large", "fast": False}
    wrong = client.error("answer", session=s, request="req1", answer={"Permission": "AllowAlways"})
    assert wrong["kind"] == "InvalidRequest"  # not among the offered options; the request stays open
    assert client.ok("answer", session=s, request="req1", answer={"Permission": "AllowOnce"}) is None
    rest = client.events(s, until=_turn_ended)
    assert _tags(rest)[0] == "RequestClosed"
    assert rest[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    # not supported by the mock
    rollback = client.error("rollback", session=s, turns=1, scope="Conversation")
    assert rollback["kind"] == "UnsupportedFeature"
    compact = client.error("compact", session=s)
    assert compact["kind"] == "UnsupportedFeature"
    # turn 3 runs until cancelled
    assert client.ok("cancel", session=s) is None  # idle: nothing to cancel
    assert client.ok("prompt", session=s, text="fourth") == {"prompt_id": "p4", "kind": {"Started": {"turn_id": "t3"}}}
    client.events(s, until=lambda l: "event" in l and kind_tag(l) == "TextDelta")
    assert client.ok("cancel", session=s, clear_queue=True) is None
    cancelled = client.events(s, until=_turn_ended)
    assert "MessageEnded" in _tags(cancelled)  # synthesized for the open message
    assert cancelled[-1]["event"]["kind"]["TurnEnded"]["stop"] == "Cancelled"
    assert client.ok("close", session=s) is None
    tail = client.events(s)
    assert tail[-1] == {"closed": s}
    assert not any("session" in l for l in tail)  # a clean close is not a session error
    assert {line["cmd"] for line in client.sent.values()} == {
        "discover",
        "probe",
        "plan_usage",
        "generate",
        "open",
        "prompt",
        "dequeue",
        "answer",
        "configure",
        "rollback",
        "compact",
        "cancel",
        "info",
        "close",
    }


def test_configure_checks_option_and_value(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "model-option")
    s = client.ok("open", agent="mock", dir=str(tmp_path), configure={"fast": True})["id"]
    assert client.ok("info", session=s)["configuration"]["options"] == {"model": "small", "fast": True}
    assert client.ok("configure", session=s, option="model", value="large") is None
    for option, value in (("model", "huge"), ("model", True), ("fast", False), ("nosuch", "x")):
        err = client.error("configure", session=s, option=option, value=value)
        assert err["kind"] == "InvalidConfiguration", (option, value, err)
        assert err["detail"]
    assert client.ok("info", session=s)["configuration"]["options"] == {"model": "large", "fast": True}
    bad_open = client.error("open", agent="mock", dir=str(tmp_path), configure={"model": "huge"})
    assert bad_open["kind"] == "InvalidConfiguration"


def test_generate_refuses_resume(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello")
    err = client.error("generate", agent="mock", dir=str(tmp_path), prompt="hi", resume="abc")
    assert err["kind"] == "InvalidConfiguration"
    assert "new session" in err["message"] + err.get("detail", "")
    text = client.ok("generate", agent="mock", dir=str(tmp_path), prompt="hi")
    assert text == (
        "Hello! I am the scripted agent. I play a JSON script, so this turn needs no account and no network."
    )


def test_concurrent_commands_are_matched_by_id(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "chatter")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    # generate plays 20 deltas 20 ms apart; the quick commands sent after it are answered first
    slow = client.send("generate", agent="mock", dir=str(tmp_path), prompt="slow")
    quick = [
        client.send("info", session=s),
        client.send("discover"),
        client.send("probe", agent="mock"),
        client.send("info", session="nope"),
        client.send("plan_usage", agent="mock"),
    ]
    replies = {i: client.reply(i) for i in [*quick, slow]}
    assert replies[quick[0]]["ok"]["id"] == s
    assert replies[quick[1]]["ok"]["agents"][0]["id"] == "mock"
    assert replies[quick[2]]["ok"]["version"] == "mock"
    assert replies[quick[3]]["error"]["kind"] == "UnknownSession"
    assert replies[quick[4]]["error"]["kind"] == "UnsupportedFeature"
    assert replies[slow]["ok"].startswith("chatter chatter")
    order = [line.get("id") for line in client.lines if "id" in line]
    assert order.index(slow) > max(order.index(i) for i in quick), order


# ------------------------------------------------------------------------------------------------ bad input


def test_bad_frames_get_bad_frame_and_the_connection_lives_on(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello")
    cases: list[tuple[str, int | None, str | None]] = [
        ("this is not json", None, None),
        ('{"id": 3, "cmd": "discover"', None, None),  # truncated JSON: its id is unreadable
        ("[1, 2, 3]", None, None),
        ('{"cmd": "discover"}', None, None),  # no id
        ('{"id": "seven", "cmd": "discover"}', None, None),
        ('{"id": -1, "cmd": "discover"}', None, None),
        ('{"id": 41, "cmd": "probe"}', 41, "agent"),  # missing field
        ('{"id": 42, "cmd": "open", "agent": "mock"}', 42, "dir"),  # missing field
        ('{"id": ' + "9" * 5000 + ', "cmd": "discover"}', None, None),  # beyond the JSON parser's digit limit
        ("[" * 100_000 + "]" * 100_000, None, None),  # nesting beyond the parser's recursion limit
        ('{"id": true, "cmd": "discover"}', None, None),  # ids are integers, never coerced
        ('{"id": 43, "cmd": "launch_missiles"}', 43, "launch_missiles"),  # unknown command
        ('{"id": 44}', 44, None),  # no cmd
        ('{"id": 45, "cmd": "rollback", "session": "s1", "turns": 0, "scope": "Conversation"}', 45, "turns"),
        ('{"id": 46, "cmd": "answer", "session": "s1", "request": "r", "answer": {"Permission": "Maybe"}}', 46, None),
        ('{"id": 47, "cmd": "prompt", "session": "s1", "text": 5}', 47, "text"),
    ]
    for raw, expected_id, mention in cases:
        client.send_raw(raw)
        line = client.reply(expected_id)
        assert set(line) == {"id", "error"}, (raw, line)
        error = line["error"]
        assert error["kind"] == "BadFrame", (raw, line)
        assert error["message"] and isinstance(error["detail"], str), (raw, line)
        if mention:
            assert mention in error["detail"] + error["message"], (raw, error)
        # the connection lives on after each
        assert client.ok("discover")["agents"][0]["id"] == "mock"
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    assert client.ok("info", session=s)["id"] == s


def test_unknown_session_keeps_the_session_field(wire: Any) -> None:
    client = wire("--mock", "hello")
    for cmd, fields in (
        ("info", {}),
        ("prompt", {"text": "hi"}),
        ("cancel", {}),
        ("close", {}),
        ("dequeue", {"prompt": "p1"}),
        ("compact", {}),
    ):
        err = client.error(cmd, session="s999", **fields)
        assert err["kind"] == "UnknownSession", (cmd, err)
        assert err["session"] == "s999"


def test_closed_session_stays_known(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    assert client.ok("close", session=s) is None
    assert client.events(s) == [{"closed": s}]
    for cmd, fields in (("prompt", {"text": "late"}), ("info", {}), ("close", {}), ("cancel", {})):
        err = client.error(cmd, session=s, **fields)
        assert err["kind"] == "SessionClosed", (cmd, err)


def test_error_bodies_keep_their_fields(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello", env={"ANYAGENTD_DISABLE_PLUGINS": "acp"})  # no plugin opens {"acp": ...}
    missing = client.error("probe", agent="nosuchagent")
    assert missing["kind"] == "NotInstalled"
    assert missing["agent"] == "nosuchagent"
    acp = client.error("open", agent={"acp": {"name": "my-acp", "path": "/bin/false"}}, dir=str(tmp_path))
    assert acp["kind"] == "NotInstalled" and acp["agent"] == "my-acp"
    no_dir = client.error("open", agent="mock", dir=str(tmp_path / "does-not-exist"))
    assert no_dir["kind"] == "InvalidConfiguration" and "does-not-exist" in no_dir["detail"]


# ------------------------------------------------------------------------------------------------ endings


def test_dying_agent_fails_the_turn_then_the_session(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "dies")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.ok("prompt", session=s, text="go")
    lines = client.events(s)
    assert lines[-1] == {"closed": s}
    errors = [i for i, l in enumerate(lines) if "session" in l]
    assert len(errors) == 1, lines
    error = lines[errors[0]]["error"]
    assert error["kind"] == "ProcessExited"
    assert "9" in error["status"]
    assert "died" in error["stderr"]
    ends = [i for i, l in enumerate(lines) if _turn_ended(l)]
    assert len(ends) == 1 and ends[0] < errors[0]
    stop = lines[ends[0]]["event"]["kind"]["TurnEnded"]["stop"]
    assert "Failed" in stop and stop["Failed"]["message"]
    assert "TextDelta" in _tags(lines[: ends[0]])
    # the server is fine; the dead session stays known
    assert client.ok("discover")["agents"]
    assert client.error("prompt", session=s, text="again")["kind"] == "SessionClosed"


def test_eof_closes_every_session_and_exits_zero(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "permission")
    busy = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.ok("prompt", session=busy, text="write hello.txt")
    client.events(busy, until=lambda l: "event" in l and kind_tag(l) == "RequestOpened")
    idle = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    in_flight = client.send("open", agent="mock", dir=str(tmp_path))
    client.close_stdin()
    assert client.wait(15) == 0  # wait() also checks that every opened session wrote closed
    reply = client.reply(in_flight)
    assert "ok" in reply, reply  # the open in flight at EOF still completes...
    late = reply["ok"]["id"]
    for session in (busy, idle, late):  # ...and, like every session, ends with exactly one closed line
        lines = client.events(session)
        assert lines[-1] == {"closed": session}
        assert not any("session" in line for line in lines), lines
    busy_lines = [l for l in client.lines if session_of(l) == busy]
    tags = _tags(busy_lines)
    assert tags.index("RequestClosed") < tags.index("TurnEnded")
    ended = [l for l in busy_lines if _turn_ended(l)][-1]
    assert ended["event"]["kind"]["TurnEnded"]["stop"] == "Cancelled"
    assert [l.get("closed") for l in client.lines].count(busy) == 1


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_idle(pid: int, *, at_least: float, at_most: float) -> None:
    """Sleep ``at_least`` seconds, then until the process stops using CPU (or ``at_most`` seconds in all)."""
    time.sleep(at_least)
    deadline = time.monotonic() + at_most - at_least
    if not Path(f"/proc/{pid}/stat").exists():
        return
    before = _cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.4)
        now = _cpu_seconds(pid)
        if now - before < 0.02:
            return
        before = now


def test_starved_session_is_closed_and_the_server_survives(wire: Any, tmp_path: Path) -> None:
    # flood.json: 200000 TextDeltas as fast as the engine takes them.
    # A bound that a stalled reader overruns (the flood is 200000 events) but a reading one never reaches within
    # the 500 events the second session is read for, however slowly this test's validating reader goes.
    client = wire("--mock", "flood", env={"ANYAGENTD_EVENT_BOUND": "4096"})
    starved = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    with client.paused():  # nobody reads: the stdout pipe fills, the session's events back up past the bound
        prompt = client.send("prompt", session=starved, text="flood me")
        _wait_until_idle(client.proc.pid, at_least=1.5, at_most=10)
    assert "ok" in client.reply(prompt)
    lines = client.events(starved, timeout=30)
    assert lines[-1] == {"closed": starved}
    assert "session" in lines[-2], lines[-3:]
    lagged = lines[-2]["error"]
    assert lagged["kind"] == "ConsumerLagged" and lagged["message"]
    deltas = _tags(lines).count("TextDelta")
    assert 0 < deltas < 200_000, deltas
    assert not any(_turn_ended(l) and "Completed" in l["event"]["kind"]["TurnEnded"]["stop"] for l in lines)
    # the sidecar survived: it answers, the starved session stays known, and a session that is read runs
    assert client.ok("discover")["agents"][0]["id"] == "mock"
    assert client.error("prompt", session=starved, text="again")["kind"] == "SessionClosed"
    fresh = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    assert client.ok("info", session=fresh)["status"] == "Idle"
    assert client.ok("prompt", session=fresh, text="flood me too")["kind"] == {"Started": {"turn_id": "t1"}}
    seen = 0

    def enough(line: dict[str, Any]) -> bool:
        nonlocal seen
        seen += "event" in line and kind_tag(line) == "TextDelta"
        return seen == 500

    client.events(fresh, until=enough)
    # The fresh session floods as fast as the engine goes; this reader validates every line against the schema,
    # so on a loaded machine it can fall behind by the bound. Either way it must end properly: closed by request
    # (Cancelled) or, having lagged, with ConsumerLagged — and never take the server down.
    reply = client.request("close", session=fresh, timeout=20)
    run = client.events(fresh, timeout=30)
    assert run[-1] == {"closed": fresh}
    if "ok" in reply:
        assert not any("session" in l for l in run), run[-3:]  # closed by request, not lagged
        ends = [l for l in run if _turn_ended(l)]
        assert len(ends) == 1 and ends[0]["event"]["kind"]["TurnEnded"]["stop"] == "Cancelled"
        assert _tags(run)[-3:] == ["MessageEnded", "TurnEnded", "StatusChanged"]
    else:
        assert reply["error"]["kind"] == "SessionClosed"
        assert run[-2]["error"]["kind"] == "ConsumerLagged"
    assert client.ok("discover")["agents"][0]["id"] == "mock"


def test_serve_stdout_holds_only_protocol_lines(wire: Any, tmp_path: Path, wire_schema: Any) -> None:
    """Whatever the process prints goes to stderr: here a plugin-free run with trace output on stderr."""
    client = wire("--mock", "permission", env={"ANYAGENTD_TRACE_PLUGINS": "1"})
    s = client.ok("open", agent="mock", dir=str(tmp_path), permission_mode="AutoApprove")["id"]
    client.ok("prompt", session=s, text="write hello.txt")
    lines = client.events(s, until=_turn_ended)
    assert "RequestOpened" not in _tags(lines)  # AutoApprove answers it inside the engine
    client.close_stdin()
    assert client.wait() == 0
    assert "anyagentd plugins:" in client.stderr  # the trace went to stderr, not into the protocol
    for line in client.lines:  # (already validated as read; once more, explicitly)
        wire_schema.validate_line(line)
    validate_def("Hello", client.lines[0]["hello"])
