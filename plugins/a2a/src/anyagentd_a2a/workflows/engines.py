"""Workflow engines, a plugin kind: the runner class an ``[workflow_engine] kind`` names, found in the entry-point
group ``anyagentd_a2a.workflow_engines`` (``importlib.metadata``), as op families are found in ``anyagentd.ops``.

This distribution registers ``local`` (:class:`.runner.WorkflowRunner`: runs on this daemon, every transition
committed to its store); ``anyagentd-temporal`` registers ``temporal``. An engine is a class taking the local
runner's arguments (``runtime``, ``store``, ``workflows``, ``work_root``, ``default_agent``, ``held``) and, when it
declares them, ``options`` (the ``[workflow_engine]`` table) and ``hosts`` (the agents this daemon serves); it
offers the runner's methods (``serve``, ``start``, ``get``, ``follow``, ``signal``, ``cancel``, ``pause``,
``resume``, ``answer``, ``awaiting_input``, ``drain``, ``redefine``, ``wake_all``). Loaded only when workflows
are configured: ``anyagentd serve`` and a daemon without workflows import no engine.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

GROUP = "anyagentd_a2a.workflow_engines"


class UnknownEngine(LookupError):
    """No installed engine has the configured kind; the message names the installed ones."""


def installed() -> list[str]:
    """The kinds of the installed engines, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def engine_class(kind: str) -> Any:
    """The runner class of engine ``kind``. Raises :class:`UnknownEngine` (with the installed kinds, and the extra
    that installs ``temporal``)."""
    for ep in entry_points(group=GROUP):
        if ep.name == kind:
            return ep.load()
    hint = " (pip install 'anyagentd-a2a[temporal]')" if kind == "temporal" else ""
    raise UnknownEngine(f"no workflow engine {kind!r} is installed{hint}; installed: {', '.join(installed())}")


__all__ = ["GROUP", "UnknownEngine", "engine_class", "installed"]
