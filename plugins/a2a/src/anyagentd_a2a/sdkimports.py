"""What the daemon's import of the a2a-sdk may leave out: httpx's command-line client.

The SDK imports ``httpx`` at module level (its push sender), and ``httpx/__init__`` imports ``httpx._main`` (the
``httpx`` console script) when it can, which imports ``rich`` and ``pygments``: ~80 modules, ~40 ms of CPU of the
daemon's start, for a command line the daemon never runs (bench/README.md, issue 31). :func:`httpx_without_cli`
imports ``httpx`` with ``httpx._main`` marked unimportable, so ``httpx`` takes the fallback it has for an install
without its CLI extra (``httpx.main`` then prints that the CLI is not installed), then unmarks it: a later
``import httpx._main`` loads it as usual. Importing this module does it once, so the daemon imports this module
before anything that imports the SDK (:mod:`.daemon`'s first import of the package).

Only the standard library is imported here, ``httpx`` aside.
"""

from __future__ import annotations

import sys


def httpx_without_cli() -> None:
    """Import ``httpx`` without ``httpx._main`` (see the module docstring); does nothing once ``httpx`` is imported
    (a process that imported it first keeps its CLI)."""
    if "httpx" in sys.modules:
        return
    marked = "httpx._main" not in sys.modules
    if marked:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]  # None: "import httpx._main" raises ImportError
    try:
        import httpx  # noqa: F401
    finally:
        if marked and sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]


httpx_without_cli()

__all__ = ["httpx_without_cli"]
