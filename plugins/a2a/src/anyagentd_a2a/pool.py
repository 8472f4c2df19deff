"""The daemon-wide pool of live agents: one budget over every agent's :class:`~.conversations.Conversations`.

A daemon that serves several agents gives each its own :class:`~.conversations.Conversations` (its conversations,
its runs, its own bounds — ``[agents.pool]``: ``max_live``, ``idle_close``) and one :class:`Pool` for all of them
(``[a2a.pool]``: ``max_live``, ``max_rss_mb`` over the whole process tree). Before a conversation's session opens,
:meth:`Pool.make_room` — under the one lock — holds first the agent's own cap (evicting only that agent's idle
conversations), then the daemon's cap and RSS bound (evicting any agent's); when no idle conversation is left to
close it opens past the cap, saying so in the log, rather than fail a message. A one-agent daemon's
:class:`~.conversations.Conversations` makes a private pool with itself its only member, its limits both its own
and the daemon's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from anyagentd.adapters.lineage import guardian_pid

log = logging.getLogger("anyagentd.a2a")

MIB = 1024 * 1024


def process_tree_rss(root: int | None = None) -> int:
    """Resident memory, in bytes, of every descendant process of ``root`` (default: this process), read from
    ``/proc/<pid>/stat`` (field 24, in pages); 0 where /proc is not there. The root's own memory is not counted,
    nor the lineage guardian's (:func:`anyagentd.adapters.lineage.guardian_pid`: a child of anyagentd, started
    with the first agent and living on after the last closed, about 9 MiB): what is summed is the agents' (and
    their children's)."""
    root = os.getpid() if root is None else root
    helper = guardian_pid()
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21])
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0, [pid for pid in children.get(root, []) if pid != helper]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class PoolLimits:
    """Bounds on live agents (``[a2a.pool]`` for the daemon, ``[agents.pool]`` for one agent): ``idle_close``
    seconds with no live task before a conversation's agent is closed (0: never), ``max_live`` agents at most (0:
    no cap), ``max_rss_mb`` MiB of the agents' process tree at most (``None``: no bound; the daemon's only — the
    tree is measured whole)."""

    idle_close: float = 900.0
    max_live: int = 0
    max_rss_mb: int | None = None


DEFAULT_LIMITS = PoolLimits()
"""The default bounds: idle close after 15 minutes, no cap, no RSS bound."""


class Pooled(Protocol):
    """What the pool reads of one conversation (:class:`.conversations.Conversation`)."""

    context_id: str
    last_active: float
    session: Any

    @property
    def host(self) -> Member: ...

    @property
    def idle(self) -> bool: ...

    @property
    def resumable(self) -> bool: ...


class Member(Protocol):
    """What the pool reads of one agent's conversations, a member (:class:`.conversations.Conversations`)."""

    limits: PoolLimits
    opening: Any  # the set of its conversations reserved a place, session not yet open
    evictions: int
    idle_closes: int

    @property
    def tag(self) -> str: ...

    def live(self) -> Sequence[Pooled]: ...


def _capped(*caps: int) -> int:
    """The lowest of the caps that are set (0: none is)."""
    return min((cap for cap in caps if cap), default=0)


def _past_the_cap(member: Member, why: str, opening: Pooled) -> None:
    log.warning("pool: %s%s and none idle; opening conversation %s past the cap", member.tag, why, opening.context_id)


class Pool:
    """The daemon's budget of live agents over its :attr:`members` (one :class:`~.conversations.Conversations` per
    agent, each joining with :meth:`join`): ``limits`` are the daemon's (``[a2a.pool]``: ``max_live`` over all
    agents, ``max_rss_mb`` of the agents' process tree as ``rss()`` measures it, in bytes); each member's own
    ``limits.max_live`` caps that agent alone. One lock serialises every :meth:`make_room`."""

    def __init__(self, limits: PoolLimits = DEFAULT_LIMITS, rss: Callable[[], int] = process_tree_rss) -> None:
        self.limits = limits
        self.rss = rss
        self.members: list[Member] = []
        self._room = anyio.Lock()

    def join(self, member: Member) -> None:
        """Count ``member``'s conversations in this pool from now on (once, however often it joins)."""
        if not any(m is member for m in self.members):
            self.members.append(member)

    def live(self) -> list[Pooled]:
        """Every member's conversations that hold an open agent session."""
        return [c for member in self.members for c in member.live()]

    def _own_cap(self, member: Member) -> int:
        """The cap of ``member`` alone: 0 when it has none, or when its limits are the daemon's (a private pool's
        one member: the daemon's cap is the one rule)."""
        return 0 if member.limits is self.limits else member.limits.max_live

    def _over(self, count: int) -> str | None:
        """Why the daemon-wide bounds leave no room with ``count`` live and opening agents, or ``None``."""
        limits = self.limits
        if limits.max_live and count >= limits.max_live:
            in_all = " in all" if len(self.members) > 1 else ""
            return f"{count} live agents{in_all}, cap {limits.max_live}"
        if limits.max_rss_mb and count and self.rss() > limits.max_rss_mb * MIB:
            return f"agents' RSS over {limits.max_rss_mb} MiB"
        return None

    async def _evict(self, why: str, candidates: list[Pooled]) -> bool:
        """Close the least recently used idle conversation of ``candidates`` (one whose agent resumes first: it
        loses nothing), counted on its own agent's :class:`~.conversations.Conversations`; ``False`` when none is
        idle."""
        idle = [c for c in candidates if c.idle]
        if not idle:
            return False
        victim = min(idle, key=lambda c: (not c.resumable, c.last_active))
        host = victim.host
        host.evictions += 1
        log.info("pool: %s%s; evicting the least recently used conversation %s", host.tag, why, victim.context_id)
        if not victim.resumable:
            log.warning(
                "pool: %sthe agent of conversation %s cannot resume; its next message starts a fresh agent conversation",
                host.tag,
                victim.context_id,
            )
        await victim.session.close()
        return True

    async def make_room(self, member: Member, opening: Pooled) -> None:
        """Reserve ``opening`` (a conversation of ``member``) a place among the live agents, closing idle
        conversations while a bound is reached: first ``member``'s own cap (its own live and opening agents; only
        its own least recently used idle conversation goes), then the daemon's cap and RSS bound (every member's
        live and opening agents; any agent's least recently used idle conversation goes). When no idle
        conversation is left to close it opens past the cap, saying so in the log, rather than fail a message. The
        caller discards ``opening`` from ``member.opening`` once its session is open."""
        async with self._room:
            cap = self._own_cap(member)
            while cap:
                own = [c for c in member.live() if c is not opening]
                count = len(own) + len(member.opening)
                if count < cap:
                    break
                why = f"{count} live agents of its own, its cap {cap}"
                if not await self._evict(why, own):
                    _past_the_cap(member, why, opening)
                    break
            while True:
                every = [c for c in self.live() if c is not opening]
                over = self._over(len(every) + sum(len(m.opening) for m in self.members))
                if over is None:
                    break
                if not await self._evict(over, every):
                    _past_the_cap(member, over, opening)
                    break
            member.opening.add(opening)

    def values_of(self, member: Member) -> dict[str, Any]:
        """``member``'s pool as ``status`` shows it (``values``): its live agents, the cap that holds it (the lower
        of its own and the daemon's, 0: none), the agents' tree RSS in bytes and its bound (daemon-wide), its
        evictions and idle closes since start, its idle-close seconds."""
        return {
            "liveAgents": len(member.live()),
            "maxLive": _capped(member.limits.max_live, self.limits.max_live),
            "agentRssBytes": self.rss(),
            "maxRssBytes": (self.limits.max_rss_mb or 0) * MIB,
            "evictions": member.evictions,
            "idleCloses": member.idle_closes,
            "idleCloseSeconds": member.limits.idle_close,
        }

    @property
    def evictions(self) -> int:
        """Idle conversations closed to make room, over every member since start (the metrics' counter)."""
        return sum(m.evictions for m in self.members)

    @property
    def idle_closes(self) -> int:
        """Sessions closed after ``idle_close`` seconds idle, over every member since start (the metrics')."""
        return sum(m.idle_closes for m in self.members)

    def totals(self) -> dict[str, Any]:
        """The whole daemon's pool: live agents, the daemon's cap (0: none), evictions and idle closes over every
        member since start."""
        return {
            "liveAgents": len(self.live()),
            "maxLive": self.limits.max_live,
            "evictions": self.evictions,
            "idleCloses": self.idle_closes,
        }


__all__ = ["DEFAULT_LIMITS", "MIB", "Member", "Pool", "Pooled", "PoolLimits", "process_tree_rss"]
