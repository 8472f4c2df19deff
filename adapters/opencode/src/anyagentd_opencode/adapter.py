"""The ``opencode`` adapter: its catalog profile, ``probe`` and ``connect`` (environment override
``ANYAGENTD_OPENCODE_BIN``). ``config`` may set ``handshake_timeout`` (seconds)."""

from __future__ import annotations

import tempfile

from anyagentd.adapters.connection import short_lived
from anyagentd.adapters.interface import AdapterLink, AgentAdapter, AgentConnection
from anyagentd.model import AgentDetails, AgentInstallation, SessionOptions

from .connection import OpencodeConnection
from .plugin import PROFILE  # the catalog entry lives with the registration, which must not import this module


class OpencodeAdapter(AgentAdapter):
    """Drives ``opencode serve`` (an HTTP API with server-sent events) for each session."""

    PLUGIN_NAME = "opencode"
    profiles = (PROFILE,)

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        """Version and capabilities from a short-lived server (no session is created)."""

        async def details(conn: OpencodeConnection) -> AgentDetails:
            return conn.details

        with tempfile.TemporaryDirectory(prefix="anyagentd-opencode-probe-") as scratch:
            return await short_lived(
                lambda link: OpencodeConnection.open(
                    installation,
                    SessionOptions(dir=scratch),
                    link,
                    handshake_timeout=self.handshake_timeout,
                    session=False,
                ),
                details,
            )

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        """Start ``opencode serve`` in ``options.dir`` and create (or, with ``resume``, find) its session."""
        return await OpencodeConnection.open(installation, options, link, handshake_timeout=self.handshake_timeout)
