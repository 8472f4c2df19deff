"""anyagentd-claude: the Claude Code adapter for anyagentd.

Claude Code runs as ``claude -p`` with bidirectional stream-json (``--input-format``/``--output-format
stream-json``) and the control protocol on the same pipes. Modules, one idea each:

- :mod:`.adapter`: the catalog profile, ``probe`` and ``connect``;
- :mod:`.launch`: command line, environment, and ``AgentDetails`` from the ``initialize`` handshake;
- :mod:`.connection`: one live session (stdout pump, turns, answers, cancel, configure, compact, rollback, close);
- :mod:`.control`: the control protocol (our requests and the matching of the CLI's responses, our reply frames);
- :mod:`.permissions`: the CLI's ``can_use_tool`` requests ↔ the engine's Permission / Question requests;
- :mod:`.state`: the session's protocol state, one object the connection and the mapper share;
- :mod:`.mapping`: stdout frames → normalized events;
- :mod:`.tools`: tool calls → ``ToolUpdate`` snapshots;
- :mod:`.plugin`: the pluggy registration.
"""

from typing import Any

from .plugin import PROFILE

__version__ = "0.1.0"
__all__ = ["ClaudeAdapter", "PROFILE", "__version__"]


def __getattr__(name: str) -> Any:
    # Loading the entry point (``.plugin``) imports this package: the adapter module loads when the adapter is
    # first used (``anyagentd.adapters.lazy``), not when plugins load (issue 17).
    if name == "ClaudeAdapter":
        from .adapter import ClaudeAdapter

        return ClaudeAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
