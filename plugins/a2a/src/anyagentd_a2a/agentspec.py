"""Which agents one daemon serves, and which is its default: the configuration's agents as :class:`AgentSpec`.

``[[agents]]`` entries, in the file's order, or ``[agent]``: the one-agent shorthand, one entry whose id is its
``id`` or else its name made an id (:func:`slug`: ``mock`` for ``name = "mock"``). The default agent (what the root
serves) is the entry with ``default = true``, else the first (:func:`default_of`).

Pure: it reads a validated :class:`~.config.Config` and resolves paths; it imports no settings, store or SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import RESERVED_IDS

if TYPE_CHECKING:
    from .config import AgentSection, Config, Loaded, SkillSection

ID_CHARACTERS = 32
"""The longest agent id (``config.AGENT_ID``)."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent the daemon serves, as the start reads it from the configuration.

    ``id``: its sub-path ``/agents/<id>``; ``key``: its configuration key as written, for messages (``"agent"`` for
    the shorthand, ``"agents.N"`` for an entry); ``ref``: the ``AgentRef`` the runtime opens (a catalog id or
    ``{"acp": {...}}``); ``label``: its name (a catalog id, or the ACP agent's ``name``); ``dir``: where its
    sessions run (``~`` expanded, resolved); ``mock_script``: the scripted agent's script (``--mock`` wins over
    the entry's); ``options``: ``Runtime.open(configure=…)``; ``description`` and ``skills`` (``SkillSection``\\ s):
    its card's (``None`` / empty: the card's defaults); ``max_live``: its own cap of live agents (0: none, only the
    daemon's); ``idle_close``: its own idle close in seconds (``None``: ``[a2a.pool]``'s); ``default``: whether
    it is the configured ``default = true``; ``approval``: ``"ask"`` or ``"auto"`` as started (what is in force
    is :meth:`.settings.Settings.approval_of`)."""

    id: str
    key: str
    ref: Any = field(hash=False)
    label: str
    dir: Path
    mock_script: str | None = None
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    description: str | None = None
    skills: tuple[SkillSection, ...] = field(default=(), hash=False)
    max_live: int = 0
    idle_close: float | None = None
    default: bool = False
    approval: str = "ask"

    @property
    def model(self) -> str:
        """The model it runs: ``options["model"]`` when that is a string, else its ``label``."""
        model = self.options.get("model")
        return model if isinstance(model, str) and model else self.label


_OUTSIDE = re.compile(r"[^a-z0-9-]+")


def slug(label: str) -> str:
    """``label`` made an agent id: lower-case, each run of characters outside ``[a-z0-9-]`` one ``-``, trimmed of
    ``-``, at most :data:`ID_CHARACTERS` characters; ``"agent"`` when nothing is left (``"Gemini CLI"`` →
    ``gemini-cli``, ``mock`` → ``mock``; a reserved id, :data:`.config.RESERVED_IDS`, gets ``-agent``)."""
    made = _OUTSIDE.sub("-", label.lower()).strip("-")[:ID_CHARACTERS].strip("-") or "agent"
    return made if made not in RESERVED_IDS else f"{made}-agent"


def entry_id(entry: AgentSection) -> str:
    """The id of a configured agent: its ``id``, else (the shorthand without one) :func:`slug` of its name."""
    return entry.id or slug(entry.label())


def entry_ids(config: Config) -> list[tuple[str, str, AgentSection]]:
    """``(key, id, entry)`` of each configured agent, in order (:meth:`.config.Config.entries`)."""
    return [(key, entry_id(entry), entry) for key, entry in config.entries()]


def agent_specs(config: Config | Loaded, mock_override: str | None = None) -> tuple[AgentSpec, ...]:
    """The agents ``config`` (a :class:`~.config.Config`, or a :class:`~.config.Loaded` holding one) serves: its
    ``[[agents]]`` in order, or the one ``[agent]``; ``mock_override`` (``--mock``) is every agent's
    ``mock_script`` when given. Never empty; raises nothing (``config`` is validated)."""
    config = getattr(config, "config", config)
    specs = []
    for key, agent_id, entry in entry_ids(config):
        specs.append(
            AgentSpec(
                id=agent_id,
                key=key,
                ref=entry.agent_ref(),
                label=entry.label(),
                dir=Path(entry.dir).expanduser().resolve(),
                mock_script=mock_override or entry.mock_script,
                options=dict(entry.options),
                description=entry.description,
                skills=tuple(entry.skills),
                max_live=entry.pool.max_live,
                idle_close=entry.pool.idle_close,
                default=entry.default,
                approval=entry.approval,
            )
        )
    return tuple(specs)


def default_of(specs: tuple[AgentSpec, ...] | list[AgentSpec]) -> AgentSpec:
    """The default agent of ``specs`` (what the root serves): the one with ``default``, else the first. Raises
    ``ValueError`` for no specs."""
    if not specs:
        raise ValueError("no agents")
    return next((spec for spec in specs if spec.default), specs[0])


__all__ = ["AgentSpec", "agent_specs", "default_of", "entry_id", "entry_ids", "slug"]
