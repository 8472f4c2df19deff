"""How Claude Code is started and what its handshake says about it (``docs/agents/claude.md#launch``).

- :func:`launch_argv`: the command line for a session (new, resumed, forked, with MCP servers and creation
  options) — ``claude --output-format stream-json --input-format stream-json --verbose
  --include-partial-messages --permission-prompt-tool stdio --replay-user-messages ...``;
- :func:`launch_env`: the child environment (ours, the executable's directory first on PATH, plus the headless
  defaults of :data:`HEADLESS_ENV` where not already set);
- :func:`agent_details`: ``AgentDetails`` from the ``initialize`` response (auth, capabilities, options,
  slash commands);
- the CLI's version comes from :func:`anyagentd.adapters.process.cli_version` (``claude --version``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from anyagentd.adapters.interface import spawn_env
from anyagentd.errors import InvalidConfiguration
from anyagentd.model import (
    AccountInfo,
    AgentDetails,
    AgentInstallation,
    Authenticated,
    Capabilities,
    ConfigChoice,
    ConfigOption,
    EnvVar,
    McpServer,
    OtherAuth,
    Select,
    SessionOptions,
    SlashCommand,
    Terminal,
    Unauthenticated,
)

if TYPE_CHECKING:
    from anyagentd.model import AuthStatus, Http, LoginMethod, Sse, Stdio

BASE_FLAGS = (
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "--verbose",
    "--include-partial-messages",
    "--permission-prompt-tool",
    "stdio",
    "--replay-user-messages",
)
"""Flags of every launch: bidirectional stream-json, partial messages, permission prompts on the control channel,
and our user messages echoed back.

No ``-p``: the CLI runs non-interactively because its stdout is a pipe (``claude --help``: "non-interactive mode
(via -p, or when stdout is not a TTY)"), as the official SDKs start it. With ``-p`` Claude Code 2.1.197 answers
``initialize`` and streams the first text about 50 ms later (median of 20 paired runs, same CPU time: a wait),
with the same request to the model (``bench/README.md``, bench_agents.py)."""

HEADLESS_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING": "1",
}
"""Set in the child's environment unless the caller's environment already sets them:

- ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``: no session-title model calls, no lookups of api.anthropic.com;
- ``DISABLE_AUTOUPDATER``, ``DISABLE_TELEMETRY``, ``DISABLE_ERROR_REPORTING``: nothing runs or phones home
  behind the session;
- ``CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING``: file checkpoints, which ``rollback`` with
  ``ConversationAndFiles`` (the ``rewind_files`` control request) needs.

Set one to ``0`` (or anything) in the caller's environment to keep the caller's value."""

PERMISSION_MODES = (
    ("default", "Default", "Ask before edits and commands"),
    ("acceptEdits", "Accept edits", "Edits are allowed; commands still ask"),
    ("plan", "Plan", "Read-only planning; no edits or commands"),
    ("dontAsk", "Don't ask", "Deny whatever is not pre-approved instead of asking"),
    (
        "bypassPermissions",
        "Bypass permissions",
        "Allow everything (as root needs IS_SANDBOX=1; live switching needs a session started in this mode)",
    ),
)
"""The ``mode`` option's choices (``--permission-mode`` / ``set_permission_mode``)."""

EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""``--effort`` levels of Claude Code 2.1.197 (creation-only: there is no control request to change it)."""

CAPABILITIES = (
    "Images",
    "Permissions",
    "Questions",
    "Subagents",
    "ContextUsage",
    "Rollback",
    "RollbackFiles",
    "Fork",
    "SlashCommands",
    "Resume",
    "Plan",
    "Compact",
)
"""What a Claude Code session can do here. Not advertised: Steer (a message sent mid-turn is queued by the CLI
as the next turn, not merged) and PlanUsage (not implemented)."""

MCP_TRANSPORTS = ("Stdio", "Http", "Sse")
"""The MCP transports Claude Code can take in ``--mcp-config``; a session offers those with an installed plugin."""


def login_methods(executable: str) -> list[LoginMethod]:
    """How to log Claude Code in: ``claude /login`` in a terminal, or ``ANTHROPIC_API_KEY``."""
    return [
        Terminal(command=[executable, "/login"], description="Log in to Claude Code (claude.ai or Console)"),
        EnvVar(name="ANTHROPIC_API_KEY"),
    ]


def render_stdio(server: McpServer) -> dict[str, Any]:
    """One ``Stdio`` server in ``--mcp-config``: ``{"type": "stdio", "command", "args", "env"}``."""
    conn = cast("Stdio", server.connection)  # (the renderer of its transport)
    return {"type": "stdio", "command": conn.command, "args": list(conn.args), "env": dict(conn.env)}


def render_http(server: McpServer) -> dict[str, Any]:
    """One ``Http`` (streamable HTTP) server: ``{"type": "http", "url", "headers"}``."""
    conn = cast("Http", server.connection)
    return {"type": "http", "url": conn.url, "headers": dict(conn.headers)}


def render_sse(server: McpServer) -> dict[str, Any]:
    """One ``Sse`` server: ``{"type": "sse", "url", "headers"}``."""
    conn = cast("Sse", server.connection)
    return {"type": "sse", "url": conn.url, "headers": dict(conn.headers)}


MCP_RENDERERS = {"Stdio": render_stdio, "Http": render_http, "Sse": render_sse}
"""Claude Code's format for each MCP transport it can forward (``AgentAdapter.render_mcp`` takes it)."""


def mcp_config(rendered: Sequence[tuple[McpServer, Any]]) -> str:
    """``--mcp-config`` JSON: ``{"mcpServers": {name: {type: stdio|http|sse, ...}}}`` from
    ``AgentAdapter.render_mcp`` output. A name given twice is refused with ``InvalidConfiguration``."""
    config: dict[str, Any] = {}
    for server, entry in rendered:
        if server.name in config:
            raise InvalidConfiguration(f"MCP server name {server.name!r} is given twice")
        config[server.name] = entry
    return json.dumps({"mcpServers": config}, separators=(",", ":"))


def launch_argv(
    executable: str,
    options: SessionOptions,
    *,
    session_id: str,
    no_tools: bool = False,
    persist: bool = True,
    mcp: Sequence[tuple[McpServer, Any]] | None = None,
) -> list[str]:
    """The command line for a session.

    New: ``--session-id <session_id>``; resume: ``--resume T``; fork: ``--resume T --fork-session
    --session-id <session_id>`` (+ ``--resume-session-at <fork_at>``, an assistant line uuid). Then
    ``--mcp-config`` (from ``mcp``, the servers of ``options.mcp_servers`` as ``AgentAdapter.render_mcp`` rendered
    them with :data:`MCP_RENDERERS`), ``--permission-mode``/``--model``/``--effort`` from ``options.configure``,
    ``--tools ""``
    for ``no_tools``, ``--no-session-persistence`` unless ``persist``. Raises ``InvalidConfiguration`` for values
    the CLI would refuse.
    """
    argv = [executable, *BASE_FLAGS]
    if options.resume and options.fork:
        raise InvalidConfiguration("resume and fork are exclusive")
    if options.fork_at and not options.fork:
        raise InvalidConfiguration("fork_at needs fork")
    if options.resume:
        argv += ["--resume", options.resume]
    elif options.fork:
        argv += ["--resume", options.fork, "--fork-session", "--session-id", session_id]
        if options.fork_at:
            argv += ["--resume-session-at", options.fork_at]
    else:
        argv += ["--session-id", session_id]
    if options.mcp_servers and mcp is None:
        raise InvalidConfiguration("MCP servers must be rendered through the adapter (AgentAdapter.render_mcp)")
    if mcp:
        argv += ["--mcp-config", mcp_config(mcp)]
    configure = dict(options.configure)
    mode = configure.pop("mode", None)
    if mode is not None:
        if mode not in {m[0] for m in PERMISSION_MODES}:
            raise InvalidConfiguration(f"unknown permission mode {mode!r}")
        argv += ["--permission-mode", str(mode)]
    model = configure.pop("model", None)
    if model is not None:
        if not isinstance(model, str) or not model:
            raise InvalidConfiguration("model must be a non-empty string")
        argv += ["--model", model]
    effort = configure.pop("effort", None)
    if effort is not None:
        if effort not in EFFORT_LEVELS:
            raise InvalidConfiguration(f"unknown effort {effort!r}; one of {', '.join(EFFORT_LEVELS)}")
        argv += ["--effort", str(effort)]
    if configure:
        raise InvalidConfiguration(f"unknown option {next(iter(configure))!r}")
    if no_tools:
        argv += ["--tools", ""]
    if not persist:
        argv.append("--no-session-persistence")
    return argv


def launch_env(installation: AgentInstallation) -> dict[str, str]:
    """``spawn_env`` (our environment, the executable's directory first on PATH) plus :data:`HEADLESS_ENV`
    where the caller did not set those variables."""
    env = spawn_env(installation)
    for key, value in HEADLESS_ENV.items():
        env.setdefault(key, value)
    return env


# ------------------------------------------------------------------------------------------------ details


def auth_status(account: object, executable: str) -> AuthStatus:
    """``AuthStatus`` from the ``initialize`` response's ``account``.

    Cloud providers (``apiProvider`` bedrock/vertex/foundry) → CloudProvider; an API key (``apiKeySource`` other
    than ``none``) → ApiKey; a claude.ai login (``tokenSource`` with an email or subscription) → Subscription
    with the email and plan; another token source → ``Other(<source>)``; nothing → Unauthenticated with the
    login methods.
    """
    account = account if isinstance(account, dict) else {}
    provider = str(account.get("apiProvider") or "firstParty")
    key_source = account.get("apiKeySource")
    token_source = account.get("tokenSource")
    info = None
    if account.get("email") or account.get("subscriptionType"):
        info = AccountInfo(email=account.get("email"), plan=account.get("subscriptionType"))
    if provider in ("bedrock", "vertex", "foundry"):
        return Authenticated(kind="CloudProvider", account=info)
    if key_source and key_source != "none":
        return Authenticated(kind="ApiKey", account=info)
    if token_source and token_source != "none":
        if info is not None or token_source == "claude.ai":
            return Authenticated(kind="Subscription", account=info)
        return Authenticated(kind=OtherAuth(value=str(token_source)), account=info)
    return Unauthenticated(login=login_methods(executable))


def is_authenticated(status: object) -> bool:
    return isinstance(status, Authenticated)


def config_options(init: dict[str, Any], current: dict[str, Any]) -> list[ConfigOption]:
    """The session's options: ``mode`` (live), ``model`` (live; choices from ``initialize.models``, plus the
    current value when it is not one of them), ``effort`` (creation-only)."""
    modes = [ConfigChoice(value=v, label=label, description=d) for v, label, d in PERMISSION_MODES]
    models = []
    for m in init.get("models") or []:
        if isinstance(m, dict) and isinstance(m.get("value"), str):
            models.append(
                ConfigChoice(
                    value=m["value"], label=str(m.get("displayName") or m["value"]), description=m.get("description")
                )
            )
    if not any(c.value == "default" for c in models):
        models.insert(0, ConfigChoice(value="default", label="Default"))
    model = current.get("model", "default")
    if isinstance(model, str) and not any(c.value == model for c in models):
        models.append(ConfigChoice(value=model, label=model))
    efforts = [ConfigChoice(value=e, label=e.capitalize()) for e in EFFORT_LEVELS]
    return [
        ConfigOption(
            id="mode",
            name="Permission mode",
            category="mode",
            kind=Select(choices=modes),
            current=current.get("mode", "default"),
            live=True,
        ),
        ConfigOption(id="model", name="Model", category="model", kind=Select(choices=models), current=model, live=True),
        ConfigOption(
            id="effort",
            name="Effort",
            category="thought_level",
            kind=Select(choices=efforts),
            current=current.get("effort"),
            live=False,
        ),
    ]


def slash_commands(init: dict[str, Any]) -> list[SlashCommand]:
    """``initialize.commands`` → slash commands (``argumentHint`` becomes ``input_hint``)."""
    commands = []
    for c in init.get("commands") or []:
        if isinstance(c, dict) and isinstance(c.get("name"), str):
            commands.append(
                SlashCommand(
                    name=c["name"],
                    description=str(c.get("description") or ""),
                    input_hint=c.get("argumentHint") or None,
                )
            )
    return commands


def agent_details(
    init: dict[str, Any],
    *,
    version: str | None,
    executable: str,
    current: dict[str, Any],
    mcp_transports: Sequence[str] = MCP_TRANSPORTS,
) -> AgentDetails:
    """``AgentDetails`` from an ``initialize`` response; ``mcp_transports``: the forwardable transports that have an
    installed plugin (``AgentAdapter.effective_mcp_transports(MCP_TRANSPORTS)``)."""
    return AgentDetails(
        version=version,
        auth=auth_status(init.get("account"), executable),
        capabilities=Capabilities(features=list(CAPABILITIES), mcp_transports=list(mcp_transports)),
        config_options=config_options(init, current),
        commands=slash_commands(init),
    )
