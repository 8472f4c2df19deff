"""The wire under careless and hostile clients (issue 16, 15.7, 20.1), over a real ``anyagentd serve --mock``.

Every line is validated by :class:`wire_client.WireClient` as it is read (schema, ordering guarantees, one reply per
id). These tests add: compact lines; unknown fields ignored by every command; strict JSON and strict types; a
``generate``'s throwaway session out of the caller's reach; the input line bound and clipped error details; no
reading while output is stalled; and an event that cannot be written failing only its own session.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from wire_client import kind_tag

pytestmark = pytest.mark.timeout(120)


def _script(tmp_path: Path, script: dict[str, Any], name: str = "script.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(script))  # ensure_ascii: a lone surrogate is written as the escape "\ud83d"
    return str(path)


def _turn_ended(line: dict[str, Any]) -> bool:
    return "event" in line and kind_tag(line) == "TurnEnded"


def _text_turn(*texts: str, sleep_ms: int = 0) -> list[Any]:
    steps: list[Any] = [{"Sleep": sleep_ms}] if sleep_ms else []
    steps += [{"Emit": {"TextDelta": {"message_id": "m1", "text": text}}} for text in texts]
    return [*steps, {"Emit": {"MessageEnded": {"message_id": "m1"}}}, {"End": {"Completed": {"source": "Protocol"}}}]


# ------------------------------------------------------------------------------------------------ 15.7 compact


def test_every_line_is_written_compact(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "permission")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.ok("prompt", session=s, text="write hello.txt")
    client.events(s, until=lambda l: "event" in l and kind_tag(l) == "RequestOpened")
    client.error("info", session="s999")
    client.send_raw("not json")
    client.reply(None)
    client.ok("close", session=s)
    client.events(s)
    shapes = set()
    for raw in client.raw_lines:
        obj = json.loads(raw)
        shapes.add(next(iter(obj)) if len(obj) == 1 else "+".join(sorted(obj)))
        assert raw == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n", raw[:300]
    assert {"hello", "event", "closed", "id+ok", "error+id"} <= shapes, shapes


# ------------------------------------------------------------------------------------------------ 16.1 unknown fields


def test_every_command_ignores_unknown_fields(wire: Any, tmp_path: Path) -> None:
    # generate and the session both play turn 1: text, then 2 s (the session's second prompt is queued meanwhile)
    script = {
        "turns": [
            [
                {"Emit": {"TextDelta": {"message_id": "m", "text": "one"}}},
                {"Sleep": 2000},
                {"End": {"Completed": {"source": "Protocol"}}},
            ]
        ],
        "options": [
            {"id": "fast", "name": "Fast", "category": None, "kind": "Boolean", "current": False, "live": True}
        ],
    }
    client = wire("--mock", _script(tmp_path, script))
    work = str(tmp_path)
    extra = {"client_hint": "x", "trace": {"nested": [1, 2]}}
    assert client.ok("discover", **extra)["agents"][0]["id"] == "mock"
    assert client.ok("probe", agent="mock", **extra)["version"] == "mock"
    assert client.error("plan_usage", agent="mock", **extra)["kind"] == "UnsupportedFeature"
    assert client.ok("generate", agent="mock", dir=work, prompt="hi", **extra) == "one"
    s = client.ok("open", agent="mock", dir=work, **extra)["id"]
    assert client.ok("info", session=s, **extra)["id"] == s
    assert client.ok("configure", session=s, option="fast", value=True, **extra) is None
    assert client.ok("prompt", session=s, text="first", **extra)["kind"] == {"Started": {"turn_id": "t1"}}
    client.events(s, until=lambda l: "event" in l and kind_tag(l) == "TextDelta")
    queued = client.ok("prompt", session=s, text="second", **extra)
    assert queued["kind"] == {"Queued": {"position": 0}}
    assert client.ok("dequeue", session=s, prompt=queued["prompt_id"], **extra) is None
    wrong = client.error("answer", session=s, request="nope", answer={"Permission": "AllowOnce"}, **extra)
    assert wrong["kind"] == "InvalidRequest"
    assert client.error("rollback", session=s, turns=1, scope="Conversation", **extra)["kind"] == "UnsupportedFeature"
    assert client.error("compact", session=s, **extra)["kind"] == "UnsupportedFeature"
    assert client.ok("cancel", session=s, clear_queue=True, **extra) is None
    assert client.ok("close", session=s, **extra) is None
    assert not [l for l in client.lines if "error" in l and l["error"]["kind"] == "BadFrame"]


# ------------------------------------------------------------------------------------------------ 16.2 generate


def test_a_generates_session_answers_like_an_unknown_one(wire: Any, tmp_path: Path) -> None:
    # generate's turn sleeps 3 s: its session (this server's first) is alive while the commands below name it.
    client = wire("--mock", _script(tmp_path, {"turns": [_text_turn("generated", sleep_ms=3000)]}))
    client.ok("discover")  # discovery done: generate's open is quick
    slow = client.send("generate", agent="mock", dir=str(tmp_path), prompt="go")
    time.sleep(0.5)
    probe = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    hidden = "s2" if probe == "s1" else "s1"  # session ids are s1, s2… per process
    for cmd, fields in (
        ("info", {}),
        ("prompt", {"text": "hijack"}),
        ("dequeue", {"prompt": "p1"}),
        ("answer", {"request": "r", "answer": {"Permission": "AllowOnce"}}),
        ("configure", {"option": "model", "value": "x"}),
        ("compact", {}),
        ("cancel", {}),
        ("rollback", {"turns": 1, "scope": "Conversation"}),
        ("close", {}),
    ):
        err = client.error(cmd, session=hidden, **fields)
        assert err == {"kind": "UnknownSession", "message": f"unknown session {hidden!r}", "session": hidden}, cmd
    assert client.reply(slow, timeout=10)["ok"] == "generated"  # undisturbed: nothing was queued on it
    assert client.error("info", session=hidden)["kind"] == "UnknownSession"  # not SessionClosed afterwards either
    client.close()
    assert "Traceback" not in client.stderr


# ------------------------------------------------------------------------------------------------ 16.5 strict frames


@pytest.mark.parametrize(
    ("raw", "frame_id", "mention"),
    [
        (b'{"id": 1, "cmd": "discover", "x": NaN}', None, "NaN"),
        (b'{"id": 1, "cmd": "discover", "x": -Infinity}', None, "Infinity"),
        (b'\xef\xbb\xbf{"id": 1, "cmd": "discover"}', None, "BOM"),
        (b'{"id": 1, "cmd": "prompt", "session": "s1", "text": "\xed\xa0\xbd"}', None, "UTF-8"),  # encoded surrogate
        (b'{"id": 2, "cmd": "prompt", "session": "s1", "text": "\\ud83d"}', 2, "text"),  # escaped lone surrogate
        (b'{"id": 3, "cmd": "cancel", "session": "s1", "clear_queue": 0}', 3, "clear_queue"),
        (b'{"id": 4, "cmd": "cancel", "session": "s1", "clear_queue": 1}', 4, "clear_queue"),
        (b'{"id": 5, "cmd": "cancel", "session": "s1", "clear_queue": "yes"}', 5, "clear_queue"),
        (b'{"id": 6, "cmd": "rollback", "session": "s1", "turns": "2", "scope": "Conversation"}', 6, "turns"),
        (b'{"id": 7, "cmd": "rollback", "session": "s1", "turns": 2.0, "scope": "Conversation"}', 7, "turns"),
        (b'{"id": 8, "cmd": "configure", "session": "s1", "option": "fast", "value": 1}', 8, "value"),
        (b'{"id": 9, "cmd": "open", "agent": "mock", "dir": "/tmp", "configure": {"fast": 0}}', 9, "configure.fast"),
        (b'{"id": 10, "cmd": "prompt", "session": "s1", "text": "hi", "attachments": "a.png"}', 10, "attachments"),
        (b'{"id": 11, "cmd": "info", "session": 1}', 11, "session"),
    ],
)
def test_frames_are_strict_json_with_strict_types(
    wire: Any, tmp_path: Path, raw: bytes, frame_id: int | None, mention: str
) -> None:
    client = wire("--mock", "model-option")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.send_raw(raw.replace(b'"s1"', json.dumps(s).encode()))
    error = client.reply(frame_id)["error"]
    assert error["kind"] == "BadFrame", error
    assert mention in error["message"] + error["detail"], error
    # a refused command changes nothing
    info = client.ok("info", session=s)
    assert info["configuration"]["options"] == {"model": "small", "fast": False}
    assert info["status"] == "Idle"


def test_a_paired_surrogate_escape_is_fine(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello")
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.send_raw(f'{{"id": 50, "cmd": "prompt", "session": "{s}", "text": "\\ud83d\\ude00"}}')
    assert "ok" in client.reply(50)


# ------------------------------------------------------------------------------------------------ 16.6 line bound


def test_a_line_over_the_bound_is_refused_and_the_connection_lives(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", "hello", env={"ANYAGENTD_WIRE_MAX_LINE_BYTES": "4096"})
    s = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    at_limit = json.dumps({"id": 60, "cmd": "prompt", "session": s, "text": ""})
    at_limit = at_limit.replace('"text": ""', '"text": "' + "a" * (4096 - len(at_limit)) + '"')
    assert len(at_limit) == 4096
    client.send_raw(at_limit)
    assert "ok" in client.reply(60)
    client.send_raw(json.dumps({"id": 61, "cmd": "prompt", "session": s, "text": "b" * 3_000_000}))
    error = client.reply(None)["error"]
    assert error["kind"] == "BadFrame" and error["message"] == "line too long", error
    assert "3000" in error["detail"] and "4096" in error["detail"], error
    assert client.ok("info", session=s)["id"] == s  # the rest of the long line was not taken as frames
    assert 61 not in {l.get("id") for l in client.lines}


def test_error_details_are_clipped(wire: Any) -> None:
    client = wire("--mock", "hello")
    client.send_raw(json.dumps({"id": 70, "cmd": "x" * 1_000_000}))
    error = client.reply(70)["error"]
    assert error["kind"] == "BadFrame" and len(json.dumps(error)) < 1000, len(json.dumps(error))
    client.send_raw(json.dumps({"id": 71, "cmd": "prompt", "session": "s1", "text": ["y" * 100_000] * 10}))
    error = client.reply(71)["error"]
    assert error["kind"] == "BadFrame" and "text" in error["detail"] and len(json.dumps(error)) < 1000


# ------------------------------------------------------------------------------------------------ 16.3 backpressure


def test_no_commands_are_read_while_output_is_stalled(wire: Any) -> None:
    client = wire("--mock", "hello", env={"ANYAGENTD_WIRE_OUTPUT_BOUND_BYTES": "16384"})
    client.ok("discover")
    total = 6000
    written = 0
    frames = [json.dumps({"id": 1000 + i, "cmd": "info", "session": "nope"}).encode() + b"\n" for i in range(total)]
    for i in range(total):
        client.sent[1000 + i] = {"id": 1000 + i, "cmd": "info"}
    assert client.proc.stdin is not None

    def flood() -> None:
        nonlocal written
        try:
            for frame in frames:
                client.proc.stdin.write(frame)
                client.proc.stdin.flush()
                written += 1
        except (BrokenPipeError, ValueError, OSError):
            pass

    with client.paused():
        writer = threading.Thread(target=flood, daemon=True)
        writer.start()
        last, still = -1, 0.0
        while still < 1.5 and writer.is_alive():  # until the writer has been stuck for 1.5 s
            time.sleep(0.1)
            still = still + 0.1 if written == last else 0.0
            last = written
        stuck_at = written
    # The server stopped reading: what it took is its output bound plus the two pipes' buffers, not everything.
    assert stuck_at < total, stuck_at
    writer.join(60)
    assert written == total
    replies = [client.reply(1000 + i, timeout=30) for i in range(total)]  # and every command is answered once
    assert {r["error"]["kind"] for r in replies} == {"UnknownSession"}


# ------------------------------------------------------------------------------------------------ 20.1 surrogates


def test_an_unwritable_event_fails_only_its_session(wire: Any, tmp_path: Path) -> None:
    # The mock plays its script as written, so it can emit what a careless adapter would: a lone surrogate.
    bad_turn = _text_turn("before ", "bad \ud83d here")
    bad_turn[2:2] = [{"Sleep": 3000}, {"Emit": {"TextDelta": {"message_id": "m1", "text": "after"}}}]
    script = {"turns": [_text_turn("fine"), bad_turn]}
    client = wire("--mock", _script(tmp_path, script))
    bad = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    good = client.ok("open", agent="mock", dir=str(tmp_path))["id"]
    client.ok("prompt", session=bad, text="first")
    client.events(bad, until=_turn_ended)
    client.ok("prompt", session=bad, text="second")
    lines = client.events(bad)
    assert lines[-1] == {"closed": bad}
    error = lines[-2]["error"]
    assert error["kind"] == "ProtocolFailed", error
    assert "TextDelta" in error["message"] and "TextDelta" in error["detail"], error
    ended = [l for l in lines if _turn_ended(l)]
    assert len(ended) == 1 and "Failed" in ended[0]["event"]["kind"]["TurnEnded"]["stop"], lines
    texts = [l["event"]["kind"]["TextDelta"]["text"] for l in lines if "event" in l and kind_tag(l) == "TextDelta"]
    assert texts[-1] == "before ", texts  # nothing after the unwritable one: the turn was failed at once
    # the other session and the server go on
    assert client.error("prompt", session=bad, text="again")["kind"] == "SessionClosed"
    client.ok("prompt", session=good, text="first")
    run = client.events(good, until=_turn_ended)
    assert run[-1]["event"]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    assert client.ok("info", session=good)["id"] == good
    assert client.ok("discover")["agents"][0]["id"] == "mock"
    client.close()
    assert "Traceback" not in client.stderr


def test_a_reply_with_a_lone_surrogate_is_written_with_a_replacement(wire: Any, tmp_path: Path) -> None:
    client = wire("--mock", _script(tmp_path, {"turns": [_text_turn("half \ud83d of a pair")]}))
    assert client.ok("generate", agent="mock", dir=str(tmp_path), prompt="go") == "half \ufffd of a pair"


def test_wire_bounds_come_from_the_environment() -> None:
    from anyagentd.errors import InvalidConfiguration
    from anyagentd.wire import WireSettings

    assert WireSettings.from_env({}) == WireSettings(16 * 1024 * 1024, 1024 * 1024, 1024)
    env = {
        "ANYAGENTD_WIRE_MAX_LINE_BYTES": "100",
        "ANYAGENTD_WIRE_OUTPUT_BOUND_BYTES": "200",
        "ANYAGENTD_WIRE_MAX_COMMANDS": "3",
    }
    assert WireSettings.from_env(env) == WireSettings(100, 200, 3)
    for bad in ("abc", "0", "-5", "1.5"):
        with pytest.raises(InvalidConfiguration, match="ANYAGENTD_WIRE_MAX_COMMANDS"):
            WireSettings.from_env({"ANYAGENTD_WIRE_MAX_COMMANDS": bad})


def test_a_bad_wire_bound_is_one_clear_line(tmp_path: Path) -> None:
    import subprocess

    from wire_client import child_env, serve_command

    proc = subprocess.run(
        serve_command("--mock", "hello"),
        input=b"",
        capture_output=True,
        timeout=30,
        env=child_env({"ANYAGENTD_WIRE_MAX_LINE_BYTES": "lots"}),
    )
    assert proc.returncode == 2 and proc.stdout == b""  # the CLI's exit code for InvalidConfiguration
    assert "ANYAGENTD_WIRE_MAX_LINE_BYTES" in proc.stderr.decode() and b"Traceback" not in proc.stderr


def test_max_commands_bounds_the_commands_running_at_once(wire: Any, tmp_path: Path) -> None:
    # Two generates (1.5 s each) fill a bound of 2: the info sent after them is read only when one finishes.
    client = wire(
        "--mock",
        _script(tmp_path, {"turns": [_text_turn("slow", sleep_ms=1500)]}),
        env={"ANYAGENTD_WIRE_MAX_COMMANDS": "2"},
    )
    slow = [client.send("generate", agent="mock", dir=str(tmp_path), prompt="go") for _ in range(2)]
    quick = client.send("info", session="nope")
    assert client.reply(quick, timeout=20)["error"]["kind"] == "UnknownSession"
    order = [line["id"] for line in client.lines if "id" in line]
    assert order.index(quick) > min(order.index(i) for i in slow if i in order), order
