"""Property-based fuzzing of the wire (hypothesis) over a real ``anyagentd serve --mock``: fuzzed lines and fuzzed
command sequences.

Every line read is validated by :class:`wire_client.WireClient` (the schema's ``Line``, its ``ok`` payload or error
body, hello first, ``ok`` to ``open`` before the session's lines, ``closed`` once and last, one reply per id).
On top, these properties:

- the server never dies: it answers after every fuzzed line and exits 0 on EOF, every session closed;
- every line whose integer id a strict JSON parser can read gets exactly one reply with that id; any other
  non-blank line gets one ``BadFrame`` with id ``null``;
- per session: ``sequence`` goes 1, 2, 3… (+1 each event); turns are not nested and every event with
  ``turn_info`` belongs to the running turn; every request is closed before its turn's ``TurnEnded``; a prompt
  whose ``dequeue`` succeeded never starts.

The budget is fixed for CI: derandomized (the same examples every run), a bounded number of examples, no
example database; the two tests take a few tens of seconds together.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import event as note_reached
from hypothesis import strategies as st
from wire_client import WireClient, kind_tag, session_of

from anyagentd.wire import COMMANDS as WIRE_COMMANDS

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Five scripted turns, played in order by every session: a permission request (prompts sent meanwhile are queued);
# text with a pause; a question; a tool running then done; text, then the agent dies. Prompts beyond the fifth start
# a turn that never ends (until cancel or close).
SCRIPT = {
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
        }
    ],
    "turns": [
        [
            {
                "Emit": {
                    "RequestOpened": {
                        "Permission": {
                            "id": "req1",
                            "options": ["AllowOnce", "DenyOnce"],
                            "detail": None,
                            "tool": {
                                "id": "tool1",
                                "kind": "Execute",
                                "title": "ls",
                                "status": "Pending",
                                "input": "None",
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
            {"Emit": {"TextDelta": {"message_id": "m2", "text": "answered"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "one "}}},
            {"Sleep": 30},
            {"Emit": {"TextDelta": {"message_id": "m1", "text": "two"}}},
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {
                "Emit": {
                    "RequestOpened": {
                        "Question": {
                            "id": "req2",
                            "questions": [
                                {
                                    "id": "q1",
                                    "text": "Which?",
                                    "header": None,
                                    "multi_select": False,
                                    "allows_free_text": True,
                                    "choices": [
                                        {"id": "a", "label": "A", "description": None},
                                        {"id": "b", "label": "B", "description": None},
                                    ],
                                }
                            ],
                        }
                    }
                }
            },
            "AwaitAnswer",
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [
            {
                "Emit": {
                    "ToolUpdated": {
                        "id": "tool2",
                        "kind": "Read",
                        "title": "read",
                        "status": "Running",
                        "input": "None",
                        "output": None,
                        "diffs": [],
                        "locations": [],
                        "raw": None,
                    }
                }
            },
            {"Sleep": 40},
            {
                "Emit": {
                    "ToolUpdated": {
                        "id": "tool2",
                        "kind": "Read",
                        "title": "read",
                        "status": "Completed",
                        "input": "None",
                        "output": "ok",
                        "diffs": [],
                        "locations": [],
                        "raw": None,
                    }
                }
            },
            {"End": {"Completed": {"source": "Protocol"}}},
        ],
        [{"Emit": {"TextDelta": {"message_id": "m5", "text": "last words"}}}, "Die"],
    ],
}

NO_REPLY = object()


@pytest.fixture(scope="module")
def script_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fuzz") / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return str(path)


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("fuzz-work"))


# ------------------------------------------------------------------------------------------------ fuzzed lines

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


JSON_VALUES = st.recursive(JSON_SCALARS, _containers, max_leaves=6)
COMMANDS = list(WIRE_COMMANDS)  # the wire's command table's names, in its order
ANSWERS = [
    {"Permission": "AllowOnce"},
    {"Permission": "DenyOnce"},
    {"Permission": "Maybe"},
    {"Question": [{"Choices": ["a"]}]},
    {"Question": [{"Text": "free"}]},
    {"Question": []},
]


REQUIRED = {
    "discover": [],
    "probe": ["agent"],
    "plan_usage": ["agent"],
    "generate": ["agent", "dir", "prompt"],
    "open": ["agent", "dir"],
    "prompt": ["session", "text"],
    "dequeue": ["session", "prompt"],
    "answer": ["session", "request", "answer"],
    "configure": ["session", "option", "value"],
    "rollback": ["session", "turns", "scope"],
    "compact": ["session"],
    "cancel": ["session"],
    "info": ["session"],
    "close": ["session"],
}


def _field_values(work: str) -> dict[str, st.SearchStrategy[Any]]:
    """Plausible values for each frame field (right type, often a right value)."""
    return {
        "session": st.sampled_from(["s1", "s2", "s3", "s999", ""]),
        "agent": st.sampled_from(["mock", "mock", "nosuch", {"acp": {"name": "x", "path": "/bin/false"}}]),
        "dir": st.sampled_from([work, work, "/nonexistent", ""]),
        "text": st.text(max_size=20),
        "prompt": st.sampled_from(["p1", "p2", "say hi"]),
        "request": st.sampled_from(["req1", "req2", "nope"]),
        "answer": st.sampled_from(ANSWERS),
        "option": st.sampled_from(["model", "nosuch"]),
        "value": st.sampled_from(["small", "large", True]),
        "turns": st.integers(0, 3),
        "scope": st.sampled_from(["Conversation", "ConversationAndFiles"]),
        "clear_queue": st.booleans(),
        "attachments": st.lists(st.text(max_size=5), max_size=2),
        "permission_mode": st.sampled_from(["Ask", "AutoApprove"]),
        "configure": st.sampled_from([{}, {"model": "large"}, {"model": 0}]),
        "mcp_servers": st.sampled_from([[], [{"name": "x", "connection": {"Stdio": {"command": ""}}}]]),
        "resume": st.none() | st.text(max_size=5),
    }


@st.composite
def frames(draw: st.DrawFn, work: str) -> bytes:
    """One input line: a command frame (its required fields with plausible values, some optional ones, unknown
    ones; now and then one field of any JSON type or one missing; an id drawn fresh, or bad), or that frame cut or
    corrupted, or junk bytes."""
    values = _field_values(work)
    frame: dict[str, Any] = {}
    fresh = draw(st.integers(0, 9)) < 8
    frame["id"] = "fresh" if fresh else draw(st.sampled_from(["missing", -1, 2**64, True, "7", 1.5, None]))
    valid_cmd = draw(st.integers(0, 9)) < 8
    cmd = frame["cmd"] = draw(st.sampled_from(COMMANDS) if valid_cmd else st.sampled_from(["", "launch"]) | JSON_VALUES)
    names = list(REQUIRED.get(cmd, [])) if isinstance(cmd, str) else []
    names += draw(st.lists(st.sampled_from(sorted(values)), max_size=3, unique=True))
    for name in dict.fromkeys(names):
        frame[name] = draw(values[name])
    fault = ["junk", "drop"][draw(st.integers(0, 1))] if draw(st.integers(0, 9)) >= 8 else "none"
    if fault != "none" and len(frame) > 2:
        name = draw(st.sampled_from(sorted(set(frame) - {"id", "cmd"})))
        if fault == "junk":
            frame[name] = draw(JSON_VALUES)
        else:
            del frame[name]
    for name in draw(st.lists(st.text(max_size=6), max_size=2)):  # unknown fields
        frame.setdefault(name, draw(JSON_VALUES))
    if frame["id"] == "missing":
        del frame["id"]
    text = json.dumps(frame, ensure_ascii=draw(st.booleans()))
    line = text.encode("utf-8", "surrogatepass")
    mutations = ["cut", "blank", "byte", "nan", "bom", "binary"]
    mutation = mutations[draw(st.integers(0, 5))] if draw(st.integers(0, 9)) >= 7 else "none"
    if mutation == "cut":
        line = line[: draw(st.integers(0, max(0, len(line) - 1)))]
    elif mutation == "byte":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.binary(min_size=1, max_size=3)) + line[at:]
    elif mutation == "binary":
        line = draw(st.binary(max_size=40))
    elif mutation == "nan":
        line = line[:-1] + b', "x": NaN}' if line.endswith(b"}") else line
    elif mutation == "bom":
        line = b"\xef\xbb\xbf" + line
    elif mutation == "blank":
        line = draw(st.sampled_from([b"", b"   ", b"\t", b"\r"]))
    return line.replace(b"\n", b" ")


def expected_reply(line: bytes) -> Any:
    """What the server must answer: the id (an int) a strict JSON reader finds, ``None`` (a BadFrame with id null)
    or :data:`NO_REPLY` for a blank line."""
    if not line.strip():
        return NO_REPLY
    try:
        data = json.loads(line.decode("utf-8"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    frame_id = data.get("id") if isinstance(data, dict) else None
    if type(frame_id) is int and 0 <= frame_id < 2**64:
        return frame_id
    return None


def _refuse(name: str) -> Any:
    raise ValueError(name)


@pytest.fixture(scope="module")
def shared_server(script_path: str) -> Iterator[WireClient]:
    client = WireClient("--mock", script_path, timeout=20)
    try:
        yield client
        client.close_stdin()
        assert client.wait(30) == 0, client.stderr[-2000:]
        assert "Traceback" not in client.stderr, client.stderr[-3000:]
    finally:
        client.close()


_fresh_ids = iter(range(10_000, 10**9))


@settings(FUZZ, max_examples=250)
@given(data=st.data())
def test_fuzzed_lines_get_one_reply_each_and_never_kill_the_server(
    shared_server: WireClient, work_dir: str, data: st.DataObject
) -> None:
    client = shared_server
    line = data.draw(frames(work_dir))
    if b'"fresh"' in line:  # a valid id, never used before (ids must be unique to match replies)
        line = line.replace(b'"fresh"', str(next(_fresh_ids)).encode(), 1)
    client.send_raw(line + b"\n")
    expected = expected_reply(line)
    if expected is not NO_REPLY:
        reply = client.reply(expected, timeout=20)
        note_reached("reply ok" if "ok" in reply else f"reply {reply['error']['kind']}")
        if expected is None:
            assert reply["error"]["kind"] == "BadFrame", (line, reply)
        assert len(json.dumps(reply)) < 4000 or "ok" in reply, reply  # details clipped
    assert client.proc.poll() is None, client.stderr[-3000:]


# ------------------------------------------------------------------------------------------------ command sequences


# Names weighted by repetition: mostly prompts, answers and dequeues, the commands that move a session along.
ACTION_NAMES = (
    ["prompt"] * 4
    + ["answer"] * 3
    + ["dequeue"] * 2
    + ["wait"] * 2
    + ["open", "cancel", "configure", "info", "close", "generate", "junk"]
)


@st.composite
def action(draw: st.DrawFn) -> tuple[Any, ...]:
    """One step of a command sequence: a name and its arguments (session index, prompt index, answer…)."""
    name = draw(st.sampled_from(ACTION_NAMES))
    session = draw(st.integers(0, 3))
    if name == "prompt" or name in ("info", "close"):
        return (name, session)
    if name == "dequeue":
        return (name, session, draw(st.integers(0, 5)))
    if name == "answer":
        return (name, session, draw(st.sampled_from([*ANSWERS[:2], ANSWERS[4], *ANSWERS])))
    if name == "cancel":
        return (name, session, draw(st.booleans()))
    if name == "configure":
        return (name, session, draw(st.sampled_from(["small", "large", "huge"])))
    if name == "wait":
        return (name, draw(st.sampled_from([0.02, 0.06])))
    if name == "junk":
        return (name, draw(st.binary(max_size=20)))
    return (name,)


def _session(opened: list[str], index: int) -> str:
    return opened[index % len(opened)] if opened else "s999"


def _open_request(client: WireClient, session: str) -> str:
    """The id of the session's latest request still open in what was read (waiting briefly for a new one when none
    is), else ``"nope"``."""

    def opened(line: dict[str, Any]) -> bool:
        return "event" in line and session_of(line) == session and kind_tag(line) == "RequestOpened"

    def request_id(line: dict[str, Any]) -> str:
        return next(iter(line["event"]["kind"]["RequestOpened"].values()))["id"]

    seen: set[str] = set()
    open_ids: list[str] = []
    for line in client.lines:
        if opened(line):
            seen.add(request_id(line))
            open_ids.append(request_id(line))
        elif "event" in line and session_of(line) == session and kind_tag(line) == "RequestClosed":
            closed = line["event"]["kind"]["RequestClosed"]["request_id"]
            open_ids = [i for i in open_ids if i != closed]
    if open_ids:
        return open_ids[-1]
    try:
        return request_id(client._take(lambda line: opened(line) and request_id(line) not in seen, 0.3))
    except TimeoutError:
        return "nope"


def _play(client: WireClient, actions: list[tuple[Any, ...]], work: str) -> set[tuple[str, str]]:
    """Run ``actions``, each waiting for its reply; returns the (session, prompt id) pairs dequeued."""
    opened: list[str] = []
    prompts: dict[str, list[str]] = {}
    queued: dict[str, list[str]] = {}
    dequeued: set[tuple[str, str]] = set()
    for action in actions:
        name = action[0]
        if name == "open":
            reply = client.request("open", agent="mock", dir=work)
            opened.append(reply["ok"]["id"])
        elif name == "prompt":
            session = _session(opened, action[1])
            reply = client.request("prompt", session=session, text="go")
            if "ok" in reply:
                prompts.setdefault(session, []).append(reply["ok"]["prompt_id"])
                if "Queued" in reply["ok"]["kind"]:
                    queued.setdefault(session, []).append(reply["ok"]["prompt_id"])
        elif name == "dequeue":
            session = _session(opened, action[1])
            known = queued.get(session) or prompts.get(session) or ["p1"]  # mostly prompts that were queued
            prompt = known[action[2] % len(known)]
            if "ok" in client.request("dequeue", session=session, prompt=prompt):
                dequeued.add((session, prompt))
        elif name == "answer":
            session = _session(opened, action[1])
            client.request("answer", session=session, request=_open_request(client, session), answer=action[2])
        elif name == "cancel":
            client.request("cancel", session=_session(opened, action[1]), clear_queue=action[2])
        elif name == "configure":
            client.request("configure", session=_session(opened, action[1]), option="model", value=action[2])
        elif name in ("info", "close"):
            client.request(name, session=_session(opened, action[1]))
        elif name == "wait":
            time.sleep(action[1])
        elif name == "generate":
            client.request("generate", agent="mock", dir=work, prompt="one shot")
        elif name == "junk":
            client.send_raw(action[1].replace(b"\n", b" ") + b"\n")
            if expected_reply(action[1].replace(b"\n", b" ")) is None:
                client.reply(None)
    return dequeued


def check_sessions(lines: list[dict[str, Any]], dequeued: set[tuple[str, str]]) -> None:
    """The per-session invariants over every line a server wrote (see the module docstring)."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if (session := session_of(line)) is not None:
            by_session.setdefault(session, []).append(line)
    for session, own in by_session.items():
        assert own[-1] == {"closed": session}, (session, own[-3:])
        events = [line["event"] for line in own if "event" in line]
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1)), session
        turn: str | None = None
        open_requests: set[str] = set()
        for event in events:
            kind = event["kind"]
            tag = kind if isinstance(kind, str) else next(iter(kind))
            info = event["turn_info"]
            if tag == "TurnStarted":
                assert turn is None, f"{session}: turn {info['id']} started inside turn {turn}"
                turn = info["id"]
                origin = kind["TurnStarted"]["origin"]
                if isinstance(origin, dict):
                    assert (session, origin["Prompt"]) not in dequeued, f"{session}: dequeued {origin} started"
            elif info is not None:
                assert info["id"] == turn, f"{session}: {tag} of turn {info['id']} while {turn} runs"
            if tag == "RequestOpened":
                open_requests.add(next(iter(kind["RequestOpened"].values()))["id"])
            elif tag == "RequestClosed":
                open_requests.discard(kind["RequestClosed"]["request_id"])
            elif tag == "TurnEnded":
                assert turn is not None, f"{session}: TurnEnded outside a turn"
                assert not open_requests, f"{session}: requests {open_requests} open at TurnEnded"
                turn = None


# Every session's whole script, with a prompt queued behind the permission request and then dequeued.
WHOLE_SCRIPT = [
    ("prompt", 0),
    ("dequeue", 0, 1),
    ("answer", 0, {"Permission": "AllowOnce"}),
    ("wait", 0.06),
    ("prompt", 0),
    ("wait", 0.06),
    ("prompt", 0),
    ("wait", 0.02),
    ("answer", 0, {"Question": [{"Text": "free"}]}),
    ("prompt", 0),
    ("wait", 0.06),
    ("prompt", 0),
    ("wait", 0.06),
    ("open",),
    ("prompt", 1),
    ("cancel", 1, True),
    ("close", 1),
]


@settings(FUZZ, max_examples=30)
@given(actions=st.lists(action(), min_size=4, max_size=24))
@example(actions=WHOLE_SCRIPT)
def test_fuzzed_command_sequences_keep_the_session_invariants(
    script_path: str, work_dir: str, actions: list[tuple[Any, ...]]
) -> None:
    client = WireClient("--mock", script_path, timeout=20)
    try:
        # Every run starts with a session whose first turn waits for an answer, and a second prompt queued behind it.
        dequeued = _play(client, [("open",), ("prompt", 0), *actions], work_dir)
        client.close_stdin()
        assert client.wait(30) == 0, client.stderr[-2000:]
    finally:
        client.close()
    assert "Traceback" not in client.stderr, client.stderr[-3000:]
    sent = {i for i, frame in client.sent.items() if isinstance(i, int)}
    replies = [line["id"] for line in client.lines if "id" in line and line["id"] is not None]
    assert sorted(replies) == sorted(sent), "every command gets exactly one reply"
    check_sessions(client.lines, dequeued)
    tags = {kind_tag(line) for line in client.lines if "event" in line}
    for reached in ("RequestOpened", "RequestClosed", "ToolUpdated", "TurnEnded"):
        if reached in tags:
            note_reached(f"reached {reached}")
    if dequeued:
        note_reached("a prompt was dequeued")
    if any("session" in line for line in client.lines):
        note_reached("a session failed (the agent died)")


def test_the_invariant_checker_catches_violations() -> None:
    def event(seq: int, kind: Any, turn: str | None = "t1") -> dict[str, Any]:
        info = {"id": turn, "parent_tool_id": None} if turn else None
        return {"event": {"sequence": seq, "session_id": "s1", "turn_info": info, "kind": kind}}

    started = {"TurnStarted": {"origin": {"Prompt": "p1"}}}
    ended = {"TurnEnded": {"stop": "Cancelled", "background": []}}
    good = [event(1, started), event(2, ended), {"closed": "s1"}]
    check_sessions(good, set())
    bad_cases = [
        ([event(1, started), event(3, ended), {"closed": "s1"}], set()),  # sequence skips
        ([event(1, started), event(2, started), {"closed": "s1"}], set()),  # nested
        (
            [
                event(1, started),
                event(2, {"RequestOpened": {"Permission": {"id": "r"}}}),
                event(3, ended),
                {"closed": "s1"},
            ],
            set(),
        ),  # request open at TurnEnded
        (good, {("s1", "p1")}),  # a dequeued prompt started
        ([event(1, started), event(2, ended)], set()),  # no closed
    ]
    for lines, dequeued in bad_cases:
        with pytest.raises(AssertionError):
            check_sessions(lines, dequeued)


def test_generated_lines_cover_the_shapes(work_dir: str) -> None:
    # The strategy reaches every kind of expectation: fresh ids, null-id BadFrames and blank lines.
    seen: set[str] = set()

    @settings(FUZZ, max_examples=150)
    @given(frames(work_dir))
    def collect(line: bytes) -> None:
        expected = expected_reply(line.replace(b'"fresh"', b"1"))
        seen.add("blank" if expected is NO_REPLY else "null" if expected is None else "id")

    collect()
    assert seen == {"blank", "null", "id"}, seen
    assert Path(work_dir).is_dir()
