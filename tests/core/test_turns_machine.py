"""The turn rules (:mod:`anyagentd.engine.turns`) driven alone, without a session, an adapter or an event loop.

A hypothesis property test plays random report sequences (prompts held or steerable, acks, deltas and other events,
turn ends, steer answers, answers, cancels, the quiet timer, compact, promotion, dequeues, the primary reader's
lag), with the I/O the machine asks for (StartTurn, Steer, Cancel, an answer, compact) completing, succeeding or
failing at random points in between, and the cancel deadlines firing at random; then the session shuts down.
Every output is checked against the invariants ``tests/core/test_wire_fuzz.py`` checks on the wire (turns are not
nested, an event's ``turn_info`` is the running turn's, every request is closed before its turn's ``TurnEnded``,
a dequeued prompt never starts), and more that the wire cannot see:

- every turn that starts ends exactly once, after its ``TurnStarted``; none is open after the shutdown;
- no prompt is lost or doubled: at every step each prompt is in exactly one place (started, steered into a turn,
  queued, its steer in flight, dequeued, dropped by ``cancel(clear_queue)`` or by the shutdown);
- at most one steer in flight; requests closed at most once; messages ended before their turn's end;
- before a prompted turn is acknowledged, none of the agent's content is attributed to it;
- a ``Failed`` end the agent reports after a cancel reads ``Cancelled``;
- ``StatusChanged`` only on a change, and the status is the rule's (``docs/engine.md#status``);
- nothing starts after the shutdown, and the commands raise ``SessionClosed``.

The machine checks each move against :data:`~anyagentd.engine.turns.MOVES` itself (``TurnStateError``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anyagentd.engine import turns as T
from anyagentd.errors import AnyagentError, InvalidRequest, SessionBusy, SessionClosed
from anyagentd.model import EVENT_KIND, STOP_REASON, AnswerPermission, kind_tag

TOOL = {"kind": "Read", "title": "read", "input": "None", "output": None, "diffs": [], "locations": [], "raw": None}


def _kind(data: dict[str, Any]) -> Any:
    return EVENT_KIND.validate_python(data)


EVENTS = [
    _kind({"TextDelta": {"message_id": "m1", "text": "a"}}),
    _kind({"TextDelta": {"message_id": "m2", "text": "b"}}),
    _kind({"ReasoningDelta": {"message_id": "m3", "text": "c"}}),
    _kind({"MessageEnded": {"message_id": "m1"}}),
    _kind({"ToolUpdated": {"id": "tool1", "status": "Running", **TOOL}}),
    _kind({"ToolUpdated": {"id": "tool1", "status": "Completed", **TOOL}}),
    _kind({"ToolUpdated": {"id": "tool2", "status": "Failed", **TOOL}}),
    _kind(
        {
            "RequestOpened": {
                "Permission": {
                    "id": "req1",
                    "options": ["AllowOnce", "DenyOnce"],
                    "detail": None,
                    "tool": {"id": "tool3", "status": "Pending", **TOOL},
                }
            }
        }
    ),
    _kind(
        {
            "RequestOpened": {
                "Question": {
                    "id": "req2",
                    "questions": [
                        {
                            "id": "q1",
                            "text": "?",
                            "header": None,
                            "multi_select": False,
                            "allows_free_text": True,
                            "choices": [],
                        }
                    ],
                }
            }
        }
    ),
    _kind({"Diagnostic": {"level": "Info", "message": "hello"}}),
    _kind({"StatusChanged": "Working"}),  # engine-owned: dropped
]
STOPS = [
    STOP_REASON.validate_python({"Completed": {"source": "Protocol"}}),
    STOP_REASON.validate_python({"Failed": {"message": "agent failed"}}),
]
CONTENT = {"TextDelta", "ReasoningDelta", "UserMessage", "RequestOpened"}

REPORT = st.one_of(
    st.tuples(st.just("prompt"), st.booleans(), st.booleans()),
    st.tuples(st.just("prompt"), st.just(False), st.just(True)),
    st.just(("ack",)),
    st.tuples(st.just("delta"), st.integers(0, 2)),
    st.tuples(st.just("event"), st.integers(0, len(EVENTS) - 1), st.booleans()),
    st.tuples(st.just("turn_ended"), st.integers(0, 1)),
    st.tuples(st.just("steered"), st.booleans()),
    st.tuples(st.just("answer"), st.sampled_from(["req1", "req2", "nope"]), st.booleans()),
    st.tuples(st.just("cancel"), st.booleans()),
    st.just(("quiet",)),
    st.just(("compact",)),
    st.tuples(st.just("promote"), st.booleans(), st.booleans()),
    st.tuples(st.just("dequeue"), st.integers(1, 8)),
    st.tuples(st.just("complete"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("grace"), st.integers(0, 3)),
    st.just(("lag",)),
)


class Driver:
    """Plays reports into one :class:`~anyagentd.engine.turns.Turns` the way ``Session`` does, keeps the I/O it
    asked for in flight, and checks every output as it comes."""

    def __init__(self, deterministic: tuple[bool, bool]) -> None:
        self.m = T.Turns()
        self.m.deterministic = deterministic
        self.stream: list[tuple[str, Any, Any]] = []  # (tag, kind, turn_info) of every event emitted
        self.in_flight: list[tuple[Any, ...]] = []
        self.timers: list[str] = []  # turn ids with a cancel deadline running
        self.issued: list[str] = []
        self.started: list[str] = []
        self.steered: list[str] = []
        self.dequeued: list[str] = []
        self.dropped: list[str] = []
        self.steer_pending: str | None = None  # a steer sent and not settled
        self.turn: str | None = None  # the running turn as the stream shows it
        self.turns_ended: list[str] = []
        self.turns_started: list[str] = []
        self.unacked: str | None = None  # a prompted turn the driver has not acknowledged
        self.open_requests: set[str] = set()
        self.open_messages: set[str] = set()
        self.status = "Idle"
        self.cancelled: set[str] = set()
        self.shut = False

    # ------------------------------------------------------------------------ outputs

    def perform(self, out: list[Any]) -> Any:
        action = None
        for index, item in enumerate(out):
            if isinstance(item, T.Emit):
                self.emitted(item.kind, item.turn_info)
            elif isinstance(item, T.NotePrompt):
                if item.steered:
                    assert self.steer_pending == item.prompt.prompt_id
                    self.steered.append(item.prompt.prompt_id)
            elif isinstance(item, T.SettleSteer):
                assert self.steer_pending is not None, "a steer settled that was not in flight"
                if item.error is not None:
                    assert isinstance(item.error, SessionClosed) and self.shut
                    self.dropped.append(self.steer_pending)
                self.steer_pending = None
            elif isinstance(item, T.TurnOpened):
                assert self.turn is None or self.turn == item.turn_id
            elif isinstance(item, T.TurnClosed):
                assert self.turns_ended[-1] == item.turn_id
            elif isinstance(item, (T.Rearm, T.NoteAnswer)):
                pass
            else:
                assert index == len(out) - 1, f"the action {item} is not last"
                action = item
        return action

    def emitted(self, kind: Any, info: Any) -> None:
        tag = kind_tag(kind)
        self.stream.append((tag, kind, info))
        if tag == "TurnStarted":
            assert not self.shut, "a turn started after the shutdown"
            assert self.turn is None, f"turn {info.id} started inside {self.turn}"
            assert info.id not in self.turns_started, "a turn id reused"
            self.turn = info.id
            self.turns_started.append(info.id)
            origin = kind.origin
            if origin != "Agent":
                assert origin.value not in self.dequeued, "a dequeued prompt started"
                assert origin.value not in self.started, "a prompt started twice"
                self.started.append(origin.value)
                self.unacked = info.id
            return
        if tag == "StatusChanged":
            assert kind.value != self.status, "StatusChanged without a change"
            self.status = kind.value
            return
        if info is None:
            assert tag not in CONTENT, f"{tag} outside a turn"
            return
        assert info.id == self.turn, f"{tag} of turn {info.id} while {self.turn} runs"
        if self.unacked == self.turn:
            assert tag not in CONTENT, f"{tag} attributed to the unacknowledged turn {self.turn}"
        if tag == "RequestOpened":
            request_id = kind.value.value.id
            self.open_requests.add(request_id)
        elif tag == "RequestClosed":
            assert kind.request_id in self.open_requests, f"request {kind.request_id} closed twice or never open"
            self.open_requests.discard(kind.request_id)
        elif tag in ("TextDelta", "ReasoningDelta"):
            self.open_messages.add(kind.message_id)
        elif tag == "MessageEnded":
            self.open_messages.discard(kind.message_id)
        elif tag == "TurnEnded":
            assert not self.open_requests, f"requests {self.open_requests} open at TurnEnded"
            assert not self.open_messages, f"messages {self.open_messages} open at TurnEnded"
            self.turns_ended.append(info.id)
            self.turn = None
            self.unacked = None

    def action(self, action: Any) -> None:
        if isinstance(action, T.StartTurn):
            assert not self.shut
            self.in_flight.append(("start", action.turn_id))
        elif isinstance(action, T.SendSteer):
            assert not self.shut
            assert self.steer_pending is None, "two steers in flight"
            self.steer_pending = action.prompt.prompt_id
            self.in_flight.append(("steer", action.prompt))
        elif isinstance(action, T.ForwardCancel):
            assert not self.shut
            self.in_flight.append(("cancel", action))
        elif isinstance(action, T.AutoApprove):
            assert action.request.value.id not in self.open_requests
        elif isinstance(action, T.Enqueued):
            position = action.delivery.kind.position
            assert [p.prompt_id for p in self.m.queue][position] == action.delivery.prompt_id
        else:
            assert action is None, action

    # ------------------------------------------------------------------------ reports

    def play(self, report: tuple[Any, ...]) -> None:
        m = self.m
        name = report[0]
        if name == "prompt":
            try:
                out = m.prompt(f"text {len(self.issued)}", held=report[1], can_steer=report[2])
            except SessionClosed:
                assert self.shut
                return
            action = self.perform(out)
            prompt_id = action.prompt.prompt_id if not isinstance(action, T.Enqueued) else action.delivery.prompt_id
            self.issued.append(prompt_id)
            self.action(action)
        elif name == "ack":
            m.ack()
            if self.unacked is not None and m.turn is not None and m.turn.id == self.unacked:
                self.unacked = None
        elif name == "delta":
            kind = EVENTS[report[1]]
            context = m.delta(kind, None)
            if context is None:
                self.action(self.perform(m.event(kind)))
            else:
                self.emitted(kind, context)
        elif name == "event":
            self.action(self.perform(m.event(EVENTS[report[1]], None, None, auto_approve=report[2])))
        elif name == "turn_ended":
            running, before = m.turn, len(self.stream)
            self.perform(m.turn_ended(STOPS[report[1]]))
            ends = [k for tag, k, _ in self.stream[before:] if tag == "TurnEnded"]
            if ends and running is not None and running.id in self.cancelled:
                assert kind_tag(ends[-1].stop) != "Failed", "a Failed end after a cancel must read Cancelled"
        elif name == "steered":
            self.perform(m.steered(report[1]))
        elif name == "answer":
            self.answer(report[1], report[2])
        elif name == "cancel":
            try:
                if report[1]:
                    queued = [p.prompt_id for p in m.queue]
                out = m.cancel(report[1])
            except SessionClosed:
                assert self.shut
                return
            if report[1]:
                self.dropped += queued
            if m.turn is not None:
                self.cancelled.add(m.turn.id)
            self.action(self.perform(out))
        elif name == "quiet":
            if self.perform(m.quiet_expired()) is None and not self.shut:
                self.promote(False, False)
        elif name == "compact":
            try:
                turn_id, out = m.compact()
            except SessionBusy:
                assert m.turn is not None
                return
            except SessionClosed:
                assert self.shut
                return
            self.perform(out)
            self.in_flight.append(("compact", turn_id))
        elif name == "promote":
            self.promote(report[1], report[2])
        elif name == "dequeue":
            prompt_id = f"p{report[1]}"
            try:
                self.perform(m.dequeue(prompt_id))
            except InvalidRequest:
                assert prompt_id not in [p.prompt_id for p in m.queue]
            except SessionClosed:
                assert self.shut
            else:
                self.dequeued.append(prompt_id)
        elif name == "complete" and self.in_flight:
            self.complete(self.in_flight.pop(report[1] % len(self.in_flight)), report[2])
        elif name == "grace" and self.timers:
            turn_id = self.timers.pop(report[1] % len(self.timers))
            if self.perform(m.grace_expired(turn_id, 5.0)) is None and not self.shut:
                self.promote(False, False)
        elif name == "lag":
            m.closing = True
        self.check()

    def promote(self, held: bool, waiting: bool) -> None:
        self.action(self.perform(self.m.promote(held=held, reports_waiting=waiting)))

    def answer(self, request_id: str, fits: bool) -> None:
        def check(request: Any) -> None:
            if not fits:
                raise InvalidRequest("does not fit")

        try:
            turn, request = self.m.take_request(request_id, check)
        except InvalidRequest:
            assert request_id not in self.open_requests or not fits
            return
        except SessionClosed:
            assert self.shut
            return
        self.in_flight.append(("answer", turn, request_id, request))

    def complete(self, flight: tuple[Any, ...], ok: bool) -> None:
        m = self.m
        what = flight[0]
        if what == "start" and not ok:
            self.perform(m.start_failed(flight[1], "could not start"))
        elif what == "compact" and not ok:
            self.perform(m.start_failed(flight[1], "could not compact"))
        elif what == "steer" and not ok:
            prompt = flight[1]
            if self.steer_pending == prompt.prompt_id:  # as Session: a steer settled meanwhile keeps its delivery
                self.steer_pending = None
                self.action(self.perform(m.steer_failed(prompt)))
        elif what == "cancel" and ok:
            grace = self.perform(m.cancel_sent(flight[1]))
            if isinstance(grace, T.StartGrace):
                self.timers.append(grace.turn_id)
        elif what == "answer":
            _, turn, request_id, request = flight
            if ok:
                self.perform(m.answered(turn, request_id, AnswerPermission(value="AllowOnce")))
            else:
                m.answer_failed(turn, request_id, request)

    # ------------------------------------------------------------------------ invariants after every step

    def check(self) -> None:
        m = self.m
        queued = [p.prompt_id for p in m.queue]
        steering = [self.steer_pending] if self.steer_pending is not None else []
        places = self.started + self.steered + self.dequeued + self.dropped + queued + steering
        assert sorted(places) == sorted(self.issued), f"prompts lost or doubled: {places} vs {self.issued}"
        assert (m.turn.id if m.turn else None) == self.turn, "the machine's turn is not the stream's"
        if m.turn is not None:
            expected = "NeedsInput" if m.turn.open_requests else "Working"
        else:
            expected = "Working" if m.queue else "Idle"
        assert m.status == expected == self.status, (m.status, expected, self.status)
        assert m.phase in T.PHASES

    def shutdown(self, stop: Any) -> None:
        queued = [p.prompt_id for p in self.m.queue]
        self.shut = True
        self.dropped += queued
        self.perform(self.m.shutdown(stop))
        self.check()
        assert self.turn is None and sorted(self.turns_ended) == sorted(self.turns_started)
        assert len(set(self.turns_ended)) == len(self.turns_ended), "a turn ended twice"
        # Nothing after close: late reports change nothing, commands are refused.
        before = len(self.stream)
        for report in (
            ("event", 0, False),
            ("ack",),
            ("turn_ended", 0),
            ("steered", True),
            ("quiet",),
            ("promote", False, False),
            ("prompt", False, True),
            ("cancel", True),
            ("compact",),
            ("dequeue", 1),
            ("answer", "req1", True),
        ):
            self.play(report)
        assert all(tag not in CONTENT and tag != "TurnStarted" for tag, _, _ in self.stream[before:])
        while self.in_flight:
            self.complete(self.in_flight.pop(), False)
            self.check()
        for turn_id in self.timers:
            assert self.m.grace_expired(turn_id, 5.0) == []
        assert self.m.phase == "closed"


@settings(derandomize=True, database=None, deadline=None, max_examples=600, print_blob=False)
@given(
    reports=st.lists(REPORT, max_size=60),
    deterministic=st.tuples(st.booleans(), st.booleans()),
    stop=st.sampled_from(["Cancelled", STOPS[1]]),
)
def test_random_reports_keep_the_turn_invariants(
    reports: list[tuple[Any, ...]], deterministic: tuple[bool, bool], stop: Any
) -> None:
    driver = Driver(deterministic)
    for report in reports:
        driver.play(report)
    driver.shutdown(stop)


def test_the_moves_table_covers_every_phase_and_report() -> None:
    assert set(T.MOVES) == set(T.PHASES)
    for phase, row in T.MOVES.items():
        assert set(row) == set(T.REPORTS), phase
        for report, targets in row.items():
            assert targets <= set(T.PHASES), (phase, report)
    assert T.MOVES["closed"]["shutdown"] == {"closed"}
    assert all(T.MOVES[phase]["shutdown"] == {"closed"} for phase in T.PHASES)
    refused = {(phase, report) for phase, row in T.MOVES.items() for report, targets in row.items() if not targets}
    assert refused == {("closed", r) for r in ("prompt", "answer", "cancel", "compact", "dequeue")} | {
        (phase, "compact") for phase in ("unacked", "running", "cancelling_unacked", "cancelling")
    }


def test_a_move_the_table_lacks_is_a_state_error(monkeypatch: pytest.MonkeyPatch) -> None:
    moves = {phase: dict(row) for phase, row in T.MOVES.items()}
    moves["idle"]["prompt"] = frozenset({"idle"})  # a table that forbids starting a turn
    monkeypatch.setattr(T, "MOVES", moves)
    with pytest.raises(T.TurnStateError, match="prompt moved the session from idle to unacked"):
        T.Turns().prompt("hi", held=False, can_steer=False)


def test_the_machine_is_pure() -> None:
    """No awaits, no I/O: the module imports neither anyio nor the adapters, and defines no coroutine."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(T))
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [name for name in imported if "anyio" in name or "adapters" in name or "asyncio" in name], imported
    assert not any(isinstance(n, (ast.AsyncFunctionDef, ast.Await)) for n in ast.walk(tree))
    assert not any(inspect.iscoroutinefunction(f) for _, f in inspect.getmembers(T.Turns, inspect.isfunction))


def test_every_prompt_error_is_typed() -> None:
    m = T.Turns()
    m.shutdown("Cancelled")
    for call in (
        lambda: m.prompt("x", held=False, can_steer=False),
        lambda: m.cancel(),
        m.compact,
        lambda: m.dequeue("p1"),
        lambda: m.take_request("r", lambda r: None),
    ):
        with pytest.raises(SessionClosed) as caught:
            call()
        assert isinstance(caught.value, AnyagentError)
