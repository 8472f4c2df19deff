"""An adapter's open server requests: the agent's permission and question requests waiting for the engine's answer.

Every adapter keeps them in one :class:`PendingRequests` table, keyed by the engine's request id (the ``id`` of the
``PermissionRequest`` / ``QuestionRequest`` it reported). Each :class:`PendingRequest` holds the agent-side id to
reply to (a JSON-RPC id, a control ``request_id``; ``None`` where the id is the engine's own), its ``kind`` and
``data``, what the adapter needs to build the reply (the agent's request params, the choice → option map).

The moves:

- :meth:`PendingRequests.open`: the agent asked; the adapter reports ``RequestOpened``;
- :meth:`PendingRequests.answer`: the engine answered: the request leaves the table with the reply the adapter's
  ``reply`` builds for it (answered once; an id that is not open is refused with ``InvalidRequest``: answered
  already, withdrawn, cancelled, or never opened);
- :meth:`PendingRequests.withdraw`: the agent withdrew it (no reply is owed);
- :meth:`PendingRequests.cancel_all`: a cancel or close: every open request is answered with what the adapter's
  ``reply`` builds for it (its protocol's cancel/deny shape), in the order they opened; the table is then empty.

An agent whose protocol waits for the answer inside its own request handler (ACP's ``session/request_permission``)
awaits :meth:`PendingRequest.wait`: it returns the reply :meth:`~PendingRequests.answer` or
:meth:`~PendingRequests.cancel_all` set (``None`` after a :meth:`~PendingRequests.withdraw`).

The engine alone validates answers (their kind, the choices offered): what reaches :meth:`~PendingRequests.answer`
is an answer to the request it names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import anyio

from ..errors import InvalidRequest

D = TypeVar("D")


class PendingRequest(Generic[D]):
    """One server request waiting for the engine's answer.

    ``id``: the engine's request id; ``agent_id``: the agent's id to reply to (``None`` when the agent needs none);
    ``kind``: what was asked (``permission`` | ``question``, or an adapter's finer kind, e.g. Codex's ``command`` |
    ``file`` | ``legacy``); ``data``: what the reply is built from. ``reply``: how it was answered, the JSON the
    agent is sent (set by :meth:`PendingRequests.answer` / :meth:`PendingRequests.cancel_all`; ``None`` while open or
    once withdrawn).
    """

    __slots__ = ("_done", "agent_id", "data", "id", "kind", "reply")

    def __init__(self, request_id: str, data: D, *, kind: str = "permission", agent_id: object = None) -> None:
        self.id = request_id
        self.agent_id = agent_id
        self.kind = kind
        self.data = data
        self.reply: Any = None  # arbitrary JSON: the protocol's reply
        self._done: anyio.Event | None = None  # made on first wait: most adapters never wait

    @property
    def closed(self) -> bool:
        """Whether it was answered, cancelled or withdrawn."""
        return self._done is not None and self._done.is_set()

    def settle(self, reply: Any) -> None:
        """Close the request with ``reply`` and wake its waiter (:meth:`PendingRequests.answer`, ``withdraw`` and
        ``cancel_all`` call it; an adapter goes through the table)."""
        self.reply = reply
        if self._done is None:
            self._done = anyio.Event()
        self._done.set()

    async def wait(self) -> Any:
        """Wait until the request is answered, cancelled or withdrawn; return :attr:`reply`."""
        if self._done is None:
            self._done = anyio.Event()
        await self._done.wait()
        return self.reply


class PendingRequests(Generic[D]):
    """The open server requests of one session, by the engine's request id (see the module doc).

    ``agent``: the agent's name in the refusal of an unknown id (``"Codex has no pending request 'x'"``).
    """

    def __init__(self, agent: str = "the agent") -> None:
        self.agent = agent
        self._open: dict[str, PendingRequest[D]] = {}

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._open

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[str]:
        """The open request ids, in the order they opened (a copy: the table may change meanwhile)."""
        return iter(list(self._open))

    def __getitem__(self, request_id: str) -> PendingRequest[D]:
        return self._open[request_id]

    def get(self, request_id: str) -> PendingRequest[D] | None:
        """The open request ``request_id``, or ``None``."""
        return self._open.get(request_id)

    def open(self, request_id: str, data: D, *, kind: str = "permission", agent_id: object = None) -> PendingRequest[D]:
        """Record the agent's request (reported to the engine as ``request_id``) and return it. An id already open
        is replaced (the agent asked again under the same id)."""
        item = PendingRequest(request_id, data, kind=kind, agent_id=agent_id)
        self._open[request_id] = item
        return item

    def answer(self, request_id: str, reply: Callable[[PendingRequest[D]], Any] | None = None) -> PendingRequest[D]:
        """The engine answered ``request_id``: take it out of the table, set its :attr:`~PendingRequest.reply` to
        ``reply(request)`` (what the agent is sent: the adapter builds it from the engine's answer and the
        request's ``data``; ``None`` without ``reply``) and return it, to send. Raises ``InvalidRequest`` when no
        such request is open (answered already, withdrawn, cancelled or never opened); ``reply`` is then not
        called."""
        item = self._open.pop(request_id, None)
        if item is None:
            raise InvalidRequest(f"{self.agent} has no pending request {request_id!r}")
        item.settle(reply(item) if reply is not None else None)
        return item

    def withdraw(self, request_id: str) -> PendingRequest[D] | None:
        """The agent withdrew ``request_id`` (or it became moot): forget it, owing no reply; the request, or
        ``None`` when it was not open."""
        item = self._open.pop(request_id, None)
        if item is not None:
            item.settle(None)
        return item

    def cancel_all(self, reply: Callable[[PendingRequest[D]], Any] = lambda item: None) -> list[PendingRequest[D]]:
        """A cancel or close: answer every open request with ``reply(request)`` (its protocol's cancel shape, set
        as its :attr:`~PendingRequest.reply`) and return them in the order they opened, to send; none is open
        afterwards."""
        items, self._open = list(self._open.values()), {}
        for item in items:
            item.settle(reply(item))
        return items


__all__ = ["PendingRequest", "PendingRequests"]
