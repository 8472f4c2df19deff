"""The daemon-wide part of what the command ops see: :class:`Instance` holds the daemon's typed parts that no one
agent owns — its :class:`~.settings.Settings`, its :class:`~.lifecycle.Lifecycle`, its id and start time, the log
ring, and the services the op families use (the workflow runner, the subagent manager, the device grant and the
signed-in sessions), each ``None`` when not configured — never the daemon itself (this module does not import it:
no import circle). Each path's :class:`~.agentface.AgentFace` is the ops' :class:`CommandFace`: its agent's state
its own, the rest this instance's.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from anyagentd import __version__
from anyagentd.ops import InvalidOpArguments

from .logring import LogRing

if TYPE_CHECKING:
    from .auth.device import DeviceGrant
    from .auth.sessions import AuthSessions
    from .lifecycle import Lifecycle
    from .settings import Settings
    from .subagents.manager import SubagentManager
    from .workflows.definition import Workflow
    from .workflows.runner import WorkflowRunner

SETTABLE = ("agent.approval", "a2a.introspection.enabled")


class Instance:
    """The daemon-wide state the ops read through each path's face: ``settings`` give the configuration in force
    (and hold the ``admin.set`` values), ``lifecycle`` the daemon's drain and pause latches; ``log`` is the daemon's
    log ring. The services (``runner``, ``workflows``, ``subagents``, ``device_grant``, ``auth_sessions``) are given
    as configured, each ``None`` (``workflows``: empty) otherwise."""

    def __init__(
        self,
        settings: Settings,
        lifecycle: Lifecycle,
        log: LogRing,
        *,
        runner: WorkflowRunner | None = None,
        workflows: dict[str, Workflow] | None = None,
        subagents: SubagentManager | None = None,
        device_grant: DeviceGrant | None = None,
        auth_sessions: AuthSessions | None = None,
    ) -> None:
        self.settings = settings
        self.lifecycle = lifecycle
        self.instance = f"agentd-{secrets.token_hex(4)}"
        self.version = __version__
        self.started_ms = int(time.time() * 1000)
        self.log = log
        self.runner: WorkflowRunner | None = runner
        self.workflows: dict[str, Workflow] = workflows if workflows is not None else {}
        self.subagents: SubagentManager | None = subagents
        self.device_grant: DeviceGrant | None = device_grant
        self.auth_sessions: AuthSessions | None = auth_sessions

    @property
    def introspection(self) -> bool:
        return self.settings.introspection

    def switches(self) -> dict[str, bool]:
        """The configuration switches ops are served under (see :attr:`anyagentd.ops.Op.switch`)."""
        return {
            "introspection": self.introspection,
            "device_grant": self.device_grant is not None,
            "tcp_listener": True,
        }

    # -- configuration ---------------------------------------------------------------------------------------

    def redacted_config(self) -> dict[str, Any]:
        """The effective configuration: credential fields hold their references (secrets are resolved apart,
        never into the configuration), with ``admin.set`` overrides applied — each served agent's ``approval`` as
        in force, ``--mock`` as each agent's ``mock_script``. With ``[[agents]]`` there is no ``agent`` key (the
        shorthand is not configured)."""
        from .agentspec import entry_id

        settings = self.settings
        loaded = settings.loaded.config
        config = loaded.model_dump(mode="json")
        served = {spec.id for spec in settings.specs}
        if loaded.agents:
            del config["agent"]
            entries = list(zip(loaded.agents, config["agents"], strict=True))
        else:
            entries = [(loaded.agent, config["agent"])]
        for entry, shown in entries:
            agent = entry_id(entry)
            if agent in served:  # an agent a reload added is not served until the next start
                shown["approval"] = settings.approval_of(agent)
            if settings.options.mock_script is not None:  # --mock on the command line wins over the file
                shown["mock_script"] = str(settings.options.mock_script)
        config["a2a"]["introspection"] = self.introspection
        return config

    def settable(self) -> list[str]:
        return list(SETTABLE)

    def set_setting(self, path: str, value: Any, agent: str) -> Any:
        """``admin.set`` on the path of ``agent`` (an id): values typed as the configuration file types them (TOML: a
        boolean is true/false, not the string ``"true"``). ``agent.approval`` is that agent's, until the next reload;
        ``a2a.introspection`` (the file's key) and ``a2a.introspection.enabled`` (the schema's name) are one setting,
        the daemon's. Raises ``InvalidOpArguments`` naming ``value`` or ``path``."""
        path = "a2a.introspection.enabled" if path == "a2a.introspection" else path  # the config file's key
        key = path
        if path == "agent.approval":
            if value not in ("ask", "auto"):
                raise InvalidOpArguments('agent.approval is "ask" or "auto"', [("value", 'expected "ask" or "auto"')])
            key = f"agents.{agent}.approval"
        elif path == "a2a.introspection.enabled":
            if not isinstance(value, bool):
                raise InvalidOpArguments(
                    "a2a.introspection.enabled is a boolean", [("value", "expected a boolean (true or false)")]
                )
        else:
            raise InvalidOpArguments(f"{path} cannot be set", [("path", f"one of {', '.join(SETTABLE)}")])
        self.settings.overrides[key] = value  # until the next reload (Settings.replace)
        self.log.emit("admin.set", path=path, value=value, agent=agent)
        return value


__all__ = ["Instance", "SETTABLE"]
