"""The ``temporal`` workflow engine: the runner the A2A face's ops use (the same methods as the local
:class:`~anyagentd_a2a.workflows.runner.WorkflowRunner`), with runs as Temporal workflows
(:class:`.workflow.RunWorkflow`) and steps as activities on the task queues of the agents this daemon hosts.

One daemon's part (:class:`TemporalRunner`):

- a worker on the runs' queue (``<prefix>-runs``): every daemon runs the workflows' code, and commits each
  transition to the run store (:class:`StepActivities.commit`, a local activity) — the store is shared when the
  daemons share one database, so ``run.get``, ``workflow.status`` and ``GetTask`` of a run's task read the same
  through any of them;
- a worker per hosted agent (``<prefix>-agent-<name>``: the agents of its ``[[agents]]``, or ``[workflow_engine]
  hosts``), running agent turns and subagent steps on this daemon's runtime, at most ``max_concurrent`` at once
  (``[a2a.pool] max_live`` when set);
- requests (:meth:`TemporalRunner.start`, ``signal``, ``cancel``, ``pause``, ``resume``) go to Temporal by the
  run's workflow id, which is the run id; ``get`` reads the store and, for a run that has not ended, the
  workflow's ``state`` query.

A follower (:meth:`TemporalRunner.follow`, the run's A2A task) gets this daemon's commits and agent text as they
happen and another daemon's commits from the store (read every :data:`FOLLOW_POLL` seconds while followed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from anyagentd.errors import AnyagentError
from anyagentd.model import kind_tag
from anyagentd_a2a.members import RUN
from anyagentd_a2a.workflows.definition import Workflow
from anyagentd_a2a.workflows.runner import (
    EngineUnavailable,
    RunNotFound,
    RunStateRefused,
    definitions_changed,
    in_order,
    new_run,
    now_ms,
    subagent_step,
)
from anyagentd_a2a.workflows.state import RUN_TERMINAL
from anyagentd_a2a.workflows.store import RunMissing, RunRecord, RunStore

from .codec import record_json, record_of
from .workflow import (
    AGENT_TURN,
    COMMIT,
    DRAINED,
    HELD,
    SUBAGENT,
    RunWorkflow,
    agent_name,
    agent_queue,
    runs_queue,
)

log = logging.getLogger("anyagentd.a2a.temporal")

RPC_TIMEOUT = 10.0
"""Seconds one request to Temporal may take before the op that made it fails (the client retries within it)."""
RPC_SECONDS = timedelta(seconds=RPC_TIMEOUT)
FOLLOW_POLL = 0.25
"""Seconds between a followed run's reads of the store (another daemon's commits reach a follower this late)."""
SIGNAL_CONCURRENCY = 16
"""Runs one ``workflow.signal`` delivers to at once (each is a store write and a Temporal signal)."""
HEARTBEAT = 10.0
"""Default seconds of an agent step's heartbeat timeout: a daemon that died mid-step is known this late."""


def _core_runtime() -> Any:
    """Temporal's core runtime with its (Rust) log lines forwarded to Python's ``logging`` (the daemon's JSON lines,
    redacted as every line) instead of written raw to stderr; warnings and up."""
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    forwarding = LogForwardingConfig(logger=logging.getLogger("anyagentd.a2a.temporal.core"))
    filtered = TelemetryFilter(core_level="WARN", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=filtered, forwarding=forwarding)))


async def connect(address: str, namespace: str) -> Any:
    """A Temporal client of ``namespace`` at ``address`` (``host:port``), the namespace checked to exist. Raises
    :class:`EngineUnavailable`, one sentence: the server does not answer, the address is not one, or the namespace
    does not exist (with the command that creates it)."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client
    from temporalio.service import RPCError, RPCStatusCode

    where = f"Temporal at {address} (namespace {namespace})"
    try:
        client = await Client.connect(address, namespace=namespace, runtime=_core_runtime())
    except (RuntimeError, ValueError) as err:
        reason = str(err).split("(", 1)[0].strip().rstrip(":")  # the SDK's first words, not its transport dump
        raise EngineUnavailable(f"{where} cannot be reached: {reason}") from None
    try:
        request = DescribeNamespaceRequest(namespace=namespace)
        await client.workflow_service.describe_namespace(request, timeout=RPC_SECONDS)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise EngineUnavailable(
                f"{where}: the namespace does not exist (temporal operator namespace create {namespace})"
            ) from None
        raise EngineUnavailable(f"{where} does not answer: {err.message}") from None
    return client


@asynccontextmanager
async def reaching(address: str) -> AsyncIterator[None]:
    """Turn a Temporal RPC failure in the body into :class:`EngineUnavailable` naming the server (the op that met it fails saying so; it changed nothing)."""
    from temporalio.service import RPCError

    try:
        yield
    except RPCError as err:
        raise EngineUnavailable(f"the workflow engine (Temporal at {address}) does not answer: {err.message}") from None


class Followers:
    """The changes of runs as this daemon sees them, to each follower: ``(record, change)`` per stream, at most
    1000 behind (a follower that falls further behind loses the oldest; a run never waits for it)."""

    def __init__(self) -> None:
        self.streams: dict[str, list[MemoryObjectSendStream[tuple[RunRecord, dict[str, Any]]]]] = {}
        self.seen: dict[str, int] = {}  # run id -> the ``updated`` of the last record told
        self.latest: dict[str, RunRecord] = {}  # run id -> the newest record seen of a followed run

    def tell(self, record: RunRecord, change: dict[str, Any]) -> None:
        """Send ``(record, change)`` to the run's followers; a record of the run's end ends their streams."""
        if change.get("type") != "text":
            if record.updated < self.seen.get(record.id, 0):
                return  # older than what they were told (another daemon's commit read late)
            self.seen[record.id] = record.updated
            if record.id in self.streams:
                self.latest[record.id] = record
        for send in list(self.streams.get(record.id, [])):
            try:
                send.send_nowait((record, change))
            except anyio.WouldBlock:
                pass
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.drop(record.id, send)
            if record.terminal and change.get("type") != "text":
                send.close()

    def drop(self, run_id: str, send: MemoryObjectSendStream[tuple[RunRecord, dict[str, Any]]]) -> None:
        """Forget the stream ``send`` of run ``run_id`` (and the run, once no stream follows it); closes it."""
        streams = self.streams.get(run_id, [])
        if send in streams:
            streams.remove(send)
        if not streams:
            self.streams.pop(run_id, None)
            self.seen.pop(run_id, None)
            self.latest.pop(run_id, None)
        send.close()


def _asking(record: RunRecord) -> dict[str, Any] | None:
    for step_id, state in record.steps.items():
        wait = state.wait or {}
        if state.status == "suspended" and wait.get("on") == "input":
            return {"step": step_id, "request": wait.get("request"), "event": wait.get("event")}
    return None


def change_of(old: RunRecord | None, new: RunRecord) -> dict[str, Any]:
    """What a follower is told of ``new``, read from the store, after ``old`` (the last record it was told; ``None``:
    none): ``{"type": "input", "step"}`` when a step has just started waiting for an answer (the change the daemon
    that committed it tells its own followers: the run's task then reads INPUT_REQUIRED, wherever the workflow
    code ran), else ``{"type": "step", "steps"}`` naming the steps that differ, else ``{"type": "status"}``."""
    changed = [s for s, state in new.steps.items() if old is None or old.steps.get(s) != state]
    asking = _asking(new)
    if asking is not None and asking["step"] in changed:
        return {"type": "input", "step": asking["step"]}
    return {"type": "step", "steps": changed} if changed else {"type": "status"}


class StepActivities:
    """This daemon's activities: ``commit`` (a run's transition into the store, then to this daemon's followers),
    ``agent_turn`` and ``subagent`` (a step's work on this daemon's runtime). Takes the runtime, the run store, the
    followers, the runs' working-directory root, the pause note of the instance (``held``: while it is not
    ``None`` no step starts here) and the heartbeat interval in seconds."""

    def __init__(
        self,
        runtime: Any,
        store: RunStore,
        followers: Followers,
        work_root: Path,
        held: Callable[[], str | None],
        heartbeat: float,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.followers = followers
        self.work_root = work_root
        self.held = held
        self.heartbeat = heartbeat
        self.subagents: Any = None
        self.client: Any = None  # the runner's Temporal client, once connected

    @activity.defn(name=COMMIT)
    async def commit(self, payload: dict[str, Any]) -> None:
        """Write the run and the steps ``payload["steps"]`` names in one transaction (the store's ``save``), then
        tell this daemon's followers ``payload["change"]``."""
        record = record_of(payload["run"])
        changed = {s: record.steps[s] for s in payload["steps"]}
        try:
            await self.store.save(record, changed)
        except RunMissing as err:
            log.error(
                "%s: every daemon of one Temporal namespace and task queue prefix must share one [a2a] store", err
            )
            raise ApplicationError(str(err), type="RunMissing", non_retryable=True) from None
        self.followers.tell(record, payload["change"])
        if payload["change"].get("type") != "status" and record.status in RUN_TERMINAL:
            self.followers.tell(record, {"type": "status"})

    @activity.defn(name=AGENT_TURN)
    async def agent_turn(self, args: dict[str, Any]) -> dict[str, Any]:
        """One attempt of an agent step: open a session on ``args["agent"]`` in the step's directory (resuming
        ``args["resume"]`` when the previous attempt left a token), send the prompt, collect the top-level text
        until ``TurnEnded``, close the session. Returns ``{"stop", "message", "text", "resume"}``, or ``{"error"}``
        for a failure of the agent (never retried by Temporal: the step's policy decides). Heartbeats the resume
        token. Hands the attempt back, its attempt not counted, with ``ApplicationError`` of type ``Drained`` when
        this daemon's worker shuts down mid-turn, and of type ``Held`` when the instance is paused (nothing new
        starts here; another host of the agent may take it)."""
        turn = {"token": args.get("resume")}
        if self.held() is not None:
            raise ApplicationError("the daemon is paused", turn["token"], type=HELD, non_retryable=True)
        helpers = [asyncio.ensure_future(self._beat(lambda: turn["token"]))]  # plain tasks: nothing wraps an error
        try:
            return await self._turn(args, turn, helpers)
        except asyncio.CancelledError:
            if activity.is_worker_shutdown():
                raise ApplicationError("the daemon drains", turn["token"], type=DRAINED, non_retryable=True) from None
            raise
        finally:
            for helper in helpers:
                helper.cancel()

    async def _turn(
        self, args: dict[str, Any], turn: dict[str, Any], helpers: list[asyncio.Future[Any]]
    ) -> dict[str, Any]:
        run_id, step_id = args["run"], args["step"]
        asked: dict[str, str] = {}  # the open request's id, while one is open
        try:
            directory = Path(args["dir"]) if args.get("dir") else self.work_root / run_id
            directory.mkdir(parents=True, exist_ok=True)
            mode = "AutoApprove" if args.get("approval") == "auto" else "Ask"
            session = await self._open(args["agent"], directory, mode, turn["token"])
            try:
                turn["token"] = session.info().resume_token or turn["token"]
                activity.heartbeat(turn["token"])
                parts: list[str] = []
                await session.prompt(args["prompt"])
                async for event in session.events():
                    if event.tag == "TextDelta" and event.turn_info is not None:
                        if event.turn_info.parent_tool_id is None:
                            parts.append(event.kind.text)
                            await self._tell_text(run_id, step_id, event.kind.text)
                    elif event.tag == "RequestOpened":
                        request = event.kind.value
                        asked["id"] = request.value.id
                        ask = {"request": request.model_dump(mode="json"), "event": to_jsonable_python(event)}
                        await self._signal(run_id, "asked", step_id, ask)
                        helpers.append(asyncio.ensure_future(self._give_answer(session, run_id, step_id, asked)))
                    elif event.tag == "RequestClosed" and asked:
                        asked.clear()
                        await self._signal(run_id, "answered", step_id)
                    elif event.tag == "TurnEnded":
                        stop = event.kind.stop
                        message = getattr(stop, "message", None) if not isinstance(stop, str) else None
                        turn["token"] = session.info().resume_token or turn["token"]
                        text = "".join(parts)
                        return {"stop": kind_tag(stop), "message": message, "text": text, "resume": turn["token"]}
                return {"error": "the agent's session ended before its turn did", "resume": turn["token"]}
            finally:
                with anyio.CancelScope(shield=True):
                    await session.close()
        except (AnyagentError, KeyError, ValueError, OSError) as err:
            message = getattr(err, "message", None) or str(err)
            return {"error": f"{type(err).__name__}: {message}", "resume": turn["token"]}

    async def _open(self, agent: Any, directory: Path, mode: str, token: str | None) -> Any:
        from anyagentd.errors import ResumeFailed

        if token:
            try:
                return await self.runtime.open(agent, directory, permission_mode=mode, resume=token)
            except ResumeFailed as err:
                log.warning("resuming the step's session failed (%s): starting a new one", err.message)
        return await self.runtime.open(agent, directory, permission_mode=mode)

    async def _signal(self, run_id: str, name: str, *args: Any) -> None:
        assert self.client is not None
        await self.client.get_workflow_handle(run_id).signal(name, args=list(args))

    async def _give_answer(self, session: Any, run_id: str, step_id: str, asked: dict[str, str]) -> None:
        """While the step's request is open: read the run's ``answer`` query (every :data:`FOLLOW_POLL` s) and give
        the answer found to the session. An answer the session refuses leaves the request open (logged)."""
        from anyagentd.model import ANSWER

        request_id = asked.get("id")
        handle = self.client.get_workflow_handle(run_id)
        while asked.get("id") == request_id:
            value = await handle.query("answer", step_id)
            if value is not None:
                try:
                    await session.answer(request_id, ANSWER.validate_python(value))
                    return
                except (AnyagentError, ValueError) as err:
                    log.warning("run %s, step %s: the answer was refused: %s", run_id, step_id, err)
            await anyio.sleep(FOLLOW_POLL)

    async def _beat(self, token: Callable[[], str | None]) -> None:
        while True:
            activity.heartbeat(token())
            await anyio.sleep(self.heartbeat / 3)

    async def _tell_text(self, run_id: str, step_id: str, text: str) -> None:
        record = self.followers.latest.get(run_id)  # followed here: the newest record, for the change's reader
        if record is not None:
            self.followers.tell(record, {"type": "text", "step": step_id, "text": text})

    @activity.defn(name=SUBAGENT)
    async def subagent(self, args: dict[str, Any]) -> dict[str, Any]:
        """A ``subagent`` step on this daemon's subagent manager (:func:`~anyagentd_a2a.workflows.runner.subagent_step`,
        as the local engine's): ``{"status", "output", "error"}``."""
        outcome = await subagent_step(
            self.subagents, args["owner"], args["agent"], args["instruction"], args["mode"], args["run"]
        )
        return {"status": outcome.status, "output": outcome.output, "error": outcome.error}


class TemporalRunner:
    """The runner of the ``temporal`` engine (the local runner's methods). Takes what the local runner takes —
    ``runtime``, ``store`` (opened), ``workflows``, ``work_root``, ``default_agent``, ``held`` — and ``options``:
    the ``[workflow_engine]`` table (``address``, ``namespace``, ``task_queue_prefix``, ``heartbeat`` seconds,
    ``max_concurrent``) and ``hosts`` (the names of the agents whose steps this daemon runs)."""

    def __init__(
        self,
        runtime: Any,
        store: RunStore,
        workflows: dict[str, Workflow],
        *,
        work_root: Path,
        default_agent: Any = "mock",
        held: Callable[[], str | None] = lambda: None,
        options: dict[str, Any] | None = None,
        hosts: list[str] | None = None,
    ) -> None:
        options = dict(options or {})
        self.runtime = runtime
        self.store = store
        self.workflows = workflows
        self.work_root = Path(work_root)
        self.default_agent = default_agent
        self.held = held
        self.address = str(options.get("address", "127.0.0.1:7233"))
        self.namespace = str(options.get("namespace", "default"))
        self.prefix = str(options.get("task_queue_prefix", "anyagentd"))
        self.heartbeat = float(options.get("heartbeat", HEARTBEAT))
        self.max_concurrent = int(options.get("max_concurrent") or 100)
        self.hosts = sorted({agent_name(h) for h in (hosts or [])})
        self.followers = Followers()
        self.activities = StepActivities(runtime, store, self.followers, self.work_root, held, self.heartbeat)
        self.client: Any = None
        self._workers: list[Any] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._starting: set[str] = set()  # runs :meth:`start` is starting now

    @property
    def subagents(self) -> Any:
        return self.activities.subagents

    @subagents.setter
    def subagents(self, value: Any) -> None:
        self.activities.subagents = value

    # ------------------------------------------------------------------------------------------ lifecycle

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect to Temporal and run this daemon's workers until cancelled. Raises :class:`EngineUnavailable`
        when the server cannot be reached."""
        from temporalio.worker import Worker

        self.client = await connect(self.address, self.namespace)
        self.activities.client = self.client
        acts = self.activities
        self._workers = [
            Worker(
                self.client,
                task_queue=runs_queue(self.prefix),
                workflows=[RunWorkflow],
                activities=[acts.commit],
            )
        ]
        for name in self.hosts:
            self._workers.append(
                Worker(
                    self.client,
                    task_queue=agent_queue(self.prefix, name),
                    activities=[acts.agent_turn, acts.subagent],
                    max_concurrent_activities=self.max_concurrent,
                    graceful_shutdown_timeout=timedelta(0),
                )
            )
        log.info(
            "workflows on Temporal at %s (namespace %s): runs on %s, steps of %s",
            self.address,
            self.namespace,
            runs_queue(self.prefix),
            ", ".join(self.hosts) or "no agent",
        )
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for worker in self._workers:
                tg.start_soon(worker.run)
            tg.start_soon(self._watch)
            await self.recover()
            task_status.started()

    async def recover(self) -> list[str]:
        """Start the workflow of every stored run this daemon holds (or takes over: its holder dead or unknown,
        :meth:`~anyagentd_a2a.members.Membership.claim`) that has none yet — created while the instance was paused,
        or by a daemon that stopped between committing the run and starting it; Temporal keeps every started run
        going whichever daemon stopped. Returns the ids started. Nothing starts while the instance is paused, and
        nothing is started while Temporal does not answer (logged; tried again at the next call)."""
        from temporalio.exceptions import WorkflowAlreadyStartedError

        if self.held() is not None:
            return []
        waiting = [
            record
            for record in await self.store.list(non_terminal=True)
            if record.status == "pending"
            and not any(s.attempt for s in record.steps.values())
            and record.workflow in self.workflows
            and record.id not in self._starting
        ]
        members = self.store.members
        if members is not None and waiting:
            mine = set(await members.held_by(RUN, members.instance))
            mine |= await members.claim(RUN, [r.id for r in waiting if r.id not in mine])
            waiting = [r for r in waiting if r.id in mine]
        started = []
        for record in waiting:
            try:
                await self._start_workflow(record, self.workflows[record.workflow])
            except WorkflowAlreadyStartedError:
                continue
            except EngineUnavailable as err:
                log.warning("starting the runs held back: %s", err.message)
                break
            started.append(record.id)
        return started

    def wake_all(self) -> None:
        """After the instance is resumed: start the runs held while it was paused (:meth:`recover`); a held step
        of a started run waits in its activity and reads ``held`` again."""
        if self._tg is not None:
            self._tg.start_soon(self.recover)

    async def drain(self, timeout: float) -> None:
        """Stop this daemon's workers: a running step is handed back to Temporal (``Drained``: it starts again on
        a host of its agent, its attempt not counted); waits stay waiting in Temporal."""
        with anyio.move_on_after(timeout):
            for worker in self._workers:
                if worker.is_running:
                    await worker.shutdown()

    def redefine(self, workflows: dict[str, Workflow]) -> dict[str, list[str]]:
        """Take ``workflows`` for the runs started from now on (a started run keeps the definition it started
        with: it is in its workflow's input). Returns ``{"added", "changed", "removed"}`` names, sorted."""
        old, self.workflows = self.workflows, dict(workflows)
        return definitions_changed(old, self.workflows)

    # ------------------------------------------------------------------------------------------ requests

    async def start(
        self, workflow_name: str, inputs: dict[str, Any], principal: str | None, task_id: str | None = None
    ) -> RunRecord:
        """Create the run (committed first), then its Temporal workflow (id: the run id) — unless the instance is
        paused: the run then waits, ``pending``, and starts when it is resumed (:meth:`wake_all`)."""
        workflow = self.workflows[workflow_name]
        record = new_run(workflow, inputs, principal, task_id)
        self._starting.add(record.id)  # not the recovery's to start (:meth:`recover`)
        try:
            await self.store.create(record)
            if self.held() is None:
                try:
                    await self._start_workflow(record, workflow)
                except EngineUnavailable:
                    await self.store.delete(record.id)  # refused: nothing is left to run later
                    raise
        finally:
            self._starting.discard(record.id)
        return record

    async def _start_workflow(self, record: RunRecord, workflow: Workflow) -> None:
        default = self.default_agent.model_dump() if hasattr(self.default_agent, "model_dump") else self.default_agent
        async with reaching(self.address):
            await self._client().start_workflow(
                RunWorkflow.run,
                {
                    "run": record_json(record),
                    "workflow": workflow.model_dump(mode="json"),
                    "prefix": self.prefix,
                    "default_agent": default,
                    "heartbeat": self.heartbeat,
                },
                id=record.id,
                task_queue=runs_queue(self.prefix),
                rpc_timeout=RPC_SECONDS,
            )

    async def get(self, run_id: str) -> RunRecord | None:
        """The run: as stored, or — while it has not ended — as its workflow's ``state`` query answers (a
        transition it is committing shows already)."""
        record = in_order(self.workflows, await self.store.get(run_id))
        if record is None or record.terminal:
            return record
        try:
            with anyio.fail_after(5):
                state = await self._client().get_workflow_handle(run_id).query("state")
        except Exception as err:  # noqa: BLE001 - no worker answers (every daemon down): the store's copy
            log.debug("the state query of run %s failed (%s): read from the store", run_id, type(err).__name__)
            return record
        return in_order(self.workflows, record_of(state))

    async def _live(self, run_id: str, what: str) -> RunRecord:
        record = await self.store.get(run_id)
        if record is None:
            raise RunNotFound(run_id)
        if record.terminal:
            raise RunStateRefused(f"cannot {what} a run that has ended")
        return record

    async def cancel(self, run_id: str, reason: str | None = None) -> RunRecord:
        """Cancel a run (its running steps' activities are cancelled and their sessions closed); returns once it
        has ended. :class:`RunNotFound`, or :class:`RunStateRefused` for a run that has ended."""
        await self._live(run_id, "cancel")
        handle = self._client().get_workflow_handle(run_id)
        async with reaching(self.address):
            await handle.signal("cancel", reason, rpc_timeout=RPC_SECONDS)
        return record_of(await handle.result())

    async def pause(self, run_id: str) -> RunRecord:
        record = await self._live(run_id, "pause")
        async with reaching(self.address):
            await self._client().get_workflow_handle(run_id).signal("pause", rpc_timeout=RPC_SECONDS)
        record.flags = replace(record.flags, paused=True)
        return record

    async def resume(self, run_id: str) -> RunRecord:
        record = await self.get(run_id)
        if record is None:
            raise RunNotFound(run_id)
        if record.terminal or not record.flags.paused:
            raise RunStateRefused(f"run {run_id} is not paused")
        async with reaching(self.address):
            await self._client().get_workflow_handle(run_id).signal("resume", rpc_timeout=RPC_SECONDS)
        record.flags = replace(record.flags, paused=False)
        return record

    async def signal(
        self, name: str, payload: Any, sender: str, *, owner: str | None, run_id: str | None = None
    ) -> int:
        """Deliver signal ``name`` to every run of ``owner`` (every run for ``None``; ``run_id`` only when given)
        with a wait step suspended on it; returns how many steps were resolved."""
        targets: list[tuple[str, list[str]]] = []
        for record in await self.store.list(principal=owner, non_terminal=True):
            if run_id is not None and record.id != run_id:
                continue
            # the store holds a wait step's "suspended" before the workflow waits (committed first)
            steps = [
                s
                for s, state in record.steps.items()
                if state.status == "suspended" and (state.wait or {}).get("signal") == name
            ]
            if steps:
                targets.append((record.id, steps))
        limit = anyio.Semaphore(SIGNAL_CONCURRENCY)
        delivered: list[int] = []
        missed: list[EngineUnavailable] = []

        async def deliver(target: str, steps: list[str]) -> None:
            async with limit:
                try:
                    async with reaching(self.address):
                        handle = self._client().get_workflow_handle(target)
                        await handle.signal("signal", args=[name, payload, sender], rpc_timeout=RPC_SECONDS)
                except EngineUnavailable as err:
                    missed.append(err)
                    return
                for step_id in steps:
                    await self.store.add_signal(target, step_id, name, payload, sender, now_ms())
                delivered.append(len(steps))

        async with anyio.create_task_group() as tg:
            for target, steps in targets:
                tg.start_soon(deliver, target, steps)
        if missed:
            raise EngineUnavailable(f"{missed[0].message} (delivered to {len(delivered)} of {len(targets)} runs)")
        return sum(delivered)

    async def answer(self, run_id: str, answer: Any) -> bool:
        """Answer the open request of the run's ``ask`` step (the ``answer`` signal; the daemon running the step
        gives it to its agent); ``False`` when nothing waits for one."""
        from anyagentd.model import ANSWER

        waiting = await self.asked(run_id)
        if waiting is None:
            return False
        value = ANSWER.dump_python(answer, mode="json")
        async with reaching(self.address):
            handle = self._client().get_workflow_handle(run_id)
            await handle.signal("answer", args=[waiting["step"], value], rpc_timeout=RPC_SECONDS)
        return True

    async def asked(self, run_id: str) -> dict[str, Any] | None:
        """The request the run's ``ask`` step waits on (as :meth:`awaiting_input`), for a run this daemon may not
        follow: read from the store."""
        waiting = self.awaiting_input(run_id)
        if waiting is None:
            record = await self.store.get(run_id)
            waiting = _asking(record) if record is not None else None
        return waiting

    def awaiting_input(self, run_id: str) -> dict[str, Any] | None:
        """The request an ``ask`` step of the followed run waits on, or ``None``: ``{"step", "request", "event"}``
        (the newest record this daemon has seen of it: a run it follows)."""
        record = self.followers.latest.get(run_id)
        return _asking(record) if record is not None else None

    @asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[MemoryObjectReceiveStream[tuple[RunRecord, dict[str, Any]]]]:
        """Every change of run ``run_id`` from now on, as ``(record, change)``, until the run ends: this daemon's
        commits and agent text at once, another daemon's commits from the store (:meth:`_watch`). The stream ends
        with the run (at once for a run that has ended or does not exist)."""
        send, receive = anyio.create_memory_object_stream[tuple[RunRecord, dict[str, Any]]](1000)
        current = await self.store.get(run_id)
        if current is None or current.terminal:
            send.close()
        else:
            self.followers.streams.setdefault(run_id, []).append(send)
            self.followers.latest.setdefault(run_id, current)  # what awaiting_input reads from now on
            self.followers.seen.setdefault(run_id, current.updated)
        try:
            yield receive
        finally:
            self.followers.drop(run_id, send)
            receive.close()

    async def _watch(self) -> None:
        """Until cancelled, every :data:`FOLLOW_POLL` seconds while any run is followed: one query for when each
        followed run was last written, then the runs written since they were last told (by another daemon's commit)
        read and told as the change it is (:func:`change_of`)."""
        while True:
            await anyio.sleep(FOLLOW_POLL)
            followed = list(self.followers.streams)
            if not followed:
                continue
            for run_id, updated in (await self.store.updated_of(followed)).items():
                if updated <= self.followers.seen.get(run_id, 0):
                    continue
                record = await self.store.get(run_id)
                if record is None:
                    continue
                self.followers.tell(record, change_of(self.followers.latest.get(run_id), record))

    async def wait(self, run_id: str) -> RunRecord:
        """Wait until the run ends; returns its record."""
        if await self.store.get(run_id) is None:
            raise RunNotFound(run_id)
        return record_of(await self._client().get_workflow_handle(run_id).result())

    def _client(self) -> Any:
        assert self.client is not None, "start TemporalRunner.serve first"
        return self.client


__all__ = ["Followers", "StepActivities", "TemporalRunner", "connect"]
