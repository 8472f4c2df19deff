"""Issue 27: one daemon, many agents — the pool's bounds hold per agent and in total. Each agent has its own
``Conversations`` (its own ``[agents.pool]`` cap and idle close), all members of one daemon-wide ``Pool``
(``[a2a.pool]``: ``max_live`` over every agent, ``max_rss_mb`` of the whole process tree). In process, with fake
sessions that stay Idle (in the style of test_a2a_warm's ``NeverOpens``)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from anyagentd_a2a.conversations import Conversation, Conversations, PoolLimits
from anyagentd_a2a.pool import MIB, Pool

pytestmark = pytest.mark.anyio


class Session:
    """An agent session that stays where it is put (``Idle`` unless told otherwise); it resumes when ``resumable``."""

    def __init__(self, resumable: bool) -> None:
        self.closed, self.status, self.resumable = False, "Idle", resumable

    def info(self) -> Any:
        capabilities = SimpleNamespace(has=lambda name: self.resumable and name == "Resume")
        token = "tok" if self.resumable else None
        return SimpleNamespace(resume_token=token, details=SimpleNamespace(capabilities=capabilities))

    def snapshot(self) -> Any:
        return SimpleNamespace(resume_token="tok" if self.resumable else None)

    async def close(self) -> None:
        self.closed = True


class Opens:
    """The conversations' agent sessions: each open gives a new :class:`Session` (resumable for a contextId in
    ``resumable``)."""

    def __init__(self, resumable: set[str] | None = None) -> None:
        self.resumable = resumable or set()

    async def open(self, conversation: Any, opening: str = "resume") -> Any:
        return Session(conversation.context_id in self.resumable)

    def remember(self, conversation: Any, token: str | None) -> None:
        return None


def agent(
    tmp_path: Path, pool: Pool, name: str, limits: PoolLimits | None = None, resumable: set[str] | None = None
) -> Conversations:
    """Agent ``name``'s conversations, a member of ``pool``."""
    return Conversations(
        tmp_path / name,
        sessions=Opens(resumable),
        start_pump=lambda *a: None,
        limits=limits or PoolLimits(),
        pool=pool,
        agent=name,
    )


async def opened(member: Conversations, context_id: str, at: float) -> Conversation:
    """``member``'s conversation ``context_id`` with its session opened (making room in the pool as a message
    does), last used at ``at``."""
    conversation = member.conversation("operator", context_id)
    await conversation.session_for()
    conversation.last_active = at
    return conversation


def live_ids(*members: Conversations) -> set[str]:
    return {c.context_id for member in members for c in member.live()}


async def test_an_agents_cap_evicts_its_own_least_recently_used_idle_conversation_never_anothers(
    tmp_path: Path, caplog: Any
) -> None:
    pool = Pool(PoolLimits(max_live=0))
    a = agent(tmp_path, pool, "a", PoolLimits(max_live=2))
    b = agent(tmp_path, pool, "b")
    await opened(b, "b1", at=1)  # the least recently used of all, but b's: a's cap never touches it
    await opened(a, "a1", at=2)
    await opened(a, "a2", at=3)
    with caplog.at_level(logging.INFO, logger="anyagentd.a2a"):
        await opened(a, "a3", at=4)
    assert live_ids(a) == {"a2", "a3"} and live_ids(b) == {"b1"}
    assert (a.evictions, b.evictions) == (1, 0)
    said = [r.getMessage() for r in caplog.records]
    assert (
        "pool: agent a: 2 live agents of its own, its cap 2; evicting the least recently used conversation a1" in said
    )
    # b has no cap of its own: more of its conversations open freely
    await opened(b, "b2", at=5)
    await opened(b, "b3", at=6)
    assert live_ids(b) == {"b1", "b2", "b3"} and b.evictions == 0
    # a's cap still counts a's own only: a4 evicts a2, not b1
    await opened(a, "a4", at=7)
    assert live_ids(a) == {"a3", "a4"} and live_ids(b) == {"b1", "b2", "b3"}
    assert (a.evictions, b.evictions) == (2, 0)


async def test_the_daemon_cap_evicts_across_agents(tmp_path: Path, caplog: Any) -> None:
    pool = Pool(PoolLimits(max_live=3))
    a = agent(tmp_path, pool, "a")
    b = agent(tmp_path, pool, "b", resumable={"b2"})
    await opened(b, "b1", at=1)
    await opened(a, "a1", at=2)
    await opened(a, "a2", at=3)
    with caplog.at_level(logging.INFO, logger="anyagentd.a2a"):
        await opened(a, "a3", at=4)  # 3 live in all: the least recently used of any agent goes, b's b1
    assert live_ids(a) == {"a1", "a2", "a3"} and live_ids(b) == set()
    assert (a.evictions, b.evictions) == (0, 1)  # counted on the victim's agent
    said = [r.getMessage() for r in caplog.records]
    assert "pool: agent b: 3 live agents in all, cap 3; evicting the least recently used conversation b1" in said
    assert any(m.startswith("pool: agent b: the agent of conversation b1 cannot resume") for m in said), said
    # one whose agent resumes loses nothing: it goes first, though a1 is older
    await opened(b, "b2", at=5)  # evicts a1 (the LRU; none resumes)
    assert live_ids(a, b) == {"a2", "a3", "b2"} and a.evictions == 1
    await opened(a, "a4", at=6)
    assert live_ids(a, b) == {"a2", "a3", "a4"}
    assert (a.evictions, b.evictions) == (1, 2)


async def test_the_rss_bound_evicts_across_agents(tmp_path: Path) -> None:
    holder: dict[str, Pool] = {}
    pool = holder["pool"] = Pool(PoolLimits(max_rss_mb=100), rss=lambda: len(holder["pool"].live()) * 60 * MIB)
    a = agent(tmp_path, pool, "a")
    b = agent(tmp_path, pool, "b")
    await opened(b, "b1", at=1)
    await opened(a, "a1", at=2)  # 2 live: 120 MiB, over the bound
    await opened(a, "a2", at=3)  # b's b1, the least recently used of any agent, goes first: 60 MiB
    assert live_ids(a, b) == {"a1", "a2"}
    assert (a.evictions, b.evictions) == (0, 1)
    await opened(b, "b2", at=4)  # and b's opening closes a's a1
    assert live_ids(a, b) == {"a2", "b2"}
    assert (a.evictions, b.evictions) == (1, 1)


async def test_a_busy_conversation_is_never_closed_it_opens_past_the_cap(tmp_path: Path, caplog: Any) -> None:
    pool = Pool(PoolLimits(max_live=2))
    a = agent(tmp_path, pool, "a", PoolLimits(max_live=1))
    b = agent(tmp_path, pool, "b")
    a1 = await opened(a, "a1", at=1)
    a.new_run(a1, "task-a1")  # a task of it runs
    b1 = await opened(b, "b1", at=2)
    b1.session.status = "Running"  # its session is in a turn
    with caplog.at_level(logging.INFO, logger="anyagentd.a2a"):
        await opened(a, "a2", at=3)
    assert live_ids(a, b) == {"a1", "a2", "b1"}  # nothing closed
    assert not a1.session.closed and not b1.session.closed
    assert (a.evictions, b.evictions) == (0, 0)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "pool: agent a: 1 live agents of its own, its cap 1 and none idle; opening conversation a2 past the cap",
        "pool: agent a: 2 live agents in all, cap 2 and none idle; opening conversation a2 past the cap",
    ]
    # past its own cap with none of its own idle, another agent's idle conversation is not closed for it
    b1.session.status = "Idle"
    pool.limits = PoolLimits(max_live=0)
    await opened(a, "a3", at=4)
    assert live_ids(b) == {"b1"} and b.evictions == 0


async def test_values_per_agent_and_totals(tmp_path: Path) -> None:
    pool = Pool(PoolLimits(max_live=5, max_rss_mb=100), rss=lambda: 123)
    a = agent(tmp_path, pool, "a", PoolLimits(max_live=2, idle_close=30))
    b = agent(tmp_path, pool, "b", PoolLimits(idle_close=0), resumable={"b1"})
    c = agent(tmp_path, pool, "c", PoolLimits(max_live=9))
    for name, at in (("a1", 1), ("a2", 2), ("a3", 3)):
        await opened(a, name, at)
    await opened(b, "b1", at=4)
    await b.close_idle(0)  # b1's agent resumes: closed
    assert a.values() == {**pool.values_of(a), "tokensIn": 0, "tokensOut": 0, "costUsd": 0.0}  # and what it spent
    assert pool.values_of(a) == {
        "liveAgents": 2,
        "maxLive": 2,  # its own cap, lower than the daemon's
        "agentRssBytes": 123,
        "maxRssBytes": 100 * MIB,
        "evictions": 1,
        "idleCloses": 0,
        "idleCloseSeconds": 30,
    }
    assert pool.values_of(b) == {
        "liveAgents": 0,
        "maxLive": 5,  # no cap of its own: the daemon's
        "agentRssBytes": 123,
        "maxRssBytes": 100 * MIB,
        "evictions": 0,
        "idleCloses": 1,
        "idleCloseSeconds": 0,
    }
    assert c.values()["maxLive"] == 5  # the daemon's, lower than its own
    assert pool.totals() == {"liveAgents": 2, "maxLive": 5, "evictions": 1, "idleCloses": 1}
    free = Pool(PoolLimits(max_live=0))
    assert agent(tmp_path, free, "d").values()["maxLive"] == 0  # neither is set: no cap
    assert agent(tmp_path, free, "e", PoolLimits(max_live=3)).values()["maxLive"] == 3


async def test_without_a_pool_the_conversations_are_their_own_daemon(tmp_path: Path, caplog: Any) -> None:
    """One agent alone (no ``pool``): a private pool with it the only member, its limits the daemon's — today's
    behaviour, its log lines naming no agent, one warning when it opens past its cap."""
    alone = Conversations(
        tmp_path, sessions=Opens(), start_pump=lambda *a: None, limits=PoolLimits(max_live=1), rss=lambda: 7
    )
    assert alone.pool.members == [alone] and alone.pool.limits is alone.limits and alone.rss() == 7
    first = await opened(alone, "x", at=1)
    with caplog.at_level(logging.INFO, logger="anyagentd.a2a"):
        await opened(alone, "y", at=2)
    assert live_ids(alone) == {"y"} and first.session.closed
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == "pool: 1 live agents, cap 1; evicting the least recently used conversation x"
    alone.new_run(alone.conversation("operator", "y"), "task-y")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="anyagentd.a2a"):
        await opened(alone, "z", at=3)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "pool: 1 live agents, cap 1 and none idle; opening conversation z past the cap"
    ]
    assert alone.pool.values_of(alone) == {
        "liveAgents": 2,
        "maxLive": 1,
        "agentRssBytes": 7,
        "maxRssBytes": 0,
        "evictions": 1,
        "idleCloses": 0,
        "idleCloseSeconds": 900.0,
    }
    assert alone.pool.totals() == {"liveAgents": 2, "maxLive": 1, "evictions": 1, "idleCloses": 0}
