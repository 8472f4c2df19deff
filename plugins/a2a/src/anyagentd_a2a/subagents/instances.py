"""Child instances: a subagent that is another anyagentd daemon (or any A2A agent), reached over A2A with the
official ``a2a-sdk`` client.

Configured as ``[[subagents.instances]]`` (``name``, ``url``, ``bearer`` a credential reference). Spawning the
agent ``name`` sends the instruction as one A2A message and waits for its task to end (unary ``SendMessage``):
the child's reply *is* its result, recorded on the parent's handle at once. The message's ``contextId`` is the
parent's handle, so the child keeps one conversation per subagent (a warm one's ``subagent.send`` continues it)
and the handle is what the child knows the parent by; the message's ``metadata`` carries
``{"agentd": {"handle", "parent"}}`` (the parent's URL) for a child that reports out of band with the parent's
operator credential (``_instance.result`` / ``_instance.emit``). Killing such a subagent cancels every task of
that context on the child (``ListTasks`` + ``CancelTask``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

TIMEOUT = 600.0
"""Seconds one message to a child may take (the manager's turn timeout bounds it too)."""


class ChildFailed(Exception):
    """The child could not be reached, refused the message, or ended its task other than completed."""


@dataclass(frozen=True)
class ChildInstance:
    """One configured child: ``name`` (the agent name it is spawned by), ``url`` (its A2A endpoint) and
    ``bearer`` (the resolved credential the parent presents, or ``None``)."""

    name: str
    url: str
    bearer: str | None = None

    def _http(self) -> httpx.AsyncClient:
        headers = {"A2A-Version": "1.0"}
        if self.bearer:
            headers["Authorization"] = f"Bearer {self.bearer}"
        return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(TIMEOUT, connect=10))

    async def _client(self, http: httpx.AsyncClient) -> Any:
        from a2a.client import ClientConfig, ClientFactory

        try:
            return await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(self.url)
        except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the record needs one line
            raise ChildFailed(f"cannot reach the child instance {self.name!r} at {self.url}: {err}") from None

    async def ask(self, text: str, *, handle: str, parent: str | None) -> str:
        """Send ``text`` in the context ``handle`` and wait for the child's task to end; returns its answer text
        (the response artifact, else the final status message). Raises :class:`ChildFailed`."""
        from a2a.types import Message, Part, Role, SendMessageRequest
        from google.protobuf.json_format import MessageToDict, ParseDict
        from google.protobuf.struct_pb2 import Struct

        from ..client import task_text

        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)],
                          context_id=handle)  # fmt: skip
        message.metadata.CopyFrom(ParseDict({"agentd": {"handle": handle, "parent": parent}}, Struct()))
        async with self._http() as http:
            client = await self._client(http)
            try:
                responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
            except Exception as err:  # noqa: BLE001
                raise ChildFailed(f"the child instance {self.name!r} refused the message: {err}") from None
        task = next((MessageToDict(r).get("task") for r in reversed(responses) if MessageToDict(r).get("task")), None)
        if not task:
            raise ChildFailed(f"the child instance {self.name!r} answered no task")
        state = task.get("status", {}).get("state", "")
        if state != "TASK_STATE_COMPLETED":
            raise ChildFailed(f"the child's task {task.get('id')} ended {state.removeprefix('TASK_STATE_')}: "
                              f"{task_text(task)[:500]}")  # fmt: skip
        return task_text(task)

    async def cancel(self, handle: str) -> int:
        """Cancel every task of the context ``handle`` on the child that has not ended; returns how many."""
        from a2a.types import CancelTaskRequest, ListTasksRequest, TaskState

        ended = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED,
                 TaskState.TASK_STATE_REJECTED}  # fmt: skip
        cancelled = 0
        async with self._http() as http:
            client = await self._client(http)
            try:
                listed = await client.list_tasks(ListTasksRequest(context_id=handle))
                for task in listed.tasks:
                    if task.status.state not in ended:
                        await client.cancel_task(CancelTaskRequest(id=task.id))
                        cancelled += 1
            except Exception as err:  # noqa: BLE001
                raise ChildFailed(f"cannot cancel on the child instance {self.name!r}: {err}") from None
        return cancelled


__all__ = ["ChildFailed", "ChildInstance"]
