"""A package's import graph read from its source, for tests that forbid import circles (issue 30's core adapters,
issue 25's daemon and instance): every import counts — at module level, under ``TYPE_CHECKING``, inside a
function — since any of them ties the two modules together for a reader and for the structure tools."""

from __future__ import annotations

import ast
from pathlib import Path


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package ``package`` whose directory is ``root``: dotted name → source file (a
    package's own name for its ``__init__.py``)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = (package, *path.relative_to(root).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (its source at ``path``) imports anywhere in its source; an
    imported name that is not a module counts as its module (``from .b import X`` is ``b``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module → the modules it imports): its strongly connected components of two
    or more modules (Tarjan), each sorted, in the order their first module is met in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, set())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


__all__ = ["circles", "imports_of", "package_modules"]
