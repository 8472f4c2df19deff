"""Leaving the process at once, as ``serve`` and the CLI do, without losing a coverage measurement.

``anyagentd serve`` and the CLI end with :func:`os._exit`: a worker thread may still be blocked reading stdin, and
an interpreter shutdown would wait for it. ``os._exit`` runs no ``atexit`` handler, so a process the test suite
measures (coverage's ``patch = ["subprocess"]``, ``pyproject.toml``) would lose its data; :func:`hard_exit` saves it
first. Only the standard library is imported: nothing is paid when coverage is not running.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def hard_exit(status: int) -> NoReturn:
    """``os._exit(status)`` (status 0-255), after stopping and saving the coverage measurement running in this
    process, if any (``coverage.Coverage.current()``; coverage is never imported here). Never returns."""
    coverage = sys.modules.get("coverage")
    current = coverage.Coverage.current() if coverage is not None else None
    if current is not None:
        try:
            current.stop()
            current.save()
        except Exception:  # a measurement that cannot be saved must not change how the process ends
            pass
    os._exit(status)
