"""What a fresh operator's trial of ``anyagentd a2a`` found in its configuration checks (issue 26), against the
real command: a file that is not UTF-8 (or a ``{{secret-file:…}}`` that is not) is one line naming it, exit 2, for
``--check-config`` and the start, and a SIGHUP with one keeps the running configuration (it killed the daemon);
an ``agent.mock_script`` the mock cannot load is refused by the check as by the start (``--mock`` wins over it);
``--check-config`` prints every key the file's types refuse, not the first alone (the start names the first and
how many more); ``a2a.metrics.token`` may not be another credential's bearer; ``a2a.url`` is an http(s) URL.

A second trial: ``a2a.url`` (and a subagent instance's or parent's ``url``) is read once as a URL — a bad IPv6
host, a port that is no number or past 65535, ``user:password@``, ``//`` in its path are one line naming the key
(they passed the check, and the next start crashed), an upper-case scheme is a URL; a SIGHUP names every change it
cannot apply (``a2a.url``, ``a2a.store``, ``[a2a.metrics] enabled`` … were dropped silently); the configuration
file and secret files are regular files read up to a bound (``/dev/zero`` and a FIFO hung the check); a store that
is a directory or not a SQLite file is refused by the check as by the start, an in-memory one is a warning; a
leading byte order mark is read."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_a2a_logs import json_lines
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
    assert line == (
        f"a2a.bearer: secret file '{tmp_path}/operator' is not UTF-8: byte offset 0 (line 1): invalid start byte"
    )


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
        line = wait_line(
            daemon, lambda line: "configuration not reloaded" in str(line.get("msg")) and said in str(line.get("msg"))
        )
        assert line["level"] == "error", line
        audits = [
            a
            for a in json_lines(daemon)
            if a.get("logger") == "anyagentd.a2a.audit" and a.get("action") == "config.reload"
        ]
        deadline = time.monotonic() + 15
        while len(audits) < n and time.monotonic() < deadline:
            time.sleep(0.02)
            audits = [
                a
                for a in json_lines(daemon)
                if a.get("logger") == "anyagentd.a2a.audit" and a.get("action") == "config.reload"
            ]
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
    assert line.startswith(
        "agent.mock_script: no script file '/nope/script.json' and no example of that name (examples: "
    ), line
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
    config.write_text(
        '[a2a]\nintrospection = "yes"\naccess_log = 3\ntrusted_proxies = ["bad", "10.0.0.0/8", '
        '"worse"]\n[a2a.limits]\nmessage_parts = 0\n'
    )
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
    assert (
        code == 2
        and stdout == ""
        and one_line(stderr)
        == (
            f"{ERROR}a2a.trusted_proxies.0: 'bad' is neither an IP address nor a CIDR network "
            f"(4 more: anyagentd a2a --check-config {config})"
        )
    )


UNIONS = {  # agent.name is a catalog id or {acp = …}: the key named is the file's, never a union member's label
    'name = { acp = { name = "x" } }': ["agent.name.acp.path: Field required"],
    "name = 5": ["agent.name: Input should be a valid string or Input should be a valid dictionary"],
    'name = { acp = { name = "x", path = "/bin/true" }, other = 1 }': [
        "agent.name.other: Input should be 'acp' or Input should be a valid dictionary or instance of AcpAgent"
    ],
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
    "a2a.principals.1.bearer": (
        '[a2a.metrics]\ntoken = "{{secret:SCRAPE}}"\n[[a2a.principals]]\nid = "alice"\n'
        'bearer = "{{secret:ALICE}}"\n[[a2a.principals]]\nid = "bob"\n'
        'bearer = "{{secret:SCRAPE}}"\n'
    ),
}


@pytest.mark.parametrize("shared", list(SCRAPE_SHARED))
def test_the_scrape_token_may_not_be_another_credential(tmp_path: Path, shared: str) -> None:
    env = {
        "OPERATOR": "op-token",
        "ALICE": "alice-token",
        "SCRAPE": "op-token" if shared == "a2a.bearer" else "scrape-token",
    }
    line = check_and_start_refuse(tmp_path, SCRAPE_SHARED[shared], env)
    assert line == (
        f"a2a.metrics.token: resolves to the same bearer as {shared}: the scrape token must be a credential of its own"
    ), line
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


# -- the second trial: a2a.url read as a URL, SIGHUP naming what it cannot apply, bounded reads, stores, a BOM -----

BAD_URLS = {  # a2a.url → what its one line says after the quoted value (a password never shown)
    "http://[::1/": "is not a URL: Invalid IPv6 URL",
    "http://127.0.0.1:abc/x": "is not a URL: Port could not be cast to integer value as 'abc'",
    "http://127.0.0.1:99999/x": "is not a URL: Port out of range 0-65535",
    "http://127.0.0.1:0/x": "names port 0, which no client can reach",
    "http://u:secret-pw@agents.example/a2a": "carries a user name or password (user:password@): the card would "
    "publish it to every client; give the URL without it",
    "http://u:secret-pw/x@agents.example": "is not a URL",  # a password with a / is read as a port: not quoted
    "http://agents.example//": "its path '//' has an empty segment ('//')",
    "https://agents.example/a2a//x": "its path '/a2a//x' has an empty segment ('//')",
    "https://agents.example/a2a?x=1": "has a query or a fragment: give the URL without it",
    "http://:8080/a2a": "is not an http:// or https:// URL with a host (e.g. https://agents.example)",
    "http://[::1]x/a2a": "is not an http:// or https:// URL with a host (e.g. https://agents.example)",
}


@pytest.mark.parametrize("url", list(BAD_URLS))
def test_a2a_url_is_read_once_as_a_url(tmp_path: Path, url: str) -> None:
    line = check_and_start_refuse(tmp_path, f'[a2a]\nurl = "{url}"\n')
    shown = url.replace("u:secret-pw@", "…@").replace("u:secret-pw/x@", "…@")
    assert line == (f"a2a.url: {shown!r}: " if "path" in BAD_URLS[url] else f"a2a.url: {shown!r} ") + BAD_URLS[url]
    assert "secret-pw" not in line


@pytest.mark.parametrize(
    "section", ['[[subagents.instances]]\nname = "kid"\n', '[[subagents.parents]]\nbearer = "{{secret:PARENT}}"\n']
)
def test_a_subagent_url_is_checked_by_the_same_rule(tmp_path: Path, section: str) -> None:
    key = "subagents.instances.0.url" if "instances" in section else "subagents.parents.0.url"
    line = check_and_start_refuse(tmp_path, f'{section}url = "http://[::1/"\n', {"PARENT": "parent-token"})
    assert line == f"{key}: 'http://[::1/' is not a URL: Invalid IPv6 URL"
    line = check_and_start_refuse(tmp_path, f'{section}url = "http://u:pw@kid.example/a2a"\n', {"PARENT": "p"})
    assert line.startswith(f"{key}: 'http://…@kid.example/a2a' carries a user name or password"), line


def test_an_upper_case_scheme_is_a_url(a2a_daemon: Any, tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text('[a2a]\nurl = "HTTPS://agents.example/a2a"\n')
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 0 and checked.stderr.strip() == f"{config}: ok", checked.stderr
    daemon = a2a_daemon(config=config.read_text())
    card = httpx.get(daemon.url + "/.well-known/agent-card.json", headers={"Host": "agents.example"}, timeout=30)
    assert card.status_code == 200, card.text
    assert card.json()["supportedInterfaces"][0]["url"] == "https://agents.example/a2a"


def test_a_sighup_with_a_bad_url_keeps_the_running_configuration(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config="[a2a]\nintrospection = true\n", mock="hello")
    (tmp_path / "config0.toml").write_text('[a2a]\nurl = "http://[::1/"\n')
    daemon.signal(signal.SIGHUP)
    line = wait_line(daemon, lambda line: "configuration not reloaded" in str(line.get("msg")))
    assert line["msg"] == "SIGHUP: configuration not reloaded: a2a.url: 'http://[::1/' is not a URL: Invalid IPv6 URL"
    assert daemon.send_text("hi")["status"]["state"] == "TASK_STATE_COMPLETED"


def reloads(daemon: Any) -> list[str]:
    return [str(line["msg"]) for line in json_lines(daemon) if str(line.get("msg")).startswith("SIGHUP: ")]


def reload_with(daemon: Any, path: Path, text: str) -> list[str]:
    """Write ``text`` as the daemon's config, SIGHUP, wait for the reload to be logged; the SIGHUP lines it logged."""
    before = len(reloads(daemon))
    path.write_text(text)
    daemon.signal(signal.SIGHUP)
    wait_line(
        daemon,
        lambda line: (
            "configuration reloaded" in str(line.get("msg"))
            and len(reloads(daemon)) > before
            and "configuration reloaded" in reloads(daemon)[-1]
        ),
    )
    return reloads(daemon)[before:]


def test_a_sighup_names_every_change_it_cannot_apply(a2a_daemon: Any, tmp_path: Path) -> None:
    base = "[a2a]\nintrospection = true\n"
    daemon = a2a_daemon(config=base, mock="hello")
    path = tmp_path / "config0.toml"
    said = reload_with(
        daemon,
        path,
        f'[a2a]\nintrospection = true\nurl = "http://127.0.0.1:9"\n'
        f'store = "sqlite+aiosqlite:///{tmp_path}/other.db"\n'
        "[a2a.metrics]\nenabled = false\n",
    )
    assert said[0] == (
        "SIGHUP: changes to a2a.url, a2a.store, a2a.metrics.enabled take effect at the next start "
        "(the running daemon keeps what it started with)"
    ), said
    assert len(said) == 2 and said[1].startswith("SIGHUP: configuration reloaded from "), said
    # what a reload applies is applied without a warning: introspection, the approval of new sessions, CORS
    said = reload_with(daemon, path, '[agent]\napproval = "auto"\n[a2a]\ncors_origins = ["https://app.example"]\n')
    assert len(said) == 1 and said[0].startswith("SIGHUP: configuration reloaded from "), said
    # still served as started: /metrics is there, the task store the one it opened
    assert httpx.get(daemon.url + "/metrics", timeout=30).status_code == 200
    assert not (tmp_path / "other.db").exists()
    said = reload_with(daemon, path, '[agent]\ndir = "/"\n[a2a.pool]\nmax_live = 3\n[a2a.push]\nenabled = false\n')
    assert said[0].startswith("SIGHUP: changes to agent.dir, a2a.push, a2a.pool take effect at the next start"), said


def test_a_secret_file_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path) -> None:
    line = check_and_start_refuse(tmp_path, '[a2a]\nbearer = "{{secret-file:/dev/zero}}"\n')
    assert line == "a2a.bearer: secret file '/dev/zero' is not a regular file (a character device)"
    fifo = tmp_path / "token-fifo"
    os.mkfifo(fifo)
    line = check_and_start_refuse(tmp_path, f'[a2a]\nbearer = "{{{{secret-file:{fifo}}}}}"\n')
    assert line == f"a2a.bearer: secret file '{fifo}' is not a regular file (a FIFO)"
    (tmp_path / "big").write_bytes(b"t" * (64 * 1024 + 1))
    line = check_and_start_refuse(
        tmp_path, f'[[a2a.principals]]\nid = "alice"\nbearer = "{{{{secret-file:{tmp_path}/big}}}}"\n'
    )
    assert line == f"a2a.principals.0.bearer: secret file '{tmp_path}/big' is larger than 64 KiB"
    (tmp_path / "fits").write_bytes(b"t" * (64 * 1024 - 1) + b"\n")  # a file of 64 KiB: read
    fits = write(tmp_path, f'[a2a]\nbearer = "{{{{secret-file:{tmp_path}/fits}}}}"\n')
    checked = run_cli("--check-config", str(fits))
    assert checked.returncode == 0, checked.stderr


def write(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "agentd.toml"
    config.write_text(text)
    return config


def check_and_start_refuse_file(tmp_path: Path, config: Path) -> str:
    checked = run_cli("--check-config", str(config), cwd=tmp_path)
    line = one_line(checked.stderr)
    assert checked.returncode == 2 and line.startswith(ERROR), checked.stderr
    code, stdout, stderr = start(config, tmp_path)
    assert code == 2 and stdout == "" and one_line(stderr) == line
    return line.removeprefix(ERROR)


def test_a_config_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path) -> None:
    line = check_and_start_refuse_file(tmp_path, Path("/dev/zero"))
    assert line == "/dev/zero is not a regular file (a character device)"
    fifo = tmp_path / "agentd-fifo.toml"
    os.mkfifo(fifo)
    assert check_and_start_refuse_file(tmp_path, fifo) == f"{fifo} is not a regular file (a FIFO)"
    big = tmp_path / "big.toml"
    big.write_bytes(b"[a2a]\n" + b"#" * (1024 * 1024) + b"\n")
    assert check_and_start_refuse_file(tmp_path, big) == f"{big} is larger than 1 MiB"


def test_a_store_the_start_cannot_open_is_refused_by_the_check(tmp_path: Path) -> None:
    directory = (tmp_path / "dir").resolve()
    directory.mkdir()
    line = check_and_start_refuse(tmp_path, f'[a2a]\nstore = "sqlite+aiosqlite:///{directory}"\n')
    assert line == (
        f"a2a.store: cannot open the task store sqlite+aiosqlite:///{directory}: {directory} is not a "
        "regular file (a directory)"
    )
    other = directory / "passwd"
    other.write_text("root:x:0:0:root:/root:/bin/bash\n")
    line = check_and_start_refuse(tmp_path, f'[a2a]\nstore = "sqlite+aiosqlite:///{other}"\n')
    assert line == (
        f"a2a.store: cannot open the task store sqlite+aiosqlite:///{other}: {other} is not a SQLite "
        "database (its first 16 bytes are not 'SQLite format 3\\0')"
    )
    import sqlite3

    for name in ("empty.db", "real.db"):  # an empty file SQLite makes a database of; a database
        (directory / name).write_bytes(b"")
    with sqlite3.connect(directory / "real.db") as db:
        db.execute("create table t (x)")
    db.close()
    for name in ("empty.db", "real.db", "new.db"):
        config = write(tmp_path, f'[a2a]\nstore = "sqlite+aiosqlite:///{directory / name}"\n')
        checked = run_cli("--check-config", str(config))
        assert checked.returncode == 0 and checked.stderr.strip().endswith(": ok"), checked.stderr


def test_an_in_memory_store_is_a_warning_and_is_served(a2a_daemon: Any, tmp_path: Path) -> None:
    text = '[a2a]\nstore = "sqlite+aiosqlite:///:memory:"\n'
    checked = run_cli("--check-config", str(write(tmp_path, text)))
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip().splitlines() == [
        "anyagentd a2a: warning: a2a.store: sqlite+aiosqlite:///:memory: is an in-memory database: nothing survives "
        "a restart (tasks, conversations, push configs, workflow runs, device sessions)",
        f"{tmp_path}/agentd.toml: ok",
    ], checked.stderr
    daemon = a2a_daemon(config=text, mock="hello")
    task = daemon.send_text("hi")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert daemon.rpc("GetTask", {"id": task["id"]}).json()["result"]["id"] == task["id"]


def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_bytes(b"\xef\xbb\xbf[a2a]\nintrospection = true\n")
    checked = run_cli("--check-config", str(config))
    assert checked.returncode == 0 and checked.stderr.strip() == f"{config}: ok", checked.stderr
    # offsets stay the file's: the mark's three bytes count
    line = check_and_start_refuse(tmp_path, b"\xef\xbb\xbf[a2a]\n\xff\n")
    assert line == f"{tmp_path}/agentd.toml is not UTF-8: byte offset 9 (line 2): invalid start byte"
