"""Issue 25 (item 4): the daemon is assembly. ``daemon.py`` binds, starts the services and the app, and handles the
signals — under 300 lines; what it assembles is built by the modules that own it (``services.py``, ``app.py``,
``reload.py``); nothing below the assembly imports it (no arrow from the op families, the stores or the services
up into the daemon); the package's modules import no circle at module level; and the daemon hands no bound
method of its own to a collaborator (only its task group runs its own tasks).

Read from the source (:mod:`ast`), as the structure tools read it."""

from __future__ import annotations

import ast
from pathlib import Path

import anyagentd_a2a
from anyagentd_testing.imports import circles as _circles
from anyagentd_testing.imports import imports_of, package_modules

PACKAGE = Path(anyagentd_a2a.__file__).resolve().parent
DAEMON = PACKAGE / "daemon.py"
ASSEMBLY = {
    "anyagentd_a2a.daemon",
    "anyagentd_a2a.services",
    "anyagentd_a2a.agent_services",
    "anyagentd_a2a.app",
    "anyagentd_a2a.reload",
}
"""The modules that assemble the daemon; ``anyagentd_a2a.cli`` runs it (``anyagentd a2a``), above them all."""


def _modules() -> dict[str, Path]:
    return package_modules(PACKAGE, "anyagentd_a2a")


def _module_level_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports when it is imported: its top-level imports, those in top-level
    ``if``/``try`` blocks included, ``if TYPE_CHECKING:`` blocks and imports inside functions left out."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes: list[ast.stmt] = []
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            nodes.append(node)
        elif isinstance(node, ast.If):
            test = node.test
            if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"):
                pending.extend(node.body)
            pending.extend(node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                pending.extend(handler.body)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_the_daemon_is_under_300_lines() -> None:
    lines = len(DAEMON.read_text(encoding="utf-8").splitlines())
    assert lines < 300, f"daemon.py has {lines} lines: the daemon is assembly (issue 25 item 4)"


def test_nothing_below_the_assembly_imports_it() -> None:
    """Any import counts (module level, ``TYPE_CHECKING``, inside a function): the op families, the stores, the
    front, the instance and the task sources never reach up into the daemon or what assembles it."""
    modules = _modules()
    above = {name for name in modules if name not in ASSEMBLY and name != "anyagentd_a2a.cli"}
    upward = {
        f"{name} -> {target}"
        for name in above
        for target in imports_of(name, modules[name], modules)
        if target in ASSEMBLY
    }
    assert upward == set()
    daemon_importers = {
        name for name, path in modules.items() if "anyagentd_a2a.daemon" in imports_of(name, path, modules)
    }
    assert daemon_importers == {"anyagentd_a2a.cli"}  # the command line runs it: serve(loaded, Options(...))


def test_the_package_imports_no_circle_at_module_level() -> None:
    modules = _modules()
    graph = {name: _module_level_imports(name, path, modules) for name, path in modules.items()}
    assert "anyagentd_a2a.instance" in graph["anyagentd_a2a.services"]  # the scan sees the imports
    assert _circles(graph) == []


def test_the_package_imports_no_circle_at_all() -> None:
    """Counting every import (``TYPE_CHECKING`` blocks and imports inside functions too), as the structure tools
    read them: no two modules of the package reach each other (issue 25's done-when). The last two were the ops'
    views ↔ the subagents' streams (``truncate``, now :mod:`anyagentd_a2a.truncation`) and the subagent manager
    ↔ its MCP server (``Caller``, now :mod:`anyagentd_a2a.subagents.callers`)."""
    modules = _modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert _circles(graph) == []


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from .b import X\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import Y\n")
    (tmp_path / "c.py").write_text("import anyagentd_a2a.a\n\ndef f():\n    from .b import Z\n")
    modules = {f"anyagentd_a2a.{n}": tmp_path / f"{n}.py" for n in "abc"}
    graph = {name: _module_level_imports(name, path, modules) for name, path in modules.items()}
    assert graph == {
        "anyagentd_a2a.a": {"anyagentd_a2a.b"},
        "anyagentd_a2a.b": set(),
        "anyagentd_a2a.c": {"anyagentd_a2a.a"},
    }
    assert _circles(graph) == []
    graph["anyagentd_a2a.b"].add("anyagentd_a2a.c")
    assert _circles(graph) == [["anyagentd_a2a.a", "anyagentd_a2a.b", "anyagentd_a2a.c"]]


def test_the_daemon_hands_no_bound_method_of_its_own_to_a_collaborator() -> None:
    """``self.<method>`` of :class:`Daemon` appears as an argument only as the task its own task group runs
    (``tg.start_soon(self._signals, …)``); collaborators get typed objects (issue 25: nothing calls back up into
    the assembler through injected callables)."""
    tree = ast.parse(DAEMON.read_text(encoding="utf-8"))
    daemon = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Daemon")
    methods = {n.name for n in daemon.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    handed = []
    for call in (n for n in ast.walk(daemon) if isinstance(n, ast.Call)):
        arguments = [*call.args, *(k.value for k in call.keywords)]
        own_task = isinstance(call.func, ast.Attribute) and call.func.attr == "start_soon"
        for position, argument in enumerate(arguments):
            for node in ast.walk(argument):
                if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                    continue
                the_task = own_task and position == 0 and node is argument
                if node.value.id == "self" and node.attr in methods and not the_task:
                    handed.append(f"line {call.lineno}: self.{node.attr}")
    assert handed == []
    lambdas = [n.lineno for n in ast.walk(daemon) if isinstance(n, ast.Lambda) and "self" in ast.unparse(n)]
    assert lambdas == [], "a lambda over the daemon handed to a collaborator"
