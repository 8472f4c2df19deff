"""The audit log: one JSON line per operator action, logger ``anyagentd.a2a.audit``.

The line's fields (top-level keys beside ``ts``, ``level``, ``logger``, ``msg``, by :class:`.logs.JsonLines`):
``action`` (the op's name, e.g. ``admin.pause``, or ``config.reload``), ``principal`` (who acted: a principal id,
or ``"signal"`` for a SIGHUP), ``arguments`` (the op's arguments, any secret-named one replaced by
``"[redacted]"``, whatever the outcome: a command refused before it ran has those it was sent, parsed as a run of
it shows them when they parse — :func:`.command.envelope.attempted_arguments`), ``outcome`` (``"ok"``,
``"started"`` for a long-running op whose task goes on, ``"refused"``, ``"failed"``) and ``reason`` (why it was
refused or failed, or null). Which ops: every op whose floor is ``operator``
(:data:`anyagentd.ops.interface.Floor`) — ``admin.*``, ``auth.*`` (device approvals and denials, session
revocations), ``config``, the operator's workflow and inspection ops — audited where commands are dispatched
(:class:`.command.dispatch.CommandDispatcher`), so a new operator op is audited without a call of its own.
Besides the ops: ``config.reload`` (a SIGHUP) and ``oauth2.revoke`` (a device session revoked by its own token at
``POST /oauth2/revoke``, RFC 7009; its principal is the session's).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("anyagentd.a2a.audit")

_SECRET = re.compile(r"token|secret|password|passwd|credential|bearer|key|code|authorization|cookie", re.IGNORECASE)
"""Argument names whose value is kept out of the line (``user_code`` included: it signs a device in)."""

REDACTED = "[redacted]"


def audited(floor: str) -> bool:
    """Whether an op of this floor is an operator action."""
    return floor == "operator"


def redacted(args: Any) -> Any:
    """``args`` with the value of every secret-named key (:data:`_SECRET`), at any depth, replaced by
    :data:`REDACTED`."""
    if isinstance(args, Mapping):
        return {k: REDACTED if isinstance(k, str) and _SECRET.search(k) else redacted(v) for k, v in args.items()}
    if isinstance(args, list):
        return [redacted(v) for v in args]
    return args


def audit(action: str, principal: str, outcome: str, *, args: Any = None, reason: str | None = None) -> None:
    """Write one audit line (fields in the module's docstring)."""
    # "arguments", not "args": a LogRecord's own attribute, which extra= may not replace
    line = {
        "action": action,
        "principal": principal,
        "arguments": redacted(args or {}),
        "outcome": outcome,
        "reason": reason,
    }
    log.info("%s by %s: %s", action, principal, outcome, extra=line)


__all__ = ["REDACTED", "audit", "audited", "redacted"]
