"""The daemon's logs on stderr: one JSON object per line (:class:`JsonLines`), secrets redacted.

:func:`setup_logging` installs them as the root logger's one handler (the command line does, before the daemon
starts); :func:`redact_stderr` gives them the daemon's redactor once its configuration's secrets are known.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

# what every LogRecord carries; anything else on a record came from ``extra=`` (uvicorn's color_message is its own)
_RECORD_KEYS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonLines(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``msg`` (and ``exc`` for exceptions), then each
    field the call passed with ``extra=`` as a key of its own (the access and audit lines, :mod:`.observe.access`);
    an extra field never replaces one of the four. The line is passed through :attr:`redact` (the daemon installs
    its :class:`~.logring.SecretRedactor`: a configured secret's value never reaches stderr, whatever field or
    argument carried it)."""

    def __init__(self, redact: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.redact = redact or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info).splitlines()[-1]
        for key, value in record.__dict__.items():
            if key not in _RECORD_KEYS and key not in line:
                line[key] = value
        return self.redact(json.dumps(line, ensure_ascii=False, default=str))


def setup_logging() -> None:
    """The root logger writes :class:`JsonLines` to stderr at INFO (its one handler); the chatty libraries' loggers
    (httpx, uvicorn's access log, sse-starlette, the a2a SDK, aiosqlite, SQLAlchemy) only from WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "uvicorn.access", "sse_starlette", "a2a", "aiosqlite", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def redact_stderr(redact: Callable[[str], str]) -> None:
    """Pass every line of the root logger's :class:`JsonLines` handlers (stderr's, :func:`setup_logging`) through
    ``redact`` from now on."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonLines):
            handler.formatter.redact = redact


__all__ = ["JsonLines", "redact_stderr", "setup_logging"]
