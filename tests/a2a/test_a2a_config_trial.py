"""What a fresh operator's trial of ``anyagentd a2a`` found in its configuration checks (issue 26), against the
real command: a file that is not UTF-8 (or a ``{{secret-file:…}}`` that is not) is one line naming it, exit 2, for
``--check-config`` and the start, and a SIGHUP with one keeps the running configuration (it killed the daemon);
an ``agent.mock_script`` the mock cannot load is refused by the check as by the start (``--mock`` wins over it);
``--check-config`` prints every key the file's types refuse, not the first alone (the start names the first and
how many more); ``a2a.metrics.token`` may not be another credential's bearer; ``a2a.url`` is an http(s) URL."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_a2a_preflight import one_line, run_cli, start

pytestmark = pytest.mark.timeout(120)

ERROR = "anyagentd a2a: configuration error: "


def check_and_start_refuse(tmp_path: Path, text: str | bytes, env: dict[str, str] | None = None) -> str:
    """``--check-config`` and the start of ``text`` both exit 2 with the same one line; returns it."""
    config = tmp_path / "agentd.toml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    checked = run_cli("--check-config", str(config), env=env, cwd=tmp_path)
    line = one_line(checked.stderr)
    assert checked.returncode == 2 and line.startswith(ERROR), checked.stderr
    code, stdout, stderr = start(config, tmp_path, env)
    assert code == 2 and stdout == "" and one_line(stderr) == line
    return line.removeprefix(ERROR)


def test_a_file_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path) -> None:
    line = check_and_start_refuse(tmp_path, b"[a2a]\nintrospection = true\n\xff\n")
    assert line == f"{tmp_path}/agentd.toml is not UTF-8: byte offset 27 (line 3): invalid start byte"


def test_a_secret_file_that_is_not_utf8_is_one_line_naming_its_key(tmp_path: Path) -> None:
    (tmp_path / "operator").write_bytes(b"\xfe\xff-token\n")
    line = check_and_start_refuse(tmp_path, f'[a2a]\nbearer = "{{{{secret-file:{tmp_path}/operator}}}}"\n')
    assert line == (f"a2a.bearer: secret file '{tmp_path}/operator' is not UTF-8: byte offset 0 (line 1): "
                    "invalid start byte")  # fmt: skip


def json_lines(daemon: Any) -> list[dict[str, Any]]:
    found = []
    for raw in list(daemon.stderr):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            found.append(line)
    return found


def wait_line(daemon: Any, match: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.process.poll() is None, f"the daemon exited: {''.join(daemon.stderr)[-3000:]}"
        for line in json_lines(daemon):
            if match(line):
                return line
        time.sleep(0.02)
    raise AssertionError(f"no line matched; stderr: {''.join(daemon.stderr)[-3000:]}")


def test_a_sighup_with_a_file_not_utf8_keeps_the_running_configuration(a2a_daemon: Any, tmp_path: Path) -> None:
    secret = tmp_path / "operator"
    secret.write_text("op-token\n")
    text = f'[a2a]\nbearer = "{{{{secret-file:{secret}}}}}"\n'
    daemon = a2a_daemon(config=text, mock="hello")
    config = tmp_path / "config0.toml"

    def refused(n: int, said: str) -> None:
        daemon.signal(signal.SIGHUP)
        line = wait_line(daemon, lambda line: "configuration not reloaded" in str(line.get("msg"))
                         and said in str(line.get("msg")))  # fmt: skip
        assert line["level"] == "error", line
        audits = [a for a in json_lines(daemon) if a.get("logger") == "anyagentd.a2a.audit"
                  and a.get("action") == "config.reload"]  # fmt: skip
        deadline = time.monotonic() + 15
        while len(audits) < n and time.monotonic() < deadline:
            time.sleep(0.02)
            audits = [a for a in json_lines(daemon) if a.get("logger") == "anyagentd.a2a.audit"
                      and a.get("action") == "config.reload"]  # fmt: skip
        assert len(audits) == n and audits[-1]["outcome"] == "refused", audits
        # still serving, with the configuration it started with: the operator's token
        assert daemon.send_text("hi", token="op-token")["status"]["state"] == "TASK_STATE_COMPLETED"
        assert daemon.rpc("ListTasks", {}).status_code == 401

    config.write_bytes(text.encode() + b"# \xff\n")
    refused(1, f"{config} is not UTF-8: byte offset")
    config.write_text(text)
    secret.write_bytes(b"\xff\xfe")
    refused(2, f"a2a.bearer: secret file '{secret}' is not UTF-8")
    assert daemon.process.poll() is None


def test_a_mock_script_the_mock_cannot_load_is_refused_by_the_check_as_by_the_start(tmp_path: Path) -> None:
    line = check_and_start_refuse(tmp_path, '[agent]\nmock_script = "/nope/script.json"\n')
    assert line.startswith("agent.mock_script: no script file '/nope/script.json' and no example of that name "
                           "(examples: "), line  # fmt: skip
    line = check_and_start_refuse(tmp_path, '[agent]\nmock_script = "no-such-example"\n')
    assert line.startswith("agent.mock_script: no script file 'no-such-example'"), line
    (tmp_path / "bad.json").write_text("{not json")
    line = check_and_start_refuse(tmp_path, f'[agent]\nmock_script = "{tmp_path}/bad.json"\n')
    assert line.startswith(f"agent.mock_script: invalid mock script {tmp_path}/bad.json: not JSON"), line
    # --mock wins over the file's script: the check of what the start runs is ok
    checked = run_cli("--check-config", str(tmp_path / "agentd.toml"), "--mock", "hello")
    assert checked.returncode == 0 and checked.stderr.strip().endswith(": ok"), checked.stderr
    checked = run_cli("--check-config", str(tmp_path / "agentd.toml"), "--mock", "nope")
    assert checked.returncode == 2 and one_line(checked.stderr).startswith(f"{ERROR}--mock: no script file 'nope'")


def test_check_config_prints_every_key_the_types_refuse(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text('[a2a]\nintrospection = "yes"\naccess_log = 3\ntrusted_proxies = ["bad", "10.0.0.0/8", '
                      '"worse"]\n[a2a.limits]\nmessage_parts = 0\n')  # fmt: skip
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert checked.stderr.strip().splitlines() == [
        f"{ERROR}a2a.trusted_proxies.0: 'bad' is neither an IP address nor a CIDR network",
        f"{ERROR}a2a.trusted_proxies.2: 'worse' is neither an IP address nor a CIDR network",
        f"{ERROR}a2a.introspection: Input should be a valid boolean",
        f"{ERROR}a2a.access_log: Input should be a valid boolean",
        f"{ERROR}a2a.limits.message_parts: Input should be greater than or equal to 1",
    ], checked.stderr
    code, stdout, stderr = start(config, tmp_path)
    assert code == 2 and stdout == "" and one_line(stderr) == (
        f"{ERROR}a2a.trusted_proxies.0: 'bad' is neither an IP address nor a CIDR network "
        f"(4 more: anyagentd a2a --check-config {config})")


UNIONS = {  # agent.name is a catalog id or {acp = …}: the key named is the file's, never a union member's label
    'name = { acp = { name = "x" } }': ["agent.name.acp.path: Field required"],
    'name = 5': ["agent.name: Input should be a valid string or Input should be a valid dictionary"],
    'name = { acp = { name = "x", path = "/bin/true" }, other = 1 }': [
        "agent.name.other: Input should be 'acp' or Input should be a valid dictionary or instance of AcpAgent"],
}


@pytest.mark.parametrize("line", list(UNIONS))
def test_an_error_in_a_union_names_the_files_key(tmp_path: Path, line: str) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text(f"[agent]\n{line}\n")
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert checked.stderr.strip().splitlines() == [ERROR + e for e in UNIONS[line]], checked.stderr


SCRAPE_SHARED = {
    "a2a.bearer": '[a2a]\nbearer = "{{secret:OPERATOR}}"\n[a2a.metrics]\ntoken = "{{secret:SCRAPE}}"\n',
    "a2a.principals.1.bearer": ('[a2a.metrics]\ntoken = "{{secret:SCRAPE}}"\n[[a2a.principals]]\nid = "alice"\n'
                                'bearer = "{{secret:ALICE}}"\n[[a2a.principals]]\nid = "bob"\n'
                                'bearer = "{{secret:SCRAPE}}"\n'),
}  # fmt: skip


@pytest.mark.parametrize("shared", list(SCRAPE_SHARED))
def test_the_scrape_token_may_not_be_another_credential(tmp_path: Path, shared: str) -> None:
    env = {"OPERATOR": "op-token", "ALICE": "alice-token", "SCRAPE": "op-token" if shared == "a2a.bearer" else
           "scrape-token"}  # fmt: skip
    line = check_and_start_refuse(tmp_path, SCRAPE_SHARED[shared], env)
    assert line == (f"a2a.metrics.token: resolves to the same bearer as {shared}: the scrape token must be a "
                    "credential of its own"), line  # fmt: skip
    for secret in env.values():
        assert secret not in line


@pytest.mark.parametrize("url", ["ftp://x", "x.example", "https://", "file:///etc/passwd", "http:// x"])
def test_a2a_url_is_an_http_or_https_url(tmp_path: Path, url: str) -> None:
    line = check_and_start_refuse(tmp_path, f'[a2a]\nurl = "{url}"\n')
    assert line == f"a2a.url: {url!r} is not an http:// or https:// URL with a host (e.g. https://agents.example)"


def test_an_https_url_is_advertised(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(config='[a2a]\nurl = "https://agents.example"\n')
    card = httpx.get(daemon.url + "/.well-known/agent-card.json", headers={"Host": "agents.example"}, timeout=30)
    assert card.status_code == 200, card.text
    assert card.json()["supportedInterfaces"][0]["url"].startswith("https://agents.example")
