"""The workflow runner: starts runs, drives their steps on engine sessions, and survives restarts.

One task per live run computes what may start (:func:`.state.ready`), one task per started step does it: an
``agent`` step opens a session on its agent in the run's working directory, sends the rendered prompt, collects
the top-level text (or JSON) of the turn and closes the session; a ``wait`` step suspends until
:meth:`WorkflowRunner.signal` names its signal or its timeout passes; a ``finish`` step renders the run's output.
Every transition is committed to the :class:`~.store.RunStore` before it takes effect, and reported to the
``listener`` (the A2A face turns it into task updates). At start-up :meth:`WorkflowRunner.recover` picks up every
run that had not ended (:func:`.state.recover`).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic_core import to_jsonable_python
from ulid import ULID

from anyagentd.errors import AnyagentError
from anyagentd.model import AnswerPermission, AnswerQuestion, kind_tag
from anyagentd.ops import OpError

from . import interpreter
from .definition import Step, Workflow
from .interpreter import Outcome, conclude, outcome_of_turn, render_value, run_output, settle
from .state import RunFlags, StepState, move, ready, recover, run_status, to_skip, waiting
from .store import RunRecord, RunStore
from .template import render

Listener = Callable[[RunRecord, dict[str, Any]], Awaitable[None]]
"""Called after each committed change with the run and ``{"type": "status" | "step" | "text" | "input", ...}``."""


def now_ms() -> int:
    return int(time.time() * 1000)


class RunNotFound(LookupError):
    """No run of that id (for this caller)."""


class RunStateRefused(ValueError):
    """A request the run's state refuses (pausing a terminal run, resuming one not paused)."""


class EngineUnavailable(AnyagentError, OpError):
    """The workflow engine cannot be reached (a ``temporal`` engine whose server does not answer, whose address is
    not one, whose namespace does not exist): the message names the engine and why. At the start the daemon does
    not start (one line at the CLI, as every typed error); later, the op that met it fails with it (OP_FAILED) and
    changed nothing."""


@dataclass
class _Live:
    record: RunRecord
    workflow: Workflow
    wake: anyio.Event = field(default_factory=anyio.Event)
    scopes: dict[str, anyio.CancelScope] = field(default_factory=dict)
    signals: dict[str, tuple[anyio.Event, list[Any]]] = field(default_factory=dict)
    asks: dict[str, tuple[Any, str, dict[str, Any]]] = field(default_factory=dict)  # step -> (session, request id,
    # the wire's JSON of the RequestOpened event that opened it)
    done: anyio.Event = field(default_factory=anyio.Event)
    step_ended: anyio.Event = field(default_factory=anyio.Event)  # set (and renewed) as each step leaves
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class WorkflowRunner:
    """Runs workflows on a :class:`~anyagentd.runtime.Runtime`.

    Takes ``runtime``, ``store`` (opened), ``workflows`` (by name), ``work_root`` (per-run working directories
    are ``work_root/<run id>`` unless a step names ``dir``), ``default_agent`` (the ``[agent].name`` of the
    configuration), ``listener`` (see :data:`Listener`) and ``held`` (how the instance is paused — its pause
    note, ``"paused by the operator (<reason>)"`` — while nothing new starts; ``None`` when it is not). Call :meth:`serve` in a task group before anything else.
    """

    def __init__(
        self,
        runtime: Any,
        store: RunStore,
        workflows: dict[str, Workflow],
        *,
        work_root: Path,
        default_agent: Any = "mock",
        listener: Listener | None = None,
        held: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.workflows = workflows
        self.work_root = Path(work_root)
        self.default_agent = default_agent
        self.listener = listener
        self.held = held
        self.subagents: Any = None
        """The daemon's subagent manager, for ``subagent`` steps (``None``: such steps fail saying so)."""
        self._live: dict[str, _Live] = {}
        self._followers: dict[str, list[MemoryObjectSendStream[tuple[RunRecord, dict[str, Any]]]]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._draining = False

    # ------------------------------------------------------------------------------------------ lifecycle

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the runs' tasks until cancelled; recovers stored runs first."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self.recover()
            task_status.started()
            await anyio.sleep_forever()

    async def recover(self) -> list[str]:
        """Resume every stored run that had not ended and this daemon claims (its holder dead, gone or unknown:
        :meth:`.store.RunStore.list` with ``claim``); returns their ids."""
        resumed = []
        for record in await self.store.list(non_terminal=True, claim=True):
            workflow = self.workflows.get(record.workflow)
            if workflow is None:
                record.status, record.error, record.finished = "failed", "workflow no longer defined", now_ms()
                await self.store.save(record, {})
                continue
            recovery = recover(workflow, record.steps, now_ms())
            record.steps = recovery.steps
            at = now_ms()
            for step_id in to_skip(workflow, record.steps):  # behind a step that failed "interrupted"
                record.steps[step_id] = move(record.steps[step_id], "skipped", finished=at)
            record.status = run_status(record.steps, record.flags)
            interrupted = [s for s, note in recovery.notes.items() if note == "interrupted"]
            if record.terminal:
                record.finished = at
                if interrupted:
                    record.error = f"step {interrupted[0]}: interrupted (the daemon stopped while it ran)"
            await self.store.save(record)
            self._launch(record, workflow)
            resumed.append(record.id)
        return resumed

    def wake_all(self) -> None:
        """Re-evaluate every live run (after the instance is resumed)."""
        for live in self._live.values():
            live.wake.set()

    async def drain(self, timeout: float) -> None:
        """Checkpoint for a restart: stop starting steps, cancel running agent steps (their stored state goes
        back to pending with the attempt not counted, so the next start runs them again), leave waits waiting."""
        self._draining = True
        for live in list(self._live.values()):
            for step_id, scope in list(live.scopes.items()):
                if live.workflow.steps[step_id].kind == "agent":
                    scope.cancel()
        with anyio.move_on_after(timeout):
            for live in list(self._live.values()):
                while any(live.workflow.steps[s].kind == "agent" for s in live.scopes):
                    await live.step_ended.wait()  # set by each step as it leaves (``_step``)

    def redefine(self, workflows: dict[str, Workflow]) -> dict[str, list[str]]:
        """Take ``workflows`` (by name, as :func:`.definition.load_workflows` returns them) for the runs started
        from now on (a SIGHUP reload). A live run keeps the definition it started with (its ``_Live`` holds it);
        a stored run recovered at the next start is driven by the definition configured then. Returns the names
        ``{"added": [...], "changed": [...], "removed": [...]}`` (each sorted)."""
        old, self.workflows = self.workflows, dict(workflows)
        return definitions_changed(old, self.workflows)

    # ------------------------------------------------------------------------------------------ requests

    async def start(
        self, workflow_name: str, inputs: dict[str, Any], principal: str | None, task_id: str | None = None
    ) -> RunRecord:
        """Create and launch a run (committed first). The caller has checked permission and inputs."""
        workflow = self.workflows[workflow_name]
        record = new_run(workflow, inputs, principal, task_id)
        await self.store.create(record)
        self._launch(record, workflow)
        return record

    async def get(self, run_id: str) -> RunRecord | None:
        live = self._live.get(run_id)
        return live.record if live is not None else in_order(self.workflows, await self.store.get(run_id))

    async def cancel(self, run_id: str, reason: str | None = None) -> RunRecord:
        """Cancel a run: running steps are cancelled (their sessions closed), pending ones never start; returns
        once it has ended. A run that has ended is refused (:class:`RunStateRefused`, as pausing it is), an
        unknown one is :class:`RunNotFound`."""
        live = await self._need_live(run_id, "cancel")
        record = live.record
        record.flags = replace(record.flags, cancelled=True)
        record.error = reason or record.error
        await self._commit(live, {}, {"type": "status"})
        for scope in list(live.scopes.values()):
            scope.cancel()
        live.wake.set()
        await live.done.wait()
        return live.record

    async def pause(self, run_id: str) -> RunRecord:
        live = await self._need_live(run_id, "pause")
        live.record.flags = replace(live.record.flags, paused=True)
        await self._commit(live, {}, {"type": "status"})
        return live.record

    async def resume(self, run_id: str) -> RunRecord:
        live = self._live.get(run_id)
        if live is None or not live.record.flags.paused:
            if live is None and await self.store.get(run_id) is None:
                raise RunNotFound(run_id)
            raise RunStateRefused(f"run {run_id} is not paused")
        live.record.flags = replace(live.record.flags, paused=False)
        await self._commit(live, {}, {"type": "status"})
        live.wake.set()
        return live.record

    async def signal(
        self, name: str, payload: Any, sender: str, *, owner: str | None, run_id: str | None = None
    ) -> int:
        """Resolve every wait step suspended on signal ``name`` in ``owner``'s runs (every run for ``None``), or
        in ``run_id`` only; each finishes with ``{signal, payload, from}``. Returns how many were resolved."""
        delivered = 0
        for live in list(self._live.values()):
            record = live.record
            if run_id is not None and record.id != run_id:
                continue
            if owner is not None and record.principal != owner:
                continue
            for step_id, (event, box) in list(live.signals.items()):
                state = record.steps[step_id]
                if state.status != "suspended" or (state.wait or {}).get("signal") != name:
                    continue
                at = now_ms()
                await self.store.add_signal(record.id, step_id, name, payload, sender, at)
                box.append({"signal": name, "payload": payload, "from": sender})
                event.set()
                delivered += 1
        return delivered

    async def answer(self, run_id: str, answer: AnswerPermission | AnswerQuestion) -> bool:
        """Answer the open request of the run's ``ask`` step; ``False`` when nothing waits for one."""
        live = self._live.get(run_id)
        if live is None or not live.asks:
            return False
        step_id, (session, request_id, _) = next(iter(live.asks.items()))
        await session.answer(request_id, answer)
        return True

    async def asked(self, run_id: str) -> dict[str, Any] | None:
        """:meth:`awaiting_input`, for a caller that may await (the engines' common method)."""
        return self.awaiting_input(run_id)

    def awaiting_input(self, run_id: str) -> dict[str, Any] | None:
        """The request an ``ask`` step of the run waits on, or ``None``: ``{"step", "request", "event"}``, the
        request and the ``RequestOpened`` event that opened it as the wire's JSON."""
        live = self._live.get(run_id)
        if live is None:
            return None
        for step_id, (_, _, event) in live.asks.items():
            wait = live.record.steps[step_id].wait or {}
            return {"step": step_id, "request": wait.get("request"), "event": event}
        return None

    @asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[MemoryObjectReceiveStream[tuple[RunRecord, dict[str, Any]]]]:
        """Every change of run ``run_id`` from now on, as ``(record, change)``; the stream ends with the run (or
        when the runner stops driving it). A follower that falls 1000 changes behind loses the oldest."""
        send, receive = anyio.create_memory_object_stream[tuple[RunRecord, dict[str, Any]]](1000)
        self._followers.setdefault(run_id, []).append(send)
        live = self._live.get(run_id)
        if live is None or live.done.is_set():
            send.close()
        try:
            yield receive
        finally:
            followers = self._followers.get(run_id, [])
            if send in followers:
                followers.remove(send)
            send.close()
            receive.close()

    async def _tell(self, record: RunRecord, change: dict[str, Any]) -> None:
        if self.listener is not None:
            await self.listener(record, change)
        for send in list(self._followers.get(record.id, [])):
            try:
                send.send_nowait((record, change))
            except anyio.WouldBlock:
                pass  # a stalled follower misses changes; the run never waits for it
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._followers[record.id].remove(send)

    async def wait(self, run_id: str) -> RunRecord:
        """Wait until the run ends (or the runner stops driving it, e.g. on drain); returns its record."""
        live = self._live.get(run_id)
        if live is not None:
            await live.done.wait()
            return live.record
        record = in_order(self.workflows, await self.store.get(run_id))
        if record is None:
            raise RunNotFound(run_id)
        return record

    # ------------------------------------------------------------------------------------------ driving

    async def _need_live(self, run_id: str, what: str) -> _Live:
        live = self._live.get(run_id)
        if live is None:
            if await self.store.get(run_id) is None:
                raise RunNotFound(run_id)
            raise RunStateRefused(f"cannot {what} a run that has ended")
        return live

    def _launch(self, record: RunRecord, workflow: Workflow) -> None:
        assert self._tg is not None, "start WorkflowRunner.serve first"
        live = _Live(record, workflow)
        self._live[record.id] = live
        self._tg.start_soon(self._drive, live)

    async def _commit(self, live: _Live, steps: dict[str, StepState], change: dict[str, Any]) -> None:
        record = live.record
        # One transition at a time per run: the store sees them in the order they happened, so a slow earlier
        # save can never land after a later one.
        async with live.lock:
            record.steps.update(steps)
            status = run_status(record.steps, record.flags)
            status_changed = status != record.status
            record.status = status
            record.updated = now_ms()
            if record.terminal and record.finished is None:
                record.finished = record.updated
                if record.status == "completed" and record.output is None:
                    record.output = run_output(live.workflow, record.steps)
            await self.store.save(record, steps)
        await self._tell(record, change)
        if status_changed and change.get("type") != "status":
            await self._tell(record, {"type": "status"})

    async def _drive(self, live: _Live) -> None:
        record, workflow = live.record, live.workflow
        try:
            async with anyio.create_task_group() as steps_tg:
                while True:
                    live.wake = anyio.Event()
                    skipped = settle(workflow, record.steps, record.flags, now_ms())
                    if skipped:
                        await self._commit(live, skipped, {"type": "step", "steps": sorted(skipped)})
                    if record.terminal and not live.scopes:
                        break
                    if not self._draining:
                        for step_id in waiting(workflow, record.steps):  # recovered waits wait on
                            if step_id not in live.scopes:
                                scope = anyio.CancelScope()
                                live.scopes[step_id] = scope
                                live.signals[step_id] = (anyio.Event(), [])  # deliverable from now on
                                steps_tg.start_soon(self._step, live, step_id, scope)
                    if not self._draining and not self.held():
                        for step_id in ready(workflow, record.steps, record.flags):
                            scope = anyio.CancelScope()
                            live.scopes[step_id] = scope
                            steps_tg.start_soon(self._step, live, step_id, scope)
                    if (
                        not live.scopes
                        and not record.terminal
                        and not any(s.status == "pending" for s in record.steps.values())
                    ):
                        await self._commit(live, {}, {"type": "status"})
                        if record.terminal:
                            break
                    await live.wake.wait()
                    if self._draining and not live.scopes:
                        return  # checkpointed: the next start goes on from the store
        finally:
            if record.terminal:
                self._live.pop(record.id, None)
            live.done.set()
            for send in self._followers.pop(record.id, []):
                send.close()

    async def _step(self, live: _Live, step_id: str, scope: anyio.CancelScope) -> None:
        step = live.workflow.steps[step_id]
        try:
            with scope:
                await self._attempts(live, step_id, step)
            if scope.cancelled_caught:
                await self._cancelled(live, step_id)
        finally:
            live.scopes.pop(step_id, None)
            live.asks.pop(step_id, None)
            live.signals.pop(step_id, None)
            live.wake.set()
            live.step_ended.set()
            live.step_ended = anyio.Event()

    async def _cancelled(self, live: _Live, step_id: str) -> None:
        state = live.record.steps[step_id]
        if state.status not in ("running", "suspended"):
            return
        with anyio.CancelScope(shield=True):
            if self._draining and not live.record.flags.cancelled:
                if live.workflow.steps[step_id].kind == "agent":  # checkpoint: run it again next start
                    back = replace(state, status="pending", attempt=max(0, state.attempt - 1), wait=None)
                    await self.store.save(live.record, {step_id: back})
                return
            await self._commit(
                live,
                {step_id: move(state, "cancelled", finished=now_ms(), wait=None)},
                {"type": "step", "steps": [step_id]},
            )

    async def _attempts(self, live: _Live, step_id: str, step: Step) -> None:
        while True:
            state = live.record.steps[step_id]
            if state.status == "suspended" and step.kind == "wait":
                started = state.started or now_ms()  # recovered: keep waiting from when it began
            else:
                started = now_ms()
                state = move(
                    state, "running", attempt=state.attempt + 1, started=started, finished=None, error=None, wait=None
                )
                await self._commit(live, {step_id: state}, {"type": "step", "steps": [step_id]})
            timeout = math.inf if step.timeout is None else max(0.0, step.timeout - (now_ms() - started) / 1000)
            outcome: Outcome
            with anyio.move_on_after(timeout) as deadline:
                try:
                    outcome = await self._do(live, step_id, step)
                except (AnyagentError, KeyError, ValueError, OSError) as err:
                    message = getattr(err, "message", None) or str(err)
                    outcome = Outcome("failed", None, f"{type(err).__name__}: {message}")
            if deadline.cancelled_caught:
                outcome = Outcome("timeout", None, f"timed out after {step.timeout:g} s")
            concluded = conclude(step_id, live.record.steps[step_id], step, outcome, now_ms())
            if concluded.refused:
                live.record.flags = replace(live.record.flags, refused=True)
                live.record.error = outcome.error
            elif concluded.error is not None:
                live.record.error = concluded.error
            await self._commit(live, {step_id: concluded.state}, {"type": "step", "steps": [step_id]})
            if not concluded.retry:
                return
            await anyio.sleep(step.retry.backoff)

    def _scope(self, live: _Live) -> dict[str, Any]:
        record = live.record
        return interpreter.scope(record.id, record.workflow, record.inputs, record.steps)

    async def _do(self, live: _Live, step_id: str, step: Step) -> Outcome:
        if step.kind == "finish":
            return Outcome("done", render_value(step.output or "", self._scope(live)))
        if step.kind == "wait":
            return await self._wait(live, step_id, step)
        if step.kind == "subagent":
            return await self._subagent(live, step)
        return await self._agent(live, step_id, step)

    async def _subagent(self, live: _Live, step: Step) -> Outcome:
        instruction = render(step.instruction or "", self._scope(live))
        owner = live.record.principal or "operator"
        return await subagent_step(self.subagents, owner, step.agent, instruction, step.mode, live.record.id)

    async def _wait(self, live: _Live, step_id: str, step: Step) -> Outcome:
        event, box = live.signals.setdefault(step_id, (anyio.Event(), []))
        state = live.record.steps[step_id]
        if state.status != "suspended":
            wait = {
                "on": "signal",
                "signal": step.signal,
                "timeout_ms": None if step.timeout is None else int(step.timeout * 1000),
            }
            await self._commit(
                live, {step_id: move(state, "suspended", wait=wait)}, {"type": "step", "steps": [step_id]}
            )
        await event.wait()
        return Outcome("done", box[0])

    async def _agent(self, live: _Live, step_id: str, step: Step) -> Outcome:
        record = live.record
        prompt = render(step.prompt or "", self._scope(live))
        directory = Path(step.dir) if step.dir else self.work_root / record.id
        directory.mkdir(parents=True, exist_ok=True)
        mode = "AutoApprove" if step.approval == "auto" else "Ask"
        agent = step.agent if step.agent is not None else self.default_agent
        if hasattr(agent, "model_dump"):
            agent = agent.model_dump()
        session = await self.runtime.open(agent, directory, permission_mode=mode)
        parts: list[str] = []
        try:
            await session.prompt(prompt)
            async for event in session.events():
                tag = event.tag
                top = event.turn_info is not None and event.turn_info.parent_tool_id is None
                if tag == "TextDelta" and top:
                    parts.append(event.kind.text)
                    await self._tell(record, {"type": "text", "step": step_id, "text": event.kind.text})
                elif tag == "RequestOpened":
                    request = event.kind.value
                    live.asks[step_id] = (session, request.value.id, to_jsonable_python(event))
                    state = record.steps[step_id]
                    wait = {"on": "input", "request": request.model_dump(mode="json")}
                    await self._commit(
                        live, {step_id: move(state, "suspended", wait=wait)}, {"type": "input", "step": step_id}
                    )
                elif tag == "RequestClosed" and step_id in live.asks:
                    live.asks.pop(step_id, None)
                    state = record.steps[step_id]
                    if state.status == "suspended":
                        await self._commit(
                            live, {step_id: move(state, "running", wait=None)}, {"type": "step", "steps": [step_id]}
                        )
                elif tag == "TurnEnded":
                    stop = event.kind.stop
                    message = getattr(stop, "message", None) if not isinstance(stop, str) else None
                    return outcome_of_turn(kind_tag(stop), message, "".join(parts), step)
            return Outcome("failed", None, "the agent's session ended before its turn did")
        finally:
            with anyio.CancelScope(shield=True):
                await session.close()


def new_run(workflow: Workflow, inputs: dict[str, Any], principal: str | None, task_id: str | None) -> RunRecord:
    """A new run of ``workflow`` (not stored yet): id ``<workflow>-<ULID>``, ``pending``, every step pending."""
    at = now_ms()
    return RunRecord(
        id=f"{workflow.name}-{ULID()}",
        workflow=workflow.name,
        principal=principal,
        task_id=task_id,
        status="pending",
        inputs=dict(inputs),
        output=None,
        error=None,
        flags=RunFlags(),
        tokens=0,
        created=at,
        updated=at,
        finished=None,
        steps={step_id: StepState() for step_id in workflow.steps},
    )


def in_order(workflows: dict[str, Workflow], record: RunRecord | None) -> RunRecord | None:
    """``record`` (read from the store, whose steps come in its key order) with its steps in its workflow's order,
    as a live run has them; steps the definition no longer names follow, in the store's order."""
    workflow = workflows.get(record.workflow) if record is not None else None
    if record is None or workflow is None:
        return record
    ordered = {step_id: record.steps[step_id] for step_id in workflow.steps if step_id in record.steps}
    record.steps = {**ordered, **record.steps}
    return record


def definitions_changed(old: dict[str, Workflow], new: dict[str, Workflow]) -> dict[str, list[str]]:
    """The workflow names a reload ``added``, ``removed`` and ``changed`` (each sorted)."""
    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": sorted(n for n in set(old) & set(new) if old[n] != new[n]),
    }


async def subagent_step(subagents: Any, owner: str, agent: Any, instruction: str, mode: str, parent: str) -> Outcome:
    """A ``subagent`` step: a subagent of the run's ``owner`` on ``subagents`` (the daemon's manager; ``None``:
    the step fails saying how to enable them). ``sync`` and ``warm`` wait for its first result, ``async`` and
    ``detached`` end the step at once. The output names the subagent in every mode: ``{"handle", "result"}``
    (sync, warm: a warm one stays alive after the step) or ``{"handle"}``; a step whose subagent ended otherwise
    fails with ``{"handle"}`` as its output (``docs/commands.md#workflows``)."""
    if subagents is None:
        return Outcome("failed", None, "subagents are not enabled ([subagents] enabled = true)")
    from ..subagents.errors import SubagentRefused
    from ..subagents.state import answered

    try:
        record = await subagents.spawn(owner, agent, instruction, mode, parent=parent)
    except SubagentRefused as err:
        return Outcome("failed", None, f"subagent refused: {err}")
    if mode in ("sync", "warm"):
        if not answered(mode, record.status):
            return Outcome(
                "failed", {"handle": record.handle}, f"subagent {record.handle} {record.status}: {record.error}"
            )
        return Outcome("done", {"handle": record.handle, "result": record.result})
    return Outcome("done", {"handle": record.handle})


__all__ = [
    "EngineUnavailable",
    "Listener",
    "RunNotFound",
    "RunStateRefused",
    "WorkflowRunner",
    "definitions_changed",
    "in_order",
    "new_run",
    "subagent_step",
]
