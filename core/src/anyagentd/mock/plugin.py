"""The built-in ``mock`` plugin, registered through the ``anyagentd`` entry-point group like any other."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def register_adapters(register):  # type: ignore[no-untyped-def]
    from .agent import MockAdapter

    register(MockAdapter)
