"""An event kind's (or a stop reason's) tag is read with ``anyagentd.model.kind_tag`` and nowhere else (issue 30:
``x if isinstance(x, str) else x.TAG`` was inlined ten times in core, the adapters, the plugins and the kit).

The scan parses every source file under ``core/src``, ``adapters/*/src``, ``plugins/*/src`` and ``testing/src`` with
``ast`` and looks for the conditional expression ``A if isinstance(A, str) else A.TAG`` whatever ``A`` is (a name,
an attribute such as ``details.auth``…); the one allowed is ``kind_tag``'s own body."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "core" / "src",
    *sorted(ROOT.glob("adapters/*/src")),
    *sorted(ROOT.glob("plugins/*/src")),
    ROOT / "testing" / "src",
]
HOME = ROOT / "core" / "src" / "anyagentd" / "model.py"
"""The module whose ``kind_tag`` may spell the expression out."""


def _is_inlined_tag(node: ast.AST) -> bool:
    """``node`` is ``A if isinstance(A, str) else A.TAG`` (the same ``A`` three times)."""
    if not isinstance(node, ast.IfExp):
        return False
    test, orelse = node.test, node.orelse
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and not test.keywords
    ):
        return False
    subject, kind = test.args
    if not (isinstance(kind, ast.Name) and kind.id == "str"):
        return False
    if not (isinstance(orelse, ast.Attribute) and orelse.attr == "TAG"):
        return False
    same = ast.dump(subject)
    return ast.dump(node.body) == same and ast.dump(orelse.value) == same


def inlined_tags(source: str, filename: str = "<source>", allowed: str | None = None) -> list[str]:
    """``filename:line`` of each inlined tag in ``source``; those inside a function named ``allowed`` are left out."""
    tree = ast.parse(source, filename)
    skip: set[int] = set()
    if allowed is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == allowed:
                skip.update(id(inner) for inner in ast.walk(node))
    lines = sorted(node.lineno for node in ast.walk(tree) if _is_inlined_tag(node) and id(node) not in skip)
    return [f"{filename}:{line}" for line in lines]


def test_the_scan_catches_the_inlined_shape() -> None:
    source = (
        "def stop_name(stop):\n"
        "    return stop if isinstance(stop, str) else stop.TAG\n"
        "auth = details.auth if isinstance(details.auth, str) else details.auth.TAG\n"
        "fine = kind_tag(kind)\n"
        "other = a if isinstance(b, str) else a.TAG\n"  # not the shape: a different subject
        "label = a if isinstance(a, str) else a.name\n"  # not the shape: another attribute
        "def kind_tag(kind):\n"
        "    return kind if isinstance(kind, str) else kind.TAG\n"
    )
    assert inlined_tags(source, "x.py") == ["x.py:2", "x.py:3", "x.py:8"]
    assert inlined_tags(source, "x.py", allowed="kind_tag") == ["x.py:2", "x.py:3"]


def test_kind_tag_is_the_one_reading_of_a_tag() -> None:
    assert all(source.is_dir() for source in SOURCES), SOURCES
    found = []
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            name = str(path.relative_to(ROOT))
            found += inlined_tags(path.read_text(encoding="utf-8"), name, "kind_tag" if path == HOME else None)
    assert not found, "read the tag with anyagentd.model.kind_tag, not inline: " + ", ".join(found)


def test_the_home_still_spells_it_out() -> None:
    # The scan's exemption is not dead: kind_tag's body is the one place with the expression.
    assert len(inlined_tags(HOME.read_text(encoding="utf-8"), "model.py")) == 1
