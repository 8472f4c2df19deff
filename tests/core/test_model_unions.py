"""``anyagentd.model`` writes each tagged union twice: the plain union type checkers read (under
``TYPE_CHECKING``) and the ``tagged_union(...)`` pydantic validates at run time. Both must name the same members,
in the same order, or mypy would check code against a union the wire does not have."""

from __future__ import annotations

import ast
from pathlib import Path

import anyagentd.model as model

SOURCE = Path(model.__file__).read_text()


def _members(union: ast.expr) -> list[str]:
    """The operands of ``A | B | C`` as source text."""
    if isinstance(union, ast.BinOp) and isinstance(union.op, ast.BitOr):
        return _members(union.left) + _members(union.right)
    return [ast.unparse(union)]


def _pairs() -> dict[str, tuple[list[str], list[str]]]:
    pairs = {}
    for node in ast.walk(ast.parse(SOURCE)):
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        [static], [runtime] = node.body, node.orelse[:1]
        assert isinstance(static, ast.AnnAssign) and isinstance(static.target, ast.Name)
        assert isinstance(runtime, ast.Assign) and isinstance(runtime.value, ast.Call)
        assert ast.unparse(runtime.value.func) == "tagged_union"
        name = static.target.id
        assert [ast.unparse(t) for t in runtime.targets] == [name]
        assert static.value is not None
        pairs[name] = (_members(static.value), [ast.unparse(a) for a in runtime.value.args])
    return pairs


def test_every_tagged_union_has_its_checker_twin_with_the_same_members() -> None:
    pairs = _pairs()
    assert {"EventKind", "StopReason", "Request", "McpConnection"} <= set(pairs)
    for name, (static, runtime) in pairs.items():
        assert static == runtime, name


def test_every_tagged_union_in_the_model_is_written_both_ways() -> None:
    built = {
        n.targets[0].id
        for n in ast.walk(ast.parse(SOURCE))
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "tagged_union"
    }
    assert built == set(_pairs())
