"""Discovery (``docs/discovery.md#search-order``): real files in temporary directories, a real (fake) login shell.

Every test builds its own environment mapping and home directory, so nothing of the machine running the tests
leaks in except the fixed KnownLocation directories, which the tests point at temporary directories too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from anyagentd import discovery
from anyagentd.adapters.interface import AgentProfile
from anyagentd.discovery import discover, parse_login_shell_output, version_key
from anyagentd.model import AgentInstallation

SCHEMA_PATH = Path(discovery.__file__).parent / "schema" / "anyagent-wire.schema.json"

PROFILE = AgentProfile(
    id="fake-agent",
    name="Fake Agent",
    executable="fake-agent-cli",
    install_hint="npm i -g fake-agent",
)
ACP_PROFILE = AgentProfile(
    id="acp-agent",
    name="ACP Agent",
    executable="acp-agent-cli",
    install_hint="pip install acp-agent",
    acp_args=("--acp", "--stdio"),
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh login-shell cache and KnownLocation system dirs that exist only in this test's tmp dir."""
    discovery.clear_cache()
    monkeypatch.setattr(
        discovery, "SYSTEM_KNOWN_DIRS", (str(tmp_path / "opt-homebrew-bin"), str(tmp_path / "usr-local-bin"))
    )
    yield
    discovery.clear_cache()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def ran_marker(tmp_path: Path) -> Path:
    """The file a fake agent writes if anything ever runs it."""
    return tmp_path / "agent-was-run"


def make_agent(
    directory: Path, name: str = PROFILE.executable, *, marker: Path | None = None, mode: int = 0o755
) -> Path:
    """A fake agent executable in ``directory`` that records being run in ``marker``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    target = marker if marker is not None else directory / f"{name}.was-run"
    path.write_text(f"#!/bin/sh\necho ran >> '{target}'\n")
    path.chmod(mode)
    return path


def make_shell(path: Path, body: str) -> Path:
    """A fake ``$SHELL``: a /bin/sh script run as ``shell -lic 'echo MARKER$PATH'``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def base_env(home: Path, path: list[Path] | None = None, **extra: str) -> dict[str, str]:
    env = {"HOME": str(home), "PATH": os.pathsep.join(str(p) for p in path or []), discovery.NO_LOGIN_SHELL_ENV: "1"}
    env.update(extra)
    return env


# ------------------------------------------------------------------------------------------------ PATH


def test_found_on_path_records_absolute_path_source_and_acp_args(tmp_path: Path, home: Path) -> None:
    bin_a, bin_b = tmp_path / "a", tmp_path / "b"
    exe = make_agent(bin_b)
    acp = make_agent(bin_a, ACP_PROFILE.executable)
    bin_b.joinpath("unused").mkdir()

    report = discover([PROFILE, ACP_PROFILE], env=base_env(home, [bin_a, bin_b]), home=home)

    assert report.missing == []
    assert report.diagnostics == []
    fake, acp_inst = report.agents
    assert fake == AgentInstallation(
        id="fake-agent", name="Fake Agent", executable_path=str(exe), source="Path", acp_args=None
    )
    assert acp_inst.executable_path == str(acp)
    assert acp_inst.acp_args == ["--acp", "--stdio"]
    assert report.find("acp-agent") is acp_inst


def test_path_order_and_non_executables_are_skipped(tmp_path: Path, home: Path) -> None:
    not_exec, a_dir, good = tmp_path / "not-exec", tmp_path / "is-a-dir", tmp_path / "good"
    make_agent(not_exec, mode=0o644)
    (a_dir / PROFILE.executable).mkdir(parents=True)
    (a_dir / PROFILE.executable).chmod(0o755)
    exe = make_agent(good)
    later = make_agent(tmp_path / "later")

    report = discover([PROFILE], env=base_env(home, [not_exec, a_dir, good, later.parent]), home=home)

    assert [a.executable_path for a in report.agents] == [str(exe)]


def test_symlink_is_followed_for_the_check_but_not_resolved_in_the_path(tmp_path: Path, home: Path) -> None:
    real = make_agent(tmp_path / "store" / "1.2.3", "real-cli")
    shims = tmp_path / "shims"
    shims.mkdir()
    link = shims / PROFILE.executable
    link.symlink_to(real)
    dangling_dir = tmp_path / "dangling"
    dangling_dir.mkdir()
    (dangling_dir / PROFILE.executable).symlink_to(tmp_path / "nowhere")

    report = discover([PROFILE], env=base_env(home, [dangling_dir, shims]), home=home)

    assert report.agents[0].executable_path == str(link)
    assert report.agents[0].source == "Path"


def test_empty_and_relative_path_entries_are_ignored(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_agent(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")

    report = discover([PROFILE], env=base_env(home, [], PATH=f":.:cwd:{os.pathsep}"), home=home)

    assert report.agents == []
    assert all(os.path.isabs(d) for d in report.missing[0].searched)
    assert str(tmp_path / "cwd") not in report.missing[0].searched


def test_tilde_in_path_is_expanded_against_home(home: Path) -> None:
    exe = make_agent(home / "mybin")

    report = discover([PROFILE], env=base_env(home, [], PATH="~/mybin"), home=home)

    assert report.agents[0].executable_path == str(exe)


# ------------------------------------------------------------------------------------------------ env override


def test_env_override_wins_over_path(tmp_path: Path, home: Path) -> None:
    make_agent(tmp_path / "onpath")
    override = make_agent(tmp_path / "custom", "my-build")
    env = base_env(home, [tmp_path / "onpath"], ANYAGENTD_FAKE_AGENT_BIN=str(override))

    report = discover([PROFILE], env=env, home=home)

    assert report.agents[0].source == "EnvOverride"
    assert report.agents[0].executable_path == str(override)
    assert report.diagnostics == []


def test_env_override_relative_value_is_made_absolute(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    override = make_agent(tmp_path / "custom", "my-build")
    monkeypatch.chdir(tmp_path)

    report = discover([PROFILE], env=base_env(home, [], ANYAGENTD_FAKE_AGENT_BIN="custom/my-build"), home=home)

    assert report.agents[0].executable_path == str(override)


@pytest.mark.parametrize("kind", ["not-executable", "missing", "directory"])
def test_bad_env_override_warns_and_keeps_scanning(tmp_path: Path, home: Path, kind: str) -> None:
    exe = make_agent(tmp_path / "onpath")
    bad = tmp_path / "bad"
    if kind == "not-executable":
        make_agent(tmp_path, "bad", mode=0o644)
    elif kind == "directory":
        bad.mkdir()
        bad.chmod(0o755)
    env = base_env(home, [tmp_path / "onpath"], ANYAGENTD_FAKE_AGENT_BIN=str(bad))

    report = discover([PROFILE], env=env, home=home)

    assert report.agents[0].source == "Path"
    assert report.agents[0].executable_path == str(exe)
    [diag] = report.diagnostics
    assert diag.level == "Warning"
    assert "ANYAGENTD_FAKE_AGENT_BIN" in diag.message and str(bad) in diag.message


def test_empty_env_override_counts_as_unset(tmp_path: Path, home: Path) -> None:
    make_agent(tmp_path / "onpath")

    report = discover([PROFILE], env=base_env(home, [tmp_path / "onpath"], ANYAGENTD_FAKE_AGENT_BIN=""), home=home)

    assert report.agents[0].source == "Path"
    assert report.diagnostics == []


# ------------------------------------------------------------------------------------------------ login shell


def login_env(home: Path, shell: Path, path: list[Path] | None = None, **extra: str) -> dict[str, str]:
    env = base_env(home, path, SHELL=str(shell))
    del env[discovery.NO_LOGIN_SHELL_ENV]
    env.update(extra)
    return env


def test_login_shell_path_is_searched_after_path(tmp_path: Path, home: Path) -> None:
    on_path, login_only = tmp_path / "onpath", tmp_path / "login-only"
    exe = make_agent(login_only)
    on_path.mkdir()
    shell = make_shell(
        tmp_path / "zsh",
        f"""
echo "Welcome to your shell (rc noise) PATH=/not/this"
echo "{discovery.LOGIN_SHELL_MARKER}decoy" >&2
echo "{discovery.LOGIN_SHELL_MARKER}{on_path}:{login_only}:relative"
echo "bye from .logout"
""",
    )

    report = discover([PROFILE, ACP_PROFILE], env=login_env(home, shell, [on_path]), home=home)

    assert report.agents[0].source == "LoginShellPath"
    assert report.agents[0].executable_path == str(exe)
    searched = report.missing[0].searched
    assert searched[:2] == [str(on_path), str(login_only)]  # on_path once, as Path; "relative" dropped
    assert len(searched) == len(set(searched))
    assert report.diagnostics == []


def test_path_wins_over_login_shell_path(tmp_path: Path, home: Path) -> None:
    first = make_agent(tmp_path / "onpath")
    make_agent(tmp_path / "login")
    shell = make_shell(tmp_path / "sh", f'echo "{discovery.LOGIN_SHELL_MARKER}{tmp_path / "login"}"\n')

    report = discover([PROFILE], env=login_env(home, shell, [first.parent]), home=home)

    assert report.agents[0].executable_path == str(first)
    assert report.agents[0].source == "Path"


def test_login_shell_runs_once_per_process_per_shell_until_cleared(tmp_path: Path, home: Path) -> None:
    runs = tmp_path / "shell-runs"
    login_dir = tmp_path / "login"
    make_agent(login_dir)
    body = f'echo run >> "{runs}"\necho "{discovery.LOGIN_SHELL_MARKER}{login_dir}"\n'
    shell = make_shell(tmp_path / "bash", body)
    other_shell = make_shell(tmp_path / "other" / "bash", body)
    env = login_env(home, shell)

    for _ in range(3):
        assert discover([PROFILE], env=env, home=home).agents[0].source == "LoginShellPath"
    assert runs.read_text().count("run") == 1

    discover([PROFILE], env=login_env(home, other_shell), home=home)
    assert runs.read_text().count("run") == 2

    discovery.clear_cache()
    discover([PROFILE], env=env, home=home)
    assert runs.read_text().count("run") == 3


def test_login_shell_receives_the_given_environment_and_no_stdin(tmp_path: Path, home: Path) -> None:
    seen = tmp_path / "seen"
    shell = make_shell(
        tmp_path / "sh",
        f"""
echo "$MY_VAR" > "{seen}"
if read line; then echo "read:$line" >> "{seen}"; else echo eof >> "{seen}"; fi
echo "{discovery.LOGIN_SHELL_MARKER}$PATH"
""",
    )

    # Give this process a readable fd 0, so an inherited stdin would be noticed.
    read_end, write_end = os.pipe()
    os.write(write_end, b"typed-by-user\n")
    os.close(write_end)
    saved_stdin = os.dup(0)
    os.dup2(read_end, 0)
    try:
        discover([PROFILE], env=login_env(home, shell, MY_VAR="hello"), home=home)
    finally:
        os.dup2(saved_stdin, 0)
        os.close(saved_stdin)
        os.close(read_end)

    assert seen.read_text().split() == ["hello", "eof"]


def test_login_shell_is_not_run_when_an_agent_is_found_earlier(tmp_path: Path, home: Path) -> None:
    runs = tmp_path / "shell-runs"
    exe = make_agent(tmp_path / "onpath")
    shell = make_shell(tmp_path / "sh", f'echo run >> "{runs}"\necho "{discovery.LOGIN_SHELL_MARKER}/x"\n')

    discover([PROFILE], env=login_env(home, shell, [exe.parent]), home=home)

    assert not runs.exists()


def test_login_shell_disabled_by_env(tmp_path: Path, home: Path) -> None:
    runs = tmp_path / "shell-runs"
    make_agent(tmp_path / "login")
    marker = discovery.LOGIN_SHELL_MARKER
    shell = make_shell(tmp_path / "sh", f'echo run >> "{runs}"\necho "{marker}{tmp_path}/login"\n')
    env = login_env(home, shell, **{discovery.NO_LOGIN_SHELL_ENV: "1"})

    report = discover([PROFILE], env=env, home=home)

    assert not runs.exists()
    assert report.agents == []
    assert str(tmp_path / "login") not in report.missing[0].searched


def test_login_shell_timeout_is_one_info_and_kills_the_shell(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discovery, "LOGIN_SHELL_TIMEOUT", 0.5)
    pidfile = tmp_path / "sleeper.pid"
    # The sleeping child keeps the shell's stdout open: the whole group must be killed, not just the shell.
    sleep = shutil.which("sleep")
    shell = make_shell(
        tmp_path / "slowsh",
        f'echo "loading..."\n{sleep} 30 &\necho $! > "{pidfile}"\nwait\necho "{discovery.LOGIN_SHELL_MARKER}/late"\n',
    )
    start = time.monotonic()

    report = discover([PROFILE, ACP_PROFILE], env=login_env(home, shell), home=home)

    assert time.monotonic() - start < 5
    assert [m.id for m in report.missing] == ["fake-agent", "acp-agent"]
    [info] = report.diagnostics
    assert info.level == "Info"
    assert "timed out" in info.message and str(shell) in info.message
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(sleeper)

    # Cached: the next discover does not wait again, and still says why the login PATH is missing.
    start = time.monotonic()
    again = discover([PROFILE], env=login_env(home, shell), home=home)
    assert time.monotonic() - start < 0.4
    assert again.diagnostics == [info]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("case", ["no-marker", "missing-shell", "not-executable"])
def test_login_shell_failure_is_an_info_not_an_exception(tmp_path: Path, home: Path, case: str) -> None:
    shell = tmp_path / "sh"
    if case == "no-marker":
        make_shell(shell, "echo 'just noise'\nexit 3\n")
    elif case == "not-executable":
        make_shell(shell, "echo hi\n").chmod(0o644)
    exe = make_agent(home / ".local" / "bin")

    report = discover([PROFILE], env=login_env(home, shell), home=home)

    assert report.agents[0].executable_path == str(exe)  # the later steps still run
    [info] = report.diagnostics
    assert info.level == "Info" and "login shell" in info.message
    if case == "no-marker":
        assert "exit status 3" in info.message


def test_parse_login_shell_output() -> None:
    m = discovery.LOGIN_SHELL_MARKER
    assert parse_login_shell_output("noise\nmore noise\n") is None
    assert parse_login_shell_output(f"hi\n{m}/a:/b::/c\r\nbye\n") == ["/a", "/b", "/c"]
    assert parse_login_shell_output(f"{m}/old\n{m}/new\n") == ["/new"]
    assert parse_login_shell_output(f"{m}\n") == []
    assert parse_login_shell_output(f"{m}/a {m}/b {m}/c d\n") == ["/a", "/b", "/c d"]  # fish lists


# ------------------------------------------------------------------------------------------------ version managers


def test_nvm_newest_version_first_numerically(tmp_path: Path, home: Path) -> None:
    versions = home / ".nvm" / "versions" / "node"
    for v in ["v9.11.2", "v18.19.0", "v20.10.0", "v20.9.0"]:
        make_agent(versions / v / "bin")
    (versions / "not-a-dir").write_text("")

    report = discover([PROFILE, ACP_PROFILE], env=base_env(home), home=home)

    assert report.agents[0].source == "VersionManager"
    assert report.agents[0].executable_path == str(versions / "v20.10.0" / "bin" / PROFILE.executable)
    nvm_searched = [d for d in report.missing[0].searched if str(versions) in d]
    assert nvm_searched == [str(versions / v / "bin") for v in ["v20.10.0", "v20.9.0", "v18.19.0", "v9.11.2"]]


def test_nvm_dir_env_replaces_default(tmp_path: Path, home: Path) -> None:
    make_agent(home / ".nvm" / "versions" / "node" / "v22.0.0" / "bin")
    custom = tmp_path / "nvm"
    exe = make_agent(custom / "versions" / "node" / "v18.0.0" / "bin")

    report = discover([PROFILE], env=base_env(home, NVM_DIR=str(custom)), home=home)

    assert report.agents[0].executable_path == str(exe)


def test_fnm_newest_first_and_fnm_dir(tmp_path: Path, home: Path) -> None:
    default = home / ".local" / "share" / "fnm" / "node-versions"
    for v in ["v9.0.0", "v20.9.0", "v20.10.0"]:
        make_agent(default / v / "installation" / "bin")
    report = discover([PROFILE], env=base_env(home), home=home)
    assert report.agents[0].executable_path == str(default / "v20.10.0" / "installation" / "bin" / PROFILE.executable)

    custom = tmp_path / "fnm"
    exe = make_agent(custom / "node-versions" / "v16.0.0" / "installation" / "bin")
    report = discover([PROFILE], env=base_env(home, FNM_DIR=str(custom)), home=home)
    assert report.agents[0].executable_path == str(exe)
    assert report.agents[0].source == "VersionManager"


@pytest.mark.parametrize("rel", [".volta/bin", ".bun/bin", ".local/share/pnpm", ".npm-global/bin"])
def test_version_manager_home_dirs(home: Path, rel: str) -> None:
    exe = make_agent(home / rel)

    report = discover([PROFILE], env=base_env(home), home=home)

    assert (report.agents[0].source, report.agents[0].executable_path) == ("VersionManager", str(exe))


@pytest.mark.parametrize(
    ("var", "rel"), [("PNPM_HOME", ""), ("NPM_CONFIG_PREFIX", "bin"), ("VOLTA_HOME", "bin"), ("BUN_INSTALL", "bin")]
)
def test_version_manager_env_dirs(tmp_path: Path, home: Path, var: str, rel: str) -> None:
    root = tmp_path / var.lower()
    exe = make_agent(root / rel if rel else root)

    report = discover([PROFILE], env=base_env(home, **{var: str(root)}), home=home)

    assert (report.agents[0].source, report.agents[0].executable_path) == ("VersionManager", str(exe))


def test_version_key() -> None:
    assert version_key("v20.10.0") > version_key("v20.9.0") > version_key("v18") > version_key("v9.99.99")
    assert version_key("21.0.0-rc.1") == (21, 0, 0)
    assert version_key("system") is None


# ------------------------------------------------------------------------------------------------ known locations


def test_known_locations_in_order_with_extra_paths(tmp_path: Path, home: Path) -> None:
    profile = AgentProfile(
        id="claude",
        name="Claude Code",
        executable="claude",
        install_hint="see docs",
        extra_paths=("~/.claude/local", str(tmp_path / "abs-extra")),
    )
    extra = make_agent(home / ".claude" / "local", "claude")

    report = discover([profile], env=base_env(home), home=home)
    assert (report.agents[0].source, report.agents[0].executable_path) == ("KnownLocation", str(extra))

    local = make_agent(home / ".local" / "bin", "claude")
    assert discover([profile], env=base_env(home), home=home).agents[0].executable_path == str(local)

    usr_local = make_agent(Path(discovery.SYSTEM_KNOWN_DIRS[1]), "claude")
    assert discover([profile], env=base_env(home), home=home).agents[0].executable_path == str(usr_local)

    brew = make_agent(Path(discovery.SYSTEM_KNOWN_DIRS[0]), "claude")
    assert discover([profile], env=base_env(home), home=home).agents[0].executable_path == str(brew)

    nvm = make_agent(home / ".nvm" / "versions" / "node" / "v20.0.0" / "bin", "claude")
    found = discover([profile], env=base_env(home), home=home).agents[0]
    assert (found.source, found.executable_path) == ("VersionManager", str(nvm))


def test_home_defaults_to_env_home(home: Path) -> None:
    exe = make_agent(home / ".local" / "bin")

    report = discover([PROFILE], env=base_env(home))

    assert report.agents[0].executable_path == str(exe)


# ------------------------------------------------------------------------------------------------ missing


def test_missing_lists_every_searched_dir_in_order_deduplicated(tmp_path: Path, home: Path) -> None:
    p1, p2 = tmp_path / "p1", tmp_path / "p2"
    local_bin = home / ".local" / "bin"
    nvm_bin = home / ".nvm" / "versions" / "node" / "v20.0.0" / "bin"
    nvm_bin.mkdir(parents=True)
    profile = AgentProfile(
        id="x", name="X", executable="x-cli", install_hint="brew install x", extra_paths=("~/.x/bin", str(p1))
    )
    env = base_env(home, [p1, p2, Path(str(p1) + "/"), local_bin])

    report = discover([profile], env=env, home=home)

    h = str(home)
    assert report.agents == []
    [missing] = report.missing
    assert (missing.id, missing.name, missing.install_hint) == ("x", "X", "brew install x")
    assert missing.searched == [
        str(p1),
        str(p2),
        str(local_bin),
        f"{h}/.volta/bin",
        f"{h}/.bun/bin",
        f"{h}/.local/share/pnpm",
        f"{h}/.npm-global/bin",
        str(nvm_bin),
        *discovery.SYSTEM_KNOWN_DIRS,
        f"{h}/.x/bin",
    ]


def test_duplicate_profile_ids_are_searched_once(tmp_path: Path, home: Path) -> None:
    report = discover([PROFILE, PROFILE], env=base_env(home), home=home)

    assert [m.id for m in report.missing] == ["fake-agent"]


# ------------------------------------------------------------------------------------------------ pinned


def test_pinned_come_first_unchanged_and_shadow_their_profile(tmp_path: Path, home: Path) -> None:
    make_agent(tmp_path / "onpath")
    make_agent(tmp_path / "onpath", ACP_PROFILE.executable)
    pinned = AgentInstallation(
        id="fake-agent", name="Pinned Fake", executable_path="/pinned/fake", source="Pinned", acp_args=["x"]
    )
    mock = AgentInstallation(id="mock", name="Mock", executable_path="", source="Pinned")

    report = discover(
        [ACP_PROFILE, PROFILE], env=base_env(home, [tmp_path / "onpath"]), home=home, pinned=[pinned, mock]
    )

    assert report.agents[:2] == [pinned, mock]
    assert [a.id for a in report.agents] == ["fake-agent", "mock", "acp-agent"]
    assert report.missing == []


# ------------------------------------------------------------------------------------------------ safety


def test_discovery_never_runs_the_agent(tmp_path: Path, home: Path, ran_marker: Path) -> None:
    """Every source holds a fake agent that writes ``ran_marker`` when run; none may run."""
    shell_dir = tmp_path / "login"
    override = make_agent(tmp_path / "override", "agent-override", marker=ran_marker)
    make_agent(tmp_path / "onpath", marker=ran_marker)
    make_agent(shell_dir, ACP_PROFILE.executable, marker=ran_marker)
    make_agent(home / ".nvm" / "versions" / "node" / "v1.0.0" / "bin", "nvm-only", marker=ran_marker)
    make_agent(home / ".local" / "bin", "local-only", marker=ran_marker)
    profiles = [
        PROFILE,
        ACP_PROFILE,
        AgentProfile(id="nvm-only", name="N", executable="nvm-only", install_hint=""),
        AgentProfile(id="local-only", name="L", executable="local-only", install_hint=""),
        AgentProfile(id="over", name="O", executable="nope", install_hint=""),
    ]
    shell = make_shell(tmp_path / "sh", f'echo "{discovery.LOGIN_SHELL_MARKER}{shell_dir}"\n')
    env = login_env(home, shell, [tmp_path / "onpath"], ANYAGENTD_OVER_BIN=str(override))

    report = discover(profiles, env=env, home=home)

    assert [a.source for a in report.agents] == [
        "Path",
        "LoginShellPath",
        "VersionManager",
        "KnownLocation",
        "EnvOverride",
    ]
    # Sanity: the fake agents do record a run when executed.
    assert not ran_marker.exists()
    subprocess.run([str(override)], check=True)
    assert ran_marker.exists()


def test_report_matches_the_wire_schema(tmp_path: Path, home: Path) -> None:
    make_agent(tmp_path / "onpath", ACP_PROFILE.executable)
    report = discover(
        [PROFILE, ACP_PROFILE], env=base_env(home, [tmp_path / "onpath"], ANYAGENTD_FAKE_AGENT_BIN="/nope"), home=home
    )
    schema = json.loads(SCHEMA_PATH.read_text())
    defs = schema.get("definitions") or schema["$defs"]
    validator = jsonschema.Draft7Validator(
        {**schema, "$ref": "#/definitions/DiscoveryReport"}
        if "definitions" in schema
        else {**schema, "$ref": "#/$defs/DiscoveryReport"}
    )
    data = report.model_dump(mode="json")
    assert "DiscoveryReport" in defs
    validator.validate(data)
    assert data["agents"][0]["acp_args"] == ["--acp", "--stdio"] and data["missing"] and data["diagnostics"]


# ------------------------------------------------------------------------------------------------ unreadable dirs


def _discover_without_dac_override(env: dict[str, str], home: Path, profiles: list[AgentProfile]) -> dict:
    """Run ``discover`` so that file permissions apply: directly when not root, otherwise in a child process
    whose capability bounding set lacks CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (so mode 000 really is unreadable)."""
    code = (
        "import json, sys\nfrom pathlib import Path\n"
        "from anyagentd import discovery\nfrom anyagentd.adapters.interface import AgentProfile\n"
        "args = json.loads(sys.stdin.read())\n"
        "discovery.SYSTEM_KNOWN_DIRS = tuple(args['known'])\n"
        "profiles = [AgentProfile(**p) for p in args['profiles']]\n"
        "print(discovery.discover(profiles, env=args['env'], home=Path(args['home'])).model_dump_json())\n"
    )
    payload = json.dumps(
        {
            "env": env,
            "home": str(home),
            "known": list(discovery.SYSTEM_KNOWN_DIRS),
            "profiles": [
                {"id": p.id, "name": p.name, "executable": p.executable, "install_hint": p.install_hint}
                for p in profiles
            ],
        }
    )
    cmd = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a directory unreadable")
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
    out = subprocess.run(cmd, input=payload, capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def test_unreadable_directories_are_warnings(tmp_path: Path, home: Path) -> None:
    locked = tmp_path / "locked"
    make_agent(locked)
    ok = tmp_path / "ok"
    exe = make_agent(ok)
    nvm_versions = home / ".nvm" / "versions" / "node"
    make_agent(nvm_versions / "v20.0.0" / "bin", ACP_PROFILE.executable)
    locked.chmod(0o000)
    nvm_versions.chmod(0o000)
    try:
        report = _discover_without_dac_override(base_env(home, [locked, ok]), home, [PROFILE, ACP_PROFILE])
    finally:
        locked.chmod(0o755)
        nvm_versions.chmod(0o755)

    assert [a["executable_path"] for a in report["agents"]] == [str(exe)]  # the locked copy was not usable
    assert report["missing"][0]["id"] == "acp-agent"
    assert report["diagnostics"] == [
        {"level": "Warning", "message": f"cannot read directory {locked}: Permission denied"},
        {"level": "Warning", "message": f"cannot read directory {nvm_versions}: Permission denied"},
    ]
