"""While a daemon runs: its lease renewed every heartbeat, and the work of the daemons on the same database that
died since taken over (issue 29; the membership and its rules: :mod:`.members`).

:meth:`Takeover.sweep` does, for every dead member (its lease run out), what a start-up does to the work a dead
process left (:func:`.services.open_stores`): its open tasks this daemon takes (a compare-and-set per task:
another survivor may take some) get what :func:`.tasks.state.on_restart` decides — failed (their push
subscribers told), parked (their answers resume the conversation here) or kept (a run's task) —; then the
workflow runner resumes the runs it claims (:meth:`.workflows.runner.WorkflowRunner.recover`: a dead, gone or
unknown holder) and their tasks follow them (:meth:`.tasks.runs.RunTasks.follow_resumed`). The dead member's row
goes last. One log line per takeover names the member, its URL and the counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from .members import RUN, TASK, Member, Membership
from .store import fail_interrupted, open_task_ids

if TYPE_CHECKING:
    from .agents import Agents, AgentStore
    from .store import PushConfigStore
    from .tasks.runs import RunTasks
    from .workflows.runner import WorkflowRunner

log = logging.getLogger("anyagentd.a2a")


@dataclass
class Taken:
    """What one takeover of a dead member did: its tasks ``failed``, ``parked`` and ``kept`` (``kept_ids``: a run's
    task, followed again), its ``runs`` resumed."""

    failed: int = 0
    parked: int = 0
    kept: int = 0
    runs: list[str] = field(default_factory=list)
    kept_ids: set[str] = field(default_factory=set)

    @property
    def tasks(self) -> int:
        return self.failed + self.parked + self.kept


@dataclass
class Takeover:
    """The sweep of one daemon: its ``members`` (joined), the served ``agents`` and their ``stores`` (by id: their
    ``parked`` maps grow with the tasks parked here), the workflow ``runner`` and ``run_tasks`` (``None`` without
    workflows), the ``push_store`` (``None`` with push off), ``spawn`` (the daemon's task group's ``start_soon``:
    the pushes and the followed tasks run there) and ``draining`` (no takeover once the daemon drains)."""

    members: Membership
    agents: Agents
    stores: dict[str, AgentStore]
    runner: WorkflowRunner | None
    run_tasks: RunTasks | None
    push_store: PushConfigStore | None
    spawn: Callable[..., Any]
    draining: Callable[[], bool] = lambda: False
    swept: set[str] = field(default_factory=set)
    """The members gone (stopped cleanly) whose tasks this daemon has taken once."""

    async def serve(self) -> None:
        """Until cancelled: every heartbeat (:attr:`.members.Membership.heartbeat`) renew the lease, and — in a loop
        of its own, so that a slow takeover (a workflow engine that does not answer) never delays a renewal past the
        lease — :meth:`sweep` (unless draining). A failure is logged and tried again at the next heartbeat."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._every_heartbeat, self.members.renew, "renewing the lease")
            tg.start_soon(self._every_heartbeat, self._sweep_unless_draining, "taking over dead members' work")

    async def _every_heartbeat(self, step: Callable[[], Any], what: str) -> None:
        while True:
            await anyio.sleep(self.members.heartbeat)
            try:
                await step()
            except Exception as err:  # noqa: BLE001 - the database may be back at the next heartbeat
                log.warning("%s failed: %s", what, err)

    async def _sweep_unless_draining(self) -> None:
        if not self.draining():
            await self.sweep()

    async def sweep(self) -> dict[str, Taken]:
        """Take over the work of every member dead now, and the open tasks of every member that left (stopped
        cleanly: a drained daemon's run tasks are followed here to their runs' end); see the module docstring.
        Returns what was taken, by member id (a run no live member held and no dead one either — left by a clean stop, or written before
        holders existed — is counted under ``""``). Raises what the driver raises."""
        dead = await self.members.dead()
        gone = [m for m in await self.members.gone() if m.instance not in self.swept]
        taken = {member.instance: await self._tasks_of(member) for member in [*dead, *gone]}
        if self.runner is not None:
            resumed = await self.runner.recover()
            for run_id in resumed:
                previous = self.members.claimed.get((RUN, run_id)) or ""
                taken.setdefault(previous if previous in taken else "", Taken()).runs.append(run_id)
            kept = {task for done in taken.values() for task in done.kept_ids}
            if (resumed or kept) and self.run_tasks is not None:
                self.spawn(self.run_tasks.follow_resumed, set(resumed), kept)
        for member in dead:
            await self.members.forget(member)
            done = taken[member.instance]
            log.warning(
                "member %s (%s) is dead (last seen %s UTC): took over %d task(s) (%d failed, %d parked, %d kept "
                "with their runs) and %d run(s)",
                member.instance,
                member.url or "no URL",
                member.last_seen.isoformat(timespec="seconds"),
                done.tasks,
                done.failed,
                done.parked,
                done.kept,
                len(done.runs),
            )
        for member in gone:  # its tasks are taken once: any later one is another daemon's to take
            self.swept.add(member.instance)
            done = taken[member.instance]
            if done.tasks:
                log.info(
                    "member %s stopped (it left the database): took over %d task(s) (%d failed, %d parked, %d kept "
                    "with their runs)",
                    member.instance,
                    done.tasks,
                    done.failed,
                    done.parked,
                    done.kept,
                )
        if "" in taken:
            log.info("resumed %d run(s) no live member held: %s", len(taken[""].runs), ", ".join(taken[""].runs))
        return taken

    async def _tasks_of(self, member: Member) -> Taken:
        """Take ``member``'s open tasks in every agent's table and do to each what a start-up does."""
        done = Taken()
        held = await self.members.held_by(TASK, member.instance)
        if not held:
            return done
        run_tasks = await self.runner.store.task_ids() if self.runner is not None else set()
        for agent in self.agents:
            mine = await self.members.take_over(TASK, await open_task_ids(agent.store, among=held), member.instance)
            if not mine:
                continue
            resumable = await agent.table.resumable(agent.spec.label)
            failed, parked = await fail_interrupted(agent.store, resumable, run_tasks, only=mine)
            self.stores[agent.id].parked.update(parked)
            done.failed += len(failed)
            done.parked += len(parked)
            done.kept_ids |= mine - {event.task_id for event in failed} - set(parked)
            done.kept = len(done.kept_ids)
            if failed and self.push_store is not None:
                self.push_store.reread()  # the dead member's subscribers were written by it
            for event in failed:
                self.spawn(agent.feed.tell, event)
        return done


__all__ = ["Taken", "Takeover"]
