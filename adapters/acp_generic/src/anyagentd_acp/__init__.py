"""anyagentd-acp: drives any agent speaking the Agent Client Protocol (ACP) over stdio.

Built on the official ``agent-client-protocol`` library (JSON-RPC correlation, typed requests, schema models);
the bytes travel through anyagentd's :class:`~anyagentd.adapters.process.AgentProcess` (own process group,
bounded lines, stderr tail). Modules, one idea each:

- :mod:`.adapter`: the catalog profiles (``codex-acp``, ``claude-acp``, ``gemini``), ``probe``, ``connect``;
- :mod:`.launch`: command line and environment (``ANYAGENTD_ACP_ARGS`` / ``ANYAGENTD_<ID>_ARGS``, config);
- :mod:`.transport`: the message transport the library's connection runs on (oversized / non-JSON lines →
  diagnostics; ``session/update`` handled in order, inline);
- :mod:`.connection`: one live session (handshake, prompts, permissions, cancel, configure, close);
- :mod:`.mapping`: ACP updates → normalized events, options, details;
- :mod:`.plugin`: the pluggy registration.
"""

from typing import Any

from .plugin import PROFILES

__version__ = "0.1.0"
__all__ = ["AcpAdapter", "PROFILES", "__version__"]


def __getattr__(name: str) -> Any:
    # Loading the entry point (``.plugin``) imports this package: the adapter module loads when the adapter is
    # first used (``anyagentd.adapters.lazy``), not when plugins load (issue 17).
    if name == "AcpAdapter":
        from .adapter import AcpAdapter

        return AcpAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
