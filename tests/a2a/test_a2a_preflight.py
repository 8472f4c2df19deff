"""What a configuration needs of this machine (``anyagentd_a2a.preflight``), against the real ``anyagentd a2a``
command: ``--check-config`` and the start refuse alike — one line naming the key, exit 2, no listener announced, no
traceback — a store directory that does not exist, an agent whose adapter is not installed, an ACP path that is not
an executable, a missing ``agent.dir``, workflow steps naming uninstalled agents or ``kind = "subagent"`` with
subagents off, a workflow command shadowed by an op, ``[subagents] enabled`` without the ``Http`` MCP transport,
``0.0.0.0`` without ``a2a.url``; a grant that matches no op is a warning (exit 0, and the start serves, logging it).
Each agent of ``[[agents]]`` is checked at its own key (``agents.1.name``, ``agents.0.dir``), and a principal's
``agents`` pattern that matches no configured agent is a warning.
Before, ``--check-config`` said ok to every one of them (issue 26), and the README's own Configuration block with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD, self_signed

README = Path(__file__).resolve().parents[2] / "plugins" / "a2a" / "README.md"


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ANYAGENTD, "a2a", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def start(
    config: Path, tmp_path: Path, env: dict[str, str] | None = None, listen: str | None = "127.0.0.1:0"
) -> tuple[int, str, str]:
    """Start a daemon on ``config`` (``--listen listen`` unless None); returns (exit status, stdout, stderr) once it
    exits. A daemon that announces a listener instead is killed at once and the test fails: it should not have
    started."""
    argv = [ANYAGENTD, "a2a", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    argv += ["--listen", listen] if listen else []
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=tmp_path,
    )
    assert process.stdout is not None and process.stderr is not None
    announced = process.stdout.readline()  # the listening line, or "" when it exits without one
    if announced:
        process.kill()
        process.wait(timeout=30)
        raise AssertionError(f"the daemon started: {announced.strip()}")
    stderr = process.stderr.read()
    return process.wait(timeout=30), announced, stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def subagent_step(agent: str = "mock") -> str:
    return (
        f'[[workflows]]\nname = "delegate"\n[workflows.steps.a]\nkind = "subagent"\nagent = "{agent}"\n'
        'instruction = "do it"\n'
    )


CASES: dict[str, tuple[str, dict[str, str], str, str]] = {
    # id: (config, env, the key named, what the line says)
    "store-directory": (
        '[a2a]\nstore = "sqlite+aiosqlite:///{tmp}/no-such-dir/a2a.db"\n',
        {},
        "a2a.store",
        "the directory {tmp}/no-such-dir does not exist",
    ),
    "agent-not-installed": (
        '[agent]\nname = "claude"\n',
        {"ANYAGENTD_DISABLE_PLUGINS": "claude"},
        "agent.name",
        "the adapter for 'claude' is not installed; install it with: pip install",
    ),
    "agent-unknown": (
        '[agent]\nname = "no-such-agent"\n',
        {},
        "agent.name",
        "no installed plugin drives an agent named 'no-such-agent'",
    ),
    "acp-path-missing": (
        '[agent]\nname = { acp = { name = "x", path = "{tmp}/no-such-agent" } }\n',
        {},
        "agent.name.acp.path",
        "{tmp}/no-such-agent does not exist",
    ),
    "acp-path-not-executable": (
        '[agent]\nname = { acp = { name = "x", path = "{tmp}/plain" } }\n',
        {},
        "agent.name.acp.path",
        "{tmp}/plain is not an executable file",
    ),
    "agent-dir-missing": (
        '[agent]\ndir = "{tmp}/no-such-work"\n',
        {},
        "agent.dir",
        "{tmp}/no-such-work does not exist",
    ),
    "agent-dir-a-file": ('[agent]\ndir = "{tmp}/plain"\n', {}, "agent.dir", "{tmp}/plain is not a directory"),
    "agents-entry-not-installed": (
        '[[agents]]\nid = "a"\n[[agents]]\nid = "b"\nname = "claude"\n',
        {"ANYAGENTD_DISABLE_PLUGINS": "claude"},
        "agents.1.name",
        "the adapter for 'claude' is not installed; install it with: pip install",
    ),
    "agents-entry-acp-path-missing": (
        '[[agents]]\nid = "a"\n[[agents]]\nid = "b"\nname = { acp = { name = "x", path = "{tmp}/no-such-agent" } }\n',
        {},
        "agents.1.name.acp.path",
        "{tmp}/no-such-agent does not exist",
    ),
    "agents-entry-dir-missing": (
        '[[agents]]\nid = "a"\ndir = "{tmp}/no-such-work"\n[[agents]]\nid = "b"\n',
        {},
        "agents.0.dir",
        "{tmp}/no-such-work does not exist",
    ),
    "agents-entry-mock-script": (
        '[[agents]]\nid = "a"\n[[agents]]\nid = "b"\nmock_script = "no-such-example"\n',
        {},
        "agents.1.mock_script",
        "no script file 'no-such-example'",
    ),
    "step-agent-not-installed": (
        '[[workflows]]\nname = "fix"\n[workflows.steps.a]\nkind = "agent"\nagent = "codex"\nprompt = "go"\n',
        {"ANYAGENTD_DISABLE_PLUGINS": "codex"},
        "workflows.fix.steps.a.agent",
        "the adapter for 'codex' is not installed",
    ),
    "subagent-step-without-subagents": (
        subagent_step(),
        {},
        "workflows.delegate.steps.a.kind",
        "a subagent step needs [subagents] enabled = true",
    ),
    "subagent-step-not-spawnable": (
        '[subagents]\nenabled = true\nagents = ["claude"]\n' + subagent_step(),
        {},
        "workflows.delegate.steps.a.agent",
        "'mock' may not be spawned here",
    ),
    "command-shadowed": (
        '[[workflows]]\nname = "w"\ncommand = "status"\n[workflows.steps.a]\nkind = "finish"\noutput = "x"\n',
        {},
        "workflows.w.command",
        '\'status\' is the op of plugin \'a2a-status\': {"agentd": {"op": "status"}} runs that op',
    ),
    "subagents-without-http": (
        "[subagents]\nenabled = true\n",
        {"ANYAGENTD_DISABLE_PLUGINS": "mcp-http"},
        "subagents.enabled",
        "no MCP transport plugin for Http is installed: pip install",
    ),
    "child-named-like-an-agent": (
        '[[subagents.instances]]\nname = "mock"\nurl = "http://127.0.0.1:9"\n',
        {},
        "subagents.instances.0.name",
        "'mock' is an installed agent here",
    ),
    "unspecified-listen-without-url": (
        '[a2a]\nlisten = "0.0.0.0:0"\nbearer = "{{secret:OPERATOR}}"\n'
        '[a2a.tls]\ncert = "{tmp}/cert.pem"\nkey = "{tmp}/key.pem"\n',
        {"OPERATOR": "op-token"},
        "a2a.url",
        "0.0.0.0:0 binds every address, so the card has no address clients can reach",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_and_start_refuse_what_this_machine_lacks_in_one_line(tmp_path: Path, case: str) -> None:
    text, env, key, said = CASES[case]
    (tmp_path / "plain").write_text("not an agent\n")
    if "cert.pem" in text:
        self_signed(tmp_path)
    config = tmp_path / "agentd.toml"
    config.write_text(text.replace("{tmp}", str(tmp_path)))
    said = said.replace("{tmp}", str(tmp_path))
    checked = run_cli("--check-config", str(config), env=env, cwd=tmp_path)  # where the start runs: install hints
    line = one_line(checked.stderr)
    assert checked.returncode == 2 and line.startswith(f"anyagentd a2a: configuration error: {key}: "), line
    assert said in line, line
    # the listen address as configured where it is the point (a2a.url), else a free loopback port
    listen = None if case == "unspecified-listen-without-url" else "127.0.0.1:0"
    code, stdout, stderr = start(config, tmp_path, env, listen)
    assert code == 2 and stdout == "" and one_line(stderr) == line


def test_the_start_names_the_first_error_and_check_config_lists_them_all(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(f'[agent]\nname = "no-such-agent"\ndir = "{tmp_path}/no-such-work"\n')
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert [line.split(": ")[2] for line in checked.stderr.strip().splitlines()] == ["agent.name", "agent.dir"]
    code, stdout, stderr = start(config, tmp_path)
    line = one_line(stderr)
    assert code == 2 and stdout == "" and line.startswith("anyagentd a2a: configuration error: agent.name: ")
    assert line.endswith(f"(1 more: anyagentd a2a --check-config {config})"), line


def test_a_grant_that_matches_no_op_is_a_warning_and_the_daemon_serves(a2a_daemon: Any, tmp_path: Path) -> None:
    text = (
        '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE}}"\n'
        'grants = ["workflow.*", "wokflow.*", "admin.*", "workflow.run:fix-*"]\n'
    )
    config = tmp_path / "agentd.toml"
    config.write_text(text)
    checked = run_cli("--check-config", str(config), env={"ALICE": "alice-token"})
    assert checked.returncode == 0 and "Traceback" not in checked.stderr, checked.stderr
    assert checked.stderr.strip().splitlines() == [
        "anyagentd a2a: warning: a2a.principals.0.grants.1: 'wokflow.*' matches no installed op "
        "(`anyagentd plugins` lists them)",
        "anyagentd a2a: warning: a2a.principals.0.grants.2: 'admin.*' matches only operator ops (admin.drain, "
        "admin.pause, admin.resume, admin.set, admin.cancel), which no grant reaches",
        "anyagentd a2a: warning: a2a.principals.0.grants.3: 'workflow.run:fix-*' matches no configured workflow "
        "(no [[workflows]] are configured)",
        f"{config}: ok",
    ]
    daemon = a2a_daemon(config=text, env={"ALICE": "alice-token"})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        logged = [json.loads(line) for line in list(daemon.stderr) if "a2a.principals.0.grants" in line]
        if len(logged) == 3:
            break
        time.sleep(0.05)
    assert [entry["level"] for entry in logged] == ["warning"] * 3, daemon.stderr
    assert "'wokflow.*' matches no installed op" in logged[0]["msg"]
    assert daemon.send_text("hi", token="alice-token")["status"]["state"] == "TASK_STATE_COMPLETED"


def test_check_config_names_each_agents_errors_and_an_agents_pattern_that_reaches_none(tmp_path: Path) -> None:
    """Every agent of ``[[agents]]`` is checked at its own key, each error a line; a principal's ``agents`` pattern
    that matches no configured agent id is a warning naming it (the check says ok)."""
    config = tmp_path / "agentd.toml"
    config.write_text(
        f'[[agents]]\nid = "a"\ndir = "{tmp_path}/no-such-work"\n[[agents]]\nid = "b"\nname = "no-such-agent"\n'
        f'[[agents]]\nid = "c"\ndir = "{tmp_path}/plain"\n'
    )
    (tmp_path / "plain").write_text("not a directory\n")
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert [line.split(": ")[2] for line in checked.stderr.strip().splitlines()] == [
        "agents.0.dir",
        "agents.1.name",
        "agents.2.dir",
    ], checked.stderr
    config.write_text(
        '[[agents]]\nid = "claude"\n[[agents]]\nid = "codex-x"\n'
        '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE}}"\nagents = ["claude", "gemini", "codex-*"]\n'
        '[[a2a.principals]]\nid = "bob"\nbearer = "{{secret:BOB}}"\nagents = ["Claude"]\n'
    )
    checked = run_cli("--check-config", str(config), env={"ALICE": "alice-token", "BOB": "bob-token"})
    assert checked.returncode == 0 and "Traceback" not in checked.stderr, checked.stderr
    assert checked.stderr.strip().splitlines() == [
        "anyagentd a2a: warning: a2a.principals.0.agents.1: 'gemini' matches no configured agent "
        "(agents: claude, codex-x)",
        "anyagentd a2a: warning: a2a.principals.1.agents.0: 'Claude' matches no configured agent "
        "(agents: claude, codex-x)",
        f"{config}: ok",
    ], checked.stderr
    # the shorthand's agent is reached by its id (its name made an id)
    config.write_text('[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE}}"\nagents = ["mock"]\n')
    checked = run_cli("--check-config", str(config), env={"ALICE": "alice-token"})
    assert checked.returncode == 0 and checked.stderr.strip().splitlines() == [f"{config}: ok"], checked.stderr


def readme_configuration() -> str:
    """The TOML block under "## Configuration" in plugins/a2a/README.md."""
    section = README.read_text().split("## Configuration", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_readmes_configuration_block_names_what_this_machine_lacks(tmp_path: Path) -> None:
    """The block, its credentials and TLS files made real (parse would refuse them first), is refused naming the
    store directory and the agent's dir that this machine lacks — where before it said ok and then could not
    start."""
    text = readme_configuration()
    for path in ("/srv/work", "/var/lib/agentd"):
        assert text.count(path) == 1 and not Path(path).exists(), path  # what the test expects to be missing
    cert, key = self_signed(tmp_path)
    (tmp_path / "alice").write_text("alice-token\n")
    text = (
        text.replace("/etc/agentd/cert.pem", str(cert))
        .replace("/etc/agentd/key.pem", str(key))
        .replace("/run/secrets/alice", str(tmp_path / "alice"))
    )
    config = tmp_path / "readme.toml"
    config.write_text(text)
    checked = run_cli(
        "--check-config",
        str(config),
        env={"AGENTD_OPERATOR_TOKEN": "operator-token", "AGENTD_SCRAPE_TOKEN": "scrape-token"},
    )
    assert checked.returncode == 2 and "Traceback" not in checked.stderr and "ok" not in checked.stderr
    errors = [
        line.removeprefix("anyagentd a2a: configuration error: ")
        for line in checked.stderr.splitlines()
        if "configuration error" in line
    ]
    assert errors == [
        "a2a.store: cannot open the task store sqlite+aiosqlite:////var/lib/agentd/a2a.db: the directory "
        "/var/lib/agentd does not exist",
        "agent.dir: /srv/work does not exist (every conversation's session runs there)",
    ], checked.stderr


def test_an_agent_whose_cli_is_not_found_is_a_warning_naming_its_key(tmp_path: Path) -> None:
    """``agent.name`` and a workflow step naming a catalog agent whose CLI this machine lacks: the check warns at
    each key with the install hint, and says ok (the daemon serves; messages to that agent fail until it is
    installed); with the CLI on ``PATH`` nothing is said."""
    from anyagentd_testing.agents import agent_bin

    config = tmp_path / "agentd.toml"
    config.write_text(
        '[agent]\nname = "claude"\n[a2a]\nlisten = "127.0.0.1:0"\n[[workflows]]\nname = "w"\n'
        '[workflows.steps.a]\nkind = "agent"\nagent = "codex"\nprompt = "hi"\n'
    )
    bare = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ANYAGENTD_NO_LOGIN_SHELL": "1",
        "ANYAGENTD_CLAUDE_PATH": "",
        "ANYAGENTD_CODEX_PATH": "",
    }
    checked = run_cli("--check-config", str(config), env=bare)
    assert checked.returncode == 0 and f"{config}: ok" in checked.stdout + checked.stderr, checked.stderr
    warned = [line for line in checked.stderr.splitlines() if "warning:" in line]
    assert any(
        line.startswith(
            "anyagentd a2a: warning: agent.name: 'claude' was not found on this machine; "
            "install it with: npm install -g @anthropic-ai/claude-code"
        )
        for line in warned
    ), warned
    assert any("workflows.w.steps.a.agent: 'codex' was not found" in line for line in warned), warned
    found = {**bare, "PATH": f"{agent_bin('claude').parent}:{agent_bin('codex').parent}:/usr/bin:/bin"}
    checked = run_cli("--check-config", str(config), env=found)
    assert checked.returncode == 0 and "was not found" not in checked.stderr, checked.stderr
