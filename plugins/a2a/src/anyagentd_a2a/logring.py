"""The daemon's own structured log, kept in a bounded ring for ``debug.events`` and written to stderr as JSON lines.

Every record is a flat JSON object ``{seq, ts_ms, level, event, ...fields}``. The ring holds the newest ``size``
records (1024 by default), drops the oldest, never blocks and counts what it dropped; a reader pages through it
with a cursor (``after``). Secrets never enter it: every string field is passed through the redactor the daemon
installs (each configured secret value replaced by its ``{{secret:…}}`` reference) before it is stored or written.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Page:
    """One cursor read: ``events`` (oldest first, each with ``seq``), the ring's ``oldest_seq`` and
    ``newest_seq`` (0 when empty), and ``dropped``: records evicted from the ring since start (cumulative)."""

    events: list[dict[str, Any]]
    oldest_seq: int
    newest_seq: int
    dropped: int


class LogRing:
    """A bounded, thread-safe ring of structured log records, mirrored to ``stream`` as JSON lines.

    Takes ``size`` (records kept; at least 1), ``stream`` (where lines go; ``None``: nowhere), ``redact``
    (``str -> str``, applied to every string field before anything is kept or written).
    """

    def __init__(
        self, size: int = 1024, *, stream: TextIO | None = sys.stderr, redact: Callable[[str], str] | None = None
    ) -> None:
        self.size = max(1, size)
        self.stream = stream
        self.redact = redact or (lambda text: text)
        self._ring: deque[dict[str, Any]] = deque(maxlen=self.size)
        self._seq = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def emit(self, event: str, level: str = "info", **fields: Any) -> dict[str, Any]:
        """Record ``event`` (a dotted name, e.g. ``task.started``) with ``fields``; returns the stored record."""
        if level not in LEVELS:
            level = "info"
        clean = {key: self._clean(value) for key, value in fields.items()}
        with self._lock:
            self._seq += 1
            record = {
                "seq": self._seq,
                "ts_ms": int(time.time() * 1000),
                "level": level,
                "event": self.redact(event),
                **clean,
            }
            if len(self._ring) == self.size:
                self._dropped += 1
            self._ring.append(record)
        if self.stream is not None:
            try:
                self.stream.write(json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":")) + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # a closed stderr must not take the daemon down
        return record

    def read(self, after: int = 0, limit: int = 200, *, level: str | None = None, prefix: str | None = None) -> Page:
        """Records with ``seq > after`` (at most ``limit``, oldest first), optionally only of ``level`` and whose
        event name starts with ``prefix``."""
        with self._lock:
            records = list(self._ring)
            dropped = self._dropped
        oldest = records[0]["seq"] if records else 0
        newest = records[-1]["seq"] if records else 0
        chosen = []
        for record in records:
            if record["seq"] <= after:
                continue
            if level is not None and record["level"] != level:
                continue
            if prefix is not None and not record["event"].startswith(prefix):
                continue
            chosen.append(dict(record))
            if len(chosen) >= limit:
                break
        return Page(chosen, oldest, newest, dropped)

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {str(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._clean(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self.redact(str(value))


class RingHandler(logging.Handler):
    """A ``logging`` handler that also keeps every record in a :class:`LogRing` (event: the logger's name;
    ``msg``: the formatted message), so what the daemon logs is what ``debug.events`` reads."""

    def __init__(self, ring: LogRing) -> None:
        super().__init__(logging.INFO)
        self.ring = ring

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.ring.emit(record.name, record.levelname.lower(), msg=record.getMessage())
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


class SecretRedactor:
    """The redactor of the configuration served now, for every log sink (the ring and stderr's JSON lines): called
    with a line, it replaces each secret value by its reference (:func:`secret_redactor`). ``current()`` returns the
    configuration served (its identity changes when a reload takes a new one); ``secrets()`` maps its secret values
    to their references, read again only when ``current()`` changed, so a rotated secret is redacted from the line
    after the reload on, at one identity check per line otherwise."""

    def __init__(self, current: Callable[[], object], secrets: Callable[[], dict[str, str]]) -> None:
        self._current = current
        self._secrets = secrets
        self._for: object = None
        self._redact: Callable[[str], str] = lambda text: text

    def __call__(self, text: str) -> str:
        now = self._current()
        if now is not self._for:
            self._for, self._redact = now, secret_redactor(self._secrets())
        return self._redact(text)


def secret_redactor(secrets: dict[str, str]) -> Callable[[str], str]:
    """A redactor replacing each secret value (``{value: reference}``) by its reference, longest first, so a
    secret that contains another is replaced whole. Values shorter than 4 characters are refused at load
    elsewhere; here they are skipped so that a one-letter value cannot mangle every line."""
    pairs = sorted(((v, r) for v, r in secrets.items() if len(v) >= 4), key=lambda p: -len(p[0]))

    def redact(text: str) -> str:
        for value, reference in pairs:
            if value in text:
                text = text.replace(value, reference)
        return text

    return redact


__all__ = ["LEVELS", "LogRing", "Page", "RingHandler", "SecretRedactor", "secret_redactor"]
