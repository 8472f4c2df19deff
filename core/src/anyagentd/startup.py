"""The cyclic garbage collector while a command starts, and the ``anyagentd`` console script.

Start-up (imports, plugins, schemas, the A2A app) allocates hundreds of thousands of objects that live as long as
the process and almost no garbage, yet at the default thresholds (700, 10, 10) the collector walks the growing heap
again and again: ~80 ms of the A2A daemon's ~600 ms to its ``listening`` line, ~10 ms of ``anyagentd run mock``
(bench/README.md, issue 17). So the console script raises the thresholds before anything is imported
(:func:`begin`), and a command that goes on running (``serve``, ``run``, ``chat``, ``a2a``) calls :func:`done`
once it has started: what start-up built is frozen out of the collector's sight (``gc.freeze``) and the thresholds
are put back. A command that never calls it still collects every generation, only less often, until it exits.

Only the standard library is imported here (the console script imports this module first).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 250_000
"""The young generation's ``gc`` threshold while starting: a young collection per 250,000 net allocations of
tracked objects instead of 700, more than ``serve`` (~57,000 by :func:`done`), ``run`` (~72,000) and the A2A daemon
(~199,000) make before they call :func:`done`, so none of them collects while it starts (issue 31). A young
collection walks every object allocated since the last one, and start-up's are long-lived, referring to many
others: at 50,000 (issue 17's figure) ``serve`` still ran one before its first reply, over ~57,000 objects (17–30 ms
of CPU timed in gc's callbacks, ~700 objects collected; spawn → reply 248 → 237 ms of CPU, median of 15 interleaved
runs, bench/README.md). The older generations keep the thresholds they had, so a long-running command
that never calls :func:`done` still collects fully, only less often (~350× at the defaults)."""

_saved: tuple[int, int, int] | None = None


def begin() -> None:
    """Raise the young generation's threshold to :data:`YOUNG_THRESHOLD` (once; the thresholds found are kept for
    :func:`done`)."""
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, *_saved[1:])


def done() -> None:
    """Start-up is over: freeze what exists (``gc.freeze``: never walked again) and restore the thresholds
    :func:`begin` replaced. Does nothing in a process that did not :func:`begin` (an application embedding the
    CLI, a test's ``CliRunner``: their objects are theirs to collect), or once done."""
    global _saved
    if _saved is not None:
        gc.freeze()
        gc.set_threshold(*_saved)
        _saved = None


def main() -> object:
    """The ``anyagentd`` console script: :func:`begin`, then the click group of :mod:`anyagentd.cli`."""
    begin()
    from .cli import main as cli

    return cli()
