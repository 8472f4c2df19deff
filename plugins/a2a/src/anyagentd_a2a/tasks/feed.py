"""The stored tasks outside a request: read as their owner, and — for a task a restart failed, which no request
serves — told to their push subscribers. Every task a request serves is stored and pushed by the SDK's request
handler (:mod:`..executor`), whatever produced it.

:class:`TaskFeed` knows the store and the push sender, not who produced the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..calls import call_context

if TYPE_CHECKING:
    from a2a.server.tasks import PushNotificationSender
    from a2a.types import Task, TaskStatusUpdateEvent

    from ..principals import Principal
    from ..store import PrincipalTaskStore


class TaskFeed:
    """Reads tasks from ``store`` (the daemon's :class:`~..store.PrincipalTaskStore`) as their owner and tells
    ``push`` (the SDK's push sender; ``None`` with ``[a2a.push]`` off: nobody is told) a status update."""

    def __init__(self, store: PrincipalTaskStore, push: PushNotificationSender | None) -> None:
        self.store = store
        self.push = push

    async def get(self, task_id: str, principal: Principal) -> Task | None:
        """The stored task ``task_id`` as ``principal`` reads it (``None``: no such task of its own)."""
        return await self.store.get(task_id, call_context(principal))

    async def tell(self, event: TaskStatusUpdateEvent) -> None:
        """Tell a task's push subscribers its status update ``event`` (a task a restart failed: no request serves
        it, so the SDK pushes none of its states)."""
        if self.push is not None:
            await self.push.send_notification(event.task_id, event)


__all__ = ["TaskFeed"]
