"""The ``acp`` adapter: catalog profiles of ACP agents, ``probe``, ``connect``, and ``{"acp": {...}}`` AgentRefs.

The adapter's ``config`` (``Runtime(adapter_config={"acp": {...}})``) may set ``handshake_timeout`` (seconds,
default ``anyagentd.adapters.connection.HANDSHAKE_TIMEOUT``), ``max_line_bytes`` (default
``anyagentd.adapters.process.DEFAULT_MAX_LINE_BYTES``, 64 MiB), and per agent id
``args`` / ``env`` (see :mod:`.launch`).
"""

from __future__ import annotations

import tempfile

from anyagentd.adapters.connection import short_lived
from anyagentd.adapters.interface import AdapterLink, AgentAdapter, AgentConnection
from anyagentd.model import AgentDetails, AgentInstallation, SessionOptions

from .plugin import PROFILES  # the catalog entries live with the registration, which must not import this module

# The ACP library takes most of a second to import: it loads only when a session or probe needs it (.connection).


class AcpAdapter(AgentAdapter):
    """Drives any Agent Client Protocol agent over stdio (``docs/agents/acp.md``)."""

    PLUGIN_NAME = "acp"
    profiles = PROFILES
    acp_ref = True

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        """Version and capabilities from ``initialize`` alone (no session is created, so options, modes and
        commands are unknown and auth is ``Unknown``); the process is stopped at once."""
        from .connection import AcpConnection

        async def details(conn: AcpConnection) -> AgentDetails:
            return conn.details

        with tempfile.TemporaryDirectory(prefix="anyagentd-acp-probe-") as scratch:
            return await short_lived(
                lambda link: AcpConnection.open(
                    installation,
                    SessionOptions(dir=scratch),
                    link,
                    config=self.config,
                    adapter=self,
                    session=False,
                    handshake_timeout=self.handshake_timeout,
                ),
                details,
            )

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        """Start the agent in ``options.dir`` and open its session (``session/new``, ``session/load`` for
        resume, ``session/fork`` when offered). ``no_tools`` has no ACP equivalent and is ignored."""
        from .connection import AcpConnection

        return await AcpConnection.open(
            installation, options, link, config=self.config, adapter=self, handshake_timeout=self.handshake_timeout
        )
