"""What a configuration needs of this machine before it can be served: ``preflight(loaded, plugins)``.

:func:`.config.parse` checks a configuration on its own (types, keys, secrets, TLS files, the listener's rules);
:func:`preflight` checks it against the machine it is to run on, and is run by both ``anyagentd a2a --check-config``
and the start, before anything is bound or opened, so "the check says ok" means "the start gets past its
configuration" (issue 26). It takes the :class:`~.config.Loaded` configuration (``--listen`` applied) and the
process's :class:`~anyagentd.plugins.Plugins`, and returns :class:`Findings`: errors (the daemon would refuse to
start, or would serve something that cannot work) and warnings (served, but something said is idle), each naming
its configuration key with one line for a person.

Pure apart from what it names: it stats files and directories (``agent.dir``, an ACP agent's ``path``, a SQLite
store's directory), looks executables up on ``PATH`` — the configured agents' CLIs through
:func:`anyagentd.discovery.discover`, whose only process is the user's login shell, once, for the PATH it sets up —
and reads the plugin registry's declarations — adapters' catalog profiles and pinned installations, MCP transport
tags, op names and floors (``Plugins.ops()`` loads the op families, which import only their own modules). It opens
no database, imports no adapter's implementation (lazy adapters stay stand-ins) and none of the a2a-sdk server.

Errors:

- ``a2a.store``: a SQLite store whose directory does not exist (SQLite creates the file, never its directory;
  :func:`.config.missing_sqlite_directory`, the rule of ``store.check_sqlite_directory``), whose file is a
  directory (or another non-regular file), cannot be read, or is neither empty nor a SQLite database (its first
  16 bytes are not ``SQLite format 3\\0``);
- ``a2a.url``: ``a2a.listen`` on an unspecified address (``0.0.0.0``, ``::``) without ``a2a.url``: the card would
  advertise an address no client can use, and the Host gate would answer every remote client 421;
- ``agent.name`` (of the ``[agent]`` shorthand; ``agents.N.name`` of each ``[[agents]]`` entry, and so for every
  agent key below): no installed adapter drives that catalog id (:func:`anyagentd.discovery.no_adapter_message`,
  with the distribution to install for a first-party agent); for ``{acp = …}``, no ACP adapter installed, or
  (``agent.name.acp.path``) a path that is not an executable file (a bare name: not found on ``PATH``);
- ``agent.dir``: does not exist, or is not a directory;
- ``agent.mock_script`` (``--mock`` when given, which wins over every agent's): a script the scripted agent
  ``mock`` cannot load — neither a file nor a shipped example's name, not a valid script
  (:func:`anyagentd.mock.script.load_script`, what the mock adapter runs when the runtime is made: the start fails
  on it whatever ``agent.name`` says);
- ``subagents.enabled``: no MCP transport plugin for ``Http`` installed (the subagent tools reach the agent as an
  ``Http`` MCP server; without the plugin the agent is opened without them and answers "No such tool
  available"); ``subagents.instances.N.name``: a child instance named like an installed agent;
- ``workflows.W.steps.S.agent``: a step's agent that is not installed (for a ``subagent`` step: nor a child
  instance), or that ``subagents.agents`` does not allow to be spawned; ``workflows.W.steps.S.kind``: a
  ``subagent`` step with ``[subagents]`` not enabled (it could only fail);
- ``workflows.W.command``: a command named like an installed op (the op runs, never the workflow).

Warnings: ``a2a.store``, an in-memory SQLite database (``sqlite+aiosqlite:///:memory:``): served, and a restart
forgets every task, conversation and run; ``agent.name`` and ``workflows.W.steps.S.agent``, a catalog agent whose
adapter is installed but whose CLI is not found on this machine (with its install hint): the daemon serves, and
every message to that agent fails until the CLI is installed; ``a2a.principals.N.grants.M``, a grant pattern that
matches no installed op, only ops no grant reaches (operator-floor and reserved ops), or — ``workflow.run:<glob>``
— no configured workflow; ``a2a.principals.N.agents.M``, an ``agents`` pattern that matches no configured agent id.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    Loaded,
    Unreadable,
    missing_sqlite_directory,
    read_regular,
    split_host_port,
    sqlite_file,
)

if TYPE_CHECKING:
    from anyagentd.plugins import Plugins


@dataclass(frozen=True)
class Finding:
    """One problem: ``key`` (the dotted configuration key) and ``message`` (one line, no secret)."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass
class Findings:
    """What :func:`preflight` found: ``errors`` (the configuration cannot be served) and ``warnings`` (it can,
    with something in it idle), each in the order the checks ran."""

    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    def error(self, key: str, message: str) -> None:
        self.errors.append(Finding(key, message))

    def warn(self, key: str, message: str) -> None:
        self.warnings.append(Finding(key, message))


def installed_agents(plugins: Plugins) -> set[str]:
    """The agent names the installed adapters drive: every catalog profile's id and every pinned installation's
    (the scripted ``mock``). Only adapter classes that pin installations are instantiated to ask (a lazy adapter
    never pins, so no adapter implementation is imported)."""
    from anyagentd.adapters.interface import AgentAdapter

    known = {profile.id for profile, _ in plugins.profiles()}
    for adapter in plugins.adapters().values():
        if adapter.pinned_installations is not AgentAdapter.pinned_installations:
            known |= {i.id for i in adapter(None).pinned_installations()}
    return known


def preflight(loaded: Loaded, plugins: Plugins, *, mock_script: str | None = None) -> Findings:
    """Check ``loaded`` against this machine and ``plugins``' registry (see the module's docstring for every rule
    and the key each names); ``mock_script``: the ``--mock`` the start is given (checked instead of
    ``agent.mock_script``). Raises what the registry raises for a broken plugin set
    (``anyagentd.errors.InvalidConfiguration``: two plugins registering one op or catalog id)."""
    found = Findings()
    config = loaded.config
    _listener(loaded, found)
    if config.a2a.store is not None:
        _store(config.a2a.store, found)
    known = installed_agents(plugins)
    acp = any(getattr(a, "acp_ref", False) for a in plugins.adapters().values())
    catalog: dict[str, str] = {}  # the catalog agents named, each with the first key naming it
    entries = config.entries()
    for key, entry in entries:
        _agent(entry.name, f"{key}.name", known, acp, found, catalog=catalog)
        _directory(entry.dir, f"{key}.dir", found)
    if mock_script is not None:  # --mock is every agent's script: checked once
        _mock_script("--mock", mock_script, plugins, found)
    else:
        for key, entry in entries:
            _mock_script(f"{key}.mock_script", entry.mock_script, plugins, found)
    _subagents(loaded, plugins, known, found)
    workflows = _workflows(loaded, plugins, known, acp, found, catalog)
    _engine(loaded, known, found)
    _grants(loaded, plugins, workflows, found)
    _principal_agents(loaded, found)
    _installed(catalog, plugins, found)
    return found


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (https://sqlite.org/fileformat.html#the_database_header)."""


def _store(url: str, found: Findings) -> None:
    """``a2a.store``: a SQLite file the start cannot open — its directory missing, the path a directory (or
    anything but a regular file), an existing file that cannot be read or is neither empty nor a SQLite database
    (its first 16 bytes are not :data:`SQLITE_HEADER`) — is an error; an in-memory SQLite database is a warning
    (the daemon serves from it, and a restart forgets every task and conversation)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    shown = url if parsed.password is None else parsed.render_as_string(hide_password=True)  # as written, no secret
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        found.warn(
            "a2a.store",
            f"{shown} is an in-memory database: nothing survives a restart (tasks, "
            "conversations, push configs, workflow runs, device sessions)",
        )
        return
    directory = missing_sqlite_directory(url)
    if directory is not None:
        found.error("a2a.store", f"cannot open the task store {shown}: the directory {directory} does not exist")
        return
    database = sqlite_file(url)
    if database is None or not database.exists():
        return  # another database, or a file SQLite creates
    try:
        header = read_regular(database, len(SQLITE_HEADER), head=True)
    except Unreadable as err:
        found.error("a2a.store", f"cannot open the task store {shown}: {database} {err}")
        return
    if header and header != SQLITE_HEADER:  # an empty file is one SQLite makes a database of
        found.error(
            "a2a.store",
            f"cannot open the task store {shown}: {database} is not a SQLite database (its "
            "first 16 bytes are not 'SQLite format 3\\0')",
        )


def _listener(loaded: Loaded, found: Findings) -> None:
    a2a = loaded.config.a2a
    host, _ = split_host_port(a2a.listen)
    try:
        unspecified = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        unspecified = False
    if unspecified and a2a.url is None:
        found.error(
            "a2a.url",
            f"a2a.listen {a2a.listen} binds every address, so the card has no address "
            "clients can reach (and the Host gate answers them 421): set a2a.url to the URL "
            "they use",
        )


def _agent(
    name: Any,
    key: str,
    known: set[str],
    acp: bool,
    found: Findings,
    *,
    also: frozenset[str] | set[str] = frozenset(),
    catalog: dict[str, str] | None = None,
) -> None:
    """``name`` (a catalog id, ``{"acp": AcpAgent}`` from the config or an ``AcpRef`` from a workflow step) must be
    openable here: an installed adapter's id (or one of ``also``), or an ACP agent with the ACP adapter installed
    and an executable ``path``. A catalog id that an adapter drives is added to ``catalog`` (id → ``key``, the
    first key naming it) for :func:`_installed`."""
    from anyagentd.discovery import no_adapter_message

    if isinstance(name, str):
        if name not in known and name not in also:
            found.error(key, no_adapter_message(name))
        elif name in known and catalog is not None:
            catalog.setdefault(name, key)
        return
    spec = name["acp"] if isinstance(name, dict) else name.acp
    if not acp:
        from anyagentd.catalog import AGENT_DISTRIBUTIONS, install_hint

        dist = next(d for _, d in AGENT_DISTRIBUTIONS.values() if d.name == "anyagentd-acp")
        found.error(
            key,
            "an ACP agent opened by path needs the ACP adapter, which is not installed; install it "
            f"with: {install_hint(dist)}",
        )
        return
    _executable(spec.path, f"{key}.acp.path", found)


def _installed(catalog: dict[str, str], plugins: Plugins, found: Findings) -> None:
    """Warn, at its key, of each agent of ``catalog`` whose CLI discovery does not find (pinned installations, the
    scripted ``mock``, are not searched: they need no CLI). One :func:`anyagentd.discovery.discover` for them all."""
    profiles = [profile for profile, _ in plugins.profiles() if profile.id in catalog]
    if not profiles:
        return
    from anyagentd.discovery import discover

    for missing in discover(profiles).missing:
        hint = f"; install it with: {missing.install_hint}" if missing.install_hint else ""
        found.warn(
            catalog[missing.id],
            f"{missing.id!r} was not found on this machine{hint}: every message to it "
            "fails until it is installed (on the PATH of the daemon's user)",
        )


def _executable(path: str, key: str, found: Findings) -> None:
    from anyagentd.discovery import is_executable

    if os.sep not in path:  # a bare name: the agent is started through PATH
        if shutil.which(path) is None:
            found.error(key, f"{path!r} is not found on PATH")
        return
    full = Path(path).expanduser()
    if not full.exists():
        found.error(key, f"{full} does not exist")
    elif not is_executable(str(full)):
        found.error(key, f"{full} is not an executable file")


def _directory(value: str, key: str, found: Findings) -> None:
    """An agent's ``dir`` (``key``: ``agent.dir``, ``agents.N.dir``) must be a directory that exists."""
    path = Path(value).expanduser()
    if not path.exists():
        found.error(key, f"{path} does not exist (every conversation's session runs there)")
    elif not path.is_dir():
        found.error(key, f"{path} is not a directory")


def _mock_script(key: str, source: str | None, plugins: Plugins, found: Findings) -> None:
    """The script the ``mock`` adapter would load at start (``source``: ``--mock``, which wins over every agent's
    ``mock_script``, or one agent's; ``key`` names it), loaded by the adapter's own function; nothing when it names
    none or the mock adapter is not installed."""
    if source is None or "mock" not in plugins.adapters():
        return
    from anyagentd.errors import AnyagentError
    from anyagentd.mock.script import load_script

    try:
        load_script(source)
    except AnyagentError as err:
        found.error(key, err.message)
    except OSError as err:
        found.error(key, f"cannot read the script {source!r}: {err.strerror or err}")
    except UnicodeDecodeError as err:
        found.error(key, f"the script {source!r} is not UTF-8: byte offset {err.start}: {err.reason}")


def _subagents(loaded: Loaded, plugins: Plugins, known: set[str], found: Findings) -> None:
    section = loaded.config.subagents
    if section.enabled and "Http" not in plugins.mcp_transports():
        from anyagentd.mcp.forwarding import install_hint

        found.error(
            "subagents.enabled",
            "the subagent tools reach the agent as an Http MCP server, and no MCP "
            f"transport plugin for Http is installed: {install_hint('Http')}",
        )
    for n, child in enumerate(section.instances):
        if child.name in known:  # a spawn by that name would reach the child, never the local agent
            found.error(
                f"subagents.instances.{n}.name",
                f"{child.name!r} is an installed agent here; a child instance needs another name",
            )


def _workflows(
    loaded: Loaded, plugins: Plugins, known: set[str], acp: bool, found: Findings, catalog: dict[str, str] | None = None
) -> list[str]:
    """Check every workflow's steps and command; returns the workflow names."""
    config = loaded.config
    if not config.workflows:
        return []
    from .workflows.definition import load_workflows

    workflows = load_workflows(config.workflows)  # validated by parse: this only builds the models again
    section = config.subagents
    children = {c.name for c in section.instances}
    ops = plugins.op_origins()
    for workflow in workflows.values():
        base = f"workflows.{workflow.name}"
        if workflow.command is not None and workflow.command in ops:
            found.error(
                f"{base}.command",
                f"{workflow.command!r} is the op of plugin {ops[workflow.command]!r}: "
                f'{{"agentd": {{"op": "{workflow.command}"}}}} runs that op, never this '
                "workflow; name the command otherwise",
            )
        for step_id, step in workflow.steps.items():
            where = f"{base}.steps.{step_id}"
            if step.kind == "agent" and step.agent is not None:
                _agent(step.agent, f"{where}.agent", known, acp, found, catalog=catalog)
            elif step.kind == "subagent":
                if not section.enabled:
                    found.error(f"{where}.kind", "a subagent step needs [subagents] enabled = true (else it fails)")
                _agent(step.agent, f"{where}.agent", known, acp, found, also=children, catalog=catalog)
                name = step.agent if isinstance(step.agent, str) else step.agent.acp.name  # type: ignore[union-attr]
                if section.enabled and not any(fnmatchcase(name, p) for p in section.agents):
                    found.error(
                        f"{where}.agent",
                        f"{name!r} may not be spawned here: subagents.agents is {list(section.agents)}",
                    )
    return list(workflows)


def _engine(loaded: Loaded, known: set[str], found: Findings) -> None:
    """``[workflow_engine]``: its ``kind`` an installed engine (:mod:`.workflows.engines`), its ``hosts`` agents
    this machine drives (one it cannot would leave that agent's steps to other daemons, said as a warning), and
    no key of another kind's (``address`` and the rest are the Temporal engine's: ignored by ``local``)."""
    from .workflows.engines import UnknownEngine, engine_class

    section = loaded.config.workflow_engine
    try:
        engine_class(section.kind)
    except UnknownEngine as err:
        found.error("workflow_engine.kind", str(err))
        return
    if section.kind == "local":
        for key in sorted(section.model_fields_set - {"kind"}):
            found.warn(f"workflow_engine.{key}", 'only kind = "temporal" reads it: the local engine ignores it')
        return
    for host in section.hosts or ():
        if host not in known:
            found.warn(
                "workflow_engine.hosts",
                f"{host!r} is no agent this machine drives (installed: {', '.join(sorted(known))}): this daemon "
                "runs none of its steps",
            )


def _grants(loaded: Loaded, plugins: Plugins, workflows: list[str], found: Findings) -> None:
    """A grant pattern that admits nothing is a warning: the principal is served, the grant is idle."""
    from anyagentd.ops.registry import grant_matches

    principals = loaded.config.a2a.principals
    if not any(p.grants for p in principals):
        return
    ops = plugins.ops()
    for n, principal in enumerate(principals):
        for m, grant in enumerate(principal.grants):
            key = f"a2a.principals.{n}.grants.{m}"
            pattern, _, target = grant.partition(":")
            matched = [op for name, op in ops.items() if grant_matches(pattern, name)]
            reachable = [op for op in matched if not op.reserved and op.floor != "operator"]
            if not matched:
                found.warn(key, f"{grant!r} matches no installed op (`anyagentd plugins` lists them)")
            elif not reachable:
                found.warn(
                    key,
                    f"{grant!r} matches only operator ops ({', '.join(op.name for op in matched)}), "
                    "which no grant reaches",
                )
            elif (
                target
                and any(op.name == "workflow.run" for op in reachable)
                and not any(fnmatchcase(w, target) for w in workflows)
            ):
                among = f"workflows: {', '.join(workflows)}" if workflows else "no [[workflows]] are configured"
                found.warn(key, f"{grant!r} matches no configured workflow ({among})")


def _principal_agents(loaded: Loaded, found: Findings) -> None:
    """A principal's ``agents`` pattern that matches no configured agent id is a warning: the principal is served,
    the pattern reaches nothing (``a2a.principals.N.agents.M``)."""
    from .agentspec import entry_ids

    ids = [agent_id for _, agent_id, _ in entry_ids(loaded.config)]
    for n, principal in enumerate(loaded.config.a2a.principals):
        for m, pattern in enumerate(principal.agents):
            if not any(fnmatchcase(agent_id, pattern) for agent_id in ids):
                found.warn(
                    f"a2a.principals.{n}.agents.{m}",
                    f"{pattern!r} matches no configured agent (agents: {', '.join(ids)})",
                )
