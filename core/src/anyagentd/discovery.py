"""Discovery: find the installed agent CLIs without launching them (``docs/discovery.md``).

:func:`discover` takes the catalog (:class:`~anyagentd.adapters.interface.AgentProfile` entries) and returns a
:class:`~anyagentd.model.DiscoveryReport`. It is synchronous, never starts an agent and never touches the network;
the only process it may start is the user's login shell, once per process, to learn the PATH that shell sets up.
Callers on an event loop run it in a worker thread, unless :func:`overridden` says the override names the executable
(discovery is one ``stat`` then).

Per profile the first hit wins, in this order (the ``source`` recorded on the installation):

1. ``EnvOverride``: ``ANYAGENTD_<ID>_BIN`` names the executable. Set but not an executable file → a Warning, and
   the scan goes on.
2. ``Path``: the directories of ``PATH``.
3. ``LoginShellPath``: the directories of the PATH a login shell reports (``$SHELL -lic 'echo MARKER$PATH'``), for
   those not already searched. Timeout :data:`LOGIN_SHELL_TIMEOUT`; cached per shell (:func:`clear_cache`);
   ``ANYAGENTD_NO_LOGIN_SHELL=1`` turns it off. A failure is an Info diagnostic, never an exception.
4. ``VersionManager``: volta, bun, pnpm, npm-global, nvm and fnm bin directories (newest Node version first).
5. ``KnownLocation``: ``/opt/homebrew/bin``, ``/usr/local/bin``, ``~/.local/bin``, then the profile's
   ``extra_paths``.

A directory is searched at most once per profile (in the first step that names it); every searched directory is
listed in the profile's ``MissingAgent.searched`` when nothing is found. "Executable" means a regular file
(symlinks followed) with the execute bit for us (``os.access(path, os.X_OK)``); the recorded path is absolute but
not resolved through symlinks, so a version manager's shim stays a shim.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from .adapters.profile import AgentProfile
from .model import AgentInstallation, Diagnostic, DiagnosticLevel, DiscoveryReport, InstallationSource, MissingAgent

__all__ = [
    "LOGIN_SHELL_MARKER",
    "LOGIN_SHELL_TIMEOUT",
    "NO_LOGIN_SHELL_ENV",
    "SYSTEM_KNOWN_DIRS",
    "LoginShellError",
    "clear_cache",
    "discover",
    "is_executable",
    "known_location_dirs",
    "login_shell_path",
    "no_adapter_message",
    "overridden",
    "parse_login_shell_output",
    "path_dirs",
    "uninstalled_adapters",
    "version_key",
    "version_manager_dirs",
]

LOGIN_SHELL_TIMEOUT: float = 5.0
"""Seconds the login shell gets to print its PATH (read at call time, so tests may patch it)."""

LOGIN_SHELL_MARKER = "__ANYAGENTD_PATH__="
"""Printed right before ``$PATH`` so the value can be told apart from whatever the rc files print."""

NO_LOGIN_SHELL_ENV = "ANYAGENTD_NO_LOGIN_SHELL"
"""Set to ``1`` (any value but empty or ``0``) to skip the login-shell step."""

SYSTEM_KNOWN_DIRS: tuple[str, ...] = ("/opt/homebrew/bin", "/usr/local/bin")
"""The fixed, home-independent KnownLocation directories, searched before ``~/.local/bin`` and ``extra_paths``."""

OnUnreadable = Callable[[str, OSError], None]
"""Called with a directory and the ``PermissionError`` met while reading it."""


# ------------------------------------------------------------------------------------------------ public entry


def discover(
    profiles: Iterable[AgentProfile],
    *,
    env: Mapping[str, str] | None = None,
    pinned: Iterable[AgentInstallation] = (),
    home: Path | None = None,
) -> DiscoveryReport:
    """Find each profile's executable; return what was found, what was not, and what could not be read.

    ``env`` is the environment to read (``PATH``, ``SHELL``, ``HOME``, the overrides, the version managers'
    variables); default ``os.environ``. ``pinned`` installations are listed first in ``agents`` exactly as given,
    and profiles with a pinned id are not searched. ``home`` is where ``~`` points; default ``$HOME`` from ``env``,
    else :meth:`Path.home`. Profiles with an id seen before (pinned or an earlier profile) are skipped.

    Diagnostics (each message at most once per report): Warning for an override that is not an executable file,
    Warning for a directory that exists but cannot be read, Info when the login shell's PATH could not be read.
    """
    env = os.environ if env is None else env
    if home is None:
        home = _home(env)
    scan = _Scan(env, home)
    report = DiscoveryReport(agents=list(pinned))
    seen_ids = {agent.id for agent in report.agents}
    for profile in profiles:
        if profile.id in seen_ids:
            continue
        seen_ids.add(profile.id)
        found = scan.find(profile)
        if isinstance(found, AgentInstallation):
            report.agents.append(found)
        else:
            report.missing.append(found)
    report.diagnostics = scan.diagnostics
    return report


def uninstalled_adapters(driven: Iterable[str]) -> list[Diagnostic]:
    """An Info diagnostic for each first-party agent (:mod:`anyagentd.catalog`) whose id no installed adapter
    drives: ``claude (Claude Code): adapter not installed — pip install anyagentd-claude``."""
    from .catalog import uninstalled_agents

    return [
        Diagnostic(level="Info", message=f"{agent_id} ({name}): adapter not installed — {hint}")
        for agent_id, name, hint in uninstalled_agents(set(driven))
    ]


def no_adapter_message(agent_id: str) -> str:
    """Why ``agent_id`` cannot be opened when no installed plugin drives it, with the install hint for a
    first-party agent."""
    from .catalog import agent_install_hint

    hint = agent_install_hint(agent_id)
    if hint is None:
        return f"no installed plugin drives an agent named {agent_id!r} (`anyagentd discover` lists the known ones)"
    return f"the adapter for {agent_id!r} is not installed; install it with: {hint}"


def clear_cache() -> None:
    """Forget the cached login-shell PATHs, so the next :func:`discover` asks the shell again."""
    with _login_shell_lock:
        _login_shell_cache.clear()


def overridden(profile: AgentProfile, env: Mapping[str, str]) -> bool:
    """Whether ``env``'s ``ANYAGENTD_<ID>_BIN`` names an executable file for ``profile``: :func:`discover` then stops at
    its first step (one ``stat``) and searches nothing, starts no login shell."""
    named = _override(profile, env, _home(env))
    return named is not None and is_executable(named[1])


def _home(env: Mapping[str, str]) -> Path:
    """``env``'s ``HOME``, else this user's home."""
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def _override(profile: AgentProfile, env: Mapping[str, str], home: Path) -> tuple[str, str] | None:
    """``ANYAGENTD_<ID>_BIN``'s value and the absolute path it names (``~`` expanded against ``home``); ``None`` when
    it is unset or empty. Whether that path is executable is the caller's question."""
    value = env.get(profile.env_override)
    if not value:
        return None
    return value, os.path.abspath(_expand_home(value, home))


def is_executable(path: str) -> bool:
    """Whether ``path`` is a regular file (following symlinks) that we may execute."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except (OSError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------ one scan


class _Scan:
    """The state of one :func:`discover` call: its environment, the directory lists of each step (computed once,
    the login shell only when a profile gets that far) and the diagnostics gathered so far."""

    def __init__(self, env: Mapping[str, str], home: Path) -> None:
        self.env = env
        self.home = home
        self.diagnostics: list[Diagnostic] = []
        self._path: list[str] | None = None
        self._login: list[str] | None = None
        self._managers: list[str] | None = None

    def find(self, profile: AgentProfile) -> AgentInstallation | MissingAgent:
        """The installation of ``profile`` (first hit in §3's order), or a MissingAgent naming every searched dir."""
        override = self._env_override(profile)
        if override is not None:
            return self._installation(profile, override, "EnvOverride")
        searched: list[str] = []
        for source, directory in self._candidates(profile):
            if directory in searched:
                continue
            searched.append(directory)
            hit = self._probe(directory, profile.executable)
            if hit is not None:
                return self._installation(profile, hit, source)
        return MissingAgent(id=profile.id, name=profile.name, searched=searched, install_hint=profile.install_hint)

    # steps ------------------------------------------------------------------------------------------------

    def _env_override(self, profile: AgentProfile) -> str | None:
        """Step 1: the executable ``ANYAGENTD_<ID>_BIN`` names; None if unset, empty or not executable (→ Warning)."""
        named = _override(profile, self.env, self.home)
        if named is None:
            return None
        value, path = named
        if is_executable(path):
            return path
        self._diagnose("Warning", f"{profile.env_override}={value!r} is not an executable file; ignoring it")
        return None

    def _candidates(self, profile: AgentProfile) -> Iterator[tuple[InstallationSource, str]]:
        """Steps 2–5 as (source, directory) pairs, lazily: the login shell runs only if a profile gets there."""
        if self._path is None:
            self._path = path_dirs(self.env, self.home)
        for directory in self._path:
            yield "Path", directory
        for directory in self._login_shell_dirs():
            yield "LoginShellPath", directory
        if self._managers is None:
            self._managers = version_manager_dirs(self.env, self.home, self._unreadable)
        for directory in self._managers:
            yield "VersionManager", directory
        for directory in known_location_dirs(profile, self.home):
            yield "KnownLocation", directory

    def _login_shell_dirs(self) -> list[str]:
        """Step 3's directories: the login shell's PATH (cached), or none when disabled or failed (→ Info)."""
        if self._login is None:
            self._login = []
            shell = self.env.get("SHELL")
            if shell and self.env.get(NO_LOGIN_SHELL_ENV, "") not in ("", "0"):
                shell = None
            if shell:
                dirs, error = _cached_login_shell_path(shell, self.env)
                if dirs is None:
                    self._diagnose("Info", f"could not read the login shell's PATH ({shell}): {error}")
                else:
                    self._login = [d for d in (_normalize(e, self.home) for e in dirs) if d is not None]
        return self._login

    # helpers ----------------------------------------------------------------------------------------------

    def _probe(self, directory: str, name: str) -> str | None:
        """``directory/name`` if it is executable; a directory we may not search → Warning."""
        candidate = os.path.join(directory, name)
        try:
            os.stat(candidate)
        except PermissionError as error:
            self._unreadable(directory, error)
            return None
        except (OSError, ValueError):
            return None
        return candidate if is_executable(candidate) else None

    def _installation(self, profile: AgentProfile, path: str, source: InstallationSource) -> AgentInstallation:
        acp_args = list(profile.acp_args) if profile.acp_args is not None else None
        return AgentInstallation(
            id=profile.id, name=profile.name, executable_path=path, source=source, acp_args=acp_args
        )

    def _unreadable(self, directory: str, error: OSError) -> None:
        self._diagnose("Warning", f"cannot read directory {directory}: {error.strerror or error}")

    def _diagnose(self, level: DiagnosticLevel, message: str) -> None:
        diagnostic = Diagnostic(level=level, message=message)
        if diagnostic not in self.diagnostics:
            self.diagnostics.append(diagnostic)


# ------------------------------------------------------------------------------------------------ directory lists


def path_dirs(env: Mapping[str, str], home: Path) -> list[str]:
    """Step 2: the directories of ``env["PATH"]``, normalized, in order, without duplicates.

    Empty and relative entries (which would mean "the current directory") are dropped; a leading ``~`` is
    expanded against ``home``.
    """
    dirs = (_normalize(entry, home) for entry in env.get("PATH", "").split(os.pathsep))
    return _unique(d for d in dirs if d is not None)


def version_manager_dirs(env: Mapping[str, str], home: Path, on_unreadable: OnUnreadable | None = None) -> list[str]:
    """Step 4: the bin directories of the Node version managers, in search order (missing ones included).

    volta (``$VOLTA_HOME/bin``, ``~/.volta/bin``), bun (``$BUN_INSTALL/bin``, ``~/.bun/bin``), pnpm
    (``$PNPM_HOME``, ``~/.local/share/pnpm``), npm-global (``$NPM_CONFIG_PREFIX/bin``, ``~/.npm-global/bin``),
    nvm (``$NVM_DIR`` or ``~/.nvm``, ``versions/node/*/bin``) and fnm (``$FNM_DIR``, ``~/.local/share/fnm``,
    ``node-versions/*/installation/bin``), each Node version manager newest version first. ``on_unreadable`` is
    told about a versions directory that exists but cannot be listed.
    """
    h = str(home)

    def under(var: str, *rest: str) -> list[str]:
        return [os.path.join(env[var], *rest)] if env.get(var) else []

    dirs = [
        *under("VOLTA_HOME", "bin"),
        os.path.join(h, ".volta", "bin"),
        *under("BUN_INSTALL", "bin"),
        os.path.join(h, ".bun", "bin"),
        *under("PNPM_HOME"),
        os.path.join(h, ".local", "share", "pnpm"),
        *under("NPM_CONFIG_PREFIX", "bin"),
        os.path.join(h, ".npm-global", "bin"),
    ]
    nvm_dir = env.get("NVM_DIR") or os.path.join(h, ".nvm")
    dirs += _node_versions(os.path.join(nvm_dir, "versions", "node"), "bin", on_unreadable)
    for fnm_dir in [*under("FNM_DIR"), os.path.join(h, ".local", "share", "fnm")]:
        dirs += _node_versions(
            os.path.join(fnm_dir, "node-versions"), os.path.join("installation", "bin"), on_unreadable
        )
    return _unique(d for d in (_normalize(d, home) for d in dirs) if d is not None)


def known_location_dirs(profile: AgentProfile, home: Path) -> list[str]:
    """Step 5: :data:`SYSTEM_KNOWN_DIRS`, ``~/.local/bin``, then ``profile.extra_paths`` (``~`` → ``home``)."""
    entries = [*SYSTEM_KNOWN_DIRS, os.path.join(str(home), ".local", "bin"), *profile.extra_paths]
    return _unique(d for d in (_normalize(e, home) for e in entries) if d is not None)


def version_key(name: str) -> tuple[int, ...] | None:
    """The numeric version in a directory name like ``v20.10.0`` → ``(20, 10, 0)``; None if it has none."""
    match = re.match(r"v?(\d+(?:\.\d+)*)", name)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _node_versions(versions_dir: str, bin_rel: str, on_unreadable: OnUnreadable | None) -> list[str]:
    """``versions_dir/<version>/<bin_rel>`` for each version subdirectory, newest first (numeric, not textual:
    v20.10 > v20.9 > v18 > v9); names without a version go last. Missing ``versions_dir`` → []."""
    try:
        with os.scandir(versions_dir) as entries:
            names = [entry.name for entry in entries if entry.is_dir()]
    except PermissionError as error:
        if on_unreadable is not None:
            on_unreadable(versions_dir, error)
        return []
    except OSError:
        return []
    versioned = sorted(
        (n for n in names if version_key(n) is not None), key=lambda n: version_key(n) or (), reverse=True
    )
    others = sorted(n for n in names if version_key(n) is None)
    return [os.path.join(versions_dir, name, bin_rel) for name in [*versioned, *others]]


# ------------------------------------------------------------------------------------------------ login shell


class LoginShellError(Exception):
    """The login shell did not report its PATH (timed out, could not start, or printed no marker)."""


_login_shell_cache: dict[str, tuple[tuple[str, ...], None] | tuple[None, str]] = {}
_login_shell_lock = threading.Lock()


def _cached_login_shell_path(shell: str, env: Mapping[str, str]) -> tuple[tuple[str, ...], None] | tuple[None, str]:
    """(PATH entries, None) or (None, why not), asking ``shell`` only the first time per process (per shell)."""
    with _login_shell_lock:
        if shell not in _login_shell_cache:
            try:
                _login_shell_cache[shell] = (tuple(login_shell_path(shell, env)), None)
            except LoginShellError as error:
                _login_shell_cache[shell] = (None, str(error))
        return _login_shell_cache[shell]


def login_shell_path(shell: str, env: Mapping[str, str], timeout: float | None = None) -> list[str]:
    """The PATH entries ``shell -lic 'echo MARKER$PATH'`` prints (uncached), raising :class:`LoginShellError`.

    The shell runs in its own session with stdin ``/dev/null`` and stderr discarded, in ``env``; after
    ``timeout`` seconds (default :data:`LOGIN_SHELL_TIMEOUT`) its whole process group is killed.
    """
    timeout = LOGIN_SHELL_TIMEOUT if timeout is None else timeout
    try:
        process = subprocess.Popen(
            [shell, "-lic", f"echo {LOGIN_SHELL_MARKER}$PATH"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as error:
        raise LoginShellError(f"cannot start it: {error.strerror or error}") from None
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise LoginShellError(f"timed out after {timeout:g} s") from None
    entries = parse_login_shell_output(output.decode(errors="surrogateescape"))
    if entries is None:
        raise LoginShellError(f"it printed no PATH (exit status {process.returncode})")
    return entries


def parse_login_shell_output(output: str) -> list[str] | None:
    """The PATH entries after the last :data:`LOGIN_SHELL_MARKER` in ``output``, or None if there is none.

    Lines without the marker are rc-file noise. fish prints a list variable as ``MARKER/a MARKER/b``; that form
    is understood too.
    """
    lines = [line for line in output.splitlines() if LOGIN_SHELL_MARKER in line]
    if not lines:
        return None
    parts = lines[-1].split(LOGIN_SHELL_MARKER)[1:]
    if len(parts) > 1:  # fish: one marker per list element, separated by spaces
        return [part.rstrip(" ") for part in parts if part.strip()]
    return [entry for entry in parts[0].rstrip("\r").split(os.pathsep) if entry]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the shell's process group (rc files may have started children holding our pipe), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    if process.stdout is not None:
        process.stdout.close()
    process.wait()


# ------------------------------------------------------------------------------------------------ small helpers


def _expand_home(entry: str, home: Path) -> str:
    """``~`` or ``~/x`` against ``home``; anything else unchanged."""
    if entry == "~" or entry.startswith("~/"):
        return str(home) + entry[1:]
    return entry


def _normalize(entry: str, home: Path) -> str | None:
    """An absolute, normalized directory (``~`` expanded, symlinks kept), or None for empty/relative entries."""
    entry = _expand_home(entry, home)
    return os.path.normpath(entry) if os.path.isabs(entry) else None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
