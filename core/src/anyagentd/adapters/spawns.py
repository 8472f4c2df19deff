"""Which agent processes are a session's: every :class:`~anyagentd.adapters.process.AgentProcess` started while its
adapter connects.

``Session.connect`` runs the adapter's ``connect`` inside :func:`recording_spawns`; :meth:`AgentProcess.start
<anyagentd.adapters.process.AgentProcess.start>` calls :func:`record` with each process it starts. The engine then
knows the session's processes without the adapter telling it, and kills what of them still runs ``close_grace``
seconds after close began, whatever the adapter's ``close()`` did (``docs/engine.md#close``).

Standard library only: the engine imports it for every session, also for an in-process agent (the mock) that never
loads the process toolkit.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

# The processes recorded: `AgentProcess`es, typed by the caller's list (naming the class here would make this module
# and .process, which calls `record`, an import circle).
P = TypeVar("P")
_RECORDER: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("anyagentd_spawns", default=None)


@contextmanager
def recording_spawns(into: list[P]) -> Iterator[list[P]]:
    """Append to ``into`` every ``AgentProcess`` started inside the ``with`` block, and later by the tasks started
    from it (a task inherits the context it was started in: an adapter's reader started with ``link.start_soon``
    during ``connect``). Yields ``into``. Blocks nest: the innermost one records."""
    token = _RECORDER.set(into)
    try:
        yield into
    finally:
        _RECORDER.reset(token)


def record(process: object) -> None:
    """Add ``process`` (a just started ``AgentProcess``) to the innermost :func:`recording_spawns` list, if any."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.append(process)


__all__ = ["record", "recording_spawns"]
