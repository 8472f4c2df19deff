"""Entry point of ``anyagentd-mcp-stdio``: registers the transport with ``register_mcp_transports``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyagentd.hookspecs import hookimpl


@hookimpl
def register_mcp_transports(register: Callable[[Any], None]) -> None:
    from .transport import TRANSPORT

    register(TRANSPORT)
