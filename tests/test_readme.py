"""The README's command blocks, run as written: extracted from README.md itself (the ``sh`` block after each
``<!-- walkthrough: NAME -->`` marker), run with bash in a fresh directory with the answers piped to the prompts,
against the real pinned CLIs, and checked for what they promise (the files on disk).

The fresh directory holds the repository's distributions (``core``, ``testing``, ``adapters``, linked) and runs
the README's ``setup`` block itself (a new ``.venv``, editable installs), except its ``npm install`` line: ``tests/agents``
is linked to the CLIs ``.ci/run`` installed with that same command before the tests.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from anyagentd_testing.agents import agent_bin, clean_environ

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PLUGIN_README = ROOT / "plugins" / "a2a" / "README.md"
BLOCK = re.compile(r"<!-- walkthrough: (?P<name>[\w-]+) -->\n```sh\n(?P<body>.*?)```", re.S)
PID = re.compile(r"ANYAGENTD_MODEL_SERVER_PID=(\d+)")
PASSED_ON = {
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
}
PASSED_PREFIXES = ("PIP_", "npm_config_")
"""What the walkthroughs' shell inherits besides a bare PATH: locale, temp dir, and how to reach the package index."""

pytestmark = pytest.mark.timeout(420)


def walkthroughs(readme: Path = README) -> dict[str, str]:
    """The README's (or ``readme``'s) marked shell blocks by name, in their order."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(readme.read_text(encoding="utf-8"))}


def run_bash(
    script: str, cwd: Path, answers: str, timeout: float = 300, path: str = "/usr/bin:/bin"
) -> tuple[int, str, str]:
    """Run ``script`` with ``bash -e`` in ``cwd`` (a bare PATH, or ``path``; no agent variables), ``answers`` on
    stdin; returns (status, stdout, stderr). Model servers the script detached are stopped afterwards, whatever
    happened."""
    env = clean_environ(
        {
            "PATH": path,
            "HOME": str(cwd / "no-home"),
            "TERM": "dumb",
            "NO_COLOR": "1",
            "COLUMNS": "200",
            "ANYAGENTD_NO_LOGIN_SHELL": "1",
        },
        base={k: v for k, v in os.environ.items() if k in PASSED_ON or k.startswith(PASSED_PREFIXES)},
    )
    out, err = cwd / ".stdout", cwd / ".stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        try:
            proc.communicate(answers, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            for pid in PID.findall(err.read_text()):
                try:
                    os.kill(int(pid), signal.SIGTERM)
                except ProcessLookupError:
                    pass
    return proc.returncode, out.read_text(), err.read_text()


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh directory set up by the README's setup block (see the module docstring)."""
    agent_bin("claude")  # the pinned CLIs must be installed: fail, never skip
    fresh = tmp_path / "clone"
    (fresh / "tests").mkdir(parents=True)
    for part in ("core", "testing", "adapters", "plugins"):
        (fresh / part).symlink_to(ROOT / part)
    (fresh / "tests" / "agents").symlink_to(ROOT / "tests" / "agents")
    setup = [line for line in walkthroughs()["setup"].splitlines() if "npm install" not in line]
    status, _, err = run_bash("\n".join(setup), fresh, "")
    assert status == 0, err[-3000:]
    assert (fresh / ".venv" / "bin" / "anyagentd").is_file()
    return fresh


def test_the_walkthroughs_are_marked_in_order() -> None:
    blocks = walkthroughs()
    assert list(blocks) == [
        "quick-start",
        "a2a",
        "a2a-operate",
        "a2a-agents",
        "console",
        "setup",
        "shell",
        "claude",
        "codex",
        "acp",
        "opencode",
    ]
    setup = blocks["setup"]
    for distribution in (
        "./core",
        "./testing",
        "./adapters/claude",
        "./adapters/codex",
        "./adapters/acp_generic",
        "./adapters/opencode",
    ):
        assert f"-e {distribution}" in setup  # what the clone fixture stands for
    assert "npm install" in setup


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    fresh = tmp_path / "clone"
    fresh.mkdir()
    (fresh / "core").symlink_to(ROOT / "core")
    first = next(line for line in walkthroughs()["quick-start"].splitlines() if line.startswith("python3 -m venv"))
    status, _, err = run_bash(first, fresh, "y\n")
    assert status == 0, err[-3000:]
    assert "Allow?" in err and "You allowed it" in err and "■ Completed" in err
    assert "scripted agent plays a script" in err
    assert not (fresh / "hello.txt").exists()  # the scripted agent says it writes nothing, and does not


def test_real_agent_walkthroughs_run_as_written(clone: Path) -> None:
    blocks = walkthroughs()
    script = "\n".join(blocks[name] for name in ("shell", "claude", "codex", "acp", "opencode"))
    status, out, err = run_bash(script, clone, "y\n" * 5)  # one answer per permission prompt, in order
    assert status == 0, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-5000:]}"
    assert "command not found" not in err
    assert (clone / "work" / "hello.txt").read_text() == "hello\n"  # claude's Write
    assert (clone / "work" / "hello-codex.txt").read_text() == "hello from codex\n"  # codex's command
    assert (clone / "work-acp" / "hello-codex.txt").read_text() == "hello from codex\n"  # codex-acp
    assert (clone / "work-acp" / "hello.txt").read_text() == "hello\n"  # claude-acp
    assert (clone / "work" / "hello-opencode.txt").read_text() == "hi\n"  # opencode's write
    assert err.count("Allow?") == 5 and err.count("■ Completed") == 5
    assert out.splitlines() == ["hello", "hello from codex", "hello from codex", "hello", "hi"]  # the `cat`s


def test_python_api_example_runs_as_written(tmp_path: Path) -> None:
    """The Python API section's example, as printed, answers the scripted permission and ends."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "example.py").write_text(example)
    env = clean_environ({"ANYAGENTD_NO_LOGIN_SHELL": "1", "PATH": "/usr/bin:/bin"})
    result = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "agents=[AgentInstallation(id='mock'" in result.stdout
    assert list(tmp_path.iterdir()) == [tmp_path / "example.py"]


def test_a2a_walkthrough_runs_as_written(clone: Path) -> None:
    """The A2A block: the daemon on the embedded mock, a conversation message and a ``status`` command by curl; then
    the operator's block: a configuration with an operator bearer checked, readiness, a send, a scrape, a drain;
    then the block of two agents on one daemon: the listing, a send to each with ``--agent``, one agent's status."""
    import json

    status, out, err = run_bash(walkthroughs()["a2a"], clone, "")
    assert status == 0, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    task, command = (json.loads(line) for line in out.splitlines() if line.strip())
    assert task["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "scripted agent" in json.dumps(task["result"]["task"]["artifacts"])
    result = command["result"]["message"]["parts"][0]["data"]
    assert result["model"] == "mock" and result["draining"] is False

    # the operator's walkthrough, on the same clone: install to a metrics scrape (issue 26)
    status, out, err = run_bash(walkthroughs()["a2a-operate"], clone, "")
    assert status == 0, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    assert "agentd.toml: ok" in err
    ready, reply, *scraped = (line for line in out.splitlines() if line.strip())
    assert json.loads(ready) == {"status": "ok"}
    assert "scripted agent" in reply
    counts = {line.split()[0]: float(line.split()[1]) for line in scraped}
    assert counts['anyagentd_a2a_tasks{state="completed"}'] == 1.0, scraped
    assert sum(counts.values()) == 1.0  # the one task sent, in no other state
    log = [json.loads(line) for line in (clone / "ops.log").read_text().splitlines()]
    assert log[-1]["msg"] == "stopped"  # the drain ran to its end (exit 0 is the block's own `wait %1`)

    # two agents on one daemon (issue 27), on the same clone: each reached by its id, the root serving the first
    status, out, err = run_bash(walkthroughs()["a2a-agents"], clone, "")
    assert status == 0, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    listing, hello, writer, *shown = out.splitlines()
    listed = json.loads(listing)
    assert listed["default"] == "hello"
    assert [(a["id"], a["name"], a["default"]) for a in listed["agents"]] == [
        ("hello", "mock", True),
        ("writer", "mock", False),
    ]
    for agent in listed["agents"]:
        assert agent["card"] == agent["url"] + "/.well-known/agent-card.json"
        assert agent["url"].endswith("/agents/" + agent["id"]) and agent["state"] == "serving"
    assert listed["agents"][0]["description"] == "Says hello"
    assert hello.startswith("Hello! I am the scripted agent.")  # hello's script
    assert "You allowed it." in writer  # writer's script, its permission allowed by approval = "auto"
    assert err.count(": completed (contextId ") == 2
    writers = json.loads("\n".join(shown))
    assert len(writers["conversations"]) == 1 and writers["conversations"][0]["plan"] == "2/2 done"  # writer's only
    assert [(a["id"], a["liveAgents"]) for a in writers["values"]["agents"]] == [("hello", 1), ("writer", 1)]
    log = [json.loads(line) for line in (clone / "agents.log").read_text().splitlines()]
    assert log[-1]["msg"] == "stopped"


CONSOLE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
BROWSE = """#!/bin/sh
curl -sS -D "$(dirname "$0")/opened" -o "$(dirname "$0")/page.html" "$1"
"""
"""What the console walkthrough's ``webbrowser`` opens the URL with (``BROWSER``): the answer's headers and body,
kept in files beside it."""


def test_the_console_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The console block: the daemon started on the scripted permission agent, the console's URL read from its log
    and opened (``BROWSER`` names a script that fetches it with curl): the page answers 200 with the console's
    Content-Security-Policy. Then the daemon, left running by the block as a person leaves it, is stopped (SIGTERM
    to the block's process group) and its log ends with ``stopped``. Run in a fresh directory whose ``.venv`` is
    this environment's."""
    import json
    import time

    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    browse = tmp_path / "browse"
    browse.write_text(BROWSE)
    browse.chmod(0o755)
    env = clean_environ(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "no-home"), "BROWSER": str(browse)},
        base={k: v for k, v in os.environ.items() if k in PASSED_ON or k == "PYTHONPATH"},
    )
    with (tmp_path / ".stdout").open("w") as out, (tmp_path / ".stderr").open("w") as err:
        block = subprocess.Popen(
            ["bash", "-e", "-c", walkthroughs()["console"]],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        status = block.wait(timeout=60)
        assert status == 0, (tmp_path / ".stderr").read_text()[-3000:]
        logged = [json.loads(line)["msg"] for line in (tmp_path / "console.log").read_text().splitlines()]
        url = next(m for m in logged if m.startswith("console: ")).removeprefix("console: ")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/console/")
        opened = (tmp_path / "opened").read_text().lower().splitlines()
        assert opened[0].startswith("http/1.1 200"), opened
        assert f"content-security-policy: {CONSOLE_CSP.lower()}" in opened
        assert '<script type="module" src="static/app.js">' in (tmp_path / "page.html").read_text()
    finally:
        os.killpg(block.pid, signal.SIGTERM)  # the daemon the block left running (its job is in the group)
    deadline = time.monotonic() + 30
    while "stopped" not in (tmp_path / "console.log").read_text():
        assert time.monotonic() < deadline, "the daemon did not stop"
        time.sleep(0.05)


def test_the_plugin_readmes_agents_block_runs_as_written(tmp_path: Path) -> None:
    """plugins/a2a/README.md's block of two agents ("Several agents"), in a fresh directory with this environment's
    ``anyagentd`` on the PATH as the plugin README assumes: the configuration checked, the listing, a send to each
    agent with ``--agent``, one agent's status, that agent drained alone while the default one serves on."""
    import json

    assert list(walkthroughs(PLUGIN_README)) == ["agents"]
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "anyagentd").is_file()
    status, out, err = run_bash(walkthroughs(PLUGIN_README)["agents"], tmp_path, "", path=f"{bin_dir}:/usr/bin:/bin")
    assert status == 0, f"stdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    assert err.startswith("agents.toml: ok\n"), err
    listing, hello, writer, rest = out.split("\n", 3)
    listed = json.loads(listing)
    assert listed["default"] == "hello"
    assert [(a["id"], a["default"], a["state"]) for a in listed["agents"]] == [
        ("hello", True, "serving"),
        ("writer", False, "serving"),
    ]
    assert hello.startswith("Hello! I am the scripted agent.") and "You allowed it." in writer
    decoder = json.JSONDecoder()
    shown, end = decoder.raw_decode(rest)
    assert len(shown["conversations"]) == 1 and shown["conversations"][0]["plan"] == "2/2 done"  # writer's only
    assert [a["id"] for a in shown["values"]["agents"]] == ["hello", "writer"]
    drained, end2 = decoder.raw_decode(rest, end + 1)
    assert drained == {"ok": True, "state": "draining", "reason": "operator request"}
    refused, served = rest[end2:].strip().splitlines()
    assert refused == "exit 1: agent 'writer' is draining"
    assert "-32603: agent 'writer' is draining: no new messages" in err
    assert served.startswith("Hello! I am the scripted agent.")  # the root: the default agent, not drained
    assert err.count(": completed (contextId ") == 4  # three sends and the drain's task
    log = [json.loads(line) for line in (tmp_path / "agents.log").read_text().splitlines()]
    assert log[-1]["msg"] == "stopped"
