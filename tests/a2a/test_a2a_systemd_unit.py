"""The shipped systemd unit (``plugins/a2a/contrib/anyagentd-a2a.service``) and its configuration
(``contrib/agentd.toml``), run as systemd would run them: ``ExecStart``, ``ExecReload`` (with
``$MAINPID``) and ``KillSignal`` taken from the unit's text, with its absolute paths moved under a temporary
directory (the venv, ``/etc/anyagentd``, the state directory, the credentials directory, ``/srv/work``) and the
configuration's fixed port replaced by 0. What the unit promises about exit statuses (``RestartPreventExitStatus=2``
for a configuration error, which systemd honours for ``ExecStart`` only) is checked against the real command. See
docs/operating.md."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from anyagentd_testing.agents import agent_bin

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "plugins" / "a2a" / "contrib"
UNIT = CONTRIB / "anyagentd-a2a.service"
CREDENTIALS = "/run/credentials/anyagentd-a2a.service/"


def service_section(text: str) -> dict[str, list[str]]:
    """``[Service]`` keys to their values in order (systemd allows a key more than once)."""
    section, values = None, {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if section == "Service":
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def placed(tmp_path: Path) -> tuple[dict[str, list[str]], dict[str, str], Path]:
    """The unit's [Service] with its paths moved under ``tmp_path``; the environment it gives; the config path."""
    moves = {
        "/opt/anyagentd/bin/": str(Path(sys.executable).parent) + "/",
        "/etc/anyagentd/": str(tmp_path / "etc") + "/",
        "/var/lib/anyagentd": str(tmp_path / "var"),
        CREDENTIALS: str(tmp_path / "credentials") + "/",
        "/srv/work": str(tmp_path / "work"),
    }

    def move(text: str) -> str:
        for old, new in moves.items():
            text = text.replace(old, new)
        return text

    service = {key: [move(v) for v in values] for key, values in service_section(UNIT.read_text()).items()}
    (tmp_path / "etc").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "var").mkdir(mode=0o700)  # StateDirectory=
    config = tmp_path / "etc" / "agentd.toml"
    config.write_text(move((CONTRIB / "agentd.toml").read_text()).replace("127.0.0.1:8787", "127.0.0.1:0"))
    # LoadCredential=NAME:SOURCE: systemd copies SOURCE to $CREDENTIALS_DIRECTORY/NAME
    (tmp_path / "etc" / "operator-token").write_text("operator-secret-token-for-the-unit-test\n")
    (tmp_path / "credentials").mkdir()
    for credential in service["LoadCredential"]:
        name, _, source = credential.partition(":")
        (tmp_path / "credentials" / name).write_text(Path(source).read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANYAGENTD_")}
    for assignment in service.get("Environment", []):
        key, _, value = assignment.partition("=")
        env[key] = value
    # the service user's PATH holds the agent CLI (docs/operating.md, Install)
    env["PATH"] = f"{agent_bin('claude').parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return service, env, config


def test_the_unit_starts_reloads_and_drains_as_written(tmp_path: Path) -> None:
    service, env, config = placed(tmp_path)
    cwd = service["WorkingDirectory"][0]
    assert service["Type"] == ["exec"] and service["KillSignal"] == ["SIGTERM"]

    # no pre-check: systemd's RestartPreventExitStatus= applies to the main process only (systemd #11868)
    assert "ExecStartPre" not in service
    check = shlex.split(service["ExecStart"][0])
    check[check.index("--config")] = "--check-config"  # what docs/operating.md has the operator run by hand
    checked = subprocess.run(
        check[: check.index("--check-config") + 2], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0 and f"{config}: ok" in checked.stdout + checked.stderr, checked.stderr

    daemon = subprocess.Popen(
        shlex.split(service["ExecStart"][0]),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(daemon.stderr), daemon=True).start()  # type: ignore[arg-type]
    try:
        assert daemon.stdout is not None
        line = daemon.stdout.readline()
        assert line, "".join(stderr)[-2000:]
        url = json.loads(line)["listening"]
        assert httpx.get(f"{url}/readyz", timeout=30).json() == {"status": "ok"}
        token = "operator-secret-token-for-the-unit-test"
        scrape = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert scrape.status_code == 200 and "anyagentd_a2a_tasks" in scrape.text
        assert httpx.get(f"{url}/metrics", timeout=30).status_code == 401  # the bearer came from the credential

        reload = service["ExecReload"][0].replace("$MAINPID", str(daemon.pid))
        subprocess.run(shlex.split(reload), check=True, timeout=30)
        _wait_for(stderr, "configuration reloaded")

        daemon.send_signal(getattr(signal, service["KillSignal"][0]))
        assert daemon.wait(timeout=float(service["TimeoutStopSec"][0])) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert token not in "".join(stderr)
    assert (tmp_path / "var" / "a2a" / "a2a.db").is_file()  # --state-dir under StateDirectory=


def test_a_broken_configuration_is_the_exit_status_the_unit_does_not_restart(tmp_path: Path) -> None:
    service, env, config = placed(tmp_path)
    config.write_text(config.read_text().replace('approval = "ask"', 'approval = "sometimes"'))
    start = subprocess.run(
        shlex.split(service["ExecStart"][0]),
        env=env,
        cwd=service["WorkingDirectory"][0],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert str(start.returncode) in service["RestartPreventExitStatus"][0].split(), start.stderr
    assert "agent.approval" in start.stderr and "Traceback" not in start.stderr
    assert len(start.stderr.strip().splitlines()) == 1, start.stderr  # one journal line
    assert not start.stdout, "nothing listened"


def _wait_for(lines: list[str], text: str, timeout: float = 30.0) -> None:
    """Until a captured stderr line contains ``text`` (the daemon's JSON log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in list(lines)):
            return
        time.sleep(0.05)
    raise AssertionError(f"no log line with {text!r}: {''.join(lines)[-2000:]}")
