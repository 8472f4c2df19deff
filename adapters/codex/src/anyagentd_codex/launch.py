"""How the Codex app-server is started, and what its handshake says about it (``docs/agents/codex.md#launch``).

- :func:`launch_argv`: ``codex app-server`` + :data:`HEADLESS_CONFIG` + the caller's extra ``-c`` flags
  (``ANYAGENTD_CODEX_ARGS`` or the adapter config's ``args``) + the MCP servers of ``open`` as
  ``-c mcp_servers.<name>.…`` overrides;
- :func:`launch_env`: ours (executable directory first on PATH), ``CODEX_HOME`` only when asked;
- :func:`creation_settings`: ``configure`` values of ``open`` → thread/start fields and per-turn settings;
- :func:`agent_details`: ``AgentDetails`` from ``account/read``, ``model/list`` and ``skills/list``;
- the CLI's version comes from :func:`anyagentd.adapters.process.cli_version` (``codex --version``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import TYPE_CHECKING, Any

from anyagentd.adapters.interface import spawn_env
from anyagentd.errors import InvalidConfiguration, UnsupportedFeature
from anyagentd.model import (
    AccountInfo,
    AgentDetails,
    AgentInstallation,
    Authenticated,
    Capabilities,
    ConfigChoice,
    ConfigOption,
    Http,
    McpServer,
    Select,
    SessionOptions,
    SlashCommand,
    Stdio,
    Terminal,
    Unauthenticated,
)

from .protocol import GetAccountResponse, ModelListResponse

if TYPE_CHECKING:
    from anyagentd.model import AuthStatus, LoginMethod

ARGS_ENV = "ANYAGENTD_CODEX_ARGS"
"""Extra ``codex app-server`` arguments (shell-split), e.g. ``-c model_provider=mock -c …``."""

HEADLESS_CONFIG = (
    "analytics.enabled=false",
    "feedback.enabled=false",
    "check_for_update_on_startup=false",
    "features.plugins=false",
)
"""``-c`` overrides of every launch: no analytics, feedback upload or update check, and no plugin sync (which
looks up chatgpt.com and github.com)."""

APPROVAL_POLICIES = (
    ("untrusted", "Untrusted", "Ask before anything but known-safe read-only commands"),
    ("on-request", "On request", "Run in the sandbox; the model asks when it needs to leave it"),
    ("never", "Never", "Never ask; failures go back to the model"),
)
"""The ``mode`` option (Codex ``approvalPolicy``): set at creation and sent again with every ``turn/start``, so
it can change live."""

SANDBOX_MODES = (
    ("read-only", "Read only", "Commands may read files only"),
    ("workspace-write", "Workspace write", "Commands may write inside the session directory"),
    ("danger-full-access", "Full access", "No sandbox"),
)
"""The ``sandbox`` option (Codex ``sandbox``), creation-only."""

DEFAULT_MODE = "untrusted"
DEFAULT_SANDBOX = "workspace-write"

CAPABILITIES = (
    "Images",
    "Steer",
    "Permissions",
    "Resume",
    "Fork",
    "Compact",
    "Subagents",
    "ContextUsage",
    "PlanUsage",
)
"""What a Codex 0.171 app-server session does here (``SlashCommands`` is added when skills are listed: a
prompt ``/<skill> …`` is sent as a ``skill`` input). Not advertised:

- Questions: ``request_user_input`` answers "unavailable in Default mode" (Plan collaboration mode only, which the
  stable v2 ``turn/start`` cannot select); a ``item/tool/requestUserInput`` that does arrive is still mapped;
- Plan: the default model is offered no ``update_plan`` tool, so no ``turn/plan/updated`` comes (still mapped);
- Rollback, RollbackFiles: v2 has no ``thread/rollback``; ``thread/revert`` needs a checkpoint id we cannot name.

``PlanUsage``: ``plan_usage`` reads ``account/rateLimits/read`` (a ChatGPT login; otherwise UnsupportedFeature)
and rate-limit notifications become PlanUsageUpdated."""

MCP_TRANSPORTS = ("Stdio", "Http")
"""Codex takes stdio and streamable-HTTP MCP servers; SSE is refused with ``UnsupportedFeature``."""

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def login_methods(executable: str) -> list[LoginMethod]:
    """How to log Codex in: ``codex login`` in a terminal (ChatGPT, or ``--with-api-key``)."""
    return [Terminal(command=[executable, "login"], description="Log in to Codex (ChatGPT account or API key)")]


# ------------------------------------------------------------------------------------------------ command line


def extra_args(config: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> list[str]:
    """The caller's extra arguments: ``config["args"]`` (a list or a shell string), then ``$ANYAGENTD_CODEX_ARGS``
    (shell-split)."""
    out: list[str] = []
    configured = (config or {}).get("args")
    if isinstance(configured, str):
        out += shlex.split(configured)
    elif isinstance(configured, (list, tuple)):
        out += [str(a) for a in configured]
    env_value = (os.environ if environ is None else environ).get(ARGS_ENV)
    if env_value:
        out += shlex.split(env_value)
    return out


def toml_value(value: Any) -> str:
    """A TOML literal for a ``-c`` override: strings as basic strings, lists as arrays, dicts as inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise InvalidConfiguration(f"cannot express {value!r} as a Codex setting")


def _prefix(server: McpServer) -> str:
    if not _BARE_KEY.match(server.name):
        raise InvalidConfiguration(
            f"MCP server name {server.name!r}: Codex needs letters, digits, '_' or '-' (it becomes a config key)"
        )
    return f"mcp_servers.{server.name}"


def render_stdio(server: McpServer) -> list[str]:
    """A stdio server → ``-c mcp_servers.<name>.command=…`` (+ ``args``, ``env``)."""
    conn = server.connection
    assert isinstance(conn, Stdio)
    key = _prefix(server)
    settings = [f"{key}.command={toml_value(conn.command)}", f"{key}.args={toml_value(list(conn.args))}"]
    if conn.env:
        settings.append(f"{key}.env={toml_value(dict(conn.env))}")
    return [part for s in settings for part in ("-c", s)]


def render_http(server: McpServer) -> list[str]:
    """A streamable-HTTP server → ``-c mcp_servers.<name>.url=…`` (+ ``http_headers``)."""
    conn = server.connection
    assert isinstance(conn, Http)
    key = _prefix(server)
    settings = [f"{key}.url={toml_value(conn.url)}"]
    if conn.headers:
        settings.append(f"{key}.http_headers={toml_value(dict(conn.headers))}")
    return [part for s in settings for part in ("-c", s)]


RENDERERS = {"Stdio": render_stdio, "Http": render_http}


def mcp_args(servers: list[McpServer], adapter: object = None) -> list[str]:
    """The ``-c`` overrides for the MCP servers of ``open``. Uses the core's transport-plugin check
    (``AgentAdapter.render_mcp``) when the adapter has it; SSE → ``UnsupportedFeature`` either way."""
    if not servers:
        return []
    render = getattr(adapter, "render_mcp", None)
    if render is not None and getattr(adapter, "mcp_transports", None):
        rendered = render(servers, RENDERERS)
        return [part for _, args in rendered for part in args]
    out: list[str] = []
    for server in servers:
        tag = getattr(server.connection, "TAG", "")
        renderer = RENDERERS.get(tag)
        if renderer is None:
            raise UnsupportedFeature(f"Codex cannot use MCP transport {tag} (server {server.name!r})")
        out += renderer(server)
    return out


def launch_argv(executable: str, *, extra: list[str] | None = None, mcp: list[str] | None = None) -> list[str]:
    """``codex app-server -c analytics.enabled=false … [extra] [mcp]``."""
    argv = [executable, "app-server"]
    for setting in HEADLESS_CONFIG:
        argv += ["-c", setting]
    return argv + list(extra or []) + list(mcp or [])


def launch_env(installation: AgentInstallation, codex_home: str | None = None) -> dict[str, str]:
    """``spawn_env`` (ours, the executable's directory first on PATH); ``CODEX_HOME`` set only when given."""
    env = spawn_env(installation)
    if codex_home:
        env["CODEX_HOME"] = codex_home
    return env


# ------------------------------------------------------------------------------------------------ options


def creation_settings(options: SessionOptions) -> dict[str, Any]:
    """Validated ``configure`` values of ``open``: ``mode`` (approval policy), ``sandbox``, ``model``, ``effort``.
    Raises ``InvalidConfiguration``."""
    configure = dict(options.configure)
    out: dict[str, Any] = {}
    mode = configure.pop("mode", None)
    if mode is not None:
        if mode not in {m[0] for m in APPROVAL_POLICIES}:
            raise InvalidConfiguration(f"unknown approval policy {mode!r}; one of untrusted, on-request, never")
        out["mode"] = mode
    sandbox = configure.pop("sandbox", None)
    if sandbox is not None:
        if sandbox not in {s[0] for s in SANDBOX_MODES}:
            raise InvalidConfiguration(f"unknown sandbox {sandbox!r}")
        out["sandbox"] = sandbox
    for key in ("model", "effort"):
        value = configure.pop(key, None)
        if value is not None:
            if not isinstance(value, str) or not value:
                raise InvalidConfiguration(f"{key} must be a non-empty string")
            out[key] = value
    if configure:
        raise InvalidConfiguration(f"unknown option {next(iter(configure))!r}")
    return out


def auth_status(account: GetAccountResponse | None, executable: str) -> AuthStatus:
    """``AuthStatus`` from ``account/read``: ``apiKey`` → ApiKey; ``chatgpt`` → Subscription (email, plan);
    Bedrock / GCP → CloudProvider; no account but no OpenAI auth needed (a custom provider with its own key) →
    ApiKey; no account while OpenAI auth is needed → Unauthenticated (``codex login``); unknown → Unknown."""
    if account is None:
        return "Unknown"
    acct = account.account if isinstance(account.account, dict) else None
    if acct is None:
        if account.requiresOpenaiAuth:
            return Unauthenticated(login=login_methods(executable))
        return Authenticated(kind="ApiKey")
    kind = acct.get("type")
    if kind == "chatgpt":
        return Authenticated(
            kind="Subscription", account=AccountInfo(email=acct.get("email"), plan=acct.get("planType"))
        )
    if kind in ("amazonBedrock", "gcp"):
        return Authenticated(kind="CloudProvider")
    return Authenticated(kind="ApiKey")


def model_choices(models: ModelListResponse | None, current: str | None) -> list[ConfigChoice]:
    choices = [
        ConfigChoice(value=m.id, label=m.displayName or m.id, description=m.description or None)
        for m in (models.data if models else [])
        if not m.hidden
    ]
    if current and not any(c.value == current for c in choices):
        choices.append(ConfigChoice(value=current, label=current))
    return choices


def effort_choices(models: ModelListResponse | None, model: str | None) -> list[ConfigChoice]:
    """The efforts of ``model`` (or of the default model, or the union) from ``model/list``."""
    data = models.data if models else []
    chosen = next((m for m in data if m.id == model or m.model == model), None)
    chosen = chosen or next((m for m in data if m.isDefault), None)
    efforts = chosen.supportedReasoningEfforts if chosen else [e for m in data for e in m.supportedReasoningEfforts]
    out: list[ConfigChoice] = []
    for e in efforts:
        if not any(c.value == e.reasoningEffort for c in out):
            out.append(
                ConfigChoice(
                    value=e.reasoningEffort, label=e.reasoningEffort.capitalize(), description=e.description or None
                )
            )
    return out


def config_options(models: ModelListResponse | None, current: dict[str, Any]) -> list[ConfigOption]:
    """``model`` and ``effort`` (live: sent with each ``turn/start``), ``mode`` (approval policy, live), ``sandbox``
    (creation-only). Without a known model (a probe with no configured model) the current values shown are
    ``model/list``'s default model and its default effort."""
    data = models.data if models else []
    default = next((m for m in data if m.isDefault), None)
    model = current.get("model") or (default.id if default else None)
    efforts = effort_choices(models, model)
    chosen = next((m for m in data if m.id == model or m.model == model), None)
    effort = current.get("effort") or (chosen.defaultReasoningEffort if chosen else None)
    if effort and not any(c.value == effort for c in efforts):
        efforts.append(ConfigChoice(value=effort, label=effort))
    modes = [ConfigChoice(value=v, label=label, description=d) for v, label, d in APPROVAL_POLICIES]
    sandboxes = [ConfigChoice(value=v, label=label, description=d) for v, label, d in SANDBOX_MODES]
    return [
        ConfigOption(
            id="model",
            name="Model",
            category="model",
            kind=Select(choices=model_choices(models, model)),
            current=model,
            live=True,
        ),
        ConfigOption(
            id="effort",
            name="Reasoning effort",
            category="thought_level",
            kind=Select(choices=efforts),
            current=effort,
            live=True,
        ),
        ConfigOption(
            id="mode",
            name="Approval policy",
            category="mode",
            kind=Select(choices=modes),
            current=current.get("mode", DEFAULT_MODE),
            live=True,
        ),
        ConfigOption(
            id="sandbox",
            name="Sandbox",
            category="sandbox",
            kind=Select(choices=sandboxes),
            current=current.get("sandbox", DEFAULT_SANDBOX),
            live=False,
        ),
    ]


def skill_commands(skills: object) -> tuple[list[SlashCommand], dict[str, str]]:
    """``skills/list`` → slash commands, and skill name → SKILL.md path (for ``skill`` inputs)."""
    commands: list[SlashCommand] = []
    paths: dict[str, str] = {}
    entries = skills.get("data") if isinstance(skills, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        for skill in entry.get("skills") or [] if isinstance(entry, dict) else []:
            if not isinstance(skill, dict) or not isinstance(skill.get("name"), str) or skill.get("enabled") is False:
                continue
            if skill["name"] in paths:
                continue
            paths[skill["name"]] = str(skill.get("path") or "")
            description = str(skill.get("shortDescription") or skill.get("description") or "")
            commands.append(SlashCommand(name=skill["name"], description=description))
    return commands, paths


def agent_details(
    *,
    version: str | None,
    account: GetAccountResponse | None,
    models: ModelListResponse | None,
    skills: object,
    executable: str,
    current: dict[str, Any],
    mcp_transports: list[str] | None = None,
) -> AgentDetails:
    commands, _ = skill_commands(skills)
    features = list(CAPABILITIES) + (["SlashCommands"] if commands else [])
    return AgentDetails(
        version=version,
        auth=auth_status(account, executable),
        capabilities=Capabilities(
            features=features, mcp_transports=list(MCP_TRANSPORTS if mcp_transports is None else mcp_transports)
        ),
        config_options=config_options(models, current),
        commands=commands,
    )


def version_from_user_agent(user_agent: object) -> str | None:
    """``initialize``'s ``userAgent`` (``"anyagentd/0.171.0 (Debian …)"``) → ``"0.171.0"``."""
    if not isinstance(user_agent, str):
        return None
    match = re.match(r"[^/\s]+/(\d+\.\d+\.\d+\S*)", user_agent)
    return match.group(1) if match else None
