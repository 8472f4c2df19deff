"""How an ACP agent is started: command line and environment.

``argv`` = the executable, the installation's ``acp_args`` (a catalog profile's, or the ``{"acp": {...}}``
AgentRef's ``args``), then extra arguments for this agent id from, in order:

- the adapter config ``{"args": {"<id>": [...]}}`` (``Runtime(adapter_config={"acp": {...}})``);
- the environment variable ``ANYAGENTD_<ID>_ARGS`` (id upper-cased, ``-`` → ``_``; shell-split), e.g.
  ``ANYAGENTD_CODEX_ACP_ARGS="-c model_provider=mock ..."``; for every ACP agent, ``ANYAGENTD_ACP_ARGS``.

The environment is ours (``spawn_env``: the executable's directory first on PATH), plus the adapter config's
``{"env": {"<id>": {...}}}``, plus the profile's :data:`DEFAULT_ENV` where not already set.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from anyagentd.adapters.interface import spawn_env
from anyagentd.errors import InvalidConfiguration
from anyagentd.model import AgentInstallation

DEFAULT_ENV: dict[str, dict[str, str]] = {
    "claude-acp": {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    },
}
"""Per agent id, variables set unless the caller's environment sets them (headless, nothing phones home)."""


def args_env_name(agent_id: str) -> str:
    """``ANYAGENTD_<ID>_ARGS`` for an agent id (``codex-acp`` → ``ANYAGENTD_CODEX_ACP_ARGS``)."""
    return f"ANYAGENTD_{agent_id.upper().replace('-', '_')}_ARGS"


def extra_args(agent_id: str, config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """The extra arguments for ``agent_id`` (see the module doc). Raises ``InvalidConfiguration`` for a value
    that does not shell-split or a config entry that is not a list of strings."""
    environ = os.environ if environ is None else environ
    out: list[str] = []
    configured = (config.get("args") or {}).get(agent_id)
    if configured is not None:
        if not isinstance(configured, list) or not all(isinstance(a, str) for a in configured):
            raise InvalidConfiguration(f"acp adapter config args[{agent_id!r}] must be a list of strings")
        out += configured
    for name in ("ANYAGENTD_ACP_ARGS", args_env_name(agent_id)):
        raw = environ.get(name)
        if raw:
            try:
                out += shlex.split(raw)
            except ValueError as exc:
                raise InvalidConfiguration(f"${name} does not shell-split: {exc}") from None
    return out


def launch_argv(installation: AgentInstallation, config: Mapping[str, Any]) -> list[str]:
    """The command line of an ACP agent session (see the module doc)."""
    return [installation.executable_path, *(installation.acp_args or []), *extra_args(installation.id, config)]


def launch_env(installation: AgentInstallation, config: Mapping[str, Any]) -> dict[str, str]:
    """The child environment (see the module doc)."""
    env = spawn_env(installation, (config.get("env") or {}).get(installation.id))
    for key, value in DEFAULT_ENV.get(installation.id, {}).items():
        env.setdefault(key, value)
    return env
