"""What every process-backed connection shares, for an adapter to compose instead of copy.

- :class:`ProcessConnection`: an :class:`~.interface.AgentConnection` that owns its :class:`~.process.AgentProcess`
  and :class:`~.interface.AdapterLink`, the closing flag, the end of the agent's output (:meth:`output_ended`:
  the exit status, stderr, ``Exited`` unless we are closing), and ``close``/``kill``/:meth:`abandon`.
- :func:`short_lived`: run a body against a connection no session owns (``probe``, ``plan_usage``) and stop it.
- The adapters' shared timers, each defined once: :data:`HANDSHAKE_TIMEOUT` (the seconds an agent gets for its
  handshake where no engine bounds it, a probe: ``EngineSettings.handshake_timeout``'s default),
  :data:`REQUEST_TIMEOUT`, :data:`INTERRUPT_ON_CLOSE`, :data:`EXIT_WAIT`, :data:`ABANDON_GRACE` and
  :data:`~anyagentd.adapters.process.CLOSE_STEP` (whose home is :mod:`.process`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ..engine.settings import EngineSettings
from ..errors import HandshakeTimeout
from .interface import AdapterLink, AgentConnection, DiscardingLink
from .process import CLOSE_STEP, AgentProcess

HANDSHAKE_TIMEOUT: float = EngineSettings.handshake_timeout
"""Seconds an agent gets to complete its handshake by default: ``EngineSettings.handshake_timeout``'s default
(30 s), its one home, named here for the adapters that import it (the engine's setting bounds a session's connect;
this bounds what no engine does, e.g. ``probe``). Adapters read ``config["handshake_timeout"]`` through
:attr:`AgentAdapter.handshake_timeout <anyagentd.adapters.interface.AgentAdapter.handshake_timeout>`."""

REQUEST_TIMEOUT = 10.0
"""Seconds an adapter waits for the agent's answer to a request it sends after the handshake (Claude Code's
``set_model`` / ``rewind_*`` / version, ACP's ``session/set_mode`` / ``set_config_option``); then it reports the
request unanswered."""

INTERRUPT_ON_CLOSE = 0.5
"""Seconds a connection's ``close`` gives the interrupt of a running turn (and the denial of its open requests)
before it closes stdin (:meth:`ProcessConnection.close`)."""

EXIT_WAIT = 2.0
"""Seconds an adapter waits for the exit status of an agent whose output ended during the handshake (the output
can end before the exit is reaped), to name it in the error."""

ABANDON_GRACE = 1.0
"""Seconds :meth:`ProcessConnection.abandon` gives the agent after closing its stdin, and after SIGTERM."""

C = TypeVar("C", bound="ProcessConnection")
T = TypeVar("T")


class ProcessConnection(AgentConnection):
    """A connection to an agent running as one :class:`AgentProcess`, reporting on ``link``.

    Subclasses read frames in a task of their own and call :meth:`output_ended` (shielded) when the agent's output
    ends; they extend :meth:`close` (e.g. interrupt a running turn first) and may override :meth:`on_output_end`
    (fail what waits for a reply) and :meth:`release` (their own resources, after the process is gone).
    """

    close_step: float = CLOSE_STEP
    """Seconds :meth:`close` waits after closing stdin, and again after SIGTERM."""

    def __init__(self, process: AgentProcess, link: AdapterLink) -> None:
        self.process = process
        self.link = link
        self.exit_status: str | None = None
        """The agent's exit status once its output ended (``"exit status: 0"``, ``"signal: 9 (SIGKILL)"``)."""
        self.closing = False
        """Whether we are ending the agent (close, kill, abandon): its exit is then no news to report. A subclass's
        ``close`` sets it before it interrupts a running turn."""
        self._output_done = anyio.Event()

    @property
    def output_done(self) -> bool:
        """Whether the agent's output has ended."""
        return self._output_done.is_set()

    async def wait_output_done(self) -> None:
        await self._output_done.wait()

    def reports_exit(self) -> bool:
        """Whether the end of the agent's output is reported as ``Exited`` (default: unless we are closing)."""
        return not self.closing

    async def on_output_end(self) -> None:
        """Called first when the output ended (shielded): fail what waits for the agent's replies."""

    async def output_ended(self) -> None:
        """The agent's output ended: note it, wait for the exit status and stderr, and report ``Exited`` unless we
        are closing. Shielded from cancellation; call it from the reader's ``finally``."""
        with anyio.CancelScope(shield=True):
            self._output_done.set()
            await self.on_output_end()
            self.exit_status = await self.process.wait()
            await self.process.stderr_drained()
            if self.reports_exit():
                await self.link.exited(self.exit_status, self.process.stderr_tail())

    async def release(self) -> None:
        """What to free once the process is gone (a temporary home…); called by close, kill and abandon."""

    async def close(self) -> None:
        """End the agent gracefully: stdin closed, SIGTERM, SIGKILL, :attr:`close_step` s apart."""
        self.closing = True
        try:
            await self.process.terminate(grace=self.close_step)
        finally:
            await self.release()

    async def kill(self) -> None:
        """SIGKILL the agent's process group at once."""
        self.closing = True
        try:
            await self.process.kill()
        finally:
            await self.release()

    async def complete_handshake(self, handshake: Callable[[], Awaitable[None]], timeout: float, what: str) -> None:
        """Run ``handshake()`` within ``timeout`` seconds; on any failure :meth:`abandon` the agent and raise it
        (a timeout as ``HandshakeTimeout("<what> did not complete within <timeout> s")``)."""
        try:
            with anyio.fail_after(timeout):
                await handshake()
        except TimeoutError:
            await self.abandon()
            raise HandshakeTimeout(f"{what} did not complete within {timeout:g} s") from None
        except BaseException:
            await self.abandon()
            raise

    async def abandon(self, grace: float = ABANDON_GRACE) -> None:
        """Stop an agent nobody will use (a failed handshake, the end of a probe); shielded, never raises."""
        self.closing = True
        with anyio.CancelScope(shield=True):
            try:
                await self.process.terminate(grace=grace)
            finally:
                await self.release()


async def short_lived(
    open_connection: Callable[[DiscardingLink], Awaitable[C]], body: Callable[[C], Awaitable[T]]
) -> T:
    """Open a connection no session owns, run ``body(conn)`` and stop it: ``open_connection(link)`` starts it on a
    :class:`DiscardingLink` whose tasks run in a task group of this call. Returns what ``body`` returns; raises what
    ``open_connection`` or ``body`` raise, as themselves (not wrapped in an ``ExceptionGroup``)."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        try:
            conn = await open_connection(DiscardingLink(tg.start_soon))
        except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
            failure.append(exc)
        else:
            try:
                outcome.append(await body(conn))
            except Exception as exc:  # noqa: BLE001 - re-raised below
                failure.append(exc)
            finally:
                await conn.abandon()
        tg.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]
