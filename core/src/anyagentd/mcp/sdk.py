"""Running a check against a live MCP server with the official ``mcp`` SDK (imported lazily: core does not
depend on ``mcp``, the transport plugins do).

:func:`list_tools` enters an SDK client transport (an async context manager yielding the read/write streams),
initializes the session, lists every tool (following pagination) and leaves, all within ``timeout`` seconds; a
failure becomes ``ProtocolFailed`` (or ``SpawnFailed`` when ``spawn`` says the transport starts a process that
could not be started) with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio

from ..errors import AnyagentError, ProtocolFailed, SpawnFailed
from .interface import McpToolInfo


def leaf_errors(err: BaseException) -> list[BaseException]:
    """The non-group exceptions inside ``err`` (itself when it is not an ``ExceptionGroup``)."""
    if isinstance(err, BaseExceptionGroup):
        return [leaf for sub in err.exceptions for leaf in leaf_errors(sub)]
    return [err]


def describe(err: BaseException) -> str:
    """A one-line reason for ``err``: its type and message, following ``__cause__`` once."""
    text = " ".join(str(err).split()[:60]) or type(err).__name__
    text = text.split(" For more information check:")[0]
    if not text.startswith(type(err).__name__):
        text = f"{type(err).__name__}: {text}"
    cause = err.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def spawn_failed(detail: str) -> SpawnFailed:
    """``SpawnFailed`` whose message is ``detail`` itself (not "could not start the agent: ...")."""
    err = SpawnFailed(detail)
    err.message = detail
    err.args = (detail,)
    return err


async def list_tools(
    name: str,
    transport: Callable[[], AbstractAsyncContextManager[Any]],
    *,
    timeout: float,
    spawn_errors: tuple[type[BaseException], ...] = (),
    stderr: Callable[[], str] | None = None,
) -> list[McpToolInfo]:
    """The tools of MCP server ``name`` reached through ``transport()`` (an SDK client transport).

    ``spawn_errors``: exception types meaning the server process could not be started (→ ``SpawnFailed``);
    ``stderr``: returns the server's stderr tail to add to the reason.
    """
    from mcp.client import Client

    tools: list[McpToolInfo] = []

    async def run() -> None:
        async with Client(transport(), mode="legacy", read_timeout_seconds=timeout) as client:
            cursor = None
            while True:
                result = await client.list_tools(cursor=cursor)
                tools.extend(McpToolInfo(t.name, t.description or "") for t in result.tools)
                cursor = result.next_cursor
                if not cursor:
                    break

    def tail() -> str:
        text = stderr().strip() if stderr else ""
        return f"; stderr: {text[-2000:]}" if text else ""

    try:
        with anyio.fail_after(timeout if math.isfinite(timeout) else None):
            await run()
    except TimeoutError:
        raise ProtocolFailed(
            f"MCP server {name!r} did not answer initialize and tools/list within {timeout:g} s{tail()}"
        ) from None
    except AnyagentError:
        raise
    except Exception as err:  # noqa: BLE001 - every SDK failure becomes a typed error with its reason
        leaves = [e for e in leaf_errors(err) if not isinstance(e, anyio.get_cancelled_exc_class())] or [err]
        spawn = next((e for e in leaves if spawn_errors and isinstance(e, spawn_errors)), None)
        if spawn is not None:
            raise spawn_failed(f"MCP server {name!r} could not be started: {describe(spawn)}{tail()}") from err
        reason = "; ".join(dict.fromkeys(describe(e) for e in leaves))
        raise ProtocolFailed(f"MCP server {name!r} failed its check: {reason}{tail()}") from err
    return tools
