"""Admission: whether a runtime's sessions may start new work (``accepting``, ``paused``, ``draining``).

One :class:`Admission` is shared by a ``Runtime`` and every session it opens, so a state change reaches them all at
once. Paused and draining both *hold*: a new prompt is queued instead of started (or steered) and a turn boundary
promotes nothing; draining also refuses ``open`` and ``prompt`` (``Draining``). Turns in flight are never touched
here: pausing lets them finish, ``Runtime.drain`` cancels them after its timeout.
"""

from __future__ import annotations

from typing import Literal

AdmissionState = Literal["accepting", "paused", "draining"]


class Admission:
    """The shared admission state; ``state`` is one of ``accepting``, ``paused``, ``draining``."""

    __slots__ = ("state",)

    def __init__(self, state: AdmissionState = "accepting") -> None:
        self.state: AdmissionState = state

    @property
    def holds(self) -> bool:
        """Nothing new starts: prompts wait in their session's queue."""
        return self.state != "accepting"

    @property
    def draining(self) -> bool:
        return self.state == "draining"


__all__ = ["Admission", "AdmissionState"]
