"""The daemon's shape and life: lazy import, configuration checks, the listening line, restart durability (kill -9
mid-turn), SIGTERM drain, SIGHUP reload, push notifications to a real loopback receiver."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD, SLOW, PushReceiver, push_receiver, self_signed, wait_pushed, wait_state

from anyagentd_a2a.config import ConfigError, load, parse

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


def test_cli_import_does_not_load_the_http_stack() -> None:
    code = (
        "import sys, anyagentd.cli; "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'a2a', 'starlette', 'uvicorn', 'sqlalchemy', "
        "'sse_starlette', 'httpx'}); "
        "found = anyagentd.cli.main.get_command(None, 'a2a') is not None; "
        "print(heavy, found, 'anyagentd_a2a.plugin' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] True True"


# ------------------------------------------------------------------------------------------------ configuration


def test_config_refuses_unknown_keys_literals_and_missing_secrets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"listne": "127.0.0.1:1"}})
    assert err.value.key == "a2a.listne" and "unknown key" in err.value.message
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"bearer": "hunter2"}})
    assert err.value.key == "a2a.bearer" and "hunter2" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"principals": [{"id": "al", "bearer": "{{secret:NOPE_TOKEN}}"}]}}, env={})
    assert err.value.key == "a2a.principals.0.bearer" and "NOPE_TOKEN" in err.value.message
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"listen": "0.0.0.0:8787", "bearer": "{{secret:T}}"}}, env={"T": "x"})
    assert err.value.key == "a2a.listen" and "tls" in err.value.message
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"listen": "0.0.0.0:8787", "tls": {"cert": "c", "key": "k"}}})
    assert err.value.key == "a2a.listen" and "bearer" in err.value.message
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"principals": [{"id": "al", "bearer": "{{secret:T}}", "rate": "lots"}]}}, env={"T": "x"})
    assert err.value.key == "a2a.principals.0.rate"
    secret = tmp_path / "token"
    secret.write_text("from-a-file\n")
    loaded = parse({"a2a": {"bearer": f"{{{{secret-file:{secret}}}}}"}, "agent": {"approval": "auto"}})
    assert loaded.secrets.operator.get_secret_value() == "from-a-file"
    assert "from-a-file" not in repr(loaded)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [ANYAGENTD, "a2a", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_check_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[agent]\nname = "mock"\napproval = "sometimes"\n')
    result = run_cli("--check-config", str(bad))
    assert result.returncode == 2 and "agent.approval" in result.stderr and result.stdout == ""
    good = tmp_path / "good.toml"
    good.write_text('[a2a]\nbearer = "{{secret:GOOD_TOKEN}}"\n')
    assert run_cli("--check-config", str(good), env={"GOOD_TOKEN": "t"}).returncode == 0
    missing = run_cli("--check-config", str(good), env={"GOOD_TOKEN": ""})
    assert missing.returncode == 2 and "GOOD_TOKEN" in missing.stderr
    served = run_cli("--config", str(bad), "--listen", "127.0.0.1:0")
    assert served.returncode == 2 and "agent.approval" in served.stderr
    exposed = run_cli("--listen", "0.0.0.0:0")
    assert exposed.returncode == 2 and "a2a.listen" in exposed.stderr


def test_a_store_that_cannot_be_opened_is_one_line_naming_it_with_its_password_hidden(tmp_path: Path) -> None:
    cases = {  # a2a.store -> what the line says; each refused by --check-config too, before anything is served
        # (asyncpg is installed for the PostgreSQL tests: the missing driver here is psycopg's)
        "postgresql+psycopg_async://anyagentd:hunter2@127.0.0.1:1/tasks": "its driver is not installed (pip install psycopg)",
        "mysql+aiomysql://anyagentd:hunter2@db/tasks": "its driver is not installed (pip install aiomysql)",
        "postgresql://anyagentd:hunter2@db/tasks": "'postgresql' is not an async driver",
        "tasks.db": "not a database URL",
        "nosuch+driver://anyagentd:hunter2@db/tasks": "SQLAlchemy has no database 'nosuch+driver'",
    }
    for n, (url, said) in enumerate(cases.items()):
        config = tmp_path / f"store{n}.toml"
        config.write_text(f'[a2a]\nstore = "{url}"\n')
        for args in (("--check-config", str(config)), ("--config", str(config), "--listen", "127.0.0.1:0")):
            result = run_cli(*args)
            assert result.returncode == 2, (url, result.stderr)
            assert "a2a.store: " in result.stderr and said in result.stderr, result.stderr
            assert "hunter2" not in result.stderr and "Traceback" not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
    # A well-formed store that cannot be opened (its directory does not exist): refused by --check-config and the
    # start alike (the preflight, before anything is bound), exit 2, one line naming a2a.store, no traceback.
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = tmp_path / "unopenable.toml"
    config.write_text(f'[a2a]\nstore = "sqlite+aiosqlite:///{blocker}/sub/a2a.db"\n')
    for args in (("--check-config", str(config)), ("--config", str(config), "--listen", "127.0.0.1:0")):
        result = run_cli(*args)
        assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"anyagentd a2a: configuration error: a2a.store: cannot open the task store "
            f"sqlite+aiosqlite:///{blocker}/sub/a2a.db: the directory {blocker}/sub does not exist"
        ], result.stderr


def test_default_config_serves_mock_on_loopback_and_logs_json(a2a_daemon: Any) -> None:
    daemon = a2a_daemon()
    assert daemon.url.startswith("http://127.0.0.1:")
    task = daemon.send_text("hi")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"  # the mock's default script answers
    assert all(json.loads(line)["level"] for line in daemon.stderr if line.strip())


def test_the_listener_serves_its_connections_with_nagle_off(tmp_path: Path) -> None:
    """Nagle on made every SendMessage on a kept-alive connection wait ~40 ms for the client's delayed ACK."""
    from tcp_probe import accepted_nodelay

    from anyagentd_a2a.daemon import Daemon, Options

    daemon = Daemon(parse({}), Options(listen="127.0.0.1:0", state_dir=tmp_path))
    assert accepted_nodelay(daemon._bind())
    assert daemon.url.startswith("http://127.0.0.1:")


# ------------------------------------------------------------------------------------------------ durability


def test_kill_9_mid_turn_then_restart(a2a_daemon: Any, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    [
                        {"Emit": {"TextDelta": {"message_id": "m0", "text": "quick"}}},
                        {"End": {"Completed": {"source": "Protocol"}}},
                    ],
                    *SLOW["turns"],
                ]
            }
        )
    )
    state = tmp_path / "state"
    daemon = a2a_daemon(mock=str(script), state_dir=state)
    done = daemon.send_text("first", context_id="c1")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    running = daemon.send_text("second", context_id="c1", configuration={"returnImmediately": True})
    wait_state(daemon, running["id"], "TASK_STATE_WORKING")
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    again = a2a_daemon(mock=str(script), state_dir=state)
    failed = again.rpc("GetTask", {"id": running["id"]}).json()["result"]
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert "stopped while this task was running" in failed["status"]["message"]["parts"][0]["text"]
    assert failed["artifacts"][0]["parts"][0]["text"] == "working"  # what it streamed before is kept
    listed = again.rpc("ListTasks", {}).json()["result"]["tasks"]
    assert {t["id"] for t in listed} == {done["id"], running["id"]}
    assert again.rpc("GetTask", {"id": done["id"]}).json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # a terminal task takes no more messages
    assert (
        again.rpc(
            "SendMessage",
            {"message": {"messageId": "x", "role": "ROLE_USER", "taskId": running["id"], "parts": [{"text": "more"}]}},
        ).json()["error"]["code"]
        == -32004
    )


def test_sigterm_drains_and_exits_0(a2a_daemon: Any, tmp_path: Path) -> None:
    import anyagentd.mock

    permission = json.loads((Path(anyagentd.mock.__file__).parent / "scripts" / "permission.json").read_text())
    script = tmp_path / "drain.json"  # every session: a permission turn, then a 60 s turn
    script.write_text(json.dumps({"turns": [permission["turns"][0], SLOW["turns"][0]]}))
    state = tmp_path / "state"
    daemon = a2a_daemon(mock=str(script), state_dir=state)
    waiting = daemon.send_text("write", context_id="a")  # parked in INPUT_REQUIRED
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert (
        daemon.send_text("allow", task_id=daemon.send_text("write", context_id="b")["id"])["status"]["state"]
        == "TASK_STATE_COMPLETED"
    )
    running = daemon.send_text("long", context_id="b", configuration={"returnImmediately": True})
    wait_state(daemon, running["id"], "TASK_STATE_WORKING")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    again = a2a_daemon(mock=str(script), state_dir=state)
    for task in (running, waiting):  # both drained as CANCELED, not lost as FAILED
        got = again.rpc("GetTask", {"id": task["id"]}).json()["result"]
        assert got["status"]["state"] == "TASK_STATE_CANCELED", got
    assert any("draining" in line for line in daemon.stderr)


def test_sighup_reloads_principals(a2a_daemon: Any, tmp_path: Path) -> None:
    base = '[[a2a.principals]]\nid = "alice"\nbearer = "{{secret:ALICE_T}}"\n'
    env = {"ALICE_T": "alice-t", "BOB_T": "bob-t"}
    daemon = a2a_daemon(config=base, env=env, mock="hello")
    assert daemon.rpc("ListTasks", token="bob-t").status_code == 401
    config = next(Path(a) for a in daemon.process.args if str(a).endswith(".toml"))
    config.write_text(base + '[[a2a.principals]]\nid = "bob"\nbearer = "{{secret:BOB_T}}"\n')
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while daemon.rpc("ListTasks", token="bob-t").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemon.rpc("ListTasks", token="bob-t").status_code == 200
    assert not any("take effect at the next start" in line for line in daemon.stderr)  # nothing else changed
    config.write_text("[a2a]\nnonsense = 1\n")  # a bad file is refused and the running configuration kept
    daemon.signal(signal.SIGHUP)
    time.sleep(0.5)
    assert daemon.rpc("ListTasks", token="alice-t").status_code == 200
    assert daemon.process.poll() is None


# ------------------------------------------------------------------------------------------------ push


@pytest.fixture
def receiver() -> Any:
    with push_receiver() as server:
        yield server


def test_push_notifications_reach_a_loopback_receiver(a2a_daemon: Any, receiver: Any) -> None:
    daemon = a2a_daemon(config="[a2a.push]\nallow_private = true\n", mock="hello")
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    push = {"url": url, "token": "push-token-1"}
    task = daemon.send_text("hi", configuration={"taskPushNotificationConfig": push})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any("COMPLETED" in json.dumps(b) for _, b in PushReceiver.received):
        time.sleep(0.05)
    assert PushReceiver.received, "no notification arrived"
    headers, _ = PushReceiver.received[-1]
    assert headers["X-A2A-Notification-Token"] == "push-token-1"
    assert any(
        b.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
        for _, b in PushReceiver.received
    )
    configs = daemon.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}).json()["result"]
    assert configs["configs"][0]["url"] == url
    config_id = configs["configs"][0]["id"]
    got = daemon.rpc("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": config_id}).json()["result"]
    assert got["url"] == url and got["token"] == "push-token-1"
    daemon.rpc("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": config_id}).raise_for_status()
    left = daemon.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]}).json()["result"]
    assert not left.get("configs")


def test_push_subscribers_are_told_of_the_failure_a_restart_records(
    a2a_daemon: Any, receiver: Any, tmp_path: Path
) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    state = tmp_path / "state"
    config = "[a2a.push]\nallow_private = true\n"
    daemon = a2a_daemon(config=config, mock=str(script), state_dir=state)
    push = {"url": f"http://127.0.0.1:{receiver.server_address[1]}/hook", "token": "push-token-2"}
    running = daemon.send_text("long", configuration={"returnImmediately": True, "taskPushNotificationConfig": push})
    wait_state(daemon, running["id"], "TASK_STATE_WORKING")
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    again = a2a_daemon(config=config, mock=str(script), state_dir=state)
    assert again.rpc("GetTask", {"id": running["id"]}).json()["result"]["status"]["state"] == "TASK_STATE_FAILED"
    told = wait_pushed(running["id"], "TASK_STATE_FAILED")
    assert told[-1] == "TASK_STATE_FAILED"
    failure = next(b for _, b in reversed(PushReceiver.received) if "statusUpdate" in b)["statusUpdate"]
    assert "stopped while this task was running" in failure["status"]["message"]["parts"][0]["text"]
    assert PushReceiver.received[-1][0]["X-A2A-Notification-Token"] == "push-token-2"


def test_push_subscribers_are_told_of_the_cancel_a_drain_records(
    a2a_daemon: Any, receiver: Any, tmp_path: Path
) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW))
    daemon = a2a_daemon(config="[a2a.push]\nallow_private = true\n", mock=str(script))
    push = {"url": f"http://127.0.0.1:{receiver.server_address[1]}/hook"}
    running = daemon.send_text("long", configuration={"returnImmediately": True, "taskPushNotificationConfig": push})
    wait_state(daemon, running["id"], "TASK_STATE_WORKING")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    assert wait_pushed(running["id"], "TASK_STATE_CANCELED", timeout=1)[-1] == "TASK_STATE_CANCELED"


def test_push_to_a_private_address_is_refused_by_default(a2a_daemon: Any) -> None:
    daemon = a2a_daemon(mock="hello")
    task = daemon.send_text("hi")
    error = daemon.rpc(
        "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "http://127.0.0.1:9/hook"}
    ).json()["error"]
    assert error["code"] == -32602


def test_load_reads_toml_files(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[agent]\nname = { acp = { name = "x", path = "/bin/x" } }\n')
    assert load(path).config.agent.agent_ref() == {"acp": {"name": "x", "path": "/bin/x", "args": []}}
    path.write_text("[agent\n")
    with pytest.raises(ConfigError):
        load(path)


def test_tls_listener_serves_https(a2a_daemon: Any, tmp_path: Path) -> None:
    import ssl

    import httpx

    cert, key = self_signed(tmp_path)
    daemon = a2a_daemon(config=f'[a2a.tls]\ncert = "{cert}"\nkey = "{key}"\n', mock="hello")
    assert daemon.url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(cert))
    card = httpx.get(daemon.url + "/.well-known/agent-card.json", verify=context).json()
    assert card["supportedInterfaces"][0]["url"] == daemon.url
    reply = httpx.post(
        daemon.url + "/",
        verify=context,
        headers={"A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
    ).json()
    assert reply["result"]["tasks"] == []


async def test_sends_are_refused_while_draining_and_reads_still_served() -> None:
    """The front's last gate, in process (a drain is too short to hit from outside): sends get -32603 DRAINING and
    never reach the dispatcher; reads still do."""
    import httpx
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from anyagentd_a2a.config import default_config
    from anyagentd_a2a.front import Endpoint, Front
    from anyagentd_a2a.lifecycle import Lifecycle
    from anyagentd_a2a.principals import Identities

    reached: list[str] = []

    async def dispatch(request: Any) -> Any:
        reached.append((await request.json())["method"])
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "result": {}})

    lifecycle = Lifecycle()
    lifecycle.request_drain("SIGTERM")
    front = Front(
        Identities(default_config()), {"SendMessage", "GetTask"}, supported_extensions=set(), realm="anyagentd"
    )
    endpoint = Endpoint("mock", dispatch, lifecycle, "http://127.0.0.1")

    async def post(request: Any) -> Any:
        return await front.handle(request, endpoint)

    app = Starlette(routes=[Route("/", post, methods=["POST"])])
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        headers = {"A2A-Version": "1.0"}
        send = await client.post(
            "/", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
        )
        error = send.json()["error"]
        assert error["code"] == -32603 and error["data"][0]["reason"] == "DRAINING"
        read = await client.post(
            "/", headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "x"}}
        )
        assert read.json()["result"] == {}
    assert reached == ["GetTask"]


def test_configured_store_and_public_url(a2a_daemon: Any, tmp_path: Path) -> None:
    db = tmp_path / "custom.db"
    config = f'[a2a]\nstore = "sqlite+aiosqlite:///{db}"\nurl = "https://agents.example/a2a"\n'
    daemon = a2a_daemon(config=config, mock="hello")
    import httpx

    card = httpx.get(daemon.url + "/.well-known/agent-card.json").json()
    assert card["supportedInterfaces"][0]["url"] == "https://agents.example/a2a"
    task = daemon.send_text("hi")
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("select id from tasks")] == [task["id"]]
    assert not (daemon.state_dir / "a2a.db").exists()


def test_unknown_agent_refuses_to_start_and_a_missing_one_fails_its_task(a2a_daemon: Any, tmp_path: Path) -> None:
    config = tmp_path / "unknown.toml"
    config.write_text('[agent]\nname = "no-such-agent"\n')
    result = run_cli("--config", str(config), "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 2 and "agent.name" in result.stderr and "no-such-agent" in result.stderr
    assert result.stdout == ""  # never announced a listener
    # a child instance named like an installed agent would hide it from every spawn
    config.write_text('[[subagents.instances]]\nname = "mock"\nurl = "http://127.0.0.1:9"\n')
    result = run_cli("--config", str(config), "--listen", "127.0.0.1:0", "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 2 and "subagents.instances.0.name" in result.stderr and result.stdout == ""
    assert "'mock' is an installed agent here" in result.stderr and "Traceback" not in result.stderr
    daemon = a2a_daemon(
        config='[agent]\nname = "gemini"\n', env={"PATH": "/usr/bin:/bin", "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    )
    task = daemon.send_text("hi")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "NotInstalled" in task["status"]["message"]["parts"][0]["text"]


def test_a_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli("--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 1 and result.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
