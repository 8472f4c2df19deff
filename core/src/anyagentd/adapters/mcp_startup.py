"""Holding prompts until the MCP servers forwarded at ``open`` are up: one piece for every adapter (issue 32).

An agent CLI may answer its handshake while the servers it was given are still connecting, and a prompt it gets
meanwhile runs without their tools (Claude Code 2.1.197, Codex 0.171: ``docs/agents/claude.md`` and
``docs/agents/codex.md``, "The first prompt waits for the servers"). :class:`McpStartup` is what such an adapter
composes: it knows the forwarded server names, takes the status reports the adapter reads from its agent (mapped
to ``connected`` / ``failed`` / ``pending``), holds the prompts meanwhile, and says what to warn about. It does no
I/O and emits nothing: the adapter asks its agent (polls, or reads notifications), emits the Warning texts it
returns, and sends the held prompts through :meth:`McpStartup.release`.

The life of one::

    startup = McpStartup(names, handshake_timeout, since=spawned, agent="Codex", waiting="starting",
                         failure="did not start")
    # the reader, on each report of the agent's:
    if (warning := startup.settle(name, "failed", error)) is not None:
        await link.emit(diagnostic("Warning", warning))
    # start_turn:
    if startup.holding:
        startup.hold(prompt)          # TurnAck comes when it is sent
    # a task started after the handshake:
    late = await startup.settled()    # every server settled, or the deadline (then: the Warning text)
    if late is not None:
        await link.emit(diagnostic("Warning", late))
    await startup.release(send)       # the held prompts, in order
    # cancel: ``if startup.drop():`` TurnAck, then TurnEnded Cancelled (the agent never had the prompt)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, Literal, TypeVar

import anyio

from ..errors import ProtocolFailed

Status = Literal["connected", "failed", "pending"]
"""A forwarded server's startup, in the piece's words: up, given up on (by the agent), or still connecting."""

STATUSES: tuple[Status, ...] = ("connected", "failed", "pending")

P = TypeVar("P")


class McpStartup(Generic[P]):
    """The startup of the MCP servers forwarded at ``open``, and the prompts held until it is over.

    ``servers``: the forwarded names (none: nothing is ever held). ``timeout``: the most the prompts wait, in seconds
    from ``since`` (an ``anyio.current_time()``, by default now; the adapters pass the spawn time and their
    handshake timeout). ``agent`` (``"Codex"``), ``waiting`` (``"connecting"``, ``"starting"``) and ``failure``
    (``"failed to connect"``, ``"did not start"``) are the words of the Warning texts. ``P`` is whatever the adapter
    holds for a prompt (its ``PromptInput``, or the frame it will write). Build it in the event loop (it reads
    anyio's clock), before the reader that reports statuses starts.

    States: waiting (prompts are held) → settled (every server ``connected`` or ``failed``, :meth:`stop`, or the
    deadline) → released (:meth:`release` has begun: prompts go straight to the agent).
    """

    def __init__(
        self,
        servers: Iterable[str] = (),
        timeout: float = 0.0,
        *,
        since: float | None = None,
        agent: str = "the agent",
        waiting: str = "connecting",
        failure: str = "failed to connect",
    ) -> None:
        self.servers: list[str] = list(servers)
        """The forwarded server names."""
        self.status: dict[str, Status] = {}
        """Each forwarded server's last reported status (a server not reported yet is pending)."""
        self.timeout = timeout
        self.deadline = (anyio.current_time() if since is None else since) + timeout
        """When the prompts stop waiting (``anyio.current_time()``)."""
        self.agent, self.waiting, self.failure = agent, waiting, failure
        self._settled = anyio.Event()
        self._released = not self.servers
        self._releasing = False  # release() is sending the held prompts
        self._held: list[P] = []
        if not self.servers:
            self._settled.set()

    # ------------------------------------------------------------------------------------------- statuses

    @property
    def pending(self) -> list[str]:
        """The forwarded servers neither ``connected`` nor ``failed`` yet, sorted."""
        return sorted(n for n in set(self.servers) if self.status.get(n, "pending") == "pending")

    def remaining(self) -> float:
        """Seconds until the deadline (0 once it has passed): the bound for an adapter's own polling."""
        return max(0.0, self.deadline - anyio.current_time())

    def settle(self, name: str, status: Status, error: str | None = None, *, failure: str | None = None) -> str | None:
        """Note the agent's report that server ``name`` is ``status`` (the agent's word mapped by the adapter).
        Returns the Warning text for ``failed`` — ``MCP server 'name' <failure>: <error>`` (``failure``: this
        report's words instead of the piece's; ``error`` the agent's reason, else "no reason given"), ``None``
        otherwise and for a name not forwarded. The last forwarded server to settle settles the piece (a later
        ``pending`` report does not hold prompts again)."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
        if name not in self.servers:
            return None
        self.status[name] = status
        if not self.pending:
            self._settled.set()
        if status != "failed":
            return None
        return f"MCP server {name!r} {failure or self.failure}: {error or 'no reason given'}"

    def stop(self) -> None:
        """Stop waiting without a Warning: the agent cannot report (its output ended, it refused to say)."""
        self._settled.set()

    async def settled(self) -> str | None:
        """Wait until every forwarded server is settled (or :meth:`stop`), at most until the deadline. Returns the
        Warning text when the deadline came first — ``MCP server(s) 'a', 'b' still <waiting> <timeout> s after
        <agent> started; prompts no longer wait for it/them`` — once; ``None`` otherwise."""
        with anyio.move_on_after(self.remaining()):
            await self._settled.wait()
        if self._settled.is_set():
            return None
        self._settled.set()
        late = self.pending
        if not late:
            return None
        names = ", ".join(repr(name) for name in late)
        servers, them = ("servers", "them") if len(late) > 1 else ("server", "it")
        return (
            f"MCP {servers} {names} still {self.waiting} {self.timeout:g} s after {self.agent} started; "
            f"prompts no longer wait for {them}"
        )

    # ------------------------------------------------------------------------------------------- prompts

    @property
    def holding(self) -> bool:
        """Whether a prompt must be held (:meth:`hold`) rather than sent: until :meth:`release` begins, and while
        prompts it has not sent yet are held (a new one goes behind them)."""
        return not self._released or (self._releasing and bool(self._held))

    def hold(self, prompt: P) -> str | None:
        """Keep ``prompt`` for :meth:`release` (after those already held). Returns, for the first prompt held while
        servers are pending, the Info text that says the prompt waits (``The prompt waits for MCP server(s) 'a'
        (still <waiting>, at most N s more)``), so the client knows why nothing happens yet; else ``None``."""
        self._held.append(prompt)
        pending = self.pending
        if len(self._held) != 1 or not pending:
            return None
        names = ", ".join(repr(name) for name in pending)
        servers = "servers" if len(pending) > 1 else "server"
        return (
            f"The prompt waits for MCP {servers} {names} (still {self.waiting}, at most {self.remaining():.0f} s more)"
        )

    def drop(self) -> bool:
        """Forget the held prompts (a cancel, a close); whether there were any. A cancelled held prompt ends its turn
        there: TurnAck, then TurnEnded Cancelled, the agent never had it."""
        had = bool(self._held)
        self._held.clear()
        return had

    async def release(self, send: Callable[[P], Awaitable[object]]) -> None:
        """From now on prompts are not held; send the held ones, in order, with ``send`` (the adapter's own write,
        which reports TurnAck). Each is taken off before it is sent, so a :meth:`drop` meanwhile stops the rest.
        Stops at a send that raises ``ProtocolFailed`` (the agent is gone: its reader reports the exit)."""
        self._released = self._releasing = True
        try:
            while self._held:
                await send(self._held.pop(0))
        except ProtocolFailed:
            return
        finally:
            self._releasing = False


__all__ = ["STATUSES", "McpStartup", "Status"]
