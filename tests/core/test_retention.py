"""Sessions of a Runtime: owner and labels (issue 9.5), and retention of closed sessions by count and by age
(issue 9.3): readable (info, projections, log) until retired, then unknown."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from anyagentd.engine.settings import EngineSettings
from anyagentd.errors import InvalidConfiguration, UnknownSession
from anyagentd.runtime import Runtime

pytestmark = pytest.mark.anyio


def runtime(**kw: Any) -> Runtime:
    return Runtime(mock_script="hello", settings=EngineSettings(**kw))


async def hello_turn(session: Any) -> None:
    await session.prompt("hi")
    async for event in session.events():
        if event.tag == "TurnEnded":
            return


async def test_owner_and_labels_are_kept_and_select_sessions(tmp_path):
    async with runtime() as rt:
        labels = {"team": "docs", "ticket": "42"}
        ann = await rt.open("mock", tmp_path, owner="user:ann", labels=labels)
        bob = await rt.open("mock", tmp_path, owner="user:bob")
        nobody = await rt.open("mock", tmp_path)
        labels["team"] = "changed later"
        assert (ann.owner, ann.labels) == ("user:ann", {"team": "docs", "ticket": "42"})
        assert (nobody.owner, nobody.labels) == (None, {})
        assert rt.sessions(owner="user:ann") == [ann]
        assert rt.sessions() == [ann, bob, nobody]
        assert rt.sessions(owner="user:carol") == []
        await bob.close()
        assert rt.sessions() == [ann, nobody] and rt.sessions(owner="user:bob") == []
        assert rt.sessions(owner="user:bob", include_closed=True) == [bob]
        for bad in ({"owner": 7}, {"labels": {"n": 1}}, {"labels": ["a"]}):
            with pytest.raises(InvalidConfiguration):
                await rt.open("mock", tmp_path, **bad)
        assert len(rt.sessions(include_closed=True)) == 3  # the refused opens started nothing


async def test_closed_sessions_stay_readable_then_are_retired_by_count(tmp_path):
    async with runtime(retain_closed=2, retain_closed_seconds=3600) as rt:
        sessions = [await rt.open("mock", tmp_path) for _ in range(5)]
        for session in sessions:
            await hello_turn(session)
            await session.close()
        for retired in sessions[:3]:
            with pytest.raises(UnknownSession):
                rt.session(retired.id)
        for kept in sessions[3:]:
            assert rt.session(kept.id) is kept
            assert kept.snapshot().id == kept.id and kept.snapshot().status == "Idle"
            assert kept.projections.transcript[1].text.startswith("Hello!")
            replay = [e async for e in kept.subscribe()]
            assert replay and replay[0].sequence == 1 and replay[-1].sequence == kept.log.newest_seq
        assert rt.sessions(include_closed=True) == sessions[3:]


async def test_retain_none_retires_at_close(tmp_path):
    async with runtime(retain_closed=0) as rt:
        session = await rt.open("mock", tmp_path)
        await session.close()
        with pytest.raises(UnknownSession):
            rt.session(session.id)


async def test_closed_sessions_are_retired_by_age(tmp_path):
    async with runtime(retain_closed=100, retain_closed_seconds=0.2) as rt:
        old = await rt.open("mock", tmp_path)
        young = await rt.open("mock", tmp_path)
        await old.close()
        assert rt.session(old.id) is old  # readable at first
        with anyio.fail_after(10):  # a hang guard: the retirer wakes when the age is reached
            while old.id in {s.id for s in rt.sessions(include_closed=True)}:
                await anyio.sleep(0.02)
        with pytest.raises(UnknownSession):
            rt.session(old.id)
        assert rt.session(young.id) is young  # an open session is never retired
        await young.close()
        assert rt.session(young.id) is young


async def test_closed_sessions_stay_known_with_the_defaults(tmp_path):
    async with Runtime(mock_script="hello") as rt:
        session = await rt.open("mock", tmp_path)
        await session.close()
        assert rt.session(session.id) is session
        assert rt.settings.retain_closed == 50 and rt.settings.retain_closed_seconds == 600


def test_retention_and_log_tunables_have_env_overrides():
    settings = EngineSettings.from_env(
        {"ANYAGENTD_LOG_SIZE": "128", "ANYAGENTD_RETAIN_CLOSED": "3", "ANYAGENTD_RETAIN_CLOSED_SECONDS": "1.5"}
    )
    assert (settings.log_size, settings.retain_closed, settings.retain_closed_seconds) == (128, 3, 1.5)
    assert EngineSettings().log_size == 4096
