"""An experiment, not a fix: monkeypatch the engine's per-event object construction (this process only).

``python bench/fastpatch.py serve --mock flood`` runs ``anyagentd`` with the patch installed (bench_wire.py's
``--fast-construct`` uses it to measure the fix through a real pipe). No core file is changed.

The patch replaces ``Session._emit`` (same behaviour: sequence, wall clock, bounded ``send_nowait``, ConsumerLagged
on overflow) and ``_Turn.context`` (one ``TurnContext`` per turn and parent tool id instead of one per event), and
builds ``Event``/``SystemTime``/``TurnContext`` by setting ``__dict__`` directly, which is what pydantic's
``model_construct`` ends up doing after a pure-Python loop over every field.
"""

from __future__ import annotations

import sys


def install_fast_construct() -> None:
    """Monkeypatch ``Session._emit`` and ``_Turn.context`` with a fast-construct equivalent (same lines out)."""
    import time as _time

    import anyio as _anyio

    from anyagentd.engine import session as engine
    from anyagentd.model import Event, SystemTime, TurnContext

    setattr_ = object.__setattr__
    event_fields = frozenset(Event.model_fields)
    time_fields = frozenset(SystemTime.model_fields)
    ctx_fields = frozenset(TurnContext.model_fields)

    def fast(cls, fields_set, values):  # what model_construct does, minus its per-field Python loop
        m = cls.__new__(cls)
        setattr_(m, "__dict__", values)
        setattr_(m, "__pydantic_fields_set__", fields_set)
        setattr_(m, "__pydantic_extra__", None)
        setattr_(m, "__pydantic_private__", None)
        return m

    def context(self, parent_tool_id=None):
        cache = self.__dict__.setdefault("_ctx_cache", {})
        ctx = cache.get(parent_tool_id)
        if ctx is None:
            ctx = cache[parent_tool_id] = fast(TurnContext, ctx_fields, {"id": self.id, "parent_tool_id": parent_tool_id})
        return ctx

    def _emit(self, kind, turn_info=None, extensions=None):
        self._sequence += 1
        ns = _time.time_ns()
        occurred = fast(SystemTime, time_fields,
                        {"secs_since_epoch": ns // 1_000_000_000, "nanos_since_epoch": ns % 1_000_000_000})
        event = fast(Event, event_fields, {
            "sequence": self._sequence, "occurred_at": occurred, "session_id": self.id, "turn_info": turn_info,
            "kind": kind, "extensions": extensions if extensions is not None else {},
        })  # fmt: skip
        try:
            self._out_send.send_nowait(event)
        except _anyio.WouldBlock:
            self._lagged()
        except (_anyio.BrokenResourceError, _anyio.ClosedResourceError):
            pass

    engine._Turn.context = context
    engine.Session._emit = _emit


if __name__ == "__main__":
    install_fast_construct()
    from anyagentd.cli import main

    main(sys.argv[1:], prog_name="anyagentd")
