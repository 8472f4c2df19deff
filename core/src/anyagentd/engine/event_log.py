"""A session's event log: a bounded ring of its events and any number of independent readers.

Every event a session emits is appended to its :class:`EventLog` (``log_size`` events are held; older ones are
overwritten). A :class:`Subscription` is one reader with its own cursor (the sequence of the last event it took)
and its own ``bound``: a reader that leaves more than ``bound`` of the events that arrived since it subscribed
undrained is dropped (``ConsumerLagged``, for that reader alone) after the events it held. A cursor older than the
ring skips what is gone and counts it in ``dropped``.

Cost per appended event: a list store and two integer compares; readers take slices, not single events, and never
yield to the event loop while events are waiting (a reader that never blocks drains everything in one go). The
engine yields to its readers during a burst when one of them is half way to its bound (:attr:`EventLog.behind`).

The engine appends an event's :class:`~.event_parts.EventParts`, not its pydantic model: building an ``Event`` and
its ``SystemTime`` per delta was a fifth of the flood's cost (issue 17). A reader gets models (each built once, by
the log's ``build``, the first time any reader takes it, and kept in the ring in place of its parts) unless it asks
for parts (``parts=True``: the wire's writer formats its lines from them; :meth:`EventLog.model` builds one on
demand). An entry of the ring is an ``EventParts`` exactly when ``entry.__class__ is EventParts``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConsumerLagged, InvalidRequest
from .event_parts import EventParts, build_event

if TYPE_CHECKING:
    from ..model import Event

_NEVER = float("inf")


class EventLog:
    """The ring: ``capacity`` events at most; sequences are contiguous from 1.

    ``oldest_seq`` / ``newest_seq`` are the sequences of the oldest and newest events held (``oldest_seq`` is
    ``newest_seq + 1`` while nothing is held). :meth:`close` marks the end of the session: readers end after the
    last event, and later appends are ignored. ``build`` makes the ``Event`` of appended parts (default
    :func:`~.event_parts.build_event`). Raises ``ValueError`` for a ``capacity`` below 1.
    """

    def __init__(self, capacity: int, build: Callable[[EventParts], Event] = build_event) -> None:
        if capacity < 1:
            raise ValueError("an event log holds at least one event")
        self.capacity = capacity
        self._build = build
        self.newest_seq = 0
        self.closed = False
        self._ring: list[Event | EventParts] = []  # grows to capacity, then wraps: seq s is at (s - 1) % capacity
        self._readers: list[Subscription] = []
        self._wake: anyio.Event | None = None
        self._lag_at: float = _NEVER  # a reader lags when newest_seq passes this
        self._yield_at: float = _NEVER  # a reader is half way to its bound when newest_seq passes this

    def __len__(self) -> int:
        return len(self._ring)

    @property
    def oldest_seq(self) -> int:
        return self.newest_seq - len(self._ring) + 1

    @property
    def behind(self) -> bool:
        """Whether a reader has left half its bound undrained: the engine should let its readers run."""
        return self.newest_seq > self._yield_at

    def append(self, event: Event | EventParts) -> None:
        """Hold ``event``, a model or its parts (see the module); its ``sequence`` must be ``newest_seq + 1``
        (not checked). Wakes waiting readers and drops the readers it puts past their bound. Ignored
        after :meth:`close`."""
        if self.closed:
            return
        ring = self._ring
        seq = self.newest_seq = self.newest_seq + 1
        if len(ring) < self.capacity:
            ring.append(event)
        else:
            ring[(seq - 1) % self.capacity] = event
        if seq > self._lag_at:
            self._drop_lagging()
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    def read(self, after: int, limit: int, *, parts: bool = False) -> list[Any]:
        """Up to ``limit`` held events with sequence greater than ``after``, oldest first: models, or with
        ``parts`` as held (a model or its :class:`~.event_parts.EventParts`, see the module)."""
        start = max(after + 1, self.oldest_seq)
        stop = min(self.newest_seq, start + limit - 1)
        if stop < start:
            return []
        ring, capacity = self._ring, self.capacity
        if len(ring) < capacity:
            i, j = start - 1, stop
        else:
            i, j = (start - 1) % capacity, (stop - 1) % capacity + 1
        if not parts:
            self._build_models(i, j)
        return ring[i:j] if i < j else ring[i:] + ring[:j]

    def model(self, event: Event | EventParts) -> Event:
        """The ``Event`` of an entry :meth:`read` returned with ``parts``: a model as it is, parts built anew with
        the log's ``build`` (not kept in the ring)."""
        if event.__class__ is not EventParts:
            return event  # type: ignore[return-value]
        return self._build(event)

    def _build_models(self, i: int, j: int) -> None:
        # Replace the parts in ring[i:j] (wrapping when j <= i) by their models, so every reader shares them.
        ring, model = self._ring, self.model
        for k in range(i, j) if i < j else itertools.chain(range(i, len(ring)), range(j)):
            if ring[k].__class__ is EventParts:
                ring[k] = model(ring[k])

    def events(self) -> list[Event]:
        """Every event held, oldest first (a copy)."""
        return self.read(0, len(self._ring))

    def subscribe(
        self,
        after: int = 0,
        *,
        bound: int | None = None,
        on_lag: Callable[[Subscription], Any] | None = None,
        raise_on_lag: bool = True,
    ) -> Subscription:
        """A new reader of the events after sequence ``after`` (0: from the oldest held). ``bound`` defaults to
        and is capped at the capacity (a reader cannot fall further behind without losing events). ``on_lag`` is
        called when the reader is dropped; with ``raise_on_lag`` False the reader just ends instead of raising.
        Raises ``InvalidRequest`` for a negative ``after`` or a ``bound`` below 1."""
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise InvalidRequest(f"after must be a sequence number (0 or more), not {after!r}")
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool) or bound < 1):
            raise InvalidRequest(f"a reader's bound is a number of events (1 or more), not {bound!r}")
        bound = self.capacity if bound is None else min(bound, self.capacity)
        sub = Subscription(self, min(after, self.newest_seq), bound, on_lag, raise_on_lag)
        if not self.closed:
            self._readers.append(sub)
            self._rethreshold()
        return sub

    def close(self) -> None:
        """No more events: readers end after the last one."""
        self.closed = True
        self._readers.clear()
        self._lag_at = self._yield_at = _NEVER
        self._wake_all()

    # ------------------------------------------------------------------------------------------- readers

    async def wait_for_append(self) -> None:
        """Wait until the next :meth:`append` (or :meth:`close`, or a reader dropped for lagging)."""
        if self._wake is None:
            self._wake = anyio.Event()
        await self._wake.wait()

    def _wake_all(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

    def _rethreshold(self) -> None:
        lag_at = yield_at = _NEVER
        for sub in self._readers:
            base = max(sub.cursor, sub.start)
            lag_at = min(lag_at, base + sub.bound)
            yield_at = min(yield_at, base + sub.bound // 2)
        self._lag_at, self._yield_at = lag_at, yield_at

    def _drop_lagging(self) -> None:
        lagging = [s for s in self._readers if self.newest_seq - max(s.cursor, s.start) > s.bound]
        for sub in lagging:
            self._readers.remove(sub)
            sub.drop(self.newest_seq - 1)
        self._rethreshold()
        self._wake_all()
        for sub in lagging:
            if sub.on_lag is not None:
                sub.on_lag(sub)

    def reader_moved(self) -> None:
        """A tracked reader took events: move the lag and yield thresholds along (nothing while none is tracked)."""
        if self._readers:
            self._rethreshold()

    def detach(self, sub: Subscription) -> None:
        """Stop tracking ``sub`` (it can no longer lag); nothing when it is not tracked."""
        if sub in self._readers:
            self._readers.remove(sub)
            self._rethreshold()


class Subscription:
    """One reader of an :class:`EventLog`: an async iterator of ``Event`` and :meth:`batches`.

    ``cursor`` is the sequence of the last event taken; ``dropped`` counts events it skipped because they had left
    the ring before it read them. It ends after the log's last event; a reader that fell behind its ``bound``
    raises ``ConsumerLagged`` after the events it held then. :meth:`close` detaches it early.
    """

    def __init__(
        self, log: EventLog, cursor: int, bound: int, on_lag: Callable[[Subscription], Any] | None, raise_on_lag: bool
    ) -> None:
        self._log = log
        self.cursor = cursor
        self.bound = bound
        self.dropped = 0
        self.error: ConsumerLagged | None = None
        self.start = log.newest_seq
        """The log's newest sequence at subscribing: the bound counts what arrived after it, not the backlog."""
        self._end_seq: int | None = None  # set when lagged: deliver up to here, then end or raise
        self.on_lag = on_lag
        """Called with this reader when it is dropped for lagging (``None``: nothing is called)."""
        self._raise_on_lag = raise_on_lag
        self._pending: list[Event] = []
        self._index = 0

    @property
    def lagged(self) -> bool:
        """Whether this reader fell behind its bound and was dropped."""
        return self.error is not None

    def drop(self, end_seq: int) -> None:
        """Mark this reader lagged (called by its log): it delivers up to ``end_seq``, then ends or raises."""
        self._end_seq = end_seq
        self.error = ConsumerLagged(f"more than {self.bound} events undrained", "this reader was dropped")

    def take(self, max_events: int, *, parts: bool = False) -> list[Any]:
        """The events waiting for this reader (at most ``max_events``), without waiting; ``[]`` if none. With
        ``parts``, as the log holds them (see :meth:`EventLog.read`)."""
        log = self._log
        end = log.newest_seq if self._end_seq is None else self._end_seq
        if self.cursor >= end:
            return []
        gone = min(log.oldest_seq - 1, end) - self.cursor
        if gone > 0:
            self.dropped += gone
            self.cursor += gone
        batch = log.read(self.cursor, min(max_events, end - self.cursor), parts=parts)
        self.cursor += len(batch)
        if self._end_seq is None:
            log.reader_moved()
        return batch

    @property
    def finished(self) -> bool:
        """Nothing more will come: the log is closed (or this reader lagged) and every event was taken."""
        if self._end_seq is not None:
            return self.cursor >= self._end_seq or self.cursor >= self._log.newest_seq
        return self._log.closed and self.cursor >= self._log.newest_seq

    async def batches(self, max_events: int = 1024) -> AsyncIterator[list[Event]]:
        """Lists of at most ``max_events`` events, each everything already waiting; ends (or raises
        ``ConsumerLagged``) as described on the class. Never yields to the event loop while events wait."""
        if max_events < 1:
            raise InvalidRequest(f"max_events is at least 1, not {max_events!r}")
        while (batch := await self.next_batch(max_events)) is not None:
            yield batch

    async def next_batch(self, max_events: int = 1024, *, parts: bool = False) -> list[Any] | None:
        """The next batch (waiting for one when none is there), or ``None`` at the end; raises ``ConsumerLagged``
        once the events held when this reader lagged are taken. ``parts`` as for :meth:`take`."""
        while True:
            batch = self.take(max_events, parts=parts)
            if batch:
                return batch
            if self.finished:
                if self.error is not None and self._raise_on_lag:
                    raise self.error
                return None
            await self._log.wait_for_append()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        if self._index >= len(self._pending):
            self._pending, self._index = [], 0
            batch = await self.next_batch(256)
            if batch is None:
                raise StopAsyncIteration
            self._pending = batch
        event = self._pending[self._index]
        self._index += 1
        return event

    def close(self) -> None:
        """Stop reading: the log no longer tracks this reader (it can never lag)."""
        self._log.detach(self)
        self._end_seq = self.cursor


__all__ = ["EventLog", "Subscription"]
