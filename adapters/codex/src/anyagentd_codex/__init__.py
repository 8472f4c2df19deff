"""anyagentd-codex: the Codex CLI adapter for anyagentd.

Codex runs as ``codex app-server`` (JSON-RPC 2.0 over stdio, protocol v2). Modules, one idea each:

- :mod:`.adapter`: the catalog profile, ``probe``, ``plan_usage`` and ``connect``;
- :mod:`.launch`: command line (headless ``-c`` overrides, extra args, MCP servers), environment, options and
  ``AgentDetails``;
- :mod:`.connection`: one live session (stdout pump, turns, steer, answers, cancel, configure, compact, close);
- JSON-RPC framing (ids tracked per direction) is the toolkit's :mod:`anyagentd.adapters.jsonrpc`;
- :mod:`.state`: the thread's protocol state, one object the connection and the mapper share;
- :mod:`.mapping`: notifications → normalized events, thread items → ``ToolUpdate`` snapshots;
- :mod:`.protocol`: typed messages (pydantic) for the subset used, and the bundled JSON schema generated from the
  pinned CLI (``schema/``);
- :mod:`.plugin`: the pluggy registration.
"""

from typing import Any

from .plugin import PROFILE

__version__ = "0.1.0"
__all__ = ["CodexAdapter", "PROFILE", "__version__"]


def __getattr__(name: str) -> Any:
    # Loading the entry point (``.plugin``) imports this package: the adapter module loads when the adapter is
    # first used (``anyagentd.adapters.lazy``), not when plugins load (issue 17).
    if name == "CodexAdapter":
        from .adapter import CodexAdapter

        return CodexAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
