"""A catalog entry (:class:`AgentProfile`), in a module of its own so an adapter plugin can declare its profiles
without importing the event model: ``anyagentd --help`` loads every plugin module, and this is all a plugin that
registers a lazy adapter (:mod:`anyagentd.adapters.lazy`) needs at its top (issue 17). Standard library only;
:mod:`anyagentd.adapters.interface` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentProfile:
    """One catalog entry: an agent discovery looks for.

    ``executable`` is the file name searched on PATH and in the known directories; ``extra_paths`` are more
    directories to look in (``~`` expanded), e.g. ``~/.claude/local``; ``acp_args`` are the arguments that put
    the executable in ACP mode, for agents driven over ACP; ``install_hint`` is shown when it is missing.
    The environment override is ``ANYAGENTD_<ID>_BIN`` (id upper-cased, ``-`` → ``_``).
    """

    id: str
    name: str
    executable: str
    install_hint: str
    extra_paths: tuple[str, ...] = ()
    acp_args: tuple[str, ...] | None = None

    @property
    def env_override(self) -> str:
        return f"ANYAGENTD_{self.id.upper().replace('-', '_')}_BIN"
