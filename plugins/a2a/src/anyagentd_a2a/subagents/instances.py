"""Child instances: a subagent that is another anyagentd daemon (or any A2A agent), reached over A2A with the
official ``a2a-sdk`` client.

Configured as ``[[subagents.instances]]`` (``name``, ``url``, ``bearer`` a credential reference, ``reports``).
Spawning the agent ``name`` sends the instruction as one A2A message (:func:`anyagentd_a2a.client.send`). The
message's ``contextId`` is the parent's handle, so the child keeps one conversation per subagent (a warm one's
``subagent.send`` continues it) and the handle is what the child knows the parent by; its ``metadata`` carries
``{"agentd": {"handle"}}``. Two ways back (``docs/commands.md#child-instances``):

- ``reports = false`` (any A2A agent): the send waits for the child's task to end, and its reply *is* the result;
- ``reports = true`` (an anyagentd child with this parent among its ``[[subagents.parents]]``): the metadata also
  names ``parent`` (this daemon's URL), the send returns as soon as the child took the message, and the child
  reports with the parent's operator credential: ``_instance.emit`` for its events, ``_instance.result`` for the
  end of its task, which is what completes the handle (:mod:`.reports` is the child's side).

Killing such a subagent cancels every task of that context on the child (``ListTasks`` + ``CancelTask``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ChildFailed(Exception):
    """The child could not be reached, refused the message, or ended its task other than completed."""


@dataclass(frozen=True)
class ChildInstance:
    """One configured child: ``name`` (the agent name it is spawned by), ``url`` (its A2A endpoint), ``bearer``
    (the resolved credential the parent presents, or ``None``) and ``reports`` (the child reports its results with
    ``_instance.result``: a message is sent without waiting for its task, see :meth:`ask`)."""

    name: str
    url: str
    bearer: str | None = None
    reports: bool = False

    async def ask(self, text: str, *, handle: str, parent: str | None) -> str | None:
        """Send ``text`` in the context ``handle``. Without :attr:`reports`, wait for the child's task to end and
        return its answer text (the response artifact, else the final status message); with it, return ``None`` as
        soon as the child took the message (its ``_instance.result`` to ``parent``, this daemon's URL, is the
        answer). Raises :class:`ChildFailed` (unreachable, refused, or its task ended other than completed)."""
        from ..client import ClientError, send, task_text
        from ..tasks.state import COMPLETED, TERMINAL, name

        agentd: dict[str, Any] = {"handle": handle}
        if self.reports:
            if not parent:
                raise ChildFailed(f"the child instance {self.name!r} reports, but this daemon has no URL to give it")
            agentd["parent"] = parent
        try:
            state, task = await send(
                self.url, text, self.bearer, context_id=handle, metadata={"agentd": agentd}, immediately=self.reports
            )
        except ClientError as err:
            raise ChildFailed(f"the child instance {self.name!r}: {err}") from None
        if self.reports and state not in {name(s) for s in TERMINAL - {COMPLETED}}:
            return None  # taken: the report brings the answer (failed, rejected or cancelled already: none comes)
        if state != "TASK_STATE_COMPLETED":
            raise ChildFailed(
                f"the child's task {task.get('id')} ended {state.removeprefix('TASK_STATE_')}: {task_text(task)[:500]}"
            )
        return task_text(task)

    async def cancel(self, handle: str) -> int:
        """Cancel every task of the context ``handle`` on the child that has not ended; returns how many."""
        from a2a.types import CancelTaskRequest, ListTasksRequest

        from ..client import ClientError, connect
        from ..tasks.state import TERMINAL

        cancelled = 0
        try:
            async with connect(self.url, self.bearer) as client:
                listed = await client.list_tasks(ListTasksRequest(context_id=handle))
                for task in listed.tasks:
                    if task.status.state not in TERMINAL:
                        await client.cancel_task(CancelTaskRequest(id=task.id))
                        cancelled += 1
        except ClientError as err:
            raise ChildFailed(f"cannot cancel on the child instance {self.name!r}: {err}") from None
        except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the record needs one line
            raise ChildFailed(f"cannot cancel on the child instance {self.name!r}: {err}") from None
        return cancelled


__all__ = ["ChildFailed", "ChildInstance"]
