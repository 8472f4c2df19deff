"""Whether the connections asyncio accepts on a listening socket have Nagle's algorithm off — what uvicorn serves
with when handed that socket (``server.serve(sockets=[sock])`` → ``loop.create_server(sock=…)``). Imported by
module name (``tests`` is on ``sys.path``)."""

from __future__ import annotations

import asyncio
import socket


def accepted_nodelay(sock: socket.socket) -> bool:
    """Serve ``sock`` (listening, bound to loopback) with asyncio, connect once; ``TCP_NODELAY`` of the accepted
    connection. Closes ``sock``."""

    async def probe() -> bool:
        accepted: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                accepted.set_result(bool(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        host, port = sock.getsockname()[:2]
        async with server:
            _, writer = await asyncio.open_connection(host, port)
            try:
                return await asyncio.wait_for(accepted, 10)
            finally:
                writer.close()

    return asyncio.run(probe())
