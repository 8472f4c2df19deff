"""The scripted agent, catalog id ``mock``: plays a :mod:`~anyagentd.mock.script` with no process and no network.

It is an ordinary adapter (registered through the ``register_adapters`` hook like any plugin), so it drives every
engine path: TurnAck gating (``stale_before_ack``), steering, questions and permissions (``AwaitAnswer``),
non-deterministic turn ends (inferred completion), agent death (``Die`` → ``Exited`` status ``"9"``), floods
(``Repeat``), live options (``options``; each option's ``current`` in ``details`` follows the configuration) and
answers that change what follows (``{"AwaitAnswer": {"allow": [...], "deny": [...]}}``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel

from ..adapters.interface import AdapterLink, AgentAdapter, AgentConnection, PromptInput
from ..model import (
    AgentDetails,
    AgentInstallation,
    Answer,
    AnswerPermission,
    Authenticated,
    Capabilities,
    ConfigValue,
    SessionConfiguration,
    SessionOptions,
    TextDelta,
    diagnostic,
)
from .script import AwaitBranch, Emit, EmitWith, End, Repeat, Script, Sleep, Step, load_script

MOCK_ID = "mock"
FRAMES_PER_READ = 256
"""Frames the scripted agent emits between yields to the event loop: a pipe read's worth. A real adapter yields
every line of one 64 KiB read of its agent's stdout (``adapters.process``) before it awaits again: some 250 frames
of a flood (Claude's and Codex's text deltas are ~250-byte lines); 256 is also the script's default report buffer
(the engine's ``adapter_buffer``), past which the mock waits for the engine anyway. (It was 16, then 64: each
yield costs the engine a round of the event loop, ~30 us, so 1.9 us then 0.47 us per event; bench/README.md.)"""


def _details(script: Script, configuration: dict[str, ConfigValue] | None = None) -> AgentDetails:
    """The scripted agent's details; each option's ``current`` is its value in ``configuration`` when set."""
    features = ["Permissions", "Questions"] + (["Steer"] if script.steer else [])
    values = configuration or {}
    options = [o.model_copy(update={"current": values[o.id]}) if o.id in values else o for o in script.options]
    return AgentDetails(
        version="mock",
        auth=Authenticated(kind="ApiKey"),
        capabilities=Capabilities(features=features, mcp_transports=[]),
        config_options=options,
        commands=list(script.commands),
    )


class MockAdapter(AgentAdapter):
    """Adapter for the scripted agent. ``config["script"]``: a path, an example name or a dict (default: the
    ``hello`` example)."""

    PLUGIN_NAME = "mock"

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        source = self.config.get("script") or "hello"
        self.script = load_script(source)
        self.report_buffer = self.script.buffer

    def pinned_installations(self) -> list[AgentInstallation]:
        # The scripted agent runs in this process: it has no executable (its script is not one).
        return [AgentInstallation(id=MOCK_ID, name="Scripted agent", executable_path="mock", source="Pinned")]

    async def probe(self, installation: AgentInstallation) -> AgentDetails:
        return _details(self.script)

    async def connect(
        self, installation: AgentInstallation, options: SessionOptions, link: AdapterLink, *, no_tools: bool = False
    ) -> AgentConnection:
        self.render_mcp(options.mcp_servers, {})  # the scripted agent takes no MCP server: refuse them clearly
        return MockConnection(self.script, options, link)


def _unrolled(steps: list[Step]) -> Iterator[Step]:
    """``steps`` with every ``Repeat`` played out, lazily (a flood's 200,000 steps are never held): a plain
    iterator, so a repeated step costs no coroutine of its own (issue 17)."""
    for step in steps:
        if not isinstance(step, Repeat):
            yield step
        elif any(isinstance(inner, Repeat) for inner in step.steps):
            for _ in range(step.times):
                yield from _unrolled(step.steps)
        else:
            for _ in range(step.times):
                yield from step.steps


class MockConnection(AgentConnection):
    """One session of the scripted agent: each StartTurn plays the next turn of the script from its start."""

    def __init__(self, script: Script, options: SessionOptions, link: AdapterLink) -> None:
        self.script = script
        self.link = link
        values: dict[str, ConfigValue] = {o.id: o.current for o in script.options if o.current is not None}
        values.update(options.configure)
        self.configuration = SessionConfiguration(options=values)
        self.details = _details(script, values)
        self.deterministic_turn_end = script.deterministic
        self.deterministic_agent_turn_end = script.deterministic_agent
        self._turns = iter(script.turns)
        self._player: anyio.CancelScope | None = None
        self._ended = True  # whether the playing turn has played its End
        self._answered = anyio.Event()
        self._allowed = True  # whether the last answer allowed (or answered) rather than denied
        self._dead = False
        self._emitted = 0
        self._played = 0  # turns of the script played so far

    async def start_turn(self, turn_id: str, prompt: PromptInput) -> None:
        steps = next(self._turns, None)
        self.link.start_soon(self._play, steps)

    async def _play(self, steps: list[Step] | None) -> None:
        with anyio.CancelScope() as scope:
            self._player, self._ended = scope, False
            if self.script.stale_before_ack:
                await self.link.emit(TextDelta(message_id="stale", text="(stale frame from the previous turn)"))
            await self.link.turn_ack()
            if steps is None:
                # An exhausted script hangs (a stand-in for an agent that never ends its turn); say so once.
                await self.link.emit(
                    diagnostic(
                        "Warning",
                        f"the mock's script has no turn {self._played + 1} "
                        f"(it has {self._played}): this turn never ends; cancel it",
                    )
                )
                await anyio.sleep_forever()
            else:
                self._played += 1
                await self._steps(steps)
        if self._player is scope:
            self._player = None

    async def _steps(self, steps: list[Step]) -> None:
        for step in _unrolled(steps):
            if isinstance(step, (Emit, EmitWith)):
                if isinstance(step, Emit):
                    await self.link.emit(step.value)
                else:
                    await self.link.emit(step.event, extensions=step.extensions or None)
                self._emitted += 1
                if not self._ended and self._emitted % FRAMES_PER_READ == 0:
                    # Let the engine and the consumer run now and then, as a real agent's pipe delivers a few
                    # frames per read; steps after End play back to back (trailing frames reach the engine
                    # together, so they beat a queued prompt).
                    await anyio.lowlevel.checkpoint()
            elif isinstance(step, End):
                self._ended = True
                await self.link.turn_ended(step.value)
            elif isinstance(step, Sleep):
                await anyio.sleep(step.value / 1000)
            elif step == "AwaitAnswer" or isinstance(step, AwaitBranch):
                await self._answered.wait()
                self._answered = anyio.Event()
                if isinstance(step, AwaitBranch):
                    await self._steps(step.allow if self._allowed else step.deny)
            elif step == "Die":
                self._dead = True
                await self.link.exited("9", "the scripted agent died")
                await anyio.sleep_forever()

    async def steer(self, prompt: PromptInput) -> None:
        accepted = self.script.steer and not self.script.steer_rejects
        self.link.start_soon(self.link.steered, accepted)

    async def answer(self, request_id: str, answer: Answer) -> None:
        self._allowed = not (isinstance(answer, AnswerPermission) and answer.value.startswith("Deny"))
        self._answered.set()

    async def configure(self, option: str, value: ConfigValue) -> None:
        options = dict(self.configuration.options, **{option: value})
        self.configuration = SessionConfiguration(options=options)
        self.details = _details(self.script, options)
        configuration, details = self.configuration, self.details
        self.link.start_soon(lambda: self.link.info_changed(configuration=configuration, details=details))

    async def cancel(self) -> None:
        # Drop the turn's remaining steps and end it Cancelled (reported from a task: never blocks the caller).
        if self._dead or self._ended:
            return
        if self._player is not None:
            self._player.cancel()
            self._player = None
        self._ended = True
        self.link.start_soon(self.link.turn_ended, "Cancelled")

    async def close(self) -> None:
        if self._player is not None:
            self._player.cancel()
            self._player = None

    async def kill(self) -> None:
        await self.close()
