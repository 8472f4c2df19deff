"""The MCP ``Http`` transport plugin for anyagentd (validation and checks with the official MCP SDK)."""

from typing import Any

__all__ = ["TRANSPORT", "HttpTransport"]


def __getattr__(name: str) -> Any:
    # Loading the entry point (``.plugin``) imports this package: the transport (and the model it needs) loads
    # only when it is used, not when plugins load at start-up (issue 17).
    if name in __all__:
        from . import transport

        return getattr(transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
