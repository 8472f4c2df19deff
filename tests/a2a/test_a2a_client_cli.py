"""The client side for people, driven as a person would: the real ``anyagentd a2a login|send|status|op|tasks|runs``
against a real ``anyagentd a2a`` daemon (the scripted ``mock`` agent). ``op`` runs message and task ops with
``--arg``/``--args`` (integers sent as integers), follows a task op to its end or to INPUT_REQUIRED; ``status`` and
``op`` print JSON in the daemon's key order with whole numbers as integers; ``tasks`` and ``runs`` list as a table or
JSON; the answer hint is a command that, pasted, answers the task (the request's own answer words, ``--token`` kept
without printing the token); ``--cacert`` verifies a TLS daemon on every subcommand; every failure is one line on
stderr, exit 1. The client section's two README blocks (plugins/a2a/README.md) run as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD, self_signed

pytestmark = pytest.mark.timeout(180)

OPERATOR, ALICE = "op-secret-c1i7", "alice-secret-c1i8"
ENV = {"OP_T": OPERATOR, "ALICE_T": ALICE}
URI = "https://agentd.dev/a2a/ext/command"
README = Path(__file__).resolve().parents[2] / "plugins" / "a2a" / "README.md"
CONFIG = """
[a2a]
bearer = "{{secret:OP_T}}"
introspection = true
[a2a.device_grant]
enabled = true
[[a2a.principals]]
id = "alice"
bearer = "{{secret:ALICE_T}}"

[[workflows]]
name = "pipe"
roles = ["user"]
[workflows.steps.go]
kind = "wait"
on = "signal"
signal = "go"
[workflows.steps.done]
kind = "finish"
depends_on = ["go"]
output = "{{steps.go.output}}"

[[workflows]]
name = "asking"
roles = ["user"]
[workflows.steps.a]
kind = "agent"
agent = "mock"
prompt = "write hello.txt"
approval = "ask"
"""


def client_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a person's shell: no token or CA variable of ours, a config dir of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANYAGENTD_A2A_TOKEN", "ANYAGENTD_A2A_CACERT")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "COLUMNS": "200", **extra}


def cli(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``anyagentd a2a ARGS`` as a person runs it (see :func:`client_env`; ``env`` added)."""
    return subprocess.run(
        [ANYAGENTD, "a2a", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=client_env(tmp_path, **(env or {})),
        cwd=tmp_path,
    )


def one_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Assert ``done`` failed as the CLI must: exit 1, nothing on stdout, one line on stderr (no traceback) holding
    every needle; returns that line."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anyagentd a2a: ") and "Traceback" not in done.stderr, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll ``check`` until it returns something truthy; returns it (fails naming ``what`` after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def raw_command(daemon: Any, op: str, token: str | None = OPERATOR, **args: Any) -> dict[str, Any]:
    """The daemon's JSON-RPC reply body to the command ``op`` (raw: key order and numbers as it wrote them)."""
    message = {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "extensions": [URI],
        "parts": [{"data": {"agentd": {"op": op, **args}}, "mediaType": "application/json"}],
    }
    return daemon.rpc("SendMessage", {"message": message}, token=token, headers={"A2A-Extensions": URI}).json()


def runs_of(daemon: Any) -> list[dict[str, Any]]:
    return raw_command(daemon, "workflow.status")["result"]["message"]["parts"][0]["data"]["runs"]


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens (a port just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def readme_block(name: str) -> str:
    """The ``sh`` block after ``<!-- client: NAME -->`` in plugins/a2a/README.md."""
    found = re.search(rf"<!-- client: {re.escape(name)} -->\n```sh\n(.*?)```", README.read_text(), re.S)
    assert found, f"README block {name!r} is missing"
    return found[1]


def hint_of(stderr: str) -> str:
    """The command an ``answer (...): COMMAND`` hint line names."""
    line = next(l for l in stderr.splitlines() if l.startswith("answer ("))
    return line.split("): ", 1)[1]


def paste(hint: str, tmp_path: Path, token: str) -> subprocess.CompletedProcess[str]:
    """Run the hint's command as a person pasting it into bash would, the token in ``ANYAGENTD_A2A_TOKEN``."""
    return subprocess.run(
        ["bash", "-c", hint.replace("anyagentd", shlex.quote(ANYAGENTD), 1)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=client_env(tmp_path, ANYAGENTD_A2A_TOKEN=token),
    )


# -- op, status: message and task ops ----------------------------------------------------------------------------


def test_op_and_status_print_the_daemons_json_in_its_order_with_integers(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    daemon.send_text("hi", token=OPERATOR)  # a conversation with one turn: "turns": 1, not 1.0
    raw = raw_command(daemon, "status")["result"]["message"]["parts"][0]["data"]
    for argv in (["status", daemon.url, "--token", OPERATOR], ["op", daemon.url, "status", "--token", OPERATOR]):
        shown = cli(tmp_path, *argv)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        status = json.loads(shown.stdout)
        assert list(status) == list(raw)  # the daemon's key order, at every level
        assert list(status["values"]) == list(raw["values"])
        [conversation] = status["conversations"]
        assert list(conversation) == list(raw["conversations"][0])
        assert conversation["turns"] == 1 and type(conversation["turns"]) is int
        assert type(status["uptime_ms"]) is int and type(status["values"]["maxLive"]) is int
        assert ".0," not in shown.stdout and ".0\n" not in shown.stdout, shown.stdout
        assert shown.stdout.startswith('{\n  "instance": ')  # pretty: indent 2

    # --arg values parsed as JSON: an integer goes as an integer (5.0 is refused by the daemon's strict types)
    events = cli(tmp_path, "op", daemon.url, "debug.events", "--arg", "limit=2", "--token", OPERATOR)
    assert events.returncode == 0, events.stderr
    got = json.loads(events.stdout)
    assert len(got["events"]) == 2 and list(got) == ["events", "oldest_seq", "newest_seq", "dropped"]
    same = cli(
        tmp_path, "op", daemon.url, "debug.events", "--args", '{"limit": 1, "level": "info"}', "--token", OPERATOR
    )
    assert same.returncode == 0 and len(json.loads(same.stdout)["events"]) == 1, same.stderr

    # a task op: followed to its end, its result on stdout, the task on stderr; a value that is not JSON is text
    paused = cli(tmp_path, "op", daemon.url, "admin.pause", "--arg", "reason=deploy in progress", "--token", OPERATOR)
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout) == {"ok": True, "state": "paused", "reason": "deploy in progress"}
    # (a task op's result is its task's artifact, a protobuf Struct the SDK serves: JSON keys, no order kept)
    assert re.fullmatch(r"task [0-9a-f-]{36}: completed \(contextId [0-9a-f-]{36}\)\n", paused.stderr), paused.stderr
    assert json.loads(cli(tmp_path, "status", daemon.url, "--token", OPERATOR).stdout)["paused"] is True
    resumed = cli(tmp_path, "op", daemon.url, "admin.resume", "--token", OPERATOR)
    assert resumed.returncode == 0 and json.loads(resumed.stdout) == {"ok": True, "state": "running"}
    # a value that parses as JSON is JSON: true is a boolean (the daemon refuses the string "true" here)
    switched = cli(
        tmp_path,
        "op",
        daemon.url,
        "admin.set",
        "--arg",
        "path=a2a.introspection.enabled",
        "--arg",
        "value=false",
        "--token",
        OPERATOR,
    )
    assert switched.returncode == 0 and json.loads(switched.stdout) == {
        "path": "a2a.introspection.enabled",
        "value": False,
    }, switched.stderr
    one_line(
        cli(tmp_path, "op", daemon.url, "debug.events", "--token", OPERATOR),
        "debug.events refused: -32004 INTROSPECTION_DISABLED",
    )


def test_a_workflow_run_is_followed_to_its_end_and_listed(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    run = subprocess.Popen(
        [ANYAGENTD, "a2a", "op", daemon.url, "workflow.run", "--arg", "workflow=pipe"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=client_env(tmp_path, ANYAGENTD_A2A_TOKEN=OPERATOR),
    )
    try:
        [waiting] = wait_for(lambda: [r for r in runs_of(daemon) if r["status"] == "suspended"], "a suspended run")
        listed = cli(tmp_path, "runs", daemon.url, "--token", OPERATOR)
        assert listed.returncode == 0, listed.stderr
        assert re.search(rf"│ {waiting['run']} +│ pipe +│ suspended +│ - +│", listed.stdout), listed.stdout
        signalled = cli(
            tmp_path,
            "op",
            daemon.url,
            "workflow.signal",
            "--arg",
            "name=go",
            "--arg",
            'payload={"n": 3, "x": 1.5, "tags": ["a"]}',
            "--token",
            OPERATOR,
        )
        assert signalled.returncode == 0, signalled.stderr
        assert json.loads(signalled.stdout) == {"signal": "go", "delivered": 1}
        assert type(json.loads(signalled.stdout)["delivered"]) is int
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, err
    output = json.loads(out)
    assert output == {"signal": "go", "payload": {"n": 3, "x": 1.5, "tags": ["a"]}, "from": "operator"}
    assert type(output["payload"]["n"]) is int and type(output["payload"]["x"]) is float
    assert ": completed (contextId " in err

    as_json = cli(tmp_path, "runs", daemon.url, "--json", "--token", OPERATOR)
    [done] = json.loads(as_json.stdout)
    assert done == {"run": waiting["run"], "workflow": "pipe", "status": "completed", "output": output, "error": None}
    assert cli(tmp_path, "runs", daemon.url, "--token", ALICE).stderr == "no runs\n"  # alice started none

    # tasks: the operator's listing holds the run's task and the signal's, newest first; filters and limits apply
    tasks = json.loads(cli(tmp_path, "tasks", daemon.url, "--json", "--token", OPERATOR).stdout)
    ops = [t["metadata"]["op"] for t in tasks]
    assert ops[:2] == ["workflow.run:pipe", "workflow.signal"] or ops[:2] == ["workflow.signal", "workflow.run:pipe"]
    assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" and not t.get("history") for t in tasks)
    [one] = json.loads(cli(tmp_path, "tasks", daemon.url, "--json", "--limit", "1", "--token", OPERATOR).stdout)
    assert one["id"] == tasks[0]["id"]
    mine = json.loads(
        cli(tmp_path, "tasks", daemon.url, "--json", "--context", tasks[1]["contextId"], "--token", OPERATOR).stdout
    )
    assert [t["id"] for t in mine] == [tasks[1]["id"]]
    failed = cli(tmp_path, "tasks", daemon.url, "--json", "--state", "failed", "--token", OPERATOR)
    assert json.loads(failed.stdout) == []
    table = cli(tmp_path, "tasks", daemon.url, "--state", "COMPLETED", "--token", OPERATOR)
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "id" in line and "context" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["id", "context", "state", "updated"]
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"
    for task in tasks:  # ids and contexts never cut, whatever the width
        assert re.search(rf"│ {task['id']} │ {task['contextId']} │ completed +│ {when} │", table.stdout), table.stdout
    assert cli(tmp_path, "tasks", daemon.url, "--token", ALICE).stderr == "no tasks\n"


def test_a_task_op_that_waits_for_input_names_the_command_that_answers_it(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="permission")
    # the daemon's very first task: its run can reach the ask before workflow.run's follower subscribes, and the task
    # still reads INPUT_REQUIRED (ops.workflow.run_progress reads the run as it stands)
    asked = cli(
        tmp_path, "op", daemon.url, "workflow.run", "--args", '{"workflow": "asking"}', "--token", OPERATOR, timeout=60
    )
    assert asked.returncode == 2, asked.stderr
    # a run's waiting task says what a conversation's does (issue 25): the step, then the request's words
    assert asked.stdout.startswith("step a waits for an answer: Permission requested: Write hello.txt"), asked.stdout
    assert ": input_required (contextId " in asked.stderr and OPERATOR not in asked.stderr + asked.stdout
    hint = hint_of(asked.stderr)
    task_id = asked.stderr.split("task ")[1].split(":")[0]
    assert hint == f'anyagentd a2a send {daemon.url} allow --task-id {task_id} --token "$ANYAGENTD_A2A_TOKEN"'
    assert "answer (allow, always or deny): " in asked.stderr
    assert "set ANYAGENTD_A2A_TOKEN" in asked.stderr  # what the pasted command needs, the token never shown
    pasted = paste(hint, tmp_path, OPERATOR)
    # the daemon answers the answer with the task as it stood (working); send follows it to its end
    assert pasted.returncode == 0 and f"task {task_id}: completed" in pasted.stderr, pasted.stderr
    assert [r["status"] for r in runs_of(daemon)] == ["completed"]


def test_refusals_and_bad_arguments_are_one_line(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    one_line(
        cli(tmp_path, "op", daemon.url, "no.such.op", "--token", OPERATOR),
        "no.such.op refused: -32602 UNKNOWN_OP: no op 'no.such.op' is served here",
    )
    one_line(
        cli(tmp_path, "op", daemon.url, "run.get", "--arg", "run=x", "--arg", "zz=1", "--token", OPERATOR),
        "run.get refused: -32602 INVALID_COMMAND_ARGS",
        "zz: unknown argument",
    )
    one_line(
        cli(tmp_path, "op", daemon.url, "run.get", "--arg", "run=nope", "--token", OPERATOR),
        "run.get refused: -32001 NOT_FOUND: no such run",
    )
    one_line(cli(tmp_path, "op", daemon.url, "admin.pause", "--token", ALICE), "admin.pause refused: -31403")
    one_line(
        cli(tmp_path, "op", daemon.url, "status", "--token", "wrong-token"),
        "status refused: -31401",
        f"sign in with `anyagentd a2a login {daemon.url}`",
    )
    for argv in (["send", daemon.url, "hi"], ["status", daemon.url], ["tasks", daemon.url]):
        # a token no header can carry: one line, nothing sent (it was a UnicodeEncodeError traceback)
        one_line(cli(tmp_path, *argv, "--token", "wrøng"), "the token holds a character a bearer token cannot")
    one_line(  # a JSON-RPC error in an HTTP 200 names its code, as `op` prints it
        cli(tmp_path, "send", daemon.url, "allow", "--task-id", "no-such-task", "--token", OPERATOR),
        f"{daemon.url} refused the message: -32001: ",
    )
    one_line(  # the daemon's own refusal, as `op` prints it (it was the SDK's "HTTP Error 401: Client error …")
        cli(tmp_path, "send", daemon.url, "hi", "--token", "wrong-token"),
        f"{daemon.url} refused the message: -31401: unknown bearer token",
        f"sign in with `anyagentd a2a login {daemon.url}`",
    )
    for argv, needle in (
        (["--arg", "limit"], "--arg 'limit' is not KEY=VALUE"),
        (["--arg", "=5"], "--arg '=5' is not KEY=VALUE"),
        (["--arg", "limit=1", "--arg", "limit=2"], "--arg limit is given twice"),
        (["--arg", "limit=1", "--args", "{}"], "not both"),
        (["--args", "[1, 2]"], "--args is not a JSON object"),
        (["--args", "{nope"], "--args is not JSON"),
        (["--arg", "op=status"], "`op` is not an argument"),
    ):
        one_line(cli(tmp_path, "op", daemon.url, "debug.events", *argv, "--token", OPERATOR), needle)
    one_line(
        cli(tmp_path, "tasks", daemon.url, "--state", "sleeping", "--token", OPERATOR),
        "--state 'sleeping' is not a task state: submitted, working",
    )
    assert raw_command(daemon, "status")["result"]["message"]["parts"][0]["data"]["paused"] is False  # none ran

    nowhere = closed_port_url()
    for argv in (
        ["status", nowhere],
        ["op", nowhere, "status"],
        ["tasks", nowhere],
        ["runs", nowhere],
        ["send", nowhere, "hi"],
        ["login", nowhere],
    ):
        one_line(cli(tmp_path, *argv), f"cannot reach {nowhere}")


# -- send: the answer hint ---------------------------------------------------------------------------------------


def test_the_answer_hint_is_a_command_that_answers(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="permission")
    # --token typed: kept as "$ANYAGENTD_A2A_TOKEN", the token itself never printed
    asked = cli(tmp_path, "send", daemon.url, "write hello.txt", "--token", OPERATOR)
    assert asked.returncode == 2 and asked.stdout.startswith("Permission requested: Write hello.txt"), asked.stderr
    assert OPERATOR not in asked.stdout + asked.stderr and "ANSWER" not in asked.stderr
    hint = hint_of(asked.stderr)
    task_id = asked.stderr.split("task ")[1].split(":")[0]
    assert hint == f'anyagentd a2a send {daemon.url} allow --task-id {task_id} --token "$ANYAGENTD_A2A_TOKEN"'
    pasted = paste(hint, tmp_path, OPERATOR)
    assert pasted.returncode == 0 and "You allowed it." in pasted.stdout, pasted.stderr
    assert f"task {task_id}: completed" in pasted.stderr
    # the answer, sent with --task-id alone, joined the task's history in the task's context (the SDK gave a
    # taskId-only message a context of its own, which the history showed)
    stored = daemon.rpc("GetTask", {"id": task_id}, token=OPERATOR).json()["result"]
    answers = [m for m in stored["history"] if m["role"] == "ROLE_USER" and m["parts"][0].get("text") == "allow"]
    assert answers and all(m["contextId"] == stored["contextId"] for m in answers), stored["history"]

    # the token from the environment (or from login): the command needs no --token
    by_env = cli(tmp_path, "send", daemon.url, "write hello.txt", env={"ANYAGENTD_A2A_TOKEN": OPERATOR})
    assert by_env.returncode == 2 and "--token" not in by_env.stderr and "ANYAGENTD_A2A_TOKEN" not in by_env.stderr
    argv = shlex.split(hint_of(by_env.stderr))
    assert argv[:4] == ["anyagentd", "a2a", "send", daemon.url] and argv[4] == "allow"
    denied = cli(tmp_path, *argv[2:4], "deny", *argv[5:], env={"ANYAGENTD_A2A_TOKEN": OPERATOR})  # another answer
    assert denied.returncode == 0, denied.stderr


def test_after_a_wrong_answer_the_hint_still_offers_the_requests_answers(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="permission")
    token = {"ANYAGENTD_A2A_TOKEN": OPERATOR}
    # a conversation's permission request, then a workflow run's ask step: the same request, two kinds of task
    conversation = cli(tmp_path, "send", daemon.url, "write hello.txt", env=token)
    run = cli(tmp_path, "op", daemon.url, "workflow.run", "--args", '{"workflow": "asking"}', env=token, timeout=60)
    for asked in (conversation, run):
        assert asked.returncode == 2 and "answer (allow, always or deny): " in asked.stderr, asked.stderr
        argv = shlex.split(hint_of(asked.stderr))
        task_id = argv[argv.index("--task-id") + 1]
        wrong = cli(tmp_path, "send", daemon.url, "maybe", "--task-id", task_id, "--token", OPERATOR)
        assert wrong.returncode == 2, (wrong.stdout, wrong.stderr)
        assert "Not an answer: 'maybe' is not an answer to the permission request" in wrong.stdout, wrong.stdout
        assert OPERATOR not in wrong.stdout + wrong.stderr and "answer with: " not in wrong.stderr, wrong.stderr
        assert "answer (allow, always or deny): " in wrong.stderr, wrong.stderr  # the request's answers, as at first
        hint = hint_of(wrong.stderr)
        assert hint == f'anyagentd a2a send {daemon.url} allow --task-id {task_id} --token "$ANYAGENTD_A2A_TOKEN"'
        pasted = paste(hint, tmp_path, OPERATOR)
        assert pasted.returncode == 0 and f"task {task_id}: completed" in pasted.stderr, pasted.stderr
        if asked is run:  # the run's result, as `op` prints it (it printed the status line "run … completed")
            assert "You allowed it." in json.loads(pasted.stdout), pasted.stdout
    assert [r["status"] for r in runs_of(daemon)] == ["completed"]


def test_a_questions_hint_offers_its_choices(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="question")
    asked = cli(tmp_path, "send", daemon.url, "greet me", env={"ANYAGENTD_A2A_TOKEN": OPERATOR})
    assert asked.returncode == 2 and "Which language" in asked.stdout, asked.stderr
    assert "answer (English, French or free text): " in asked.stderr
    argv = shlex.split(hint_of(asked.stderr))
    assert argv[4] == "English"
    answered = cli(tmp_path, *argv[2:], env={"ANYAGENTD_A2A_TOKEN": OPERATOR})
    assert answered.returncode == 0 and "Thanks, noted." in answered.stdout, answered.stderr


# -- --cacert: TLS on every subcommand ---------------------------------------------------------------------------


def test_cacert_verifies_a_tls_daemon_on_every_subcommand(a2a_daemon: Any, tmp_path: Path) -> None:
    cert, other = (
        self_signed(tmp_path, "daemon.pem", "daemon.key")[0],
        self_signed(tmp_path, "other.pem", "other.key")[0],
    )
    tls = f'[a2a.tls]\ncert = "{cert}"\nkey = "{tmp_path / "daemon.key"}"\n'
    daemon = a2a_daemon(config=CONFIG.replace("[a2a.device_grant]", tls + "[a2a.device_grant]"), env=ENV, mock="hello")
    assert daemon.url.startswith("https://")
    ca = ["--cacert", str(cert)]

    login = subprocess.Popen(
        [ANYAGENTD, "a2a", "login", daemon.url, *ca],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=client_env(tmp_path),
    )
    assert login.stderr is not None
    user_code = login.stderr.readline().split("the code ")[1].split(" ")[0]
    approved = cli(
        tmp_path,
        "op",
        daemon.url,
        "auth.device.approve",
        "--arg",
        f"user_code={user_code}",
        "--arg",
        "as=carol",
        *ca,
        "--token",
        OPERATOR,
    )
    assert approved.returncode == 0 and json.loads(approved.stdout)["approved"]["principal"] == "user:carol"
    _, err = login.communicate(timeout=60)
    assert login.returncode == 0 and "token stored in" in err, err

    sent = cli(tmp_path, "send", daemon.url, "hi", *ca)  # as carol, with the stored token
    assert sent.returncode == 0 and "scripted agent" in sent.stdout, sent.stderr
    status = cli(tmp_path, "status", daemon.url, *ca)
    assert status.returncode == 0 and len(json.loads(status.stdout)["conversations"]) == 1, status.stderr
    listed = json.loads(cli(tmp_path, "tasks", daemon.url, "--json", *ca).stdout)
    assert [t["id"] for t in listed] == [sent.stderr.split("task ")[1].split(":")[0]]
    assert cli(tmp_path, "runs", daemon.url, *ca).stderr == "no runs\n"
    assert cli(tmp_path, "op", daemon.url, "workflow.status", *ca).returncode == 0
    by_env = cli(tmp_path, "status", daemon.url, env={"ANYAGENTD_A2A_CACERT": str(cert)})
    assert by_env.returncode == 0, by_env.stderr

    for argv in (
        ["login", daemon.url],
        ["send", daemon.url, "hi"],
        ["status", daemon.url],
        ["op", daemon.url, "status"],
        ["tasks", daemon.url],
        ["runs", daemon.url],
    ):
        one_line(
            cli(tmp_path, *argv, "--cacert", str(other)),
            "its TLS certificate is not trusted",
            f"checked against {other}",
        )
        one_line(cli(tmp_path, *argv), "its TLS certificate is not trusted", "--cacert FILE")
        one_line(cli(tmp_path, *argv, "--cacert", str(tmp_path / "missing.pem")), "cannot use the CA file")
    one_line(cli(tmp_path, "status", daemon.url, "--cacert", str(tmp_path / "daemon.key")), "cannot use the CA file")


# -- the README's client blocks, as written ----------------------------------------------------------------------


def test_the_readmes_operator_block_runs_as_written(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(mock="permission")  # loopback, no credential: the caller is the operator
    done = subprocess.run(
        ["bash", "-e", "-c", readme_block("operator")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=client_env(tmp_path, URL=daemon.url, PATH=f"{Path(ANYAGENTD).parent}:/usr/bin:/bin"),
    )
    assert done.returncode == 0, done.stderr
    assert '"state": "paused"' in done.stdout and '"reason": "deploy in progress"' in done.stdout
    assert '"value": true' in done.stdout and '"seq": 1,' in done.stdout
    assert "exit 2: it waits for an answer" in done.stdout and "│ input_required │" in done.stdout
    assert "answer (allow, always or deny): anyagentd a2a send" in done.stderr
    assert "no runs" in done.stderr and "no.such.op refused: -32602 UNKNOWN_OP" in done.stderr
    assert done.stdout.rstrip().endswith("exit 1") and "Traceback" not in done.stderr


def test_the_readmes_sign_in_block_runs_as_written(a2a_daemon: Any, tmp_path: Path) -> None:
    cert = self_signed(tmp_path, "daemon.pem", "daemon.key")[0]
    (tmp_path / "ca.pem").write_text(cert.read_text())
    tls = f'[a2a.tls]\ncert = "{cert}"\nkey = "{tmp_path / "daemon.key"}"\n'
    daemon = a2a_daemon(config=CONFIG.replace("[a2a.device_grant]", tls + "[a2a.device_grant]"), env=ENV, mock="hello")
    block = subprocess.Popen(
        ["bash", "-e", "-c", readme_block("sign-in")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=client_env(tmp_path, URL=daemon.url, PATH=f"{Path(ANYAGENTD).parent}:/usr/bin:/bin"),
    )
    try:
        assert block.stderr is not None
        shown = block.stderr.readline()
        user_code = shown.split("the code ")[1].split(" ")[0]
        approved = cli(
            tmp_path,
            "op",
            daemon.url,
            "auth.device.approve",
            "--arg",
            f"user_code={user_code}",
            "--arg",
            "as=dana",
            "--cacert",
            "ca.pem",
            "--token",
            OPERATOR,
        )
        assert approved.returncode == 0, approved.stderr
        out, err = block.communicate(timeout=90)
    finally:
        block.kill()
    assert block.returncode == 0, shown + err
    assert "scripted agent" in out and ": completed (contextId " in err
    assert json.loads(out[out.index("{") : out.rindex("}") + 1])["conversations"][0]["principal"] == "user:dana"
    assert out.count("│ completed │") >= 1 and "exit 1: without --cacert" in out
    assert "its TLS certificate is not trusted" in err and "Traceback" not in err


def test_a_task_that_fails_after_some_text_says_why(a2a_daemon: Any, tmp_path: Path) -> None:
    """``send`` prints the response text on stdout; when the task then fails, its status message (why) comes on
    stderr too — it was skipped whenever the task had response text (found by a fresh-eyes review)."""
    daemon = a2a_daemon(mock="dies")
    result = cli(tmp_path, "send", daemon.url, "go")
    assert result.returncode == 1 and result.stdout == "Starting... \n", result
    lines = result.stderr.strip().splitlines()
    assert re.fullmatch(r"task \S+: failed \(contextId \S+\)", lines[0]), lines
    assert len(lines) == 2 and "agent exited during the turn" in lines[1], lines
    assert "Traceback" not in result.stderr


def test_an_empty_message_is_one_line_and_creates_no_task(a2a_daemon: Any, tmp_path: Path) -> None:
    daemon = a2a_daemon(config=CONFIG, env=ENV, mock="hello")
    line = one_line(
        cli(tmp_path, "send", daemon.url, "", env={"ANYAGENTD_A2A_TOKEN": OPERATOR}),
        f"{daemon.url} refused the message",
        "message.parts",
    )
    assert "no text, data or file" in line, line
    listed = daemon.rpc("ListTasks", {}, token=OPERATOR).json()
    assert listed["result"].get("tasks", []) == [], listed  # refused before a task existed: none is stored FAILED
    sent = cli(tmp_path, "send", daemon.url, "hi", env={"ANYAGENTD_A2A_TOKEN": OPERATOR})
    assert sent.returncode == 0, sent.stderr
