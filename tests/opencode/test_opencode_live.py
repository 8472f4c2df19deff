"""End to end: the REAL pinned opencode (tests/agents/node_modules/.bin/opencode, ``opencode serve``: an HTTP API
with server-sent events) against the scripted model server's Anthropic API, through the conformance suite.

Fails (never skips) when the CLI is missing: ``agent_bin`` raises. The CLI is found through
``ANYAGENTD_OPENCODE_BIN``; its provider settings come from ``opencode_env`` (``OPENCODE_CONFIG_CONTENT``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from anyagentd_testing.agents import agent_bin, clean_environ, opencode_env
from anyagentd_testing.conformance import Conformance

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def opencode(scripted_agent: Callable[..., Any]) -> Callable[..., Any]:
    """``opencode(script)`` starts a model server with ``script`` and points this process's environment at it."""
    binary = str(agent_bin("opencode", start=__file__))
    return scripted_agent(
        lambda url, home: clean_environ({**opencode_env(url, home), "ANYAGENTD_OPENCODE_BIN": binary})
    )


class TestConformance(Conformance):
    """The adapter contract (anyagentd_testing.conformance) against the real ``opencode serve``."""

    agent = "opencode"
    version = "1.18.33"
    features = frozenset({"Images", "Permissions", "Resume", "Fork", "Compact"})

    @pytest.fixture
    def scripted(self, opencode: Any) -> Any:
        return opencode

    def write_tool(self, name: str) -> dict[str, Any]:
        return {"name": "write", "input": {"filePath": "{{cwd}}/" + name, "content": "hi\n"}}

    def check_permission(self, request: Any) -> None:
        assert request.tool.kind == "Edit"


# ------------------------------------------------------------------------------------------------ opencode's own

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f"
    "15c4890000000d4944415478da63fccfc0500f000485018084a98c210000000049454e44ae426082"
)


async def _until(events: Any, tag: str) -> Any:
    """The kind of the next event ``tag`` from ``events`` (a session's one ``events()`` iterator)."""
    async for event in events:
        if (event.kind if isinstance(event.kind, str) else event.kind.TAG) == tag:
            return event.kind
    raise AssertionError(f"the session ended before {tag}")


async def _turn(session: Any, events: Any, text: str, attachments: tuple[str, ...] = ()) -> Any:
    await session.prompt(text, attachments=list(attachments))
    return (await _until(events, "TurnEnded")).stop


async def test_an_image_reaches_the_model_as_an_image_and_a_file_as_a_mention(opencode: Any, work: Any) -> None:
    from anyagentd.runtime import Runtime

    server = opencode({"turns": [{"text": "A pixel."}]})
    (work / "dot.png").write_bytes(PNG)
    (work / "notes.txt").write_text("notes\n")
    async with Runtime() as rt:
        session = await rt.open("opencode", dir=work)
        assert "Images" in session.info().details.capabilities.features
        files = (str(work / "dot.png"), str(work / "notes.txt"))
        stop = await _turn(session, session.events().__aiter__(), "What is this?", files)
        assert stop.TAG == "Completed"
        await session.close()
    content = server.main_requests()[0]["body"]["messages"][0]["content"]
    images = [c for c in content if c.get("type") == "image"]
    assert len(images) == 1 and images[0]["source"]["media_type"] == "image/png"
    assert base64.b64decode(images[0]["source"]["data"]) == PNG
    texts = " ".join(c.get("text", "") for c in content if c.get("type") == "text")
    assert "What is this?" in texts and f"Attached: {work / 'notes.txt'}" in texts


async def test_mode_and_model_are_options_that_apply_from_the_next_prompt(opencode: Any, work: Any) -> None:
    from anyagentd.errors import InvalidConfiguration
    from anyagentd.runtime import Runtime

    server = opencode({"turns": [{"text": "Planned."}, {"text": "Built."}]})
    async with Runtime() as rt:
        session = await rt.open("opencode", dir=work, configure={"mode": "plan"})
        events = session.events().__aiter__()
        details = session.info().details
        mode, model = details.option("mode"), details.option("model")
        assert {"build", "plan"} <= {c.value for c in mode.kind.choices} and mode.live and mode.current == "plan"
        assert model.current == "anthropic/claude-sonnet-4-5" and model.live
        other = next(c.value for c in model.kind.choices if c.value.startswith("anthropic/claude-haiku"))
        assert (await _turn(session, events, "Plan it")).TAG == "Completed"
        await session.configure("mode", "build")
        await _until(events, "SessionUpdated")
        await session.configure("model", other)
        await _until(events, "SessionUpdated")
        assert session.info().configuration.options == {"mode": "build", "model": other}
        assert (await _turn(session, events, "Build it")).TAG == "Completed"
        with pytest.raises(InvalidConfiguration):
            await session.configure("mode", "nonsense")
        await session.close()
    first, second = server.main_requests()
    assert "Plan mode" in json.dumps(first["body"]["messages"]) and first["model"] == "claude-sonnet-4-5"
    assert "Plan mode ACTIVE" not in json.dumps(second["body"]["messages"][-1])
    assert second["model"] == other.split("/")[1]


async def test_a_compact_ends_when_opencode_has_compacted_and_the_next_prompt_gets_its_answer(
    opencode: Any, work: Any
) -> None:
    """``summarize`` answers before the compaction runs: the compact turn ends at the compaction's idle, so the
    next prompt's turn is its own (not ended by the compaction's idle, its reply not left to an agent turn)."""
    from anyagentd.runtime import Runtime

    server = opencode({"turns": [{"text": "One."}, {"text": "Two."}]})
    async with Runtime() as rt:
        session = await rt.open("opencode", dir=work)
        events = session.events().__aiter__()
        assert (await _turn(session, events, "say kiwi")).TAG == "Completed"
        await session.compact()
        await _until(events, "ContextCompacted")
        assert (await _until(events, "TurnEnded")).stop.TAG == "Completed"
        await session.prompt("say lychee")
        texts = []
        async for event in events:
            tag = event.kind if isinstance(event.kind, str) else event.kind.TAG
            if tag == "TextDelta":
                texts.append(event.kind.text)
            if tag == "TurnEnded":
                assert event.kind.stop.TAG == "Completed"
                break
        assert "".join(texts) == "Two." and session.status == "Idle"
        await session.close()
    last = json.dumps(server.main_requests()[-1]["body"]["messages"])
    assert "say lychee" in last and "say kiwi" not in last  # the compacted history replaced the first exchange


async def test_each_step_reports_its_tokens_once(opencode: Any, work: Any) -> None:
    """A step-finish's ``ContextUsage`` carries ``anyagentd/tokens``: in = input + cache read + cache write, out =
    output, as the model server reported them for that call; the engine sums them over the session."""
    from anyagentd.runtime import Runtime

    calls = [
        {"input_tokens": 700, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 30},
        {"input_tokens": 4, "cache_read_input_tokens": 800, "output_tokens": 6},
    ]
    opencode({"turns": [{"text": "One.", "usage": calls[0]}, {"text": "Two.", "usage": calls[1]}]})
    async with Runtime() as rt:
        session = await rt.open("opencode", dir=work)
        events = session.events().__aiter__()
        reported = []
        for word in ("first", "second"):
            await session.prompt(word)
            async for event in events:
                tag = event.kind if isinstance(event.kind, str) else event.kind.TAG
                if tag == "ContextUsage" and "anyagentd/tokens" in event.extensions:
                    reported.append(event.extensions["anyagentd/tokens"])
                if tag == "TurnEnded":
                    break
        assert reported == [{"in": 820, "out": 30}, {"in": 804, "out": 6}]
        usage = session.projections.usage
        assert (usage.tokens_in, usage.tokens_out) == (1624, 36)
        await session.close()
