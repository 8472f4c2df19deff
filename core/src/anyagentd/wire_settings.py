"""The bounds of one wire connection (``anyagentd serve``), with their environment overrides.

Apart from :mod:`anyagentd.wire` so that ``serve`` can refuse a bad setting before it writes anything (its hello
line goes out before the engine loads; see :mod:`anyagentd.stdio`). Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from .errors import InvalidConfiguration
from .text import clip


@dataclass(frozen=True)
class WireSettings:
    """Bounds of one wire connection, each overridable with ``ANYAGENTD_WIRE_<FIELD>`` (e.g.
    ``ANYAGENTD_WIRE_MAX_LINE_BYTES=1048576``).

    - ``max_line_bytes``: longest input line, in bytes without its newline (16 MiB: room for large prompts and
      attachments). A longer line is skipped up to its newline without being held, and answered ``BadFrame``.
    - ``output_bound_bytes``: output queued for stdout and not yet written above which the server reads no
      further command until the client has read enough (1 MiB).
    - ``max_commands``: commands running at once; the next is read when one finishes (1024).
    """

    max_line_bytes: int = 16 * 1024 * 1024
    output_bound_bytes: int = 1024 * 1024
    max_commands: int = 1024

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> WireSettings:
        """Defaults overridden by ``ANYAGENTD_WIRE_<FIELD>`` variables (positive integers). Raises
        ``InvalidConfiguration`` naming the variable for a value that is not one."""
        env = dict(os.environ if env is None else env)
        values = {}
        for f in fields(cls):
            name = f"ANYAGENTD_WIRE_{f.name.upper()}"
            raw = env.get(name)
            if raw:
                try:
                    values[f.name] = int(raw)
                except ValueError:
                    values[f.name] = 0
                if values[f.name] < 1:
                    raise InvalidConfiguration(f"{name}={clip(raw, 40)!r} is not a positive integer")
        return cls(**values)
