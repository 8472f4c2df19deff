"""The SIGHUP reload: the configuration file read again and applied to the running daemon (:class:`Reload`).

What a running daemon can take is applied — the credentials and ``[[a2a.principals]]``, ``cors_origins``,
``trusted_proxies``, ``introspection``, ``access_log``, ``[a2a.retention]``, ``[a2a.limits]`` (the front's), the
scrape token, each agent's ``approval``, ``[[subagents.parents]]`` and the ``[[workflows]]``; a change to a key read
once at the start (an agent's other keys, :func:`agent_changes`; :data:`START_ONLY`) is named in a warning and takes
effect at the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import AgentSection, Config, ConfigError, Loaded, load, with_listen
from .principals import Identities

if TYPE_CHECKING:
    from .front import CorsGate
    from .services import Services

log = logging.getLogger("anyagentd.a2a")

START_ONLY = (
    "a2a.listen",
    "a2a.url",
    "a2a.tls",
    "a2a.store",
    "a2a.store_synchronous",
    "a2a.push",
    "a2a.pool",
    "a2a.device_grant",
    "a2a.metrics.enabled",
    "a2a.console.enabled",
    "a2a.limits.task_history",
    "subagents.enabled",
    "subagents.agents",
    "subagents.per_owner",
    "subagents.depth",
    "subagents.timeout",
    "subagents.instances",
    "workflow_engine",
)
"""The configuration keys read once at the start — the listener and the card (url, TLS), the stores, the push
sender, the pool, the device grant, the /metrics route, the console's route, the task store's history bound, the subagent manager and
its child instances (their bearers resolved), the workflow engine (its connection and workers): a SIGHUP that changes one says it takes effect at the next start
(:meth:`Reload.reload`). The agents are read once too, all but their ``approval``: :func:`agent_changes`."""


def agent_changes(started: Config, loaded: Config) -> list[str]:
    """The keys of the agents' start-only changes from ``started`` to ``loaded`` (every key of an agent but
    ``approval``, which a reload applies), compared entry by entry in order: ``<key>.<field>`` for a changed field
    of an agent that keeps its id and place (``agent.dir``, ``agents.1.options``; ``agent.name`` too, though the
    shorthand's id follows its name), ``<key>`` for an agent added, removed, moved or given another id
    (``agents.2``). The shorthand ``[agent]`` and an ``[[agents]]`` entry with the same id and values are the same
    agent. Empty: nothing changed."""
    from .agentspec import entry_ids

    def dumped(entry: AgentSection, agent_id: str) -> dict[str, Any]:
        return {**entry.model_dump(exclude={"approval"}), "id": agent_id or entry.id}

    before, after = entry_ids(started), entry_ids(loaded)
    changed: list[str] = []
    for n in range(max(len(before), len(after))):
        if n >= len(after) or n >= len(before):
            changed.append((after if n < len(after) else before)[n][0])
            continue
        (was_key, was_id, was), (key, now_id, now) = before[n], after[n]
        if was_key == key == "agent":  # the shorthand's id follows its name: the name is what changed
            was_id = now_id = ""
        elif was_id != now_id:
            changed.append(key)
            continue
        old, new = dumped(was, was_id), dumped(now, now_id)
        changed += [f"{key}.{name}" for name in new if new[name] != old[name]]
    return changed


class Reload:
    """The reload of one daemon's ``services`` (their settings hold ``--config``, the configuration in force and
    the one started with); ``cors`` is the app's CORS gate, whose origins a reload replaces. ``spawn`` (a task
    group's ``start_soon``) runs the reports of the parents configured after a reload."""

    def __init__(self, services: Services, cors: CorsGate, spawn: Callable[..., Any]) -> None:
        self.services = services
        self.cors = cors
        self.spawn = spawn

    def on_signal(self) -> None:
        """SIGHUP: :meth:`reload`, then its audit line (``config.reload`` by ``signal``: ``ok`` when a new
        configuration took, ``refused`` when the running one was kept — the reason logged already)."""
        settings = self.services.settings
        before = settings.loaded
        self.reload()
        from .observe.audit import audit

        # a reload that took replaced the configuration; any refusal was logged with its reason
        audit(
            "config.reload",
            "signal",
            "ok" if settings.loaded is not before else "refused",
            args={"signal": "SIGHUP", "config": settings.options.config_path},
        )

    def reload(self) -> None:
        """SIGHUP: read ``--config`` again and apply what can be applied to a running daemon — the credentials and
        ``[[a2a.principals]]`` (their ``agents`` too), ``cors_origins``, ``trusted_proxies``, ``introspection``,
        ``access_log``, ``[a2a.retention]``, ``[a2a.limits]`` (the front's), the scrape token, each agent's
        ``approval``, ``[[subagents.parents]]`` and the ``[[workflows]]``; a change to any key read once at the
        start (the agents' other keys, :func:`agent_changes`, and :data:`START_ONLY`) from the configuration the
        daemon started with is named in one warning: it takes effect at the next start. A file the start would refuse is refused, and the running configuration kept."""
        services = self.services
        settings = services.settings
        path = settings.options.config_path
        if path is None:
            log.warning("SIGHUP: no --config file to reload")
            return
        try:
            loaded = with_listen(load(path), settings.options.listen)
        except ConfigError as err:
            log.error("SIGHUP: configuration not reloaded: %s", err)
            return
        from .preflight import preflight

        # what the start would refuse, the reload refuses
        found = preflight(loaded, services.runtime.plugins, mock_script=settings.options.mock_script)
        if found.errors:
            log.error("SIGHUP: configuration not reloaded: %s", found.errors[0])
            return

        def value(config: Any, key: str) -> Any:
            for part in key.split("."):
                config = getattr(config, part)
            return config

        # compared with what runs: the configuration the daemon started with (a change undone is no change)
        started = settings.started_with
        changed = agent_changes(started.config, loaded.config)
        changed += [key for key in START_ONLY if value(loaded.config, key) != value(started.config, key)]
        if "subagents.instances" not in changed and loaded.secrets.instances != started.secrets.instances:
            changed.append("subagents.instances")  # a bearer file's new content
        if changed:
            log.warning(
                "SIGHUP: changes to %s take effect at the next start (the running daemon keeps what it started with)",
                ", ".join(changed),
            )
        self._reload_workflows(loaded)
        settings.replace(loaded)  # admin.set values last until here
        services.front.identities = Identities(loaded, services.instance.auth_sessions)
        self.cors.origins = set(loaded.config.a2a.cors_origins)
        # tasks started from now on, on every agent, report to the parents configured now
        parents = settings.parents(self.spawn)
        for agent in services.agents:
            agent.executor.parents = parents
        log.info("SIGHUP: configuration reloaded from %s", path)

    def _reload_workflows(self, loaded: Loaded) -> None:
        """The reloaded ``[[workflows]]`` for the runs started from now on (:meth:`.WorkflowRunner.redefine`); a
        daemon started without workflows has no runner (nor run store): a warning says they wait for a restart."""
        from .workflows.definition import load_workflows

        instance = self.services.instance
        runner = instance.runner
        if runner is None:
            if loaded.config.workflows:
                log.warning("SIGHUP: [[workflows]] take effect at the next start (this daemon started without any)")
            return
        instance.workflows = load_workflows(loaded.config.workflows)
        changes = runner.redefine(instance.workflows)
        said = "; ".join(f"{kind} {', '.join(names)}" for kind, names in changes.items() if names)
        log.info("SIGHUP: workflows %s", said or "unchanged")


__all__ = ["START_ONLY", "Reload", "agent_changes"]
