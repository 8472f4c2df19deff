"""The TCP listening socket every HTTP server anyagentd runs hands to uvicorn (``server.serve(sockets=[sock])``).

Why it exists: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) on each connection it accepts only when the
listening socket's protocol is ``IPPROTO_TCP`` (``asyncio.base_events._set_nodelay``). A socket made as
``socket.socket(AF_INET, SOCK_STREAM)`` has protocol 0, so its connections keep Nagle: uvicorn writes a response's
head and body in two sends, the body waits for the client to acknowledge the head, and the client delays that
acknowledgement (40 ms on Linux) — every request/response exchange on a kept-alive connection paid ~40 ms for it.
"""

from __future__ import annotations

import socket

__all__ = ["listening_socket"]


def listening_socket(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` (port 0: the OS picks a free one; an IPv6 ``host`` contains ``:``)
    and listening, with ``SO_REUSEADDR``, whose accepted connections asyncio serves with ``TCP_NODELAY``.

    Raises ``OSError`` when the address cannot be bound (the socket is closed first)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
