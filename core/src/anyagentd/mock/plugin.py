"""The built-in ``mock`` plugin, registered through the ``anyagentd`` entry-point group like any other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..adapters.interface import AgentAdapter


@hookimpl
def register_adapters(register: Callable[[type[AgentAdapter]], None]) -> None:
    from .agent import MockAdapter

    register(MockAdapter)
