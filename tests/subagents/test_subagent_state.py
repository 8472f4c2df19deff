"""The subagent status rules (``anyagentd_a2a.subagents.state``), in process and without I/O: the sets, every move
the table allows or refuses, a property test driving random move sequences through ``move``, the predicates the
manager asks; that the command schema and ``docs/commands.md#subagents`` name the same statuses; that the package
writes those sets and a record's status nowhere else; and that the manager keeps a kill that came while a session
opened (the one path where it used to move an ended record)."""

from __future__ import annotations

import ast
import itertools
import json
from importlib import resources
from pathlib import Path
from typing import Any, get_args

import anyio
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anyagentd_a2a
from anyagentd.errors import SpawnFailed
from anyagentd_a2a.subagents import state as rules
from anyagentd_a2a.subagents.manager import Subagent, SubagentLimits, SubagentManager

ROOT = Path(__file__).resolve().parents[2]
EVERY = list(get_args(rules.Status))

# Written out here, not read from the module: what each status may be followed by (the manager's writes).
ALLOWED: dict[str, set[str]] = {
    "pending": {"running", "failed", "cancelled"},
    "running": {"running", "idle", "completed", "failed", "cancelled"},
    "idle": {"running", "cancelled"},
    "completed": set(),
    "failed": set(),
    "cancelled": set(),
}


# ------------------------------------------------------------------------------------------------ the table


def test_the_sets_split_every_status() -> None:
    assert rules.STATUSES == ("pending", "running", "idle", "completed", "failed", "cancelled")
    assert {"completed", "failed", "cancelled"} == rules.TERMINAL
    assert {"pending", "running"} == rules.LIVE
    assert set(EVERY) - rules.LIVE - rules.TERMINAL == {"idle"} and not rules.LIVE & rules.TERMINAL
    assert rules.REPORTED == ("completed", "failed", "cancelled")  # a refusal names them in this order


def test_the_table_holds_every_status_and_only_statuses() -> None:
    assert set(rules.MOVES) == set(EVERY)
    for current, following in rules.MOVES.items():
        assert following <= set(EVERY), current


def test_a_terminal_status_has_no_move_and_every_other_has_one() -> None:
    for status in EVERY:
        assert (rules.MOVES[status] == frozenset()) == (status in rules.TERMINAL), status


def test_every_status_is_reached_from_pending_and_every_one_can_end() -> None:
    reached: set[rules.Status] = {"pending"}
    todo: list[rules.Status] = ["pending"]
    while todo:
        for new in rules.MOVES[todo.pop()]:
            if new not in reached:
                reached.add(new)
                todo.append(new)
    assert reached == set(EVERY)
    for status in set(EVERY) - rules.TERMINAL:
        assert rules.MOVES[status] & rules.TERMINAL, f"{status} cannot end"


@pytest.mark.parametrize("current,new", list(itertools.product(EVERY, EVERY)))
def test_every_move_is_allowed_or_refused_naming_both(current: rules.Status, new: rules.Status) -> None:
    if new in ALLOWED[current]:
        assert rules.move(current, new) == new
        return
    with pytest.raises(rules.MoveRefused) as refused:
        rules.move(current, new)
    assert (refused.value.current, refused.value.new) == (current, new)
    assert str(refused.value) == f"a subagent cannot go from {current} to {new}"
    assert isinstance(refused.value, rules.StateError) and isinstance(refused.value, ValueError)


def test_a_word_that_is_no_status_has_no_move_and_is_no_target() -> None:
    stranger: Any = "waiting"
    with pytest.raises(rules.MoveRefused, match="from waiting to running"):
        rules.move(stranger, "running")
    with pytest.raises(rules.MoveRefused, match="from pending to waiting"):
        rules.move("pending", stranger)


WORDS = st.sampled_from([*EVERY, "waiting", "done", "", "Running"])


@settings(derandomize=True, database=None, deadline=None, max_examples=400, print_blob=False)
@given(st.sampled_from(EVERY), st.lists(WORDS, max_size=40))
def test_random_moves_stay_inside_status_and_end_for_good(start: rules.Status, proposed: list[Any]) -> None:
    """From any status, propose random words (statuses and strangers) one after another; keep each ``move`` takes.
    What it takes is a status the table allows from the current one, and once the record ended every proposal is
    refused, naming both words, the current status unchanged."""
    current: rules.Status = start
    path = [current]
    for new in proposed:
        was_ended = rules.ended(current)
        try:
            current = rules.move(current, new)
        except rules.MoveRefused as refused:
            assert (refused.current, refused.new) == (current, new)
            assert new not in rules.MOVES[current]
            continue
        assert not was_ended, f"{path[-1]} ended, yet moved to {new}"
        assert current in EVERY and current in rules.MOVES[path[-1]]
        path.append(current)
    assert all(status in EVERY for status in path)
    assert all(not rules.ended(status) for status in path[:-1])  # only the last may have ended


# ------------------------------------------------------------------------------------------------ predicates


def test_the_predicates_the_manager_asks() -> None:
    assert [s for s in EVERY if rules.ended(s)] == ["completed", "failed", "cancelled"]
    assert [s for s in EVERY if rules.counts_against_limit(s)] == ["pending", "running"]
    assert [s for s in EVERY if rules.takes_message(s)] == ["idle"]


@pytest.mark.parametrize("mode", ["sync", "async", "detached", "warm"])
@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
def test_what_a_turn_leaves(mode: str, outcome: rules.Status) -> None:
    expected = "idle" if (mode, outcome) == ("warm", "completed") else outcome
    assert rules.after_turn(mode, outcome) == expected
    assert rules.move("running", rules.after_turn(mode, outcome)) == expected  # the move _end_turn makes


@pytest.mark.parametrize("mode", ["sync", "async", "detached", "warm"])
def test_what_shows_a_completed_turn(mode: str) -> None:
    assert [s for s in EVERY if rules.answered(mode, s)] == (["idle"] if mode == "warm" else ["completed"])


def test_what_a_restart_does() -> None:
    assert {s: rules.on_restart(s) for s in EVERY} == {
        "pending": "failed",
        "running": "failed",
        "idle": "idle",
        "completed": "completed",
        "failed": "failed",
        "cancelled": "cancelled",
    }
    for status in rules.LIVE:
        assert rules.move(status, rules.on_restart(status)) == "failed"


# ------------------------------------------------------------------------------------------------ where the words come from


def _schema() -> dict[str, Any]:
    return json.loads((resources.files("anyagentd") / "schema" / "agentd-command.schema.json").read_text())


def test_the_command_schema_takes_every_status_and_names_no_other() -> None:
    """``subagent.status`` and ``subagent.get`` show a record's status: the schema types it without an enum today
    (a string, or anything). Every status validates against it, and should the schema name an enum, it is
    :data:`Status` exactly. The vendored schema is the shared spec's copy."""
    ops = _schema()["$defs"]["ops"]
    shapes = {
        "subagent.status": ops["subagent.status"]["result"]["properties"]["status"],
        "subagent.get": ops["subagent.get"]["result"]["properties"]["subagent"]["properties"]["status"],
    }
    for op, shape in shapes.items():
        if isinstance(shape, dict) and "enum" in shape:
            assert sorted(shape["enum"]) == sorted(EVERY), op
        for status in EVERY:
            jsonschema.validate(status, shape)
    shared = ROOT.parent / "shared" / "spec" / "agentd-command.schema.json"
    if shared.is_file():
        assert json.loads(shared.read_text()) == _schema()


def test_the_docs_name_every_status_and_the_module() -> None:
    page = (ROOT / "docs" / "commands.md").read_text()
    section = page.split("## Subagents", 1)[1].split("\n## ", 1)[0]
    for status in EVERY:
        assert f"`{status}`" in section, status
    assert "anyagentd_a2a.subagents.state" in section and "`MOVES`" in section


# ------------------------------------------------------------------------------------------------ one owner

PACKAGE = Path(anyagentd_a2a.__file__).parent
OWNER = PACKAGE / "subagents" / "state.py"


def status_collections(source: str) -> list[tuple[int, list[str]]]:
    """Every tuple, list or set literal (``Literal[...]`` included) and every dict's keys in ``source`` made only of
    two or more subagent status words: (line, the words). Run and step statuses share some words, but their sets
    hold others (``suspended``, ``refused``, ``timeout``), so they are not counted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items: list[ast.expr | None] = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        else:
            continue
        words = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        if len(words) >= 2 and len(words) == len(items) and set(words) <= set(EVERY):
            found.append((node.lineno, words))
    return found


def test_the_status_sets_are_written_only_by_their_owner() -> None:
    copies = {
        str(path.relative_to(PACKAGE)): [words for _, words in status_collections(path.read_text())]
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != OWNER
    }
    assert {path: words for path, words in copies.items() if words} == {}
    assert any(set(words) == set(EVERY) for _, words in status_collections(OWNER.read_text()))  # the owner does


def test_the_scan_finds_the_copies_it_is_for() -> None:
    old = (
        'Status = Literal["pending", "running", "idle", "completed", "failed", "cancelled"]\n'
        'TERMINAL = frozenset({"completed", "failed", "cancelled"})\n'
        'REPORTED = ("completed", "failed", "cancelled")\n'
        'busy = s.status in ("pending", "running")\n'
        'one = record.status not in ("idle",)\n'
        'RUN = frozenset({"completed", "failed", "refused", "cancelled", "stalled"})\n'
        'ACTIVE = frozenset({"running", "suspended"})\n'
    )
    assert sorted(line for line, _ in status_collections(old)) == [1, 2, 3, 4]


def test_only_the_record_writes_its_status_and_through_move() -> None:
    """In the subagents package a record's ``status`` is assigned in one place, :meth:`Subagent.moved`, and from
    :func:`.state.move`; every other write is ``moved(...)``."""
    writes = []
    for path in sorted((PACKAGE / "subagents").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign | ast.AugAssign)
                else []
            )
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Attribute) and leaf.attr == "status":
                        writes.append((path.name, ast.unparse(node)))
    assert writes == [("manager.py", "self.status = move(self.status, status)")]


# ------------------------------------------------------------------------------------------------ the manager


class _Session:
    """A session that opens and closes; a turn on it would be a bug here (``prompt`` records it)."""

    def __init__(self) -> None:
        self.closed = False
        self.prompts: list[str] = []

    def info(self) -> Any:
        return type("Info", (), {"resume_token": "tok"})()

    async def prompt(self, message: str) -> None:
        self.prompts.append(message)
        raise AssertionError("no turn runs on a killed subagent")

    async def close(self) -> None:
        self.closed = True


class _Runtime:
    """``open`` waits for ``gate``, then returns a session, or raises ``SpawnFailed`` when ``fails``."""

    def __init__(self, *, fails: bool = False) -> None:
        self.gate = anyio.Event()
        self.asked = anyio.Event()
        self.fails = fails
        self.opened: list[_Session] = []

    async def open(self, agent: Any, directory: Path, **options: Any) -> _Session:
        self.asked.set()
        await self.gate.wait()
        if self.fails:
            raise SpawnFailed("no agent here")
        session = _Session()
        self.opened.append(session)
        return session


async def _killed_while_opening(manager: SubagentManager, runtime: _Runtime, record: Subagent) -> None:
    with anyio.fail_after(5):
        await runtime.asked.wait()
    await manager.kill(record.handle, "user:alice", "stop")
    assert (record.status, record.error) == ("cancelled", "stop") and record.done.is_set()
    runtime.gate.set()
    with anyio.fail_after(5):
        while not runtime.fails and not (runtime.opened and runtime.opened[0].closed):
            await anyio.sleep(0.01)
    for _ in range(20):
        await anyio.sleep(0)  # let a turn that would wrongly start do so
    assert (record.status, record.error) == ("cancelled", "stop")
    assert record.session is None and record.attempts == 0
    assert all(session.prompts == [] for session in runtime.opened)


@pytest.mark.anyio
@pytest.mark.parametrize("fails", [False, True], ids=["opens", "fails"])
async def test_a_kill_while_the_first_session_opens_is_kept(tmp_path: Path, fails: bool) -> None:
    runtime = _Runtime(fails=fails)
    manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.serve)
        record = await manager.spawn("user:alice", "mock", "hello", "async")
        await _killed_while_opening(manager, runtime, record)
        tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("fails", [False, True], ids=["opens", "fails"])
async def test_a_kill_while_a_warm_session_reopens_is_kept(tmp_path: Path, fails: bool) -> None:
    runtime = _Runtime(fails=fails)
    manager = SubagentManager(runtime, SubagentLimits(), work_root=tmp_path)
    record = Subagent("sa-1", "warm", "user:alice", "mock", "hello", status="idle", resume_token="tok")
    manager.adopt([record])  # as a restart leaves a warm one: idle, no session
    async with anyio.create_task_group() as tg:
        await tg.start(manager.serve)
        await manager.send(record.handle, "user:alice", "more", wait=False)
        assert record.status == "running"
        await _killed_while_opening(manager, runtime, record)
        tg.cancel_scope.cancel()
