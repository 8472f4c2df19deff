"""The engine's tunables, with the defaults of ``docs/engine.md#tunables`` and their environment overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class EngineSettings:
    """Bounds and timers of every session.

    - ``event_bound``: undrained events a session may hold for its consumer before it is closed (events; 1024).
    - ``quiet_prompted`` / ``quiet_agent``: seconds of silence after which a turn whose end the agent does not
      report is inferred Completed (prompted turns 120 s, agent-originated turns 20 s).
    - ``close_grace``: seconds an agent gets to shut down on close before it is killed (5 s): the connection's
      ``close()`` is bounded by it, and whatever of the agent's processes still runs this long after close began
      the engine kills, whatever ``close()`` did (``Session.close``).
    - ``adapter_buffer``: reports the adapter→engine channel holds before the adapter waits (256: one 64 KiB read
      of an agent's stdout in a flood, ~250-byte frames, goes through without the adapter waiting; each time it
      waits costs the engine a round of the event loop, ~30 us; at 64 that was 0.47 us of a flood's ~3.5 us per
      event, issue 31).
    - ``handshake_timeout``: seconds an adapter may take to connect (30 s). Its default is also the adapters' own
      handshake bound where no engine bounds one, e.g. a probe (``anyagentd.adapters.connection.HANDSHAKE_TIMEOUT``
      names it).
    - ``cancel_grace``: seconds an agent gets to end a turn after the engine forwarded Cancel; then the engine
      ends it ``Cancelled`` itself, with a Warning diagnostic (5 s).
    - ``log_size``: events each session's log ring holds for its readers (``Session.subscribe``, ``Session.log``);
      older events are dropped from it (events; 4096; at least ``event_bound`` are always held). About 2 KB of
      memory per held event: a full ring is some 8 MB.
    - ``retain_closed``: closed sessions a ``Runtime`` keeps readable (info, projections, log) before it retires
      the oldest (sessions; 50; 0 retires a session as soon as it closes).
    - ``retain_closed_seconds``: seconds a closed session stays readable before it is retired (600 s).

    Each has the environment override ``ANYAGENTD_<NAME>`` (e.g. ``ANYAGENTD_LOG_SIZE=8192``), read by
    :meth:`from_env`.
    """

    event_bound: int = 1024
    quiet_prompted: float = 120.0
    quiet_agent: float = 20.0
    close_grace: float = 5.0
    adapter_buffer: int = 256
    handshake_timeout: float = 30.0
    cancel_grace: float = 5.0
    log_size: int = 4096
    retain_closed: int = 50
    retain_closed_seconds: float = 600.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> EngineSettings:
        """Defaults overridden by ``ANYAGENTD_<FIELD>`` variables (e.g. ``ANYAGENTD_QUIET_AGENT=0.5``)."""
        env = dict(os.environ if env is None else env)
        values: dict[str, int | float] = {}
        for f in fields(cls):
            raw = env.get(f"ANYAGENTD_{f.name.upper()}")
            if raw:
                values[f.name] = int(raw) if f.type == "int" else float(raw)
        return cls(**values)  # type: ignore[arg-type]  # each value has its field's type (f.type above)
