"""The console's push stream: ``GET /console/events``, server-sent events of every task state change the caller may
see, across every agent the daemon serves — what the Waiting page and the Overview update on (a permission asked
shows at once, without polling).

Source: each agent's task store tells :class:`TaskEvents` every task it saves (``PrincipalTaskStore.on_saved``, set
by the app for every agent: the one point every task update passes, whoever produced it — a conversation's run, a
command op, the SDK's own cancel), with the owner it is saved for; a save that changes nothing the console shows
(a WORKING update after a WORKING one: text, tools, usage) is not told. Nothing goes through pluggy, nothing reads
the database.

Who sees what: a subscriber is told a task only when :func:`anyagentd.ops.owns` says its principal owns the task's
owner (the task store's own rule: a user its own tasks, the operator every task) and the principal reaches the
task's agent (``Principal.reaches``). The caller is identified as every credentialed route is
(:meth:`.front.Front.authenticate`: ``Authorization: Bearer …`` — never a token in the URL — or the implicit
loopback operator; 401 -31401 otherwise), may call ``ListTasks`` (else 403 -31403) and passes the principal's rate
(429). A device session's stream ends when the session is revoked (:class:`..auth.revocable.RevocableResponse`).

Frames (``data:`` lines holding one JSON object each):

- ``{"type": "hello", "principal": id}`` first: the page lists what it shows (``ListTasks``) on it;
- ``{"type": "task", "agent", "id", "contextId", "state", "timestamp", "owner"?, "op"?, "message"?}`` per change
  (``message``: the status message as A2A JSON, while the task is INPUT_REQUIRED — the request the agent asks;
  ``op``: the command op of an op's task);
- ``{"type": "resync"}`` when the subscriber fell behind: each subscriber holds at most :data:`QUEUED` changes, the
  oldest dropped past that, and the page lists again;
- ``: keepalive`` comment lines every :data:`KEEPALIVE` seconds while nothing happens.

The stream ends when the daemon drains.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from a2a.types import TaskState
from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from anyagentd.ops import owns

from ..front import AGENTD_DOMAIN, rpc_error

if TYPE_CHECKING:
    from a2a.types import Task

    from ..front import Front
    from ..principals import Principal

EVENTS_PATH = "/console/events"
QUEUED = 256
"""Changes one subscriber holds before the oldest are dropped (and it is told to resync)."""
KEEPALIVE = 15.0
"""Seconds between keepalive comments on an idle stream."""
REMEMBERED = 10_000
"""Tasks whose last told state is remembered (to tell changes only); the least recently saved are forgotten."""


class Subscriber:
    """One open stream: its ``principal`` and the changes not yet sent (at most ``limit``; past it the oldest go and
    :attr:`lost` is set until :meth:`take` reports it)."""

    def __init__(self, principal: Principal, limit: int = QUEUED) -> None:
        self.principal = principal
        self.limit = limit
        self.queue: deque[dict[str, Any]] = deque()
        self.lost = False
        self.wake = anyio.Event()

    def sees(self, agent: str, owner: str) -> bool:
        return self.principal.reaches(agent) and owns(self.principal, owner)

    def offer(self, change: dict[str, Any]) -> None:
        if len(self.queue) >= self.limit:
            self.queue.popleft()
            self.lost = True
        self.queue.append(change)
        self.wake.set()

    def take(self) -> list[dict[str, Any]]:
        """The frames to send now: a resync marker first when changes were dropped, then the queued changes."""
        taken: list[dict[str, Any]] = [{"type": "resync"}] if self.lost else []
        taken.extend(self.queue)
        self.queue.clear()
        self.lost = False
        self.wake = anyio.Event()
        return taken


class TaskEvents:
    """The in-process broadcaster of task state changes (see the module docstring): :meth:`saved` is each agent
    store's ``on_saved``; :meth:`subscribe` / :meth:`unsubscribe` hold the open streams."""

    def __init__(self, limit: int = QUEUED) -> None:
        self.limit = limit
        self.subscribers: set[Subscriber] = set()
        self._told: OrderedDict[tuple[str, str], tuple[int, str]] = OrderedDict()

    def saved(self, agent: str) -> Callable[[Task, str], None]:
        """The ``on_saved(task, owner)`` hook of agent ``agent``'s task store."""

        def on_saved(task: Task, owner: str) -> None:
            self.publish(agent, task, owner)

        return on_saved

    def publish(self, agent: str, task: Task, owner: str) -> None:
        """Tell every subscriber that sees it ``task`` of ``agent`` (owned by ``owner``) as saved now, when its state
        (or, waiting for input, its status message) differs from what was told of it last."""
        state = task.status.state
        waiting = state == TaskState.TASK_STATE_INPUT_REQUIRED
        key = (agent, task.id)
        told = (state, task.status.message.message_id if waiting else "")
        if self._told.get(key) == told:
            self._told.move_to_end(key)
            return
        self._told[key] = told
        self._told.move_to_end(key)
        while len(self._told) > REMEMBERED:
            self._told.popitem(last=False)
        watching = [s for s in self.subscribers if s.sees(agent, owner)]
        if not watching:
            return
        change: dict[str, Any] = {
            "type": "task",
            "agent": agent,
            "id": task.id,
            "contextId": task.context_id,
            "state": TaskState.Name(state),
            "owner": owner,
        }
        if task.status.HasField("timestamp"):
            change["timestamp"] = task.status.timestamp.ToJsonString()
        if "op" in task.metadata:
            change["op"] = task.metadata["op"]
        if waiting and task.status.HasField("message"):
            change["message"] = MessageToDict(task.status.message)
        for subscriber in watching:
            subscriber.offer(change)

    def subscribe(self, principal: Principal) -> Subscriber:
        subscriber = Subscriber(principal, self.limit)
        self.subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)


def _frame(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


async def _wait(subscriber: Subscriber, drained: Callable[[], Awaitable[None]], timeout: float) -> bool:
    """Wait until ``subscriber`` has something, the daemon drains or ``timeout`` passes; True when it drains."""
    ended = False
    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:

            async def drain() -> None:
                nonlocal ended
                await drained()
                ended = True
                tg.cancel_scope.cancel()

            tg.start_soon(drain)
            await subscriber.wake.wait()
            tg.cancel_scope.cancel()
    return ended


def events_route(
    front: Front, events: TaskEvents, drained: Callable[[], Awaitable[None]], headers: dict[str, str]
) -> Route:
    """``GET /console/events`` over ``front`` (who asks), ``events`` (what is told), ``drained`` (returns once the
    daemon drains: the stream ends) with ``headers`` (the console's security headers)."""

    async def stream(principal: Principal) -> AsyncIterator[str]:
        subscriber = events.subscribe(principal)  # before the hello: nothing after it is missed
        try:
            yield _frame({"type": "hello", "principal": subscriber.principal.id})
            while True:
                ended = await _wait(subscriber, drained, KEEPALIVE)
                frames = subscriber.take()
                for body in frames:
                    yield _frame(body)
                if ended:
                    return
                if not frames:
                    yield ": keepalive\n\n"
        finally:
            events.unsubscribe(subscriber)

    async def endpoint(request: Request) -> Response:
        principal = await front.authenticate(request)
        if isinstance(principal, Response):
            return principal
        request.state.principal = principal  # the access log's
        if not principal.may("ListTasks"):
            return rpc_error(
                None,
                -31403,
                f"{principal.id} may not call ListTasks",
                status=403,
                reason="PERMISSION_DENIED",
                domain=AGENTD_DOMAIN,
            )
        wait = front.rates.take(principal)
        if wait > 0:
            return rpc_error(
                None, -31429, "rate limit exceeded", status=429, headers={"Retry-After": str(math.ceil(wait))}
            )
        response: Response = StreamingResponse(
            stream(principal),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        sessions = front.identities.sessions
        if principal.session is not None and sessions is not None:
            from ..auth.revocable import RevocableResponse

            response = RevocableResponse(
                response, sessions.revoked_event(principal.session), request_id=None, realm=front.realm
            )
        return response

    return Route(EVENTS_PATH, endpoint, methods=["GET"])


__all__ = ["EVENTS_PATH", "KEEPALIVE", "QUEUED", "Subscriber", "TaskEvents", "events_route"]
