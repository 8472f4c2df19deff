"""Ownership is decided in one place (issue 25): every "the operator, or the principal whose id owns it" in the A2A
package and in core calls :func:`anyagentd.ops.owns` (or its filter form :func:`anyagentd.ops.owner_scope`), none
writes the rule by hand; and the ops read the daemon's services only through the typed
:class:`~anyagentd_a2a.command.face.CommandFace`, which declares every one they use (no ``getattr(face, …)``).
Source scans, in the manner of ``test_a2a_task_state.py``'s."""

from __future__ import annotations

import ast
from pathlib import Path

import anyagentd
import anyagentd_a2a
from anyagentd_a2a.command.face import CommandFace
from anyagentd_a2a.instance import Instance
from anyagentd_a2a.logring import LogRing

PACKAGE = Path(anyagentd_a2a.__file__).parent
CORE = Path(anyagentd.__file__).parent
OWNER = CORE / "ops" / "registry.py"
SOURCES = [p for root in (PACKAGE, CORE) for p in sorted(root.rglob("*.py"))]


def _is_principal_id(node: ast.AST) -> bool:
    """``principal.id`` or ``<…>.principal.id`` (``context.principal.id``)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "id"):
        return False
    held = node.value
    return (isinstance(held, ast.Name) and held.id == "principal") or (
        isinstance(held, ast.Attribute) and held.attr == "principal"
    )


def _is_operator_test(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "is_operator"


def hand_written_ownership(source: str) -> list[int]:
    """Lines deciding ownership by hand: a principal's id compared with an owner's (``c.owner == principal.id``,
    ``principal.is_operator or owner.id == principal.id``), or the operator's "every owner" scope written out
    (``None if principal.is_operator else principal.id``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            if any(_is_principal_id(side) for side in [node.left, *node.comparators]):
                found.append(node.lineno)
        elif isinstance(node, ast.IfExp) and _is_operator_test(node.test) and _is_principal_id(node.orelse):
            found.append(node.lineno)
    return found


def _is_face(node: ast.AST) -> bool:
    """``face`` or ``<…>.face`` (``context.face``)."""
    return (isinstance(node, ast.Name) and node.id == "face") or (
        isinstance(node, ast.Attribute) and node.attr == "face"
    )


def face_lookups(source: str) -> list[int]:
    """Lines reading a face's service by name: ``getattr(context.face, "runner", None)``, ``getattr(face, …)``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and node.args
        and _is_face(node.args[0])
    ]


def face_reads(source: str) -> set[str]:
    """The names read off a face: ``context.face.runner`` and ``face.workflows`` give ``runner`` and ``workflows``."""
    return {
        node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute) and _is_face(node.value)
    }


def _where(path: Path) -> str:
    return str(path.relative_to(PACKAGE if path.is_relative_to(PACKAGE) else CORE.parent))


def test_ownership_is_decided_only_by_owns() -> None:
    by_hand = {
        f"{_where(path)}:{line}"
        for path in SOURCES
        if path != OWNER
        for line in hand_written_ownership(path.read_text())
    }
    assert by_hand == set(), "ownership written by hand: call anyagentd.ops.owns (or owner_scope)"
    assert hand_written_ownership(OWNER.read_text())  # the rule itself is written, once, where it lives


def test_the_ownership_scan_finds_the_shapes_it_is_for() -> None:
    old = (
        "ok = principal.is_operator or c.owner == principal.id\n"
        "if not (principal.is_operator or owner.id == principal.id):\n"
        "    pass\n"
        "own = [v for v in visible if v.principal == principal.id]\n"
        "owner = None if context.principal.is_operator else context.principal.id\n"
        "mine = principal.id != record.principal\n"
        'fine = owns(principal, c.owner) and principal.role == "user"\n'
    )
    assert sorted(hand_written_ownership(old)) == [1, 2, 4, 5, 6]


def test_no_op_looks_a_face_service_up_by_name() -> None:
    lookups = {f"{_where(path)}:{line}" for path in SOURCES for line in face_lookups(path.read_text())}
    assert lookups == set(), "read the service as a CommandFace attribute"
    old = (
        'runner = getattr(context.face, "runner", None)\nx = getattr(face, "workflows", None) or {}\ngetattr(o, "a")\n'
    )
    assert face_lookups(old) == [1, 2]


def test_the_command_face_declares_every_service_the_ops_read() -> None:
    declared = set(CommandFace.__annotations__) | {n for n in vars(CommandFace) if not n.startswith("_")}
    assert {"runner", "subagents", "workflows", "device_grant", "auth_sessions"} <= declared
    read = {name for path in sorted((PACKAGE / "ops").glob("*.py")) for name in face_reads(path.read_text())}
    assert read - declared == set(), "ops read these off the face without CommandFace declaring them"


def test_each_paths_face_has_everything_the_face_declares() -> None:
    from anyagentd_a2a.agentface import AgentFace

    instance = Instance(None, None, LogRing(stream=None))  # type: ignore[arg-type]  # nothing here reads them
    face = AgentFace(instance, None, None, None, None, None)  # type: ignore[arg-type]
    declared = set(CommandFace.__annotations__) | {n for n in vars(CommandFace) if not n.startswith("_")}
    missing = {n for n in declared if n not in vars(face) and not hasattr(AgentFace, n)}
    assert missing == set()
    assert face.runner is None and face.workflows == {}
    assert instance.runner is None and instance.subagents is None and instance.workflows == {}
    assert instance.device_grant is None and instance.auth_sessions is None
