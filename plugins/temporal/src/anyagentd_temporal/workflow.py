"""A run as a Temporal workflow: the definition interpreted by the same pure rules as the local runner
(:mod:`anyagentd_a2a.workflows.interpreter` and :mod:`~anyagentd_a2a.workflows.state`), in Temporal's deterministic
sandbox. What differs from the local runner is only where a transition is made durable and where work is done:

- every transition is committed to the daemons' run store by the ``anyagentd.commit`` local activity before the
  workflow acts on it (the run store is what ``run.get``, ``workflow.status`` and the runs' A2A tasks read, through
  any daemon);
- an ``agent`` or ``subagent`` step is the ``anyagentd.agent_turn`` / ``anyagentd.subagent`` activity on the task
  queue of the agent it names (:func:`agent_queue`): only a daemon hosting that agent polls it. The activity
  heartbeats; a daemon killed mid-step stops heartbeating, the attempt ends ``interrupted`` after the heartbeat
  timeout and the step's retry policy decides, as a restart decides on the local engine — the next attempt, on any
  host of the agent, resumes the agent's session from the resume token the dead attempt heartbeated, so the turn
  goes on in the same conversation rather than starting over. A host that drains hands its attempt back
  (``Drained``): the step starts again with its attempt not counted;
- a ``wait`` step waits for the ``signal`` signal (``workflow.wait_condition`` with the step's timeout); ``cancel``,
  ``pause`` and ``resume`` are signals too (a paused run is a durable gate: nothing new starts), and a Temporal
  cancellation of the workflow (``temporal workflow cancel``) cancels the run as ``cancel`` does. Cancelling a step
  cancels its activity and waits until the activity has closed the agent's session (no agent process is left);
- the ``state`` query answers the run as the workflow holds it.

- an ``ask`` step's question lives in the agent session of the daemon running the step: its activity signals it
  (``asked``: the request and the wire's ``RequestOpened`` event), the workflow commits the step ``suspended`` on
  ``input``; an answer, sent through any daemon, is the ``answer`` signal, which the activity reads through the
  ``answer`` query and gives its session; ``answered`` (the request closed) puts the step back to ``running``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from anyagentd_a2a.workflows.definition import Step, Workflow
    from anyagentd_a2a.workflows.interpreter import (
        Outcome,
        conclude,
        outcome_of_turn,
        render_value,
        run_output,
        scope,
        settle,
    )
    from anyagentd_a2a.workflows.state import RUN_TERMINAL, RunFlags, StepState, move, ready, run_status
    from anyagentd_a2a.workflows.template import render

    from .codec import flags_json, step_of

WORKFLOW_NAME = "anyagentd.run"
AGENT_TURN = "anyagentd.agent_turn"
SUBAGENT = "anyagentd.subagent"
COMMIT = "anyagentd.commit"
DRAINED = "Drained"
"""The error type an activity raises when its daemon drains: the step starts again, its attempt not counted."""
HELD = "Held"
"""The error type an activity raises on a paused daemon: the step starts again after :data:`HELD_AGAIN` seconds (on
any host of its agent), its attempt not counted."""
HELD_AGAIN = 5.0
INTERRUPTED = "interrupted"
"""A step's error when its daemon stopped heartbeating mid-step (the local engine's word for a restart's)."""
NO_TIMEOUT = timedelta(days=30)
"""An agent step's start-to-close bound when it names no ``timeout`` (Temporal needs one)."""


def agent_name(agent: Any) -> str:
    """The name of the agent a step names as its queue uses it: a catalog id (``"claude"``) as it is, an ACP agent
    (``{"acp": {"name": ...}}``) by its name."""
    if isinstance(agent, dict):
        acp = agent.get("acp", agent)
        return str(acp.get("name") or acp.get("command") or "acp")
    return str(agent)


def agent_queue(prefix: str, agent: Any) -> str:
    """The task queue of the steps that run on ``agent``: ``<prefix>-agent-<name>`` (:func:`agent_name`)."""
    return f"{prefix}-agent-{agent_name(agent)}"


def runs_queue(prefix: str) -> str:
    """The task queue every daemon polls for the runs' workflow tasks (and their commits): ``<prefix>-runs``."""
    return f"{prefix}-runs"


@workflow.defn(name=WORKFLOW_NAME, sandboxed=True)
class RunWorkflow:
    """One run. Its input (:meth:`run`): ``{"run": record JSON (codec.record_json), "workflow": the definition's
    JSON, "prefix": task queue prefix, "default_agent": the agent of steps that name none, "heartbeat": seconds}``;
    it returns the run's final record JSON."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        self.definition: Workflow | None = None
        self.steps: dict[str, StepState] = {}
        self.flags = RunFlags()
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.delivered: dict[str, dict[str, Any]] = {}  # wait step -> {signal, payload, from}
        self.resume: dict[str, str] = {}  # agent step -> the resume token its last attempt heartbeated
        self.dirty = False
        self.options: dict[str, Any] = {}
        self.asking: dict[str, dict[str, Any] | None] = {}  # step -> its open request (None: closed), to commit
        self.answers: dict[str, Any] = {}  # step -> the answer (the wire's Answer JSON) its activity has to give

    # ------------------------------------------------------------------------------------------- handlers

    @workflow.query(name="state")
    def state(self) -> dict[str, Any]:
        """The run as the workflow holds it (the record JSON, committed or about to be)."""
        return self._json()

    @workflow.signal(name="signal")
    def signal(self, name: str, payload: Any, sender: str) -> None:
        """Resolve every wait step suspended on signal ``name`` with ``{signal, payload, from}``."""
        for step_id, state in self.steps.items():
            if state.status == "suspended" and (state.wait or {}).get("signal") == name:
                self.delivered.setdefault(step_id, {"signal": name, "payload": payload, "from": sender})
        self.dirty = True

    @workflow.signal(name="asked")
    def asked(self, step_id: str, ask: dict[str, Any]) -> None:
        """The step's agent asks: ``{"request": the wire's Request JSON, "event": its RequestOpened event}``."""
        if step_id not in self.steps:
            return
        self.asking[step_id] = ask
        self.dirty = True

    @workflow.signal(name="answered")
    def answered(self, step_id: str) -> None:
        """The step's request closed (answered, or the turn went on without it)."""
        if step_id not in self.steps:
            return
        self.asking[step_id] = None
        self.answers.pop(step_id, None)
        self.dirty = True

    @workflow.signal(name="answer")
    def answer(self, step_id: str, answer: Any) -> None:
        """An answer to the step's open request, for its activity to give (:meth:`pending_answer`)."""
        state = self.steps.get(step_id)
        if state is not None and (state.wait or {}).get("on") == "input":
            self.answers[step_id] = answer

    @workflow.query(name="answer")
    def pending_answer(self, step_id: str) -> Any:
        return self.answers.get(step_id)

    @workflow.signal(name="cancel")
    def cancel(self, reason: str | None) -> None:
        if self.record.get("status") in RUN_TERMINAL:
            return
        self.flags = replace(self.flags, cancelled=True)
        self.record["error"] = reason or self.record.get("error")
        for task in self.tasks.values():
            task.cancel()
        self.dirty = True

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self.flags = replace(self.flags, paused=True)
        self.dirty = True

    @workflow.signal(name="resume")
    def resume_run(self) -> None:
        self.flags = replace(self.flags, paused=False)
        self.dirty = True

    # ------------------------------------------------------------------------------------------- the run

    @workflow.run
    async def run(self, start: dict[str, Any]) -> dict[str, Any]:
        self.record = dict(start["run"])
        self.definition = Workflow.model_validate(start["workflow"])
        self.steps = {step_id: step_of(state) for step_id, state in self.record.pop("steps").items()}
        self.flags = RunFlags(**self.record.pop("flags"))
        self.options = {k: start[k] for k in ("prefix", "default_agent", "heartbeat")}
        try:
            await self._drive()
        except asyncio.CancelledError:  # a Temporal cancellation of the workflow: the run is cancelled
            self.cancel("cancelled through Temporal")
            await self._drive()
        return self._json()

    async def _drive(self) -> None:
        assert self.definition is not None
        definition = self.definition
        await self._commit({}, {"type": "status"})
        while True:
            self.dirty = False
            ended = settle(definition, self.steps, self.flags, self._now())
            if ended:
                await self._commit(ended, {"type": "step", "steps": sorted(ended)})
            elif run_status(self.steps, self.flags) != self.record["status"]:  # paused or resumed by a signal
                await self._commit({}, {"type": "status"})
            await self._questions()
            if self.record["status"] in RUN_TERMINAL and not self.tasks:
                return
            for step_id in ready(definition, self.steps, self.flags):
                self.tasks[step_id] = asyncio.create_task(self._step(step_id, definition.steps[step_id]))
            if not self.tasks and not any(s.status == "pending" for s in self.steps.values()):
                await self._commit({}, {"type": "status"})
                if self.record["status"] in RUN_TERMINAL:
                    return
            await workflow.wait_condition(lambda: self.dirty)

    async def _questions(self) -> None:
        """Commit what the ``asked`` and ``answered`` signals told of ``ask`` steps: ``suspended`` on ``input`` while
        a request is open, ``running`` again once it closed (a step that has ended meanwhile is left alone)."""
        while self.asking:
            step_id, ask = next(iter(self.asking.items()))
            del self.asking[step_id]
            state = self.steps[step_id]
            if ask is not None and state.status == "running":
                wait = {"on": "input", "request": ask["request"], "event": ask["event"]}
                await self._commit({step_id: move(state, "suspended", wait=wait)}, {"type": "input", "step": step_id})
            elif ask is None and state.status == "suspended":
                await self._commit({step_id: move(state, "running", wait=None)}, {"type": "step", "steps": [step_id]})

    async def _step(self, step_id: str, step: Step) -> None:
        try:
            while True:
                state = self.steps[step_id]
                running = move(
                    state, "running", attempt=state.attempt + 1, started=self._now(), finished=None, error=None
                )
                await self._commit({step_id: running}, {"type": "step", "steps": [step_id]})
                try:
                    outcome = await self._do(step_id, step)
                except asyncio.CancelledError:
                    outcome = Outcome("cancelled", None, "the run was cancelled")
                except (KeyError, ValueError) as err:
                    outcome = Outcome("failed", None, f"{type(err).__name__}: {err}")
                if outcome is None:  # handed back by a draining daemon: again, the attempt not counted
                    again = replace(self.steps[step_id], status="pending", attempt=running.attempt - 1)
                    self.steps[step_id] = again
                    continue
                concluded = conclude(step_id, self.steps[step_id], step, outcome, self._now())
                if concluded.refused:
                    self.flags = replace(self.flags, refused=True)
                    self.record["error"] = outcome.error
                elif concluded.error is not None:
                    self.record["error"] = concluded.error
                await self._commit({step_id: concluded.state}, {"type": "step", "steps": [step_id]})
                if not concluded.retry or self.flags.cancelled:
                    if concluded.retry:  # cancelled between attempts
                        ended = move(concluded.state, "cancelled", finished=self._now())
                        await self._commit({step_id: ended}, {"type": "step", "steps": [step_id]})
                    return
                if step.retry.backoff:
                    await workflow.sleep(step.retry.backoff)
        finally:
            self.tasks.pop(step_id, None)
            self.dirty = True

    async def _do(self, step_id: str, step: Step) -> Outcome | None:
        if step.kind == "finish":
            return Outcome("done", render_value(step.output or "", self._scope()))
        if step.kind == "wait":
            return await self._wait(step_id, step)
        if step.kind == "subagent":
            return await self._activity(step_id, step, SUBAGENT, self._subagent_args(step))
        return await self._activity(step_id, step, AGENT_TURN, self._turn_args(step_id, step))

    async def _wait(self, step_id: str, step: Step) -> Outcome:
        wait = {
            "on": "signal",
            "signal": step.signal,
            "timeout_ms": None if step.timeout is None else int(step.timeout * 1000),
        }
        suspended = move(self.steps[step_id], "suspended", wait=wait)
        await self._commit({step_id: suspended}, {"type": "step", "steps": [step_id]})
        try:
            await workflow.wait_condition(lambda: step_id in self.delivered, timeout=step.timeout)
        except TimeoutError:
            return Outcome("timeout", None, f"timed out after {step.timeout:g} s")
        return Outcome("done", self.delivered.pop(step_id))

    def _turn_args(self, step_id: str, step: Step) -> dict[str, Any]:
        agent = step.agent if step.agent is not None else self.options["default_agent"]
        return {
            "run": self.record["id"],
            "step": step_id,
            "agent": agent.model_dump() if hasattr(agent, "model_dump") else agent,
            "prompt": render(step.prompt or "", self._scope()),
            "dir": step.dir,
            "approval": step.approval,
            "resume": self.resume.get(step_id),
        }

    def _subagent_args(self, step: Step) -> dict[str, Any]:
        return {
            "run": self.record["id"],
            "owner": self.record.get("principal") or "operator",
            "agent": step.agent.model_dump() if hasattr(step.agent, "model_dump") else step.agent,
            "instruction": render(step.instruction or "", self._scope()),
            "mode": step.mode,
        }

    async def _activity(self, step_id: str, step: Step, name: str, args: dict[str, Any]) -> Outcome | None:
        heartbeat = float(self.options["heartbeat"])
        agent = args["agent"] if args.get("agent") is not None else self.options["default_agent"]
        try:
            result = await workflow.execute_activity(
                name,
                args,
                task_queue=agent_queue(self.options["prefix"], agent),
                start_to_close_timeout=NO_TIMEOUT if step.timeout is None else timedelta(seconds=step.timeout),
                heartbeat_timeout=timedelta(seconds=heartbeat),
                retry_policy=RetryPolicy(maximum_attempts=1),  # the step's own retry policy decides (conclude)
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"{self.record['id']} {step_id}",
            )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type in (DRAINED, HELD):
                if cause.details and cause.details[0]:
                    self.resume[step_id] = str(cause.details[0])
                if cause.type == HELD:
                    await workflow.sleep(HELD_AGAIN)  # not at once: a paused host would take it straight back
                return None
            if isinstance(cause, ActivityTimeout):
                if cause.last_heartbeat_details and cause.last_heartbeat_details[0]:
                    self.resume[step_id] = str(cause.last_heartbeat_details[0])
                if cause.type == TimeoutType.HEARTBEAT:
                    return Outcome("failed", None, INTERRUPTED)
                return Outcome("timeout", None, f"timed out after {step.timeout:g} s")
            if isinstance(cause, ApplicationError):
                return Outcome("failed", None, cause.message)
            raise asyncio.CancelledError() from err  # cancelled: the run's cancel reached the activity
        if name == SUBAGENT:
            return Outcome(result["status"], result.get("output"), result.get("error"))
        if result.get("resume"):
            self.resume[step_id] = result["resume"]
        if result.get("error"):
            return Outcome("failed", None, result["error"])
        return outcome_of_turn(result["stop"], result.get("message"), result.get("text", ""), step)

    # ------------------------------------------------------------------------------------------- commits

    async def _commit(self, changed: dict[str, StepState], change: dict[str, Any]) -> None:
        """Apply ``changed`` and the run's status, then make it durable (the ``commit`` local activity writes the
        run and its changed steps in one transaction) before going on."""
        assert self.definition is not None
        self.steps.update(changed)
        ended = settle(self.definition, self.steps, self.flags, self._now())  # what follows from it, in one commit
        if ended:
            self.steps.update(ended)
            changed = {**changed, **ended}
            change = {"type": "step", "steps": sorted({*change.get("steps", ()), *ended})}
        status = run_status(self.steps, self.flags)
        self.record["status"] = status
        self.record["updated"] = self._now()
        if status in RUN_TERMINAL and self.record.get("finished") is None:
            self.record["finished"] = self.record["updated"]
            if status == "completed" and self.record.get("output") is None:
                self.record["output"] = run_output(self.definition, self.steps)
        await workflow.execute_local_activity(
            COMMIT,
            {"run": self._json(), "steps": sorted(changed), "change": change},
            start_to_close_timeout=timedelta(seconds=30),
        )

    def _json(self) -> dict[str, Any]:
        return {
            **self.record,
            "flags": flags_json(self.flags),
            "steps": {step_id: state.to_json() for step_id, state in self.steps.items()},
        }

    def _scope(self) -> dict[str, Any]:
        return scope(self.record["id"], self.record["workflow"], self.record.get("inputs") or {}, self.steps)

    @staticmethod
    def _now() -> int:
        return int(workflow.now().timestamp() * 1000)


__all__ = [
    "AGENT_TURN",
    "COMMIT",
    "DRAINED",
    "HELD",
    "SUBAGENT",
    "WORKFLOW_NAME",
    "RunWorkflow",
    "agent_name",
    "agent_queue",
    "runs_queue",
]
