"""The ``codex`` adapter: the Codex CLI's catalog entry, probe, plan usage and session connect.

A session runs ``codex app-server`` in the session directory (see :mod:`.launch` for the command line and
environment, :mod:`.connection` for the session, :mod:`.mapping` for the event mapping).

Adapter ``config`` (``Runtime(adapter_config={"codex": {...}})``):

- ``args``: extra ``codex app-server`` arguments (a list, or a shell string), e.g. ``-c`` provider overrides;
  ``$ANYAGENTD_CODEX_ARGS`` (shell-split) is appended too;
- ``codex_home``: ``"per-session"`` for a fresh ``CODEX_HOME`` per session (removed at close: such sessions cannot
  be resumed later, and a ``codex login`` is not visible there), or a directory to use as ``CODEX_HOME``;
  ``$ANYAGENTD_CODEX_HOME`` is the fallback; unset, Codex uses its own default (``~/.codex``);
- ``handshake_timeout``: seconds (default ``anyagentd.adapters.connection.HANDSHAKE_TIMEOUT``).
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, TypeVar

from anyagentd.adapters.connection import short_lived
from anyagentd.adapters.interface import AdapterLink, AgentAdapter, AgentConnection
from anyagentd.adapters.jsonrpc import RpcError
from anyagentd.errors import AuthRequired, UnsupportedFeature
from anyagentd.model import AgentDetails, AgentInstallation, PlanUsage, SessionOptions, Unauthenticated

from .plugin import PROFILE  # the catalog entry lives with the registration, which must not import this module

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .connection import CodexConnection

T = TypeVar("T")

# The session's modules (protocol models, connection, mapping) load on first use, not when the plugin registers
# the adapter: `anyagentd serve` and `anyagentd run mock` never import them.


HOME_ENV = "ANYAGENTD_CODEX_HOME"


class CodexAdapter(AgentAdapter):
    """Drives ``codex app-server`` (``docs/agents/codex.md``)."""

    PLUGIN_NAME = "codex"
    profiles = (PROFILE,)

    @property
    def codex_home(self) -> str | None:
        return self.config.get("codex_home") or os.environ.get(HOME_ENV) or None

    def _transports(self) -> list[str]:
        from .launch import MCP_TRANSPORTS

        if getattr(self, "mcp_transports", None) and hasattr(self, "effective_mcp_transports"):
            return self.effective_mcp_transports(MCP_TRANSPORTS)
        return list(MCP_TRANSPORTS)

    async def _short_lived(self, installation: AgentInstallation, body: Callable[[CodexConnection], Awaitable[T]]) -> T:
        """Run ``body(conn)`` against a short-lived app-server (no thread) and stop it."""
        from .connection import CodexConnection
        from .launch import extra_args

        with tempfile.TemporaryDirectory(prefix="anyagentd-codex-probe-") as scratch:
            return await short_lived(
                lambda link: CodexConnection.open(
                    installation,
                    SessionOptions(dir=scratch),
                    link,
                    extra_args=extra_args(self.config),
                    codex_home=self.codex_home,
                    start_thread=False,
                    require_auth=False,
                    handshake_timeout=self.handshake_timeout,
                    mcp_transports=self._transports(),
                ),
                body,
            )

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        """Version, account, models/efforts, skills (as slash commands) and capabilities from a short-lived
        ``codex app-server`` handshake (no thread is created). Raises ``SpawnFailed``, ``HandshakeTimeout``; a
        logged-out CLI gives ``Unauthenticated`` with ``codex login``."""

        async def details(conn: CodexConnection) -> AgentDetails:
            return conn.details

        return await self._short_lived(installation, details)

    async def plan_usage(self, installation: AgentInstallation) -> PlanUsage:
        """``account/rateLimits/read`` of a short-lived app-server. ``AuthRequired`` when logged out,
        ``UnsupportedFeature`` when the account has no plan quota (an API key, a custom provider)."""
        from . import protocol as p
        from .launch import login_methods
        from .mapping import plan_usage

        async def read(conn: CodexConnection) -> PlanUsage:
            if isinstance(conn.details.auth, Unauthenticated):
                raise AuthRequired(login_methods(installation.executable_path), "Codex is not logged in")
            try:
                result = await conn.channel.request(p.M_RATE_LIMITS_READ, None, timeout=self.handshake_timeout)
            except RpcError as err:
                raise UnsupportedFeature(f"Codex reports no plan usage: {err.message}") from None
            snapshot = p.RateLimitSnapshot.model_validate((result or {}).get("rateLimits") or {})
            usage = plan_usage(snapshot)
            if usage is None:
                raise UnsupportedFeature("Codex reports no plan usage windows for this account")
            return usage

        return await self._short_lived(installation, read)

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        """Start ``codex app-server`` in ``options.dir`` and open its thread (``thread/start``, ``thread/resume``
        with the resume token = thread id, or ``thread/fork`` with ``fork_at`` = a Codex turn id as
        ``lastTurnId``). ``no_tools`` cannot be honoured by the app-server (generate relies on the engine's
        refusal of tools)."""
        from .connection import CodexConnection
        from .launch import extra_args, mcp_args

        mcp = mcp_args(list(options.mcp_servers), self)
        return await CodexConnection.open(
            installation,
            options,
            link,
            extra_args=extra_args(self.config),
            mcp=mcp,
            codex_home=self.codex_home,
            handshake_timeout=self.handshake_timeout,
            mcp_transports=self._transports(),
        )
