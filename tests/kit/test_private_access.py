"""No class touches another's private attributes (issue 18; the guide's rule), in core, the adapters and the kit.

A static check over the sources: an attribute access ``x._name`` (one leading underscore) is allowed on ``self`` /
``cls``, or inside a class that defines ``_name`` itself (``conn._pump`` in the class's own ``open``). Anything
else reaches into another class (or module) and must go through a public, documented name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "core" / "src", ROOT / "testing" / "src", ROOT / "adapters"]
PUBLIC_BY_CONTRACT = {"os._exit"}  # the standard library's documented name


def _own_names(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def private_reaches(source: str) -> list[tuple[int, str]]:
    """``(line, expression)`` of each access to another's private attribute in ``source``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = _own_names(node)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            text = ast.unparse(node)
            if not on_self and node.attr not in own and text not in PUBLIC_BY_CONTRACT:
                found.append((node.lineno, text))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(ast.parse(source), set())
    return found


def test_the_check_finds_a_reach_into_another_class() -> None:
    source = "class A:\n    def f(self, s):\n        return s._conn, self._x, s._g\n    def _g(self):\n        pass\n"
    assert private_reaches(source) == [(3, "s._conn")]


def test_no_class_touches_another_s_private_attributes() -> None:
    reaches = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for base in SOURCES
        for path in sorted(base.rglob("*.py"))
        if "node_modules" not in path.parts
        for line, text in private_reaches(path.read_text("utf-8"))
    ]
    assert not reaches, "use (or add) a public, documented name instead of:\n" + "\n".join(reaches)
