"""What one daemon runs with: the command line's :class:`Options`, the loaded configuration a SIGHUP reload
replaces, the ``admin.set`` overrides that last until then, and what the start derives from them once (the agents,
their directories, the state dir, the listen address, the task store's URL).

Every service reads the configuration in force through one :class:`Settings` (``settings.loaded``, read when
used), so a reload that replaces it reaches them all; the keys read once at the start are what
``settings.started_with`` holds (:data:`.reload.START_ONLY`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agentspec import AgentSpec, agent_specs, default_of, entry_ids
from .config import ConfigError, Loaded, parent_key
from .conversations import PoolLimits

if TYPE_CHECKING:
    from anyagentd.plugins import Plugins
    from anyagentd.runtime import Runtime

    from .subagents.reports import Parents

log = logging.getLogger("anyagentd.a2a")


@dataclass(frozen=True)
class Options:
    """Command-line overrides: ``listen`` (HOST:PORT), ``mock_script``, ``state_dir``, ``config_path`` (for
    SIGHUP reloads), and ``plugins``: the plugin manager the command line already loaded (None: the runtime
    loads its own)."""

    listen: str | None = None
    mock_script: str | None = None
    state_dir: Path | None = None
    config_path: str | None = None
    plugins: Plugins | None = None


def seconds(name: str, default: float) -> float:
    """The environment variable ``name`` as seconds; ``default`` when it is unset or empty, or (with a warning)
    not a number."""
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %s", name, value, default)
        return default


def pool_limits(loaded: Loaded) -> PoolLimits:
    """``[a2a.pool]`` as :class:`PoolLimits`; env ``ANYAGENTD_A2A_IDLE_CLOSE`` (seconds) overrides ``idle_close``."""
    pool = loaded.config.a2a.pool
    return PoolLimits(
        idle_close=seconds("ANYAGENTD_A2A_IDLE_CLOSE", pool.idle_close),
        max_live=pool.max_live,
        max_rss_mb=pool.max_rss_mb,
    )


def agent_idle_close(spec: AgentSpec, loaded: Loaded) -> float:
    """Seconds ``spec``'s conversations' agents stay open with no live task: its own ``[agents.pool] idle_close``,
    else ``[a2a.pool]``'s (:func:`pool_limits`, the environment's override included)."""
    return spec.idle_close if spec.idle_close is not None else pool_limits(loaded).idle_close


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/anyagentd/a2a`` (``~/.local/state/anyagentd/a2a`` without it)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "anyagentd" / "a2a"


class Settings:
    """The configuration one daemon runs with. ``loaded`` is the configuration in force (a SIGHUP reload replaces
    it, :meth:`replace`); ``started_with`` the one the daemon started with (what the keys read once at the start
    keep, whatever reloads); ``overrides`` the values ``admin.set`` changed (path → value) until the next reload.
    The agents (``specs``: :func:`.agentspec.agent_specs`, ``--mock`` winning over every entry's script;
    ``default``: the one the root serves, :func:`.agentspec.default_of`), ``listen`` (``--listen`` wins) and
    ``state_dir`` (``--state-dir``, else :func:`default_state_dir`; resolved) are read once, at construction."""

    def __init__(self, loaded: Loaded, options: Options) -> None:
        self.loaded = loaded
        self.started_with = loaded
        self.options = options
        self.overrides: dict[str, Any] = {}
        self.listen = options.listen or loaded.config.a2a.listen
        self.state_dir = (options.state_dir or default_state_dir()).expanduser().resolve()
        self.specs: tuple[AgentSpec, ...] = agent_specs(loaded.config, options.mock_script)
        self.default: AgentSpec = default_of(self.specs)

    def spec(self, agent_id: str) -> AgentSpec:
        """The served agent whose id is ``agent_id``; raises ``KeyError`` (naming it) for no such agent."""
        for spec in self.specs:
            if spec.id == agent_id:
                return spec
        raise KeyError(agent_id)

    def approval_of(self, agent_id: str) -> str:
        """The approval in force (``"ask"`` or ``"auto"``) for the served agent ``agent_id``: ``admin.set``'s value
        (``agents.<id>.approval``: ``admin.set agent.approval`` on that agent's path), else the configuration in
        force's entry with that id (a reload applies it), else what it started with (an agent a reload removed
        keeps serving as started). Raises ``KeyError`` for an agent not served."""
        started = self.spec(agent_id)
        override = self.overrides.get(f"agents.{agent_id}.approval")
        if override is not None:
            return override
        entry = next((e for _, i, e in entry_ids(self.loaded.config) if i == agent_id), None)
        return entry.approval if entry is not None else started.approval

    @property
    def store_url(self) -> str:
        """The task store's SQLAlchemy URL: ``a2a.store``, else ``a2a.db`` in the state dir."""
        return self.loaded.config.a2a.store or f"sqlite+aiosqlite:///{self.state_dir / 'a2a.db'}"

    @property
    def introspection(self) -> bool:
        """``a2a.introspection`` in force: ``admin.set``'s value, else the configuration's."""
        return self.overrides.get("a2a.introspection.enabled", self.loaded.config.a2a.introspection)

    def replace(self, loaded: Loaded) -> None:
        """A SIGHUP reload: ``loaded`` is in force from now on, and the ``admin.set`` values end here."""
        self.loaded = loaded
        self.overrides.clear()

    def check_agents(self, runtime: Runtime) -> None:
        """Raise ``ConfigError`` unless an installed plugin of ``runtime`` drives every served agent (its key's
        ``name``: ``agent.name``, ``agents.N.name``; the first that fails) and no child instance
        (``subagents.instances``) is named like an installed agent."""
        known = {p.id for p, _ in runtime.plugins.profiles()}
        known |= {i.id for a in runtime.adapters.values() for i in a.pinned_installations()}
        for spec in self.specs:
            if isinstance(spec.ref, str) and spec.ref not in known:
                raise ConfigError(
                    f"{spec.key}.name",
                    f"no installed plugin drives an agent named {spec.ref!r} (known: {', '.join(sorted(known))})",
                )
        for n, child in enumerate(self.loaded.config.subagents.instances):
            if child.name in known:  # a spawn by that name would reach the child, never the local agent
                raise ConfigError(
                    f"subagents.instances.{n}.name",
                    f"{child.name!r} is an installed agent here; a child instance needs another name",
                )

    async def check_options(self, runtimes: dict[str, Runtime]) -> None:
        """Raise ``ConfigError`` naming ``<key>.options.<id>`` for an option of a served agent (``[agents.options]``)
        that its agent does not list, or a value the option does not take (``Runtime.probe``: what
        ``anyagentd probe`` shows; ``runtimes`` by agent id). Agents with no options are not probed; one the probe
        cannot reach (not installed, not signed in) is left to its first session, which says why."""
        import json

        from anyagentd.errors import AnyagentError

        for spec in self.specs:
            if not spec.options:
                continue
            try:
                details = await runtimes[spec.id].probe(spec.ref)
            except AnyagentError:
                continue
            for option_id, value in spec.options.items():
                option = details.option(option_id)
                listed = ", ".join(o.id for o in details.config_options) or "none"
                if option is None:
                    raise ConfigError(
                        f"{spec.key}.options.{option_id}",
                        f"{spec.label} has no option {option_id!r} (its options: {listed}; anyagentd probe lists them)",
                    )
                if not option.accepts(value):
                    raise ConfigError(
                        f"{spec.key}.options.{option_id}",
                        f"{json.dumps(value)} does not fit {spec.label}'s option {option_id!r}",
                    )

    def secret_references(self) -> dict[str, str]:
        """Each resolved credential's value → the reference it was configured as (for redaction)."""
        loaded = self.loaded
        config, found = loaded.config.a2a, {}
        if loaded.secrets.operator is not None and config.bearer:
            found[loaded.secrets.operator.get_secret_value()] = config.bearer
        if loaded.secrets.metrics is not None and config.metrics.token:
            found[loaded.secrets.metrics.get_secret_value()] = config.metrics.token
        for section in config.principals:
            secret = loaded.secrets.principals.get(section.id)
            if secret is not None:
                found[secret.get_secret_value()] = section.bearer
        for child in loaded.config.subagents.instances:
            secret = loaded.secrets.instances.get(child.name)
            if secret is not None and child.bearer:
                found[secret.get_secret_value()] = child.bearer
        for parent in loaded.config.subagents.parents:
            secret = loaded.secrets.parents.get(parent_key(parent.url))
            if secret is not None:
                found[secret.get_secret_value()] = parent.bearer
        return found

    def parents(self, spawn: Callable[..., Any]) -> Parents | None:
        """The ``[[subagents.parents]]`` this daemon reports a parent's subagent to (``None`` when there are none);
        ``spawn`` (a task group's ``start_soon``) runs their reports' senders."""
        configured = self.loaded.config.subagents.parents
        if not configured:
            return None
        from .subagents.reports import Parent, Parents

        secrets = self.loaded.secrets.parents
        return Parents([Parent(p.url, secrets[parent_key(p.url)], p.principal) for p in configured], spawn=spawn)


__all__ = ["Options", "Settings", "agent_idle_close", "default_state_dir", "pool_limits", "seconds"]
