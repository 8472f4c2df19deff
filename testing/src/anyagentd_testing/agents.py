"""Finding the pinned real agent CLIs, and the environment/flags that point them at a scripted model server.

The CLIs are pinned in ``tests/agents/package.json`` (install with ``npm install`` there); their binaries land in
``tests/agents/node_modules/.bin``. :func:`agent_bin` finds one; ``ANYAGENTD_TEST_AGENTS_DIR`` overrides
the directory. :func:`claude_env`, :func:`codex_args` and :func:`codex_env` give what
``docs/testing.md#offline-environment`` found necessary to run Claude Code and Codex offline
against :class:`~anyagentd_testing.model_server.ModelServer`; :func:`clean_environ` builds a child
environment from the current one without the variables that would send an agent elsewhere, and
:func:`set_environ` makes a test's ``os.environ`` exactly such an environment (what an adapter passes through to
the agent it starts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

AGENTS_DIR_ENV = "ANYAGENTD_TEST_AGENTS_DIR"
"""Environment variable naming the directory that holds the agent binaries (``claude``, ``codex``, ...)."""

AGENTS_PACKAGE_DIR = Path("tests") / "agents"
"""Where, relative to the repository root, the pinned CLIs' ``package.json`` lives."""

CLAUDE_API_KEY = "sk-ant-mock"
CODEX_API_KEY_ENV = "MOCK_API_KEY"
CODEX_API_KEY = "sk-mock"
CODEX_PROVIDER = "mock"
CODEX_MODEL = "gpt-5.5"
"""A model slug Codex 0.171 has metadata for (an unknown slug drops the ``apply_patch`` tool)."""

# Variables that would point an agent at another endpoint or account, or change how it runs, when
# inherited from the environment the tests run in (e.g. tests launched from inside Claude Code).
_FOREIGN_PREFIXES = ("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_AGENT_SDK", "OPENAI_", "CODEX_", "AZURE_OPENAI", "OPENCODE_")
_FOREIGN_NAMES = {"CLAUDECODE", "CLAUDE_CONFIG_DIR", "AWS_BEARER_TOKEN_BEDROCK", "MOCK_API_KEY"}

_QUIET = {"DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}


class AgentNotInstalledError(FileNotFoundError):
    """A pinned agent CLI is not where the tests look for it (the message says how to install it)."""


def agents_dir(start: str | Path | None = None) -> Path:
    """The directory holding the agent binaries.

    ``$ANYAGENTD_TEST_AGENTS_DIR`` if set; otherwise ``<repo>/tests/agents/node_modules/.bin``, where
    ``<repo>`` is the first ancestor of ``start`` (a file or directory; default: the current directory),
    then of this module's file, that contains ``tests/agents``. The directory may not exist yet.
    """
    override = os.environ.get(AGENTS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    origins = [Path(start) if start is not None else Path.cwd(), Path(__file__)]
    for origin in origins:
        origin = origin.resolve()
        for folder in (origin, *origin.parents):
            if (folder / AGENTS_PACKAGE_DIR / "package.json").is_file():
                return folder / AGENTS_PACKAGE_DIR / "node_modules" / ".bin"
    return Path.cwd() / AGENTS_PACKAGE_DIR / "node_modules" / ".bin"


def agent_bin(name: str, start: str | Path | None = None) -> Path:
    """The path of the pinned agent CLI ``name`` (``claude``, ``codex``, ``codex-acp``, ``claude-agent-acp``).

    ``start`` is where to begin looking for the repository (see :func:`agents_dir`). Raises
    :class:`AgentNotInstalledError`, whose message says how to install the CLIs, when it is missing.
    """
    folder = agents_dir(start)
    path = folder / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        how = (
            f"${AGENTS_DIR_ENV} is {os.environ[AGENTS_DIR_ENV]!r}; unset it to use the CLIs pinned in "
            f"{AGENTS_PACKAGE_DIR}/package.json (installed with `npm install` there)"
            if os.environ.get(AGENTS_DIR_ENV)
            else f"install the pinned CLIs with `npm install --prefix {folder.parent.parent}` "
            f"or set ${AGENTS_DIR_ENV} to a directory holding them"
        )
        raise AgentNotInstalledError(f"agent CLI {name!r} not found at {path}: {how}")
    return path


def codex_resources_dir(start: str | Path | None = None) -> Path | None:
    """The pinned Codex package's ``codex-resources`` directory, which holds its bundled ``bwrap``, or ``None``.

    codex-acp ships no ``bwrap``: with ``sandbox_mode=workspace-write`` every command fails ("bubblewrap is
    unavailable") unless a ``bwrap`` is on ``PATH`` (``docs/agents/acp.md#codex-acp-and-bwrap``). Prepend this directory to the
    agent's ``PATH`` to fix that. ``start`` is as for :func:`agents_dir`.
    """
    node_modules = agents_dir(start).parent
    for candidate in sorted(node_modules.glob("@openai/codex-*/vendor/*/codex-resources")):
        if (candidate / "bwrap").is_file():
            return candidate
    return None


def claude_env(server_url: str, home: str | Path | None = None, *, api_key: str = CLAUDE_API_KEY) -> dict[str, str]:
    """The variables that make Claude Code (and claude-agent-acp) use the model server at ``server_url``.

    ``server_url`` is the server's base URL without ``/v1`` (``ModelServer.url``). ``home``, if given,
    becomes ``HOME`` (use a fresh temporary directory per run: Claude writes ``~/.claude.json`` and
    ``~/.claude/projects``). Non-essential traffic, the updater, telemetry and error reporting are off,
    API retries are 0 (a scripted 5xx fails at once), and ``IS_SANDBOX=1`` lets
    ``bypassPermissions`` run as root. Returns only these variables: merge them with
    :func:`clean_environ`.
    """
    env = {
        "ANTHROPIC_BASE_URL": server_url.rstrip("/"),
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "IS_SANDBOX": "1",
        **_QUIET,
    }
    if home is not None:
        env["HOME"] = str(home)
    return env


def codex_args(server_url: str, *, model: str = CODEX_MODEL) -> list[str]:
    """The ``-c`` flags that make Codex (``exec``, ``app-server``, ``codex-acp``) use the model server.

    ``server_url`` is the server's base URL without ``/v1`` (``ModelServer.url``); the flags define a
    custom Responses provider at ``<server_url>/v1`` with no retries, select ``model``, and turn off
    analytics, feedback, update checks and plugins (the last one stops lookups of chatgpt.com and
    github.com). Put them after the subcommand: ``codex exec [*codex_args(url)] ...``.
    """
    provider = f"model_providers.{CODEX_PROVIDER}"
    settings = [
        f"model_provider={CODEX_PROVIDER}",
        f"model={model}",
        f"{provider}.name={CODEX_PROVIDER}",
        f"{provider}.base_url={server_url.rstrip('/')}/v1",
        f"{provider}.env_key={CODEX_API_KEY_ENV}",
        f"{provider}.wire_api=responses",
        f"{provider}.request_max_retries=0",
        f"{provider}.stream_max_retries=0",
        "analytics.enabled=false",
        "feedback.enabled=false",
        "check_for_update_on_startup=false",
        "features.plugins=false",
    ]
    return [part for setting in settings for part in ("-c", setting)]


def codex_env(home: str | Path | None = None, *, api_key: str = CODEX_API_KEY) -> dict[str, str]:
    """The variables Codex needs with :func:`codex_args`: the provider's API key, telemetry off, and
    ``HOME`` if ``home`` is given (Codex writes ``~/.codex``; use a fresh directory per run).

    Returns only these variables: merge them with :func:`clean_environ`.
    """
    env = {CODEX_API_KEY_ENV: api_key, **_QUIET}
    if home is not None:
        env["HOME"] = str(home)
    return env


OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"
"""The model opencode is pointed at (its Anthropic provider, whose base URL becomes the model server's)."""


def opencode_env(server_url: str, home: str | Path | None = None, *, api_key: str = CLAUDE_API_KEY) -> dict[str, str]:
    """The variables that make opencode (``opencode serve``) use the model server at ``server_url``: its Anthropic
    provider pointed at ``<server_url>/v1`` with ``api_key`` and :data:`OPENCODE_MODEL` selected, in
    ``OPENCODE_CONFIG_CONTENT``; updates, sharing and the models.dev fetch off; ``HOME`` if given (opencode keeps
    its sessions under it). Returns only these variables: merge them with :func:`clean_environ`."""
    import json

    config = {
        "provider": {"anthropic": {"options": {"baseURL": server_url.rstrip("/") + "/v1", "apiKey": api_key}}},
        "model": OPENCODE_MODEL,
        "autoupdate": False,
        "share": "disabled",
    }
    env = {
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        **_QUIET,
    }
    if home is not None:
        env["HOME"] = str(home)
    return env


def clean_environ(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child-process environment: ``base`` (default ``os.environ``) without the variables that would point an
    agent at another endpoint or account (``ANTHROPIC_*``, ``CLAUDE_CODE_*``, ``OPENAI_*``, ``CODEX_*``,
    ``CLAUDECODE`` ...), then ``extra`` on top.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith(_FOREIGN_PREFIXES) and k not in _FOREIGN_NAMES}
    env.update(extra or {})
    return env


def set_environ(monkeypatch: Any, env: Mapping[str, str]) -> None:
    """Make ``os.environ`` exactly ``env`` for the rest of the test, through ``monkeypatch`` (a
    ``pytest.MonkeyPatch``), which restores it at teardown: variables not in ``env`` are removed, the others set.
    E.g. ``set_environ(monkeypatch, clean_environ(claude_env(server.url, home)))``."""
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
