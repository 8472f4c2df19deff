"""Core's adapter toolkit (``anyagentd.adapters``) has no import circle, counting every import, at module level or
inside a function (issue 30: ``interface`` reached back into ``connection`` for ``HANDSHAKE_TIMEOUT``, a default
whose one home is ``EngineSettings``)."""

from __future__ import annotations

from pathlib import Path

import anyagentd
from anyagentd_testing.imports import circles as import_circles
from anyagentd_testing.imports import imports_of, package_modules

PACKAGE = Path(anyagentd.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    return package_modules(PACKAGE, "anyagentd")


def circles(prefix: str) -> list[list[str]]:
    """The import circles among the modules under ``prefix`` (strongly connected components of two or more)."""
    modules = _modules()
    graph = {
        name: {m for m in imports_of(name, path, modules) if m.startswith(prefix)}
        for name, path in modules.items()
        if name.startswith(prefix)
    }
    return import_circles(graph)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("def f():\n    from .b import X\n")
    modules = {"anyagentd.adapters.a": a, "anyagentd.adapters.b": tmp_path / "b.py"}
    assert imports_of("anyagentd.adapters.a", a, modules) == {"anyagentd.adapters.b"}


def test_core_adapters_import_no_circle() -> None:
    assert circles("anyagentd.adapters") == []
