"""The ``claude`` adapter: Claude Code's catalog entry, probe and session connect.

A session runs ``claude -p`` with bidirectional stream-json in the session directory (see :mod:`.launch` for
the command line and environment, :mod:`.connection` for the session, :mod:`.mapping` for the event mapping).
The adapter's ``config`` may set ``handshake_timeout`` (seconds, default ``anyagentd.adapters.connection.HANDSHAKE_TIMEOUT``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anyagentd.adapters.connection import short_lived
from anyagentd.adapters.interface import AdapterLink, AgentAdapter, AgentConnection
from anyagentd.errors import ResumeFailed
from anyagentd.model import AgentDetails, AgentInstallation, SessionOptions

from .plugin import PROFILE  # the catalog entry lives with the registration, which must not import this module

# The session's modules (connection, control, mapping, tools) load on first use, not when the plugin registers the
# adapter: `anyagentd serve` and `anyagentd run mock` never import them.
if TYPE_CHECKING:
    from .connection import ClaudeConnection

NO_SAVED_SESSION = "No conversation found with session ID"
"""What Claude Code (2.1.197) writes to stderr, then exits, when ``--resume`` names a session it has no transcript
for under ``$HOME/.claude/projects/<cwd>/`` (``docs/agents/claude.md#resume-and-fork``)."""


class ClaudeAdapter(AgentAdapter):
    """Drives Claude Code's ``-p`` stream-json mode (``docs/agents/claude.md``)."""

    PLUGIN_NAME = "claude"
    profiles = (PROFILE,)

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        """Version, auth, options and slash commands from a short-lived process's ``initialize`` (nothing is
        persisted: ``--no-session-persistence``); the process is stopped at once. Raises ``SpawnFailed``,
        ``HandshakeTimeout``. An unauthenticated CLI gives ``Unauthenticated`` with login methods."""
        import tempfile

        from .connection import ClaudeConnection
        from .launch import MCP_TRANSPORTS

        async def details(conn: ClaudeConnection) -> AgentDetails:
            return conn.details

        with tempfile.TemporaryDirectory(prefix="anyagentd-claude-probe-") as scratch:
            return await short_lived(
                lambda link: ClaudeConnection.open(
                    installation,
                    SessionOptions(dir=scratch),
                    link,
                    persist=False,
                    require_auth=False,
                    handshake_timeout=self.handshake_timeout,
                    mcp_transports=self.effective_mcp_transports(MCP_TRANSPORTS),
                ),
                details,
            )

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        """Start Claude Code in ``options.dir`` (new session ``--session-id``, ``--resume``, or
        ``--resume --fork-session``) and complete the handshake; the resume token is known at once.

        A resume (or fork) of a token Claude Code has no transcript for (:data:`NO_SAVED_SESSION` in its stderr: the
        session was never written, or was removed) is ``ResumeFailed`` with ``reason: "not_saved"``
        (:meth:`ResumeFailed.not_saved`); any other refusal is ``ResumeFailed`` with the CLI's words.

        ``options.mcp_servers`` go to ``--mcp-config`` through :meth:`render_mcp`: a transport without an installed
        plugin (``anyagentd-mcp-stdio``/``-http``/``-sse``) is refused with ``UnsupportedFeature`` before anything
        is spawned."""
        from .connection import ClaudeConnection
        from .launch import MCP_RENDERERS, MCP_TRANSPORTS

        mcp = self.render_mcp(options.mcp_servers, MCP_RENDERERS)
        try:
            return await ClaudeConnection.open(
                installation,
                options,
                link,
                no_tools=no_tools,
                mcp=mcp,
                handshake_timeout=self.handshake_timeout,
                mcp_transports=self.effective_mcp_transports(MCP_TRANSPORTS),
            )
        except ResumeFailed as err:
            token = options.resume or options.fork
            if token and NO_SAVED_SESSION in str(err.fields.get("detail", "")):
                raise ResumeFailed.not_saved(token, err.fields["detail"], "Claude Code") from None
            raise
