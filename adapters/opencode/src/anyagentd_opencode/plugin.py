"""The ``opencode`` plugin, registered through the ``anyagentd`` entry-point group."""

from __future__ import annotations

from anyagentd.hookspecs import hookimpl


@hookimpl
def register_adapters(register):  # type: ignore[no-untyped-def]
    from .adapter import OpencodeAdapter

    register(OpencodeAdapter)
