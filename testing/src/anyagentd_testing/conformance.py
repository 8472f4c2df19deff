"""The adapter conformance suite: the contract every agent adapter must meet, run against a real agent.

An adapter author subclasses :class:`Conformance` in a test module (pytest collects it like any ``Test*`` class)
and says which agent it drives and how it is scripted::

    class TestConformance(Conformance):
        agent = "claude"                          # a catalog id (or an {"acp": {...}} AgentRef)

        @pytest.fixture
        def scripted(self, claude):               # script -> server: starts the scripted model endpoint
            return claude                         # and points the agent's environment at it

        def write_tool(self, name):               # a model-script tool call that writes "hi\\n" to ``name``
            return {"name": "Write", "input": {"file_path": "{{cwd}}/" + name, "content": "hi\\n"}}

Every scenario is a test method, so the names are the same for every agent (``TestConformance::test_cancel_…``):
the turn contract, text assembly, allow lands / deny holds, a question round-trip, cancel mid-turn then the session
lives, resume recalls, kill → Failed → ProcessExited → closed, close leaves no process, every event schema-valid,
and capabilities honest (``test_capability[<feature>]``: a feature advertised is exercised, one not advertised is
refused with ``UnsupportedFeature``). What a scenario needs beyond the agent's advertised capabilities is skipped
by what the agent advertises (``details.capabilities``), never by a list in the test.

Failures say what the adapter must change (``AdapterContractError``: "cancel ended the turn Failed: …"). The
hooks below (scripts, checks of the model's requests) are the only agent-specific parts; the default scripts use
the scripted model endpoint's format (:mod:`anyagentd_testing.model_script`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from anyagentd.model import kind_tag

from .events import EventStream, marked_processes, process_group_alive

STEP = 25.0
"""Seconds any single wait on a real agent may take."""

WRITTEN = "hi\n"
"""What the script's write tool puts in the file."""


class AdapterContractError(AssertionError):
    """The adapter under test broke the contract; the message says which rule and what to fix."""


def require(condition: object, rule: str, fix: str) -> None:
    """Raise :class:`AdapterContractError` ``"<rule>: <fix>"`` unless ``condition`` holds."""
    if not condition:
        raise AdapterContractError(f"{rule}\n  what to fix: {fix}")


# ------------------------------------------------------------------------------------------------ schema


@cache
def _line_validator() -> Any:
    import jsonschema

    schema = json.loads((resources.files("anyagentd") / "schema" / "anyagent-wire.schema.json").read_text("utf-8"))
    return jsonschema.Draft7Validator({"$ref": "#/definitions/Line", "definitions": schema["definitions"]})


def schema_errors(event: Any) -> list[str]:
    """The wire-schema violations of ``event`` (an ``Event``) written as a wire line, as ``path: message``."""
    line = {"event": json.loads(event.__pydantic_serializer__.to_json(event))}
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:200]}"
        for e in _line_validator().iter_errors(line)
    ]


class CheckedStream(EventStream):
    """An :class:`EventStream` that checks every event it reads against the wire schema; a wait that runs out
    raises :class:`AdapterContractError` naming what was awaited and the usual causes."""

    async def next(self, timeout: float | None = None) -> Any:
        event = await super().next(timeout)
        self._check(event)
        return event

    async def until(self, name: str, timeout: float | None = None) -> Any:
        try:
            return await super().until(name, timeout)
        except TimeoutError:
            seen = [e.tag for e in self.seen[-8:]]
            require(
                False,
                f"no {name} within {self.timeout if timeout is None else timeout} s (last events: {seen})",
                STALLED_FIX,
            )

    async def rest(self, timeout: float | None = None) -> list[Any]:
        out = await super().rest(timeout)
        for event in out:
            self._check(event)
        return out

    @staticmethod
    def _check(event: Any) -> None:
        errors = schema_errors(event)
        require(
            not errors,
            f"event {event.tag} is not valid on the wire: {errors[:3]}",
            "build events from anyagentd.model types with the fields the schema requires",
        )


STALLED_FIX = (
    "report TurnAck (link.turn_ack()) when the agent accepts the prompt and before the turn's events and its "
    "TurnEnded: the engine drops content and ends that come before the ack as the previous turn's; end every "
    "turn with link.turn_ended(...); when the agent's output ends, call output_ended() (ProcessConnection's "
    "reader does) so a dead agent fails the turn instead of stalling it"
)


CLOSE_FIX = (
    "close (and kill) must end the agent's whole process group before returning: ProcessConnection.close does, or "
    "call AgentProcess.terminate (kill: AgentProcess.kill) from your connection's close"
)


# ------------------------------------------------------------------------------------------------ helpers


def agent_process(session: Any) -> Any:
    """The ``AgentProcess`` of a session's connection (``connection.process``), for checks of what is left."""
    conn = session.connection
    process = getattr(conn, "process", None)
    require(
        process is not None and getattr(process, "pid", None),
        f"{type(conn).__name__} has no `process` with a pid",
        "a process-backed connection keeps its AgentProcess in `self.process` (ProcessConnection does)",
    )
    return process


async def wait_gone(process: Any, timeout: float = 3.0) -> list[int]:
    """The pids of ``process``'s group and lineage still running once they are gone or ``timeout`` s passed."""
    deadline = time.monotonic() + timeout
    while True:
        left = sorted({*([process.pid] if process_group_alive(process.pid) else []), *marked_processes(process.mark)})
        if not left or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.05)


# ------------------------------------------------------------------------------------------------ the suite


class Conformance:
    """The scenarios; subclass per agent (see the module docstring). Class attributes and hooks to set:

    - ``agent``: the catalog id (or AgentRef dict) ``Runtime.open`` gets.
    - ``scripted`` (a fixture the subclass defines): ``scripted(script) -> server`` starts the scripted model
      endpoint playing ``script`` and points the agent at it; the server has ``set_script``,
      ``wait_for_requests`` and ``main_requests`` (:class:`~anyagentd_testing.model_server.ModelServer`).
    - :meth:`write_tool`: the model-script tool call that makes the agent write ``hi\\n`` to a file.
    - optional: :meth:`question_tool` (needed when the agent advertises Questions), :meth:`after_cancel`,
      :meth:`request_text`, :meth:`check_permission`, :meth:`denial_seen`, ``denial_aborts``, ``cancel_within``,
      ``version``.
    """

    pytestmark: ClassVar[list[Any]] = [pytest.mark.anyio]

    agent: ClassVar[Any]
    version: ClassVar[str | None] = None
    """The agent version the handshake must report (``None``: any non-empty one)."""
    features: ClassVar[frozenset[str]] = frozenset()
    """Capabilities the agent is known to have: the handshake must advertise at least these."""
    cancel_within: ClassVar[float] = 8.0
    """Seconds from Cancel to TurnEnded(Cancelled) the agent may take."""
    close_within: ClassVar[float] = 10.0
    """Seconds a graceful close may take."""

    # -------------------------------------------------------------------------------------------- hooks

    @pytest.fixture
    def scripted(self) -> Callable[[dict[str, Any]], Any]:
        raise AdapterContractError(
            f"{type(self).__name__} defines no `scripted` fixture\n  what to fix: define "
            "one returning `start(script) -> server` (see anyagentd_testing.conformance)"
        )

    def write_tool(self, name: str) -> dict[str, Any]:
        """The model-script tool call that writes ``hi\\n`` to ``name`` in the working directory."""
        raise NotImplementedError(f"{type(self).__name__}.write_tool: give the tool call that writes a file")

    def question_tool(self) -> dict[str, Any] | None:
        """The tool call asking "Which color?" with choices Red and Blue, or ``None`` when the agent has none."""
        return None

    def answer_seen_by_model(self) -> str | None:
        """What the model's next request carries once Blue is chosen (``None``: not checked)."""
        return None

    def after_cancel(self, *turns: dict[str, Any]) -> list[dict[str, Any]]:
        """The script turns for the prompts after a cancelled one (default: the cancelled one consumed none)."""
        return list(turns)

    def request_text(self, entry: dict[str, Any]) -> str:
        """The conversation a logged model request carries, as text (Anthropic ``messages``, Responses ``input``)."""
        body = entry["body"]
        return json.dumps(body.get("messages") or body.get("input") or [], ensure_ascii=False)

    def denial_seen(self) -> str | None:
        """For an agent whose denial lets the turn go on: the text the denied tool's Failed output and the model's
        next request both carry (``None``: not checked)."""
        return None

    denial_aborts: ClassVar[bool] = False
    """The agent's refusal aborts the turn: a denial ends it Cancelled, with no further model request."""

    def check_permission(self, request: Any) -> None:
        """Agent-specific checks of the write's permission request (default: none)."""

    def check_turn(self, stream: EventStream, server: Any) -> None:
        """Agent-specific checks once the turn contract's turn has ended (default: none)."""

    def runtime(self) -> Any:
        """The :class:`~anyagentd.runtime.Runtime` a scenario runs in (an ``async with`` context)."""
        from anyagentd.runtime import Runtime

        return Runtime()

    def write_script(self, name: str = "out.txt") -> dict[str, Any]:
        return {"turns": [{"text": "Writing the file.", "tool": self.write_tool(name)}, {"text": "Done."}]}

    # -------------------------------------------------------------------------------------------- pieces

    async def _open(self, rt: Any, work: Path, **options: Any) -> tuple[Any, CheckedStream]:
        session = await rt.open(self.agent, dir=work, **options)
        return session, CheckedStream(session, timeout=STEP)

    @staticmethod
    async def _wait_requests(server: Any, count: int) -> None:
        await anyio.to_thread.run_sync(lambda: server.wait_for_requests(count, timeout=STEP))

    async def _close_cleanly(self, session: Any, stream: CheckedStream) -> None:
        process = agent_process(session)
        started = time.monotonic()
        await session.close()
        took = time.monotonic() - started
        killed = list(session.killed_at_close)  # what the engine had to kill: the adapter's close() left it
        left = await wait_gone(process)
        if left:
            await process.kill()  # so the suite goes on: not even the engine's kill ended these
        grace = session.settings.close_grace
        require(
            not killed,
            f"close() left processes {killed} of the agent running: the engine killed them "
            f"{grace:g} s after close began",
            CLOSE_FIX,
        )
        require(not left, f"processes {left} of the agent are still running after close", CLOSE_FIX)
        await stream.rest()
        require(
            took < self.close_within,
            f"close took {took:.1f} s (more than {self.close_within} s)",
            f"close ends the agent gracefully and promptly; the engine kills it after {grace:g} s",
        )

    # -------------------------------------------------------------------------------------------- scenarios

    async def test_turn_contract(self, scripted: Any, work: Path) -> None:
        """Open, prompt, TurnStarted for that prompt, a permission request, allow, the change lands, Completed
        from the protocol, statuses Working → NeedsInput → Working → Idle, clean close."""
        server = scripted(self.write_script())
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            info = session.info()
            require(
                info.details.version if self.version is None else info.details.version == self.version,
                f"the handshake reported version {info.details.version!r}",
                "set details.version from the agent's handshake (or `--version`)",
            )
            missing = self.features - set(info.details.capabilities.features)
            require(
                not missing,
                f"capabilities {sorted(missing)} are not advertised",
                "advertise what the agent can do in details.capabilities",
            )
            delivery = await session.prompt("Write out.txt")
            started = await stream.until("TurnStarted")
            require(
                started.kind.origin.value == delivery.prompt_id,
                "TurnStarted names another prompt",
                "report TurnAck once the agent has taken the StartTurn, not before",
            )
            request = (await stream.until("RequestOpened")).kind.value.value
            require(
                {"AllowOnce", "DenyOnce"} <= set(request.options),
                f"permission options {request.options}",
                "offer at least AllowOnce and DenyOnce on a PermissionRequest",
            )
            self.check_permission(request)
            require(
                session.status == "NeedsInput",
                f"status {session.status} with a request open",
                "report the request as a RequestOpened event (the engine sets NeedsInput)",
            )
            await session.answer(request.id, _allow())
            ended = await stream.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Completed" and ended.kind.stop.source == "Protocol",
                f"the turn ended {ended.kind.stop!r}",
                "report TurnEnded(Completed) when the agent's protocol says the turn is over",
            )
            require(
                (work / "out.txt").read_text() == WRITTEN,
                "the allowed write did not land",
                "send AllowOnce to the agent as its protocol's approval",
            )
            require(
                stream.text() == "Writing the file.Done.",
                f"the turn's text was {stream.text()!r}",
                "emit each text delta of the turn once, in order",
            )
            tags = [e.tag for e in stream.seen]
            require(
                "RequestClosed" in tags and "ContextUsage" in tags,
                f"events {tags}",
                "close answered requests (the engine does on Answer) and report ContextUsage from usage",
            )
            tools = [e.kind.value for e in stream.of("ToolUpdated")]
            require(
                tools and tools[-1].status == "Completed",
                f"tool updates {[t.status for t in tools]}",
                "report the tool call's end as ToolUpdated(status=Completed)",
            )
            statuses = [e.kind.value for e in stream.of("StatusChanged")]
            statuses.append((await stream.until("StatusChanged")).kind.value)
            require(
                statuses == ["Working", "NeedsInput", "Working", "Idle"],
                f"statuses {statuses}",
                "one turn, one request: report nothing that opens a second turn or request",
            )
            self.check_turn(stream, server)
            await self._close_cleanly(session, stream)

    async def test_text_assembly(self, scripted: Any, work: Path) -> None:
        """The TextDelta events of a turn add up to exactly the model's text, ended by MessageEnded."""
        text = "Hello from the script, in a few words: one, two, three."
        scripted({"turns": [{"text": text}]})
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("hi")
            ended = await stream.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Completed",
                f"the turn ended {ended.kind.stop!r}",
                "report TurnEnded(Completed) at the end of the agent's reply",
            )
            require(
                stream.text() == text,
                f"the turn's text was {stream.text()!r}, not {text!r}",
                "emit each text delta once, in order (no replay of the assembled message)",
            )
            require(stream.of("MessageEnded"), "no MessageEnded", "end each assistant message with MessageEnded")

    async def test_allow_lands(self, scripted: Any, work: Path) -> None:
        """Allowing a permission request lets the tool run: the file is there, the turn goes on to its end."""
        scripted(self.write_script())
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("Write out.txt")
            request = (await stream.until("RequestOpened")).kind.value.value
            await session.answer(request.id, _allow())
            await stream.until("TurnEnded")
            require(
                (work / "out.txt").exists(),
                "the allowed write did not land",
                "send AllowOnce to the agent as its protocol's approval",
            )
            require(
                stream.text().endswith("Done."),
                f"text {stream.text()!r}",
                "the turn continues after an allowed tool: keep reporting its events",
            )

    async def test_deny_holds(self, scripted: Any, work: Path) -> None:
        """Denying a permission request keeps the tool from running; the turn still ends (Completed, or
        Cancelled where the agent's "reject" aborts the turn)."""
        server = scripted(self.write_script())
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("Write out.txt")
            request = (await stream.until("RequestOpened")).kind.value.value
            await session.answer(request.id, _deny())
            ended = await stream.until("TurnEnded")
            expected = ("Cancelled",) if self.denial_aborts else ("Completed", "Cancelled")
            require(
                kind_tag(ended.kind.stop) in expected,
                f"the turn ended {ended.kind.stop!r}",
                "a denial is an answer, not a failure: end the turn as the agent does",
            )
            require(
                not (work / "out.txt").exists(),
                "the denied write landed",
                "send DenyOnce to the agent as its protocol's refusal",
            )
        if self.denial_aborts:
            require(
                len(server.main_requests()) == 1,
                "the model was asked again after an aborting denial",
                "send the agent's abort for DenyOnce",
            )
        seen = self.denial_seen()
        if seen is not None:
            failed = [e.kind.value for e in stream.of("ToolUpdated") if e.kind.value.status == "Failed"]
            require(
                failed and seen in (failed[-1].output or ""),
                f"denied tool updates {failed!r}",
                "report the denied tool as ToolUpdated(Failed) with the agent's refusal as its output",
            )
            require(
                stream.text().endswith("Done.") and seen in self.request_text(server.main_requests()[-1]),
                f"after the denial: text {stream.text()!r}",
                "the model gets the refusal and the turn goes on",
            )

    async def test_question_round_trip(self, scripted: Any, work: Path) -> None:
        """With Questions advertised: a question reaches the caller, the chosen answer reaches the model."""
        from anyagentd.model import AnswerQuestion, Choices

        tool = self.question_tool()
        async with self.runtime() as rt:
            features = await self._features(rt, scripted)
            if "Questions" not in features:
                pytest.skip(f"{self.agent} does not advertise Questions")
            require(
                tool is not None,
                f"{self.agent} advertises Questions",
                "give the kit a question script (question_tool) or stop advertising Questions",
            )
            server = scripted({"turns": [{"tool": tool}, {"text": "Blue it is."}]})
            session, stream = await self._open(rt, work)
            await session.prompt("Ask me a question")
            opened = await stream.until("RequestOpened")
            require(
                opened.kind.value.TAG == "Question",
                f"a {opened.kind.value.TAG} request opened",
                "map the agent's question to a Question request",
            )
            question = opened.kind.value.value.questions[0]
            require(question.text == "Which color?", f"question text {question.text!r}", "keep the question text")
            blue = next((c for c in question.choices if c.label == "Blue"), None)
            require(blue is not None, f"choices {[c.label for c in question.choices]}", "keep the choices' labels")
            await session.answer(opened.kind.value.value.id, AnswerQuestion(value=[Choices(value=[blue.id])]))
            ended = await stream.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Completed" and stream.text().endswith("Blue it is."),
                f"ended {ended.kind.stop!r}, text {stream.text()!r}",
                "send the answer to the agent",
            )
            seen = self.answer_seen_by_model()
            if seen is not None:
                last = self.request_text(server.main_requests()[-1])
                require(seen in last, f"the model never saw the answer {seen!r}", "send the chosen label")

    async def test_cancel_mid_turn_then_the_session_lives(self, scripted: Any, work: Path) -> None:
        """Cancel during a model call: TurnEnded(Cancelled) promptly, then the next prompt gets its own answer."""
        server = scripted({"turns": [{"text": "too late", "delay": 20}]})
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("Take your time")
            await self._wait_requests(server, 1)
            started = time.monotonic()
            await session.cancel()
            ended = await stream.until("TurnEnded")
            took = time.monotonic() - started
            require(
                ended.kind.stop == "Cancelled",
                f"the cancelled turn ended {ended.kind.stop!r}",
                "report TurnEnded(Cancelled) when the agent has stopped after a cancel",
            )
            require(
                took < self.cancel_within,
                f"the cancel took {took:.1f} s",
                "send the protocol's interrupt at once from AgentConnection.cancel",
            )
            server.set_script({"turns": self.after_cancel({"text": "Fresh answer."})})
            await session.prompt("Again")
            ended = await stream.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Completed" and stream.text().endswith("Fresh answer."),
                f"the prompt after a cancel ended {ended.kind.stop!r} with text {stream.text()!r}",
                "after a cancel the session lives: drop the cancelled turn's late frames",
            )

    async def test_cancel_is_reported_cancelled(self, scripted: Any, work: Path) -> None:
        """The connection itself (no engine in between) answers Cancel mid-turn with TurnEnded(Cancelled): the
        engine reads a Failed stop after a cancel as Cancelled, but an adapter must not rely on that."""
        from anyagentd.adapters.interface import AdapterLink, PromptInput, TurnEndedReport
        from anyagentd.model import SessionOptions

        server = scripted({"turns": [{"text": "too late", "delay": 20}]})
        async with self.runtime() as rt:
            adapter, installation = await rt.resolve(self.agent)
            send, recv = anyio.create_memory_object_stream[Any](1024)
            async with anyio.create_task_group() as tg:
                link = AdapterLink(send, tg.start_soon)
                conn = await adapter.connect(installation, SessionOptions(dir=str(work)), link)
                try:
                    await conn.start_turn("t1", PromptInput("Take your time"))
                    await self._wait_requests(server, 1)
                    await conn.cancel()
                    with anyio.fail_after(self.cancel_within + STEP):
                        stop = None
                        async for report in recv:
                            if isinstance(report, TurnEndedReport):
                                stop = report.stop
                                break
                    require(
                        stop == "Cancelled",
                        f"cancel ended the turn {kind_tag(stop)} ({stop!r})",
                        "report TurnEnded(Cancelled) for a turn the caller cancelled, also when the agent "
                        "answers the interrupt with an error (AgentConnection.cancel)",
                    )
                finally:
                    with anyio.move_on_after(self.close_within):
                        await conn.close()
                    await conn.kill()
                    tg.cancel_scope.cancel()

    async def test_resume_recalls(self, scripted: Any, work: Path) -> None:
        """A session opened with the resume token of a closed one carries on its conversation (with Resume);
        without it, ``resume`` is refused."""
        from anyagentd.errors import ResumeFailed

        server = scripted({"turns": [{"text": "Noted the word."}, {"text": "The word was PAPAYA."}]})
        async with self.runtime() as rt:
            first, stream = await self._open(rt, work)
            resumable = "Resume" in first.info().details.capabilities.features
            await first.prompt("Remember the word PAPAYA.")
            await stream.until("TurnEnded")
            token = first.info().resume_token
            await first.close()
            await stream.rest()
            if not resumable:
                with pytest.raises(ResumeFailed):
                    await rt.open(self.agent, dir=work, resume=token or "unknown")
                return
            require(token, "no resume token while advertising Resume", "set resume_token from the handshake")
            second, stream2 = await self._open(rt, work, resume=token)
            require(
                second.info().resume_token == token,
                "the resumed session has another token",
                "resume the given session, do not start a new one",
            )
            await second.prompt("Which word did I ask you to remember?")
            ended = await stream2.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Completed" and stream2.text() == "The word was PAPAYA.",
                f"ended {ended.kind.stop!r} with text {stream2.text()!r}",
                "do not replay the resumed history as events of the new session",
            )
        last = server.main_requests()[-1]
        require(
            last["turn"] == 1 and "Remember the word PAPAYA." in self.request_text(last),
            "the resumed conversation did not reach the model",
            "pass the resume token to the agent",
        )

    async def test_kill_fails_the_turn_then_process_exited(self, scripted: Any, work: Path) -> None:
        """The agent killed mid-turn: TurnEnded(Failed), the stream ends with ProcessExited (its exit status),
        and the session is closed."""
        import os
        import signal

        from anyagentd.errors import ProcessExited, SessionClosed

        server = scripted({"turns": [{"text": "never", "delay": 20}]})
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("Hang")
            await self._wait_requests(server, 1)
            process = agent_process(session)
            os.killpg(process.pid, signal.SIGKILL)
            ended = await stream.until("TurnEnded")
            require(
                kind_tag(ended.kind.stop) == "Failed",
                f"the turn of a killed agent ended {ended.kind.stop!r}",
                "report Exited when the agent's output ends (the engine fails the turn)",
            )
            with pytest.raises(ProcessExited) as caught:
                await stream.rest()
            require(
                caught.value.status == "signal: 9 (SIGKILL)",
                f"exit status {caught.value.status!r}",
                "report the process's exit status as AgentProcess.exit_status gives it",
            )
            with pytest.raises(SessionClosed):
                await session.prompt("still there?")
            left = await wait_gone(process, timeout=5.0)
            require(
                not left,
                f"processes {left} of the killed agent are still running",
                "kill the agent's whole process group when its output ends (AgentProcess.kill)",
            )

    async def test_close_leaves_no_process(self, scripted: Any, work: Path) -> None:
        """After a turn, close ends the agent promptly and leaves none of its processes running."""
        scripted({"turns": [{"text": "Bye."}]})
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            await session.prompt("hi")
            await stream.until("TurnEnded")
            await self._close_cleanly(session, stream)

    async def test_every_event_is_schema_valid(self, scripted: Any, work: Path) -> None:
        """Every event of a turn with thinking, text and a tool call is valid on the wire."""
        scripted(
            {
                "turns": [
                    {"thinking": "Let me think.", "text": "Writing.", "tool": self.write_tool("v.txt")},
                    {"text": "Done."},
                ]
            }
        )
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work, permission_mode="AutoApprove")
            await session.prompt("Write v.txt")
            await stream.until("TurnEnded")
            await session.close()
            await stream.rest()  # CheckedStream validated every event read
            require(len(stream.seen) > 3, f"only {len(stream.seen)} events", "report the turn's events")

    @pytest.mark.parametrize("feature", ["Steer", "Rollback", "Compact", "Fork"])
    async def test_capability(self, scripted: Any, work: Path, feature: str) -> None:
        """Capabilities are honest: a feature advertised works, one not advertised is refused by the connection
        itself with UnsupportedFeature (the engine's refusal is not enough: the adapter must not pretend)."""
        from anyagentd.adapters.interface import PromptInput
        from anyagentd.errors import UnsupportedFeature

        server = scripted({"turns": [{"text": "One."}, {"text": "Two.", "delay": 2}, {"text": "Three."}]})
        async with self.runtime() as rt:
            session, stream = await self._open(rt, work)
            advertised = feature in session.info().details.capabilities.features
            conn = session.connection  # refusals are checked on the connection itself
            await session.prompt("say kiwi")
            await stream.until("TurnEnded")
            if not advertised:
                calls = {
                    "Steer": lambda: conn.steer(PromptInput("more")),
                    "Rollback": lambda: conn.rollback(1, "Conversation"),
                    "Compact": conn.compact,
                    "Fork": None,
                }
                if feature == "Fork":
                    with pytest.raises(UnsupportedFeature):
                        await rt.open(self.agent, dir=work, fork=session.info().resume_token or "x")
                    return
                try:
                    await calls[feature]()
                except UnsupportedFeature:
                    return
                raise AdapterContractError(
                    f"{feature} is not advertised, but the connection took it\n  what to "
                    f"fix: raise UnsupportedFeature, or advertise {feature}"
                )
            await getattr(self, f"_exercise_{feature.lower()}")(rt, session, stream, server, work)

    async def _exercise_steer(self, rt: Any, session: Any, stream: CheckedStream, server: Any, work: Path) -> None:
        first = await session.prompt("say mango, slowly")
        await self._wait_requests(server, 2)
        steer = await session.prompt("also this")
        require(
            steer.kind.TAG == "Steered" and steer.kind.turn_id == first.kind.turn_id,
            f"a prompt into a running turn was {steer.kind.TAG}",
            "the agent advertises Steer: implement steer and report Steered(accepted=True), or stop advertising Steer",
        )
        ended = await stream.until("TurnEnded")
        require(
            kind_tag(ended.kind.stop) == "Completed",
            f"the steered turn ended {ended.kind.stop!r}",
            "the steered turn goes on to its end",
        )

    async def _exercise_rollback(self, rt: Any, session: Any, stream: CheckedStream, server: Any, work: Path) -> None:
        await session.prompt("say mango")
        await stream.until("TurnEnded")
        await session.rollback(1)
        await stream.until("SessionUpdated")
        await session.prompt("say lychee")
        await stream.until("TurnEnded")
        last = self.request_text(server.main_requests()[-1])
        require(
            "say kiwi" in last and "mango" not in last,
            "the rolled-back prompt still reached the model",
            "drop the last turns in the agent's history",
        )

    async def _exercise_compact(self, rt: Any, session: Any, stream: CheckedStream, server: Any, work: Path) -> None:
        await session.prompt("say mango")  # some agents refuse to compact a single exchange
        await stream.until("TurnEnded")
        await session.compact()
        await stream.until("ContextCompacted")
        ended = await stream.until("TurnEnded")
        require(
            kind_tag(ended.kind.stop) == "Completed",
            f"the compact turn ended {ended.kind.stop!r}",
            "report ContextCompacted, a lower ContextUsage, then TurnEnded(Completed)",
        )

    async def _exercise_fork(self, rt: Any, session: Any, stream: CheckedStream, server: Any, work: Path) -> None:
        """Fork the closed session; where MessageEnded carries a fork point (an ``<agent>/fork_point`` extension),
        fork at the first one: the fork's history ends with the first reply."""
        points = [
            v for e in stream.of("MessageEnded") for k, v in (e.extensions or {}).items() if k.endswith("/fork_point")
        ]
        await session.prompt("say mango")
        await stream.until("TurnEnded")
        token = session.info().resume_token
        await session.close()
        await stream.rest()
        at = {"fork_at": points[0]} if points else {}
        fork, stream2 = await self._open(rt, work, fork=token, **at)
        require(
            fork.info().resume_token not in (None, token),
            "the fork has no token of its own",
            "fork into a new agent session and report its token",
        )
        await fork.prompt("say lychee")
        ended = await stream2.until("TurnEnded")
        require(
            kind_tag(ended.kind.stop) == "Completed",
            f"the fork's turn ended {ended.kind.stop!r}",
            "the fork is a working session",
        )
        text = self.request_text(server.main_requests()[-1])
        require(
            "say kiwi" in text and "One." in text and "say lychee" in text,
            "the fork lost the history",
            "fork from the given session's history",
        )
        if points:
            require(
                stream2.text() == "Two." and "mango" not in text,
                f"forked at {points[0]!r}, the model saw the later history",
                "fork_at names the message after which the fork's history ends",
            )

    async def _features(self, rt: Any, scripted: Any) -> set[str]:
        scripted({"turns": []})
        return set((await rt.probe(self.agent)).capabilities.features)


def _allow() -> Any:
    from anyagentd.model import AnswerPermission

    return AnswerPermission(value="AllowOnce")


def _deny() -> Any:
    from anyagentd.model import AnswerPermission

    return AnswerPermission(value="DenyOnce")
