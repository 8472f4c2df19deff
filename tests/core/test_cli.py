"""The ``anyagentd`` command line, run as a real process: version, ``run`` (rendered turn, terminal permission
prompts, ``--auto-approve``, ``--json``, a dying agent), ``discover``/``probe`` JSON against the schema, and
``serve`` keeping stdout for protocol lines only."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from wire_client import child_env
from wire_schema import validate_def, validate_line

import anyagentd

pytestmark = pytest.mark.timeout(60)


def anyagentd_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m anyagentd.cli ARGS``; stdin is ``stdin`` (or empty)."""
    base = {"ANYAGENTD_NO_LOGIN_SHELL": "1", "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "anyagentd.cli", *args],
        input=stdin or "",
        capture_output=True,
        text=True,
        env=child_env({**base, **(env or {})}),
        timeout=timeout,
    )


def test_version() -> None:
    result = anyagentd_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"anyagentd, version {anyagentd.__version__}"


def test_console_script_matches_module() -> None:
    script = Path(sys.executable).parent / "anyagentd"
    if not script.exists():
        pytest.skip("the anyagentd console script is not installed next to this interpreter")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and anyagentd.__version__ in result.stdout


# ------------------------------------------------------------------------------------------------ run


def _run_permission(tmp_path: Path, answer: str) -> subprocess.CompletedProcess[str]:
    return anyagentd_cli("run", "mock", "write hello.txt", "--mock", "permission", "--dir", str(tmp_path), stdin=answer)


def assert_clean_error(result: subprocess.CompletedProcess[str], kind: str, code: int) -> list[str]:
    """``result`` failed with exit status ``code`` and reported ``kind`` as one line (``Kind: message``) followed
    by indented fields and hints, never a traceback. Returns the error's lines."""
    err = result.stderr
    assert result.returncode == code, err
    assert "Traceback" not in err and "ExceptionGroup" not in err and "  File " not in err, err
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{kind}: "))
    tail = lines[start + 1 :]
    assert all(line.startswith("  ") for line in tail), err  # only its fields and hint follow
    assert len(tail) <= 16, err
    return lines[start:]


def test_run_permission_demo_says_it_is_scripted_and_writes_nothing(tmp_path: Path) -> None:
    result = _run_permission(tmp_path, "y\n")
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "Permission" in err and "Allow?" in err  # asked at the terminal
    assert "Write hello.txt" in err and "Plan" in err and "Report back" in err  # the tool and the plan
    assert "scripted agent plays a script" in err and "no file will really be written" in err
    assert "You allowed it" in err and "your directory is unchanged" in err
    assert "now says hello" not in err and "wrote 13 bytes" not in err.replace("would write 13 bytes", "")
    assert "Completed" in err and err.index("Permission") < err.index("■ Completed")
    assert "5400/200000 tokens" in err  # the usage line
    assert result.stdout == ""  # human output goes to stderr
    assert list(tmp_path.iterdir()) == []  # honest: nothing was written


def test_run_permission_demo_denied_takes_the_deny_branch(tmp_path: Path) -> None:
    result = _run_permission(tmp_path, "n\n")
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "Write hello.txt (Failed)" in err and "denied by the user; nothing was written" in err
    assert "You denied it, so I did not write hello.txt" in err
    assert "You allowed it" not in err
    assert "☐ Write hello.txt" in err.split("You denied it")[0].rsplit("Plan", 1)[1]  # the plan shows it undone
    assert list(tmp_path.iterdir()) == []


def test_run_a_bad_answer_is_asked_again(tmp_path: Path) -> None:
    result = _run_permission(tmp_path, "maybe\nn\n")
    assert result.returncode == 0, result.stderr
    assert "type one of y, a, n" in result.stderr and result.stderr.count("Allow?") == 2
    assert "You denied it" in result.stderr


def test_run_auto_approve_needs_no_stdin(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "anyagentd.cli",
            "run",
            "mock",
            "write hello.txt",
            "--mock",
            "permission",
            "--dir",
            str(tmp_path),
            "--auto-approve",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        env=child_env({"ANYAGENTD_NO_LOGIN_SHELL": "1", "NO_COLOR": "1"}),
    )
    assert result.returncode == 0, result.stderr
    assert "Allow?" not in result.stderr
    assert "Write hello.txt" in result.stderr and "Completed" in result.stderr


def test_run_without_an_answer_says_so(tmp_path: Path) -> None:
    result = _run_permission(tmp_path, "")  # EOF at the permission prompt
    lines = assert_clean_error(result, "no answer", 10)
    assert lines[0] == "no answer: standard input ended"
    assert "--auto-approve" in lines[1]
    assert "Completed" not in result.stderr


def test_run_floods_complete(tmp_path: Path) -> None:
    """200,000 one-character deltas as fast as the scripted agent can emit them: the renderer keeps up."""
    result = anyagentd_cli("run", "mock", "go", "--mock", "flood", "--dir", str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ConsumerLagged" not in result.stderr
    assert result.stderr.count("x") >= 200_000 and "■ Completed" in result.stderr


def test_run_json_prints_schema_valid_events(tmp_path: Path) -> None:
    result = anyagentd_cli(
        "run", "mock", "write hello.txt", "--mock", "permission", "--dir", str(tmp_path), "--json", stdin="y\n"
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events
    for event in events:
        validate_def("Event", event)
    sequences = [e["sequence"] for e in events]
    assert sequences == sorted(set(sequences)) and sequences[0] == 1
    tags = [e["kind"] if isinstance(e["kind"], str) else next(iter(e["kind"])) for e in events]
    assert tags[0] == "TurnStarted"
    assert {"ReasoningDelta", "PlanUpdated", "ToolUpdated", "RequestOpened", "RequestClosed", "ContextUsage"} <= set(
        tags
    )
    ended = [e for e in events if "TurnEnded" in e["kind"] if isinstance(e["kind"], dict)]
    assert ended[0]["kind"]["TurnEnded"]["stop"] == {"Completed": {"source": "Protocol"}}
    assert "Completed" in result.stderr  # still rendered for the person


def test_run_keeps_up_with_a_flood_of_tool_output(tmp_path: Path) -> None:
    tool = {
        "id": "t1",
        "kind": "Execute",
        "title": "yes",
        "status": "Running",
        "input": {"Command": {"command": "yes"}},
        "output": None,
        "diffs": [],
        "locations": [],
        "raw": None,
    }
    script = tmp_path / "tool-flood.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    [
                        {"Emit": {"ToolUpdated": tool}},
                        {
                            "Repeat": {
                                "times": 50_000,
                                "steps": [{"Emit": {"ToolOutputDelta": {"tool_id": "t1", "text": "y\n"}}}],
                            }
                        },
                        {"Emit": {"ToolUpdated": {**tool, "status": "Completed"}}},
                        {"End": {"Completed": {"source": "Protocol"}}},
                    ]
                ]
            }
        )
    )
    result = anyagentd_cli("run", "mock", "go", "--mock", str(script), "--dir", str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("  y\n") == 1 and result.stderr.count("y\n") == 50_000  # indented once, then streamed
    assert "yes (Completed)" in result.stderr


def test_run_with_a_dying_agent_fails(tmp_path: Path) -> None:
    result = anyagentd_cli("run", "mock", "go", "--mock", "dies", "--dir", str(tmp_path))
    lines = assert_clean_error(result, "ProcessExited", 6)
    assert "agent exited during the turn" in result.stderr  # the failed turn was rendered first
    assert result.stderr.index("agent exited during the turn") < result.stderr.index("ProcessExited")
    assert "  stderr:" in lines and "    the scripted agent died" in lines  # its stderr tail


def test_run_unknown_agent_fails_with_not_installed(tmp_path: Path) -> None:
    result = anyagentd_cli("run", "nosuchagent", "hi", "--dir", str(tmp_path))
    lines = assert_clean_error(result, "NotInstalled", 3)
    assert "nosuchagent" in lines[0] and "  agent: nosuchagent" in lines
    assert any("anyagentd discover" in line for line in lines)


def test_run_agent_whose_adapter_is_not_installed_names_the_distribution(tmp_path: Path) -> None:
    result = anyagentd_cli("run", "claude", "hi", "--dir", str(tmp_path), env={"ANYAGENTD_LOAD_PLUGINS": "mock"})
    lines = assert_clean_error(result, "NotInstalled", 3)
    assert "adapter for 'claude' is not installed" in lines[0]
    # core runs from this checkout (editable), so the hint is what the README installs, with the published name
    assert "pip install -e ./adapters/claude (published as anyagentd-claude)" in lines[0]


def test_run_in_a_missing_directory(tmp_path: Path) -> None:
    result = anyagentd_cli("run", "mock", "hi", "--dir", str(tmp_path / "nonexistent"))
    lines = assert_clean_error(result, "InvalidConfiguration", 2)
    assert "is not a directory" in lines[0]


def test_run_flood_at_a_tiny_bound_is_consumer_lagged(tmp_path: Path) -> None:
    """The lag error itself, forced with a bound no reader can keep: one line, exit 8, a hint."""
    # Unmeasured (an empty COVERAGE_PROCESS_CONFIG): traced, the 200,000-event flood outlasts the timeout.
    result = anyagentd_cli(
        "run",
        "mock",
        "go",
        "--mock",
        "flood",
        "--dir",
        str(tmp_path),
        env={"ANYAGENTD_EVENT_BOUND": "2", "COVERAGE_PROCESS_CONFIG": ""},
    )
    lines = assert_clean_error(result, "ConsumerLagged", 8)
    assert any("ANYAGENTD_EVENT_BOUND" in line for line in lines)


def test_run_a_value_that_does_not_fit_prints_json(tmp_path: Path) -> None:
    result = anyagentd_cli(
        "run", "mock", "hi", "--mock", "model-option", "--dir", str(tmp_path), "--option", "model=true"
    )
    lines = assert_clean_error(result, "InvalidConfiguration", 2)
    assert lines[0] == "InvalidConfiguration: value true does not fit option 'model'"


def test_run_with_options_and_model(tmp_path: Path) -> None:
    result = anyagentd_cli(
        "run",
        "mock",
        "hi",
        "--mock",
        "model-option",
        "--dir",
        str(tmp_path),
        "--model",
        "large",
        "-o",
        "fast=true",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    assert "Answering with the configured model." in result.stderr


def test_run_resume_on_an_agent_that_cannot(tmp_path: Path) -> None:
    result = anyagentd_cli("run", "mock", "hi", "--dir", str(tmp_path), "--resume", "abc")
    assert_clean_error(result, "ResumeFailed", 9)
    fork = anyagentd_cli("run", "mock", "hi", "--dir", str(tmp_path), "--resume", "abc", "--fork")
    assert_clean_error(fork, "UnsupportedFeature", 9)
    usage = anyagentd_cli("run", "mock", "hi", "--dir", str(tmp_path), "--fork")
    assert usage.returncode == 2 and "--fork needs --resume" in usage.stderr


def test_help_short_flag_and_completion() -> None:
    short = anyagentd_cli("-h")
    assert short.returncode == 0 and "chat" in short.stdout and "--verbose" in short.stdout
    assert "Exit status" in anyagentd_cli("run", "-h").stdout
    completion = anyagentd_cli(env={"_ANYAGENTD_COMPLETE": "bash_source"})
    assert completion.returncode == 0 and "complete -o nosort -F" in completion.stdout
    # click's completion of subcommand names, as bash asks for it
    words = anyagentd_cli(env={"_ANYAGENTD_COMPLETE": "bash_complete", "COMP_WORDS": "anyagentd ch", "COMP_CWORD": "1"})
    assert "plain,chat" in words.stdout


def test_verbose_logs_events(tmp_path: Path) -> None:
    result = anyagentd_cli("--verbose", "run", "mock", "hi", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "DEBUG anyagentd.cli: event" in result.stderr and "TurnEnded" in result.stderr
    quiet = anyagentd_cli("--log-level", "warning", "run", "mock", "hi", "--dir", str(tmp_path))
    assert quiet.returncode == 0 and "DEBUG" not in quiet.stderr


# ------------------------------------------------------------------------------------------------ reports


def test_discover_json_is_a_discovery_report() -> None:
    result = anyagentd_cli("discover", "--json", "--mock", "permission")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    validate_def("DiscoveryReport", report)
    assert report["agents"][0]["id"] == "mock"
    assert report["agents"][0]["executable_path"] == "mock"  # in-process: no executable, and not its script


def test_discover_names_missing_adapters_and_what_next() -> None:
    result = anyagentd_cli("discover", env={"ANYAGENTD_LOAD_PLUGINS": "mock"})
    assert result.returncode == 0, result.stderr
    assert "claude (Claude Code): adapter not installed — pip install -e ./adapters/claude" in result.stderr
    assert "gemini (Gemini CLI): adapter not installed — pip install -e ./adapters/acp_generic" in result.stderr
    assert "next: anyagentd probe" in result.stderr and "anyagentd chat" in result.stderr
    report = json.loads(anyagentd_cli("discover", "--json", env={"ANYAGENTD_LOAD_PLUGINS": "mock"}).stdout)
    infos = [d["message"] for d in report["diagnostics"] if d["level"] == "Info"]
    assert [m.split(" ")[0] for m in infos] == ["claude", "codex", "codex-acp", "claude-acp", "gemini"]
    everything = json.loads(anyagentd_cli("discover", "--json").stdout)  # all adapters installed: no such line
    assert not any("adapter not installed" in d["message"] for d in everything["diagnostics"])


def test_probe_json_is_agent_details() -> None:
    result = anyagentd_cli("probe", "mock", "--json", "--mock", "model-option")
    assert result.returncode == 0, result.stderr
    details = json.loads(result.stdout)
    validate_def("AgentDetails", details)
    assert details["version"] == "mock"
    assert [o["id"] for o in details["config_options"]] == ["model", "fast"]
    human = anyagentd_cli("probe", "mock", "--mock", "model-option")
    assert human.returncode == 0 and human.stdout == ""
    assert "creation-only" in human.stderr and "small" in human.stderr
    assert "│ false " in human.stderr and "False" not in human.stderr  # JSON's spelling, as --option takes it
    assert "--option ID=VALUE" in human.stderr


def test_probe_unknown_agent_fails_with_not_installed() -> None:
    result = anyagentd_cli("probe", "nosuchagent")
    assert result.returncode == 3
    assert "NotInstalled" in result.stderr
    assert "agent: nosuchagent" in result.stderr
    assert result.stdout == ""


def test_bad_mock_script_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "broken.json"
    script.write_text('{"turns": [[{"Emit": {"NoSuchKind": {}}}, "Bogus"]]}')
    for command in (["probe", "mock"], ["run", "mock", "hi", "--dir", str(tmp_path)]):
        result = anyagentd_cli(*command, "--mock", str(script))
        (line, *_) = assert_clean_error(result, "InvalidConfiguration", 2)
        assert f"invalid mock script {script}: turns[0][0].Emit: unknown kind 'NoSuchKind' (expected one of " in line
        assert (
            "turns[0][1]: unknown step 'Bogus' (expected one of Emit, EmitWith, AwaitAnswer, Die, End, Sleep, Repeat)"
            in line
        )
        assert "_tag_of" not in line and "https://" not in line
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'\xff\xfe{"turns": []}')  # not UTF-8: a trial's file, a traceback before
    for command in (["probe", "mock"], ["run", "mock", "hi", "--dir", str(tmp_path)]):
        result = anyagentd_cli(*command, "--mock", str(latin))
        (line, *_) = assert_clean_error(result, "InvalidConfiguration", 2)
        assert f"invalid mock script {latin}: not UTF-8 text: invalid start byte at byte 0" in line


# ------------------------------------------------------------------------------------------------ serve


def test_serve_stdout_is_protocol_only_even_when_something_prints(tmp_path: Path) -> None:
    """A noisy runtime (print(), a raw write to fd 1, a child process inheriting fd 1) must not reach stdout."""
    wrapper = tmp_path / "noisy_serve.py"
    wrapper.write_text(
        textwrap.dedent("""
        import os, subprocess, sys
        import anyagentd.runtime as runtime

        original = runtime.Runtime.discover

        async def noisy_discover(self):
            print("NOISE: print() during discover")
            sys.stdout.flush()
            os.write(1, b"NOISE: raw write to fd 1\\n")
            subprocess.run([sys.executable, "-c", "print('NOISE: child process output')"], check=True)
            return await original(self)

        runtime.Runtime.discover = noisy_discover
        from anyagentd.cli import main
        main(["serve", "--mock", "hello"], prog_name="anyagentd")
    """)
    )
    frames = [
        {"id": 1, "cmd": "discover"},
        {"id": 2, "cmd": "probe", "agent": "mock"},
        {"id": 3, "cmd": "open", "agent": "mock", "dir": str(tmp_path)},
    ]
    result = subprocess.run(
        [sys.executable, str(wrapper)],
        input="".join(json.dumps(f) + "\n" for f in frames),
        capture_output=True,
        text=True,
        timeout=30,
        env=child_env({"ANYAGENTD_TRACE_PLUGINS": "1"}),
    )
    assert result.returncode == 0, result.stderr
    lines: list[Any] = []
    for raw in result.stdout.splitlines():
        line = json.loads(raw)  # every stdout line is JSON...
        validate_line(line)  # ...and a protocol line
        lines.append(line)
    assert "hello" in lines[0]
    replies = {line["id"]: line for line in lines if "id" in line}
    assert set(replies) == {1, 2, 3} and all("ok" in r for r in replies.values())
    session = replies[3]["ok"]["id"]
    # EOF closed the session: its closed line is its last (replies to other commands may still follow it)
    session_lines = [line for line in lines if "event" in line or "closed" in line]
    assert session_lines[-1] == {"closed": session}
    assert "NOISE" not in result.stdout
    for noise in ("print() during discover", "raw write to fd 1", "child process output"):
        assert f"NOISE: {noise}" in result.stderr
    assert "anyagentd plugins:" in result.stderr


# ------------------------------------------------------------------------------------------------ signals

_SLOW = {
    "turns": [
        [
            {"Emit": {"TextDelta": {"message_id": "m", "text": "working"}}},
            {"Sleep": 30000},
            {"End": {"Completed": {"source": "Protocol"}}},
        ]
    ]
}


def _signal_env() -> dict[str, str]:
    # pytest-cov measures subprocesses by starting coverage in them, which installs its own SIGTERM handler;
    # these tests are about our handler, so the child runs unmeasured.
    return {k: v for k, v in child_env().items() if not k.startswith("COV_CORE")}


def _wait_for(stream: Any, needle: bytes, timeout: float = 20) -> bytes:
    """Read ``stream`` (a pipe) until ``needle`` appears; what was read."""
    import os
    import select
    import time

    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, seen[-300:]
        ready, _, _ = select.select([stream], [], [], remaining)
        if ready:
            chunk = os.read(stream.fileno(), 65536)  # not readline: rendered text may have no newline yet
            assert chunk, seen[-300:]
            seen += chunk
    return seen


def test_sigterm_stops_run_after_closing_its_session(tmp_path: Path) -> None:
    import signal

    script = tmp_path / "slow.json"
    script.write_text(json.dumps(_SLOW))
    proc = subprocess.Popen(
        [sys.executable, "-m", "anyagentd.cli", "run", "mock", "go", "--mock", str(script), "--dir", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_signal_env(),
    )
    try:
        _wait_for(proc.stderr, b"working")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 128 + signal.SIGTERM
        assert b"session was closed" in proc.stderr.read()
    finally:
        proc.kill()


def test_sigterm_stops_serve_like_eof(tmp_path: Path) -> None:
    import signal

    script = tmp_path / "slow.json"
    script.write_text(json.dumps(_SLOW))
    proc = subprocess.Popen(
        [sys.executable, "-m", "anyagentd.cli", "serve", "--mock", str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_signal_env(),
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"id": 1, "cmd": "open", "agent": "mock", "dir": str(tmp_path)}).encode() + b"\n")
        proc.stdin.flush()
        seen = _wait_for(proc.stdout, b'"ok":{"id":"s1"')  # the session exists before it is prompted
        proc.stdin.write(json.dumps({"id": 2, "cmd": "prompt", "session": "s1", "text": "go"}).encode() + b"\n")
        proc.stdin.flush()
        seen += _wait_for(proc.stdout, b"working")
        proc.send_signal(signal.SIGTERM)
        lines = [json.loads(line) for line in (seen + proc.stdout.read()).splitlines()]
        assert proc.wait(timeout=15) == 128 + signal.SIGTERM
        for line in lines:
            validate_line(line)
        assert lines[-1] == {"closed": "s1"}  # the running turn was ended and the session closed first
        ended = [l for l in lines if "event" in l and "TurnEnded" in l["event"]["kind"]]
        assert ended and ended[-1]["event"]["kind"]["TurnEnded"]["stop"] == "Cancelled"
    finally:
        proc.kill()


def test_serve_when_stdin_and_stdout_are_one_socket(tmp_path: Path) -> None:
    """A client may hand both ends of one socket (or one terminal) to the server: reading must still block."""
    import socket

    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "anyagentd.cli", "serve", "--mock", "hello"],
        stdin=theirs.fileno(),
        stdout=theirs.fileno(),
        env=child_env(),
    )
    theirs.close()
    try:
        ours.settimeout(20)
        reader = ours.makefile("rb")
        assert "hello" in json.loads(reader.readline())
        ours.sendall(json.dumps({"id": 1, "cmd": "discover"}).encode() + b"\n")
        reply = json.loads(reader.readline())
        validate_line(reply)
        assert reply["id"] == 1 and reply["ok"]["agents"][0]["id"] == "mock"
        ours.shutdown(socket.SHUT_WR)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
        ours.close()


# ------------------------------------------------------------------------------------------------ chat (piped)

_SAY = {"Emit": {"TextDelta": {"message_id": "m", "text": "working on it"}}}
_DONE = {"End": {"Completed": {"source": "Protocol"}}}


def test_chat_steers_when_the_agent_can(tmp_path: Path) -> None:
    script = tmp_path / "steer.json"
    script.write_text(json.dumps({"steer": True, "turns": [[_SAY, {"Sleep": 3000}, _DONE]]}))
    result = anyagentd_cli("chat", "mock", "--mock", str(script), "--dir", str(tmp_path), stdin="go\nalso this\n")
    assert result.returncode == 0, result.stderr
    assert "steered into the running turn" in result.stderr and result.stderr.count("■ Completed") == 1


def test_chat_reads_prompts_from_a_pipe_and_waits_for_the_queue(tmp_path: Path) -> None:
    script = tmp_path / "two.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    [_SAY, {"Sleep": 500}, _DONE],
                    [{"Emit": {"TextDelta": {"message_id": "n", "text": "next"}}}, _DONE],
                ]
            }
        )
    )
    result = anyagentd_cli("chat", "mock", "--mock", str(script), "--dir", str(tmp_path), stdin="first\nsecond\n")
    assert result.returncode == 0, result.stderr
    assert "queued (0 ahead of it" in result.stderr
    assert result.stderr.count("■ Completed") == 2 and result.stderr.index("working on it") < result.stderr.index(
        "next"
    )


def test_chat_errors_are_one_line_and_the_session_goes_on(tmp_path: Path) -> None:
    result = anyagentd_cli(
        "chat",
        "mock",
        "--mock",
        "model-option",
        "--dir",
        str(tmp_path),
        stdin="/model huge\n/option fast=true\n/model large\n/info\n",
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "InvalidConfiguration: value \"huge\" does not fit option 'model'" in err
    assert "InvalidConfiguration: option 'fast' is creation-only" in err
    assert "configuration: model=large, fast=false" in err and "  model = large" in err
    assert "Traceback" not in err


def test_chat_passes_the_agents_own_slash_commands_through(tmp_path: Path) -> None:
    script = tmp_path / "commands.json"
    script.write_text(
        json.dumps(
            {
                "commands": [{"name": "compact", "description": "Summarize"}],
                "turns": [[{"Emit": {"TextDelta": {"message_id": "m", "text": "compacted"}}}, _DONE]],
            }
        )
    )
    result = anyagentd_cli("chat", "mock", "--mock", str(script), "--dir", str(tmp_path), stdin="/compact\n/nosuch\n")
    assert result.returncode == 0, result.stderr
    assert "compacted" in result.stderr and "■ Completed" in result.stderr  # /compact went to the agent as a prompt
    assert "unknown command /nosuch" in result.stderr
