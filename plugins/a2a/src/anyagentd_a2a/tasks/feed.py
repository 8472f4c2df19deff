"""The tasks the daemon writes itself — a command's, a workflow run's, a task a restart failed — stored in the
task store under their owner, and told to their push subscribers: the SDK serves none of these tasks, so it
pushes none of their states.

:class:`TaskFeed` knows the store and the push sender, not who produced the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.tasks import TaskManager
from a2a.types import Task, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict

from ..calls import call_context

if TYPE_CHECKING:
    from a2a.server.tasks import PushNotificationSender

    from ..principals import Principal
    from ..store import PrincipalTaskStore


class TaskFeed:
    """Writes tasks to ``store`` (the daemon's :class:`~..store.PrincipalTaskStore`) under their owner and tells
    ``push`` (the SDK's push sender; ``None`` with ``[a2a.push]`` off: nobody is told) their status updates."""

    def __init__(self, store: PrincipalTaskStore, push: PushNotificationSender | None) -> None:
        self.store = store
        self.push = push

    def manager(self, principal: Principal, task_id: str, context_id: str) -> TaskManager:
        """The SDK's ``TaskManager`` of task ``task_id`` (in ``context_id``) in the store, under ``principal``:
        what a command's long-running task is written through (:class:`..command.dispatch.TrackedTask`)."""
        return TaskManager(self.store, call_context(principal), task_id, context_id, None)

    async def get(self, task_id: str, principal: Principal) -> Task | None:
        """The stored task ``task_id`` as ``principal`` reads it (``None``: no such task of its own)."""
        return await self.store.get(task_id, call_context(principal))

    async def tell(self, event: TaskStatusUpdateEvent) -> None:
        """Tell a task's push subscribers its status update ``event`` (the SDK serves none of these tasks, so it
        pushes none of their states)."""
        if self.push is not None:
            await self.push.send_notification(event.task_id, event)

    async def save(self, task: dict[str, Any], principal: Principal) -> None:
        """Store a command's task (proto3 JSON) under ``principal``, then tell its push subscribers its status: the
        SDK serves none of these tasks, so it pushes none of their states (the sender looks up only tasks with
        push configs)."""
        stored = ParseDict(task, Task(), ignore_unknown_fields=True)
        await self.store.save(stored, call_context(principal))
        await self.tell(
            TaskStatusUpdateEvent(
                task_id=stored.id, context_id=stored.context_id, status=stored.status, metadata=stored.metadata
            )
        )


__all__ = ["TaskFeed"]
