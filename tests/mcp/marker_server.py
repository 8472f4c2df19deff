"""A real MCP server built with the official SDK (``MCPServer``, formerly ``FastMCP``), for the MCP tests.

Its tool ``write_marker(path, text)`` writes ``text`` to ``path`` and returns ``MARKER_WRITTEN:<text reversed>``,
a value only the server computes (so a test can tell its result reached the agent).

    python marker_server.py stdio [DELAY]  # MCP over stdin/stdout; DELAY: seconds before it reads anything
    python marker_server.py http  [PORT]   # streamable HTTP at http://127.0.0.1:PORT/mcp
    python marker_server.py sse   [PORT]   # legacy HTTP+SSE at http://127.0.0.1:PORT/sse

For ``http`` and ``sse`` the port defaults to 0 (a free one); once uvicorn serves, the server prints one line
``READY http://127.0.0.1:PORT/<path>`` on stdout. With a ``DELAY`` the stdio server sleeps that long before it
reads its input, so the client's ``initialize`` is answered no sooner than ``DELAY`` seconds after the server
started (a slow server, as an agent sees one that is still starting up).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp < 2
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef]

server = MCPServer("marker")


def marker_value(text: str) -> str:
    """What ``write_marker`` returns for ``text``."""
    return f"MARKER_WRITTEN:{text[::-1]}"


@server.tool()
def write_marker(path: str, text: str) -> str:
    """Write `text` to the file at `path` and return a confirmation token."""
    Path(path).write_text(text, encoding="utf-8")
    return marker_value(text)


async def serve_http(kind: str, port: int) -> None:
    import uvicorn

    if kind == "http":
        app, path = server.streamable_http_app(), "/mcp"
    else:
        app, path = server.sse_app(), "/sse"
    from anyagentd.listen import listening_socket

    sock = listening_socket("127.0.0.1", port)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.02)
        print(f"READY http://127.0.0.1:{port}{path}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await uv.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main(argv: list[str]) -> None:
    kind = argv[0] if argv else "stdio"
    if kind == "stdio":
        if len(argv) > 1:
            time.sleep(float(argv[1]))
        server.run("stdio")
    elif kind in ("http", "sse"):
        anyio.run(serve_http, kind, int(argv[1]) if len(argv) > 1 else 0)
    else:
        raise SystemExit(f"usage: marker_server.py stdio [DELAY]|http [PORT]|sse [PORT] (not {kind!r})")


if __name__ == "__main__":
    main(sys.argv[1:])
