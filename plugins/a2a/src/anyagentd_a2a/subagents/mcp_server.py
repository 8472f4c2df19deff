"""The MCP server anyagentd gives the agents it drives, so that one agent can delegate to another.

Built on the official ``mcp`` SDK (``MCPServer``) and served over streamable HTTP on 127.0.0.1 by its own uvicorn;
a session that may spawn subagents gets it at ``open`` as an ``Http`` MCP server (forwarded by the agent's adapter
through the MCP transport plugins) with a bearer that identifies the caller: every caller's token maps to its
owner, its depth and its own handle (for a subagent that spawns). Tools:

- ``spawn_subagent(agent, instruction, mode="sync")`` → for ``sync`` the subagent's answer; for ``warm`` its
  handle and first answer (``{handle, status, mode, result}``); for ``async``/``detached`` its handle;
- ``subagent_send(handle, message)`` → a warm subagent's answer to one more message;
- ``subagent_status(handle)``, ``subagent_result(handle, wait=False)``, ``subagent_kill(handle, reason="")``.

A refusal (a limit, another owner's handle, a bad mode) is a tool error with a clear message, which the agent
sees as the tool's failed result.

:meth:`SubagentMcpServer.open_with_tools` is how a session gets the server: the daemon opens every conversation's
session with it (``Caller(owner=<principal id>)``) and the manager every subagent's (depth + 1, its handle); the
bearer is withdrawn when the session closes.
"""

import json
import secrets
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from anyagentd.errors import UnsupportedFeature

from .callers import Caller
from .manager import SubagentManager, SubagentNotFound, SubagentRefused
from .state import answered

SERVER_NAME = "anyagentd"


class SubagentMcpServer:
    """The subagent tools over streamable HTTP. :meth:`start` binds 127.0.0.1 (a free port unless given) and
    serves until :meth:`stop`; :meth:`server_for` mints a caller's bearer and returns the ``McpServer`` JSON to
    pass at ``open``."""

    def __init__(self, manager: SubagentManager, *, port: int = 0) -> None:
        self.manager = manager
        self.port = port
        self.url = ""
        self._callers: dict[str, Caller] = {}
        self._server: Any = None
        self._scope: anyio.CancelScope | None = None
        self.mcp = self._build()
        manager.tools = self  # the manager's subagent sessions get the tools too (one level deeper)

    async def open_with_tools(
        self,
        runtime: Any,
        agent: Any,
        directory: str | Path,
        caller: Caller,
        *,
        spawn: Callable[..., Any],
        **options: Any,
    ) -> Any:
        """``runtime.open(agent, directory, **options)`` with this server among the session's ``mcp_servers``, its
        bearer speaking for ``caller``. An agent that cannot take an ``Http`` MCP server (``UnsupportedFeature``
        naming the MCP transport: the scripted ``mock``, a CLI without the transport plugin) is opened without
        it. The bearer is withdrawn when the open fails or, through a watcher started with ``spawn`` (a task
        group's ``start_soon``), when the session closes. Returns the session; raises what ``open`` raises."""
        entry = self.server_for(caller)
        try:
            session = await runtime.open(agent, directory, mcp_servers=[entry], **options)
        except UnsupportedFeature as err:
            self.forget(entry)
            if "MCP transport" not in err.message:
                raise
            return await runtime.open(agent, directory, **options)
        except BaseException:
            self.forget(entry)
            raise
        spawn(self._withdraw_when_closed, session, entry)
        return session

    async def _withdraw_when_closed(self, session: Any, entry: dict[str, Any]) -> None:
        try:
            await session.wait_closed()
        finally:
            self.forget(entry)

    @property
    def live_bearers(self) -> int:
        """How many bearers are live (one per open session offered the tools)."""
        return len(self._callers)

    def server_for(self, caller: Caller) -> dict[str, Any]:
        """A new bearer for ``caller`` and the ``open`` ``mcp_servers`` entry that carries it."""
        token = secrets.token_urlsafe(24)
        self._callers[token] = caller
        return {
            "name": SERVER_NAME,
            "connection": {"Http": {"url": self.url, "headers": {"Authorization": f"Bearer {token}"}}},
        }

    def forget(self, server: dict[str, Any]) -> None:
        """Withdraw the bearer of a ``server_for`` entry (its session closed)."""
        header = server["connection"]["Http"]["headers"]["Authorization"]
        self._callers.pop(header.removeprefix("Bearer "), None)

    def _caller(self, headers: Any) -> Caller:
        value = (headers or {}).get("authorization", "") if headers is not None else ""
        caller = self._callers.get(value.removeprefix("Bearer ").strip())
        if caller is None:
            raise ToolError("this MCP server needs the bearer anyagentd gave the session")
        return caller

    def _build(self) -> MCPServer:
        mcp = MCPServer(SERVER_NAME, instructions="Delegate work to other coding agents driven by anyagentd.")
        manager = self.manager

        @mcp.tool(structured_output=False)  # plain text: the agent reads the answer itself, not {"result": …}
        async def spawn_subagent(agent: str, instruction: str, mode: str = "sync", ctx: Context = None) -> str:  # type: ignore[assignment]
            """Hand `instruction` to another coding agent (`agent`: e.g. claude, codex, mock). Modes: sync (wait for
            its answer), async (get a handle, ask later with subagent_result), detached (runs on), warm (answers,
            then takes more messages with subagent_send)."""
            caller = self._caller(ctx.headers)
            try:
                record = await manager.spawn(
                    caller.owner, agent, instruction, mode, depth=caller.depth, parent=caller.handle
                )
            except SubagentRefused as err:
                raise ToolError(f"refused: {err}") from None
            if mode in ("sync", "warm") and not answered(mode, record.status):
                raise ToolError(f"subagent {record.handle} {record.status}: {record.error}")
            if mode == "sync":
                return str(record.result)
            return json.dumps(record.status_json())

        @mcp.tool(structured_output=False)  # plain text: the agent reads the answer itself, not {"result": …}
        async def subagent_send(handle: str, message: str, ctx: Context = None) -> str:  # type: ignore[assignment]
            """Send one more message to a warm subagent and return its answer."""
            caller = self._caller(ctx.headers)
            try:
                record = await manager.send(handle, caller.owner, message)
            except (SubagentRefused, SubagentNotFound) as err:
                raise ToolError(_say(err)) from None
            if record.error and record.status == "failed":
                raise ToolError(f"subagent {handle} failed: {record.error}")
            return str(record.result)

        @mcp.tool(structured_output=False)  # plain text: the agent reads the answer itself, not {"result": …}
        async def subagent_status(handle: str, ctx: Context = None) -> str:  # type: ignore[assignment]
            """A subagent's status (and result once it has one), as JSON."""
            caller = self._caller(ctx.headers)
            try:
                return json.dumps(manager.get(handle, caller.owner).status_json())
            except SubagentNotFound as err:
                raise ToolError(_say(err)) from None

        @mcp.tool(structured_output=False)  # plain text: the agent reads the answer itself, not {"result": …}
        async def subagent_result(handle: str, wait: bool = False, ctx: Context = None) -> str:  # type: ignore[assignment]
            """A subagent's result; with wait=true, after its current turn ends."""
            caller = self._caller(ctx.headers)
            try:
                record = await manager.result(handle, caller.owner, wait=wait)
            except SubagentNotFound as err:
                raise ToolError(_say(err)) from None
            return json.dumps(record.status_json())

        @mcp.tool(structured_output=False)  # plain text: the agent reads the answer itself, not {"result": …}
        async def subagent_kill(handle: str, reason: str = "", ctx: Context = None) -> str:  # type: ignore[assignment]
            """Stop a subagent (its agent process is ended)."""
            caller = self._caller(ctx.headers)
            try:
                record = await manager.kill(handle, caller.owner, reason or None)
            except SubagentNotFound as err:
                raise ToolError(_say(err)) from None
            return json.dumps(record.status_json())

        return mcp

    async def serve(self, *, task_status: "anyio.abc.TaskStatus[None]" = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve on 127.0.0.1 until cancelled; ``task_status.started()`` once it accepts connections. A cancel
        stops it as uvicorn's shutdown does (open connections get ``timeout_graceful_shutdown``, 2 s, then are
        closed; the app's lifespan shutdown runs), so the drain writes nothing but JSON lines."""
        import uvicorn

        from anyagentd.listen import listening_socket

        sock = listening_socket("127.0.0.1", self.port)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        app = self.mcp.streamable_http_app()
        started = anyio.Event()

        class Server(uvicorn.Server):
            def capture_signals(self) -> Any:  # signals are the daemon's: uvicorn would take and restore them
                return nullcontext()

            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets=sockets)
                started.set()  # serving (``started``), or failed to: either way, no longer starting

        # log_config None: uvicorn's records go to the daemon's JSON lines, not uvicorn's own text handler
        server = Server(
            uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
        )
        server.config.setup_event_loop = lambda: None  # type: ignore[method-assign]
        self._server = server

        async def run() -> None:
            # shielded: the daemon's cancel must not reach the app's lifespan (starlette would report the
            # CancelledError as a failed shutdown, a traceback on stderr); should_exit stops it, gracefully
            with anyio.CancelScope(shield=True):
                await server.serve([sock])

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            if not server.started:
                raise RuntimeError(f"the subagent MCP server did not start on {self.url}")
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                server.should_exit = True


def _say(err: Exception) -> str:
    if isinstance(err, SubagentNotFound):
        return f"no such subagent: {err.args[0]}"
    return f"refused: {err}"


__all__ = ["Caller", "SubagentMcpServer"]
