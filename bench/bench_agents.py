"""One scripted turn per agent, each driven by anyagentd and by a bare driver of the agent's own protocol.

Run: ``.venv/bin/python bench/bench_agents.py [--agents claude,codex,codex-acp,claude-acp] [--runs N] [--quick]
[--paths P1,P2,...] [--requests FILE]``.
Prints figures and ratios, asserts nothing.

Every path talks to the same :class:`ModelServer` (one scripted reply), with a fresh HOME and work dir per run,
the pinned CLIs of ``tests/agents`` configured as the live tests configure them (``anyagentd_testing.agents``).
Times are seconds from just before the agent is spawned (for anyagentd: just before ``Runtime.open``):
``first`` = the first text (a delta or a whole message), ``end`` = the turn is over (``result`` frame, Codex's
``turn/completed``, ACP's ``session/prompt`` answer, anyagentd's ``TurnEnded``). anyagentd also reports ``open``
(``Runtime.open`` returned) and ``turn`` (``prompt`` → ``TurnEnded``).

Paths per agent:

- ``claude``: **bare CLI** (``claude -p --input-format stream-json ...``, the user frame written at spawn, no
  handshake), **anyagentd** (``Runtime.open("claude")``), **bare CLI, no -p** (the same without ``-p``, as the
  SDKs and anyagentd start it), **claude-agent-sdk** (the official SDK's ``query()``
  with its defaults, which include an empty system prompt), **sdk claude_code** (the same with
  ``system_prompt={"type": "preset", "preset": "claude_code"}``: Claude Code's own system prompt, as the CLI and
  anyagentd send it) and **sdk same request** (that plus ``permission_prompt_tool_name="stdio"``, which the SDK
  also sets for a ``can_use_tool`` callback: permission prompts on the control channel, as anyagentd asks for them.
  Claude Code 2.1.197 then offers the model three more tools, ``AskUserQuestion``, ``EnterPlanMode`` and
  ``ExitPlanMode``, 11 KB of the request: this path sends the request anyagentd sends, byte for byte but for the
  session ids and the entry point, ``sdk-py`` against ``sdk-cli``; ``--requests`` keeps the log to check it);
- ``codex``: **bare app-server** (``codex app-server``: ``initialize``, ``initialized``, ``thread/start``,
  ``turn/start``, notifications until ``turn/completed``) and **anyagentd** (``Runtime.open("codex")``);
- ``codex-acp``, ``claude-acp``: **bare ACP** (``initialize``, ``session/new``, ``session/prompt`` until its
  answer) and **anyagentd** (the generic ACP adapter).

The bare drivers are blocking line readers in this process: the least a client can do. The model server runs in a
child process of its own, so its HTTP thread never competes for this process's GIL with the paths measured
(anyagentd's and the SDK's event loops run here; the bare drivers mostly wait in ``read``). Each bare driver's agent
runs in a session (so a process group) of its own, ended as a whole when the driver is done, fails, times out
(:data:`TIMEOUT`) or is interrupted (^C, SIGTERM, SIGHUP): see :class:`LineChild`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Self

from anyagentd_testing.agents import (
    agent_bin,
    claude_env,
    clean_environ,
    codex_args,
    codex_env,
    codex_resources_dir,
)

PROMPT = "hi"
SCRIPT = {"turns": [{"text": "Hello from the scripted model."}]}
TIMEOUT = 120.0
"""Seconds a path's turn may take (a bare driver's agent is killed then, and its read raises ``TimeoutError``)."""
EXIT_GRACE = 3.0
"""Seconds a bare driver's agent gets to exit by itself once its stdin is closed, before its group gets SIGTERM."""
TERM_GRACE = 1.0
"""Seconds between the SIGTERM to a bare driver's agent's process group and the SIGKILL to it."""
CODEX_ACP_FLAGS = ["-c", "approval_policy=untrusted", "-c", "sandbox_mode=workspace-write"]
"""What tests/acp gives codex-acp (tests/acp/acp_support.py), on both paths."""

Figures = dict[str, float]


def set_environ(env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)


class Clock:
    """Marks seconds since its creation (just before the spawn); at ``end`` also ``cpu``, the CPU seconds this
    process spent meanwhile (the driver's own work, which on a loaded machine delays the agent too)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.figures: Figures = {}

    def mark(self, key: str) -> None:
        self.figures.setdefault(key, time.perf_counter() - self.t0)
        if key == "end":
            self.figures.setdefault("cpu", time.process_time() - self.c0)


# --------------------------------------------------------------------------- bare drivers
def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):  # ProcessLookupError: the group is gone already
        os.killpg(pgid, sig)


class LineChild:
    """A child speaking line-delimited JSON on stdio, read with blocking reads (stderr discarded), in a session (so
    a process group) of its own: the Node launchers and the ACP agents run the real CLI as their child, and a
    session of its own is out of reach of the terminal's ^C and hang-up. Use it as a context manager: leaving the
    block ends the whole group (:meth:`close`), whatever the way out. A watchdog kills the group ``timeout``
    seconds (default :data:`TIMEOUT`) after the spawn; the blocked read then raises ``TimeoutError``. POSIX only
    (``os.waitid``, ``os.killpg``)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, *, timeout: float | None = None) -> None:
        self.timeout = TIMEOUT if timeout is None else timeout
        self.expired = False
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self._watchdog = threading.Timer(self.timeout, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _expire(self) -> None:
        self.expired = True
        _signal_group(self.proc.pid, signal.SIGKILL)

    def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def frames(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                yield json.loads(line)
            except ValueError:
                continue
        if self.expired:
            raise TimeoutError(f"the agent did not finish within {self.timeout:g} s (killed)")
        raise RuntimeError(f"the agent's output ended ({self._leader_exit(0.5) or 'still running'})")

    def request(self, method: str, params: Any, on_message: Callable[[dict[str, Any]], None] | None = None) -> Any:
        """A JSON-RPC request; every other message read meanwhile goes to ``on_message``. Returns the result."""
        rpc_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        for msg in self.frames():
            if msg.get("id") == rpc_id and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                return msg.get("result")
            if on_message is not None:
                on_message(msg)
        return None

    def notify(self, method: str, params: Any = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)

    def _leader_exit(self, within: float) -> str | None:
        """How the agent's process ended (``exit 1``, ``signal 9``), waiting up to ``within`` seconds; None while it
        runs. It is left unreaped (``WNOWAIT``), so its pid, the group's id, cannot be reused before :meth:`close`
        has killed the group."""
        deadline = time.monotonic() + within
        while True:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                return f"{'exit' if info.si_code == os.CLD_EXITED else 'signal'} {info.si_status}"
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)

    def close(self, grace: float | None = None) -> None:
        """End the agent and every process of its group: stdin closed (its cue to exit), up to ``grace`` seconds
        (default :data:`EXIT_GRACE`) for it to exit, SIGTERM to the group, up to :data:`TERM_GRACE` seconds more
        when it still runs, then SIGKILL to the group — the SIGKILL and the reaping even when an exception (^C, a
        signal turned into ``SystemExit``) interrupts the waits. Returns once the agent is reaped (the group's other
        members die as the SIGKILL reaches them, a moment later); a second call does nothing."""
        if self.proc.returncode is not None:
            return
        try:
            if self.proc.stdin:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            if self._leader_exit(EXIT_GRACE if grace is None else grace) is None:
                _signal_group(self.proc.pid, signal.SIGTERM)
                self._leader_exit(TERM_GRACE)
        finally:
            self._watchdog.cancel()
            self._watchdog.join()  # a kill under way is over before the pid is freed
            _signal_group(self.proc.pid, signal.SIGKILL)  # the CLI under a launcher outlives it otherwise
            self.proc.wait()


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def end_on_signals() -> None:
    """Make SIGTERM and SIGHUP end this process by raising ``SystemExit`` (as ^C raises ``KeyboardInterrupt``), so
    the bare drivers' ``with`` blocks end their agents' groups: being sessions of their own, those groups would
    outlive this process otherwise."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)


def bare_claude(env: dict[str, str], cwd: str, *, print_flag: bool = True) -> Figures:
    """The pinned CLI (with ``-p`` unless not ``print_flag``), the user frame written at spawn, no handshake."""
    argv = [
        str(agent_bin("claude")),
        *(["-p"] if print_flag else []),
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    clock = Clock()
    with LineChild(argv, env, cwd) as child:
        child.send({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]}})
        for msg in child.frames():
            kind = msg.get("type")
            if kind == "stream_event":
                ev = msg.get("event", {})
                if ev.get("type") == "content_block_delta" and ev.get("delta", {}).get("type") == "text_delta":
                    clock.mark("first")
            elif kind == "assistant" and any(b.get("type") == "text" for b in msg["message"].get("content", [])):
                clock.mark("first")
            elif kind == "result":
                clock.mark("end")
                break
    return clock.figures


def bare_codex(env: dict[str, str], cwd: str) -> Figures:
    """``codex app-server``: initialize, initialized, thread/start, turn/start, notifications to turn/completed."""
    argv = [str(agent_bin("codex")), "app-server", *shlex.split(env["ANYAGENTD_CODEX_ARGS"])]
    clock = Clock()
    with LineChild(argv, env, cwd) as child:
        child.request("initialize", {"clientInfo": {"name": "bench", "title": "bench", "version": "0"}})
        child.notify("initialized")
        thread = child.request("thread/start", {"cwd": cwd})["thread"]["id"]
        child.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": PROMPT}]})
        for msg in child.frames():
            method = msg.get("method")
            if method == "item/agentMessage/delta":
                clock.mark("first")
            elif method == "turn/completed":
                clock.mark("end")
                break
            elif "id" in msg and method:  # a server request: not expected in a text-only turn
                child.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "bench"}})
    return clock.figures


def bare_acp(argv: list[str]) -> Callable[[dict[str, str], str], Figures]:
    """An ACP client: initialize (no fs, no terminal), session/new, session/prompt until its answer."""

    def run(env: dict[str, str], cwd: str) -> Figures:
        clock = Clock()
        with LineChild(argv, env, cwd) as child:

            def on_message(msg: dict[str, Any]) -> None:
                update = (msg.get("params") or {}).get("update") or {}
                if msg.get("method") == "session/update" and update.get("sessionUpdate") == "agent_message_chunk":
                    clock.mark("first")
                elif "id" in msg and msg.get("method"):  # a client request: not expected in a text-only turn
                    child.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "bench"}})

            child.request(
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                },
            )
            session = child.request("session/new", {"cwd": cwd, "mcpServers": []}, on_message)["sessionId"]
            result = child.request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]}, on_message
            )
            clock.mark("end")
            if (result or {}).get("stopReason") != "end_turn":
                raise RuntimeError(f"session/prompt ended {result!r}")
        return clock.figures

    return run


# --------------------------------------------------------------------------- anyagentd
def via_anyagentd(agent: str) -> Callable[[dict[str, str], str], Figures]:
    """``Runtime.open(agent)`` + ``prompt`` + ``events()`` to ``TurnEnded``; the agent's environment is this
    process's (what the adapter passes through)."""

    async def run(cwd: str) -> Figures:
        from anyagentd.model import TextDelta, TurnEnded
        from anyagentd.runtime import Runtime

        async with Runtime() as rt:
            clock = Clock()
            s = await rt.open(agent, dir=cwd)
            clock.mark("open")
            t1 = time.perf_counter()
            await s.prompt(PROMPT)
            async with asyncio.timeout(TIMEOUT):
                async for event in s.events():
                    if isinstance(event.kind, TextDelta):
                        clock.mark("first")
                    elif isinstance(event.kind, TurnEnded):
                        clock.mark("end")
                        clock.figures["turn"] = time.perf_counter() - t1
                        if event.kind.stop.TAG != "Completed":
                            raise RuntimeError(f"the turn ended {event.kind.stop!r}")
                        break
            await s.close()
        return clock.figures

    return lambda env, cwd: asyncio.run(run(cwd))


# --------------------------------------------------------------------------- claude-agent-sdk
def via_sdk(system_prompt: Any = None, *, permission_prompts: bool = False) -> Callable[[dict[str, str], str], Figures]:
    """The official ``claude_agent_sdk.query()`` with ``cli_path`` = the pinned CLI (spawn, ``initialize`` and its
    answer, then the user message); ``permission_prompts``: ``permission_prompt_tool_name="stdio"`` (what the SDK
    sets for a ``can_use_tool`` callback and anyagentd passes too: ``--permission-prompt-tool stdio``)."""

    async def run(env: dict[str, str], cwd: str) -> Figures:
        from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, StreamEvent, TextBlock, query

        options = ClaudeAgentOptions(
            cli_path=str(agent_bin("claude")),
            cwd=cwd,
            env=env,
            include_partial_messages=True,
            system_prompt=system_prompt,
            permission_prompt_tool_name="stdio" if permission_prompts else None,
        )
        clock = Clock()
        async with asyncio.timeout(TIMEOUT):
            async for msg in query(prompt=PROMPT, options=options):
                if isinstance(msg, StreamEvent):
                    ev = msg.event
                    if ev.get("type") == "content_block_delta" and ev.get("delta", {}).get("type") == "text_delta":
                        clock.mark("first")
                elif isinstance(msg, AssistantMessage) and any(isinstance(b, TextBlock) for b in msg.content):
                    clock.mark("first")
                elif isinstance(msg, ResultMessage):
                    clock.mark("end")  # keep draining: query() ends after the result, the CLI exits cleanly
        return clock.figures

    return lambda env, cwd: asyncio.run(run(env, cwd))


# --------------------------------------------------------------------------- agents
def claude_environment(url: str, home: str) -> dict[str, str]:
    return clean_environ({**claude_env(url, home), "ANYAGENTD_CLAUDE_BIN": str(agent_bin("claude"))})


def codex_environment(url: str, home: str) -> dict[str, str]:
    env = clean_environ(codex_env(home))
    env["ANYAGENTD_CODEX_ARGS"] = shlex.join(codex_args(url))
    env["ANYAGENTD_CODEX_BIN"] = str(agent_bin("codex"))
    return env


def codex_acp_environment(url: str, home: str) -> dict[str, str]:
    env = clean_environ(codex_env(home))
    resources = codex_resources_dir()
    if resources is not None:  # codex-acp ships no bwrap (docs/agents/acp.md#codex-acp-and-bwrap)
        env["PATH"] = f"{resources}{os.pathsep}{env.get('PATH', '')}"
    env["ANYAGENTD_CODEX_ACP_BIN"] = str(agent_bin("codex-acp"))
    env["ANYAGENTD_CODEX_ACP_ARGS"] = shlex.join([*codex_args(url), *CODEX_ACP_FLAGS])
    env["ANYAGENTD_NO_LOGIN_SHELL"] = "1"
    return env


def claude_acp_environment(url: str, home: str) -> dict[str, str]:
    extra = {"ANYAGENTD_CLAUDE_ACP_BIN": str(agent_bin("claude-agent-acp")), "ANYAGENTD_NO_LOGIN_SHELL": "1"}
    return clean_environ({**claude_env(url, home), **extra})


@dataclass(frozen=True)
class Agent:
    """One agent of the bench: its environment (model server URL, HOME) and its paths, the first the baseline."""

    id: str
    environment: Callable[[str, str], dict[str, str]]
    paths: dict[str, Callable[[dict[str, str], str], Figures]]
    optional: frozenset[str] = frozenset()
    """Paths whose failure drops them (e.g. claude-agent-sdk not installed); the others are reported per run."""


def agents() -> dict[str, Agent]:
    def acp_argv(env_bin: str, args_env: str) -> Callable[[dict[str, str], str], Figures]:
        return lambda env, cwd: bare_acp([env[env_bin], *shlex.split(env.get(args_env, ""))])(env, cwd)

    return {
        "claude": Agent(
            "claude",
            claude_environment,
            {
                "bare CLI": lambda env, cwd: bare_claude(env, cwd),
                "anyagentd": via_anyagentd("claude"),
                "bare CLI, no -p": lambda env, cwd: bare_claude(env, cwd, print_flag=False),
                "claude-agent-sdk": via_sdk(),
                "sdk claude_code": via_sdk({"type": "preset", "preset": "claude_code"}),
                "sdk same request": via_sdk({"type": "preset", "preset": "claude_code"}, permission_prompts=True),
            },
            frozenset({"claude-agent-sdk", "sdk claude_code", "sdk same request"}),
        ),
        "codex": Agent(
            "codex",
            codex_environment,
            {
                "bare app-server": bare_codex,
                "anyagentd": via_anyagentd("codex"),
            },
        ),
        "codex-acp": Agent(
            "codex-acp",
            codex_acp_environment,
            {
                "bare ACP": acp_argv("ANYAGENTD_CODEX_ACP_BIN", "ANYAGENTD_CODEX_ACP_ARGS"),
                "anyagentd": via_anyagentd("codex-acp"),
            },
        ),
        "claude-acp": Agent(
            "claude-acp",
            claude_acp_environment,
            {
                "bare ACP": acp_argv("ANYAGENTD_CLAUDE_ACP_BIN", "ANYAGENTD_CLAUDE_ACP_ARGS"),
                "anyagentd": via_anyagentd("claude-acp"),
            },
        ),
    }


# --------------------------------------------------------------------------- driver
SERVE = """
import json, sys
from anyagentd_testing.model_server import ModelServer
server = ModelServer(json.loads(sys.argv[1]), log_path=sys.argv[2] or None).start()
print(server.url, flush=True)
sys.stdin.read()
server.stop()
"""


@contextlib.contextmanager
def model_server(log_path: str | None = None) -> Iterator[str]:
    """The scripted model server in a child process (until stdin closes); yields its URL. ``log_path``: a JSONL
    file it appends every request to (headers and body: ``ModelServer``'s request log)."""
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE, json.dumps(SCRIPT), log_path or ""],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the model server did not start")
        yield url
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def one_run(agent: Agent, path: str, url: str) -> Figures:
    with (
        tempfile.TemporaryDirectory(prefix="bench-home-", ignore_cleanup_errors=True) as home,
        tempfile.TemporaryDirectory(prefix="bench-work-", ignore_cleanup_errors=True) as work,
    ):
        env = agent.environment(url, home)
        set_environ(env)
        figures = agent.paths[path](env, work)
    if "end" not in figures:
        raise RuntimeError("the turn did not end")
    return figures


def med(results: list[Figures], key: str) -> float | None:
    vals = [r[key] for r in results if key in r]
    return statistics.median(vals) if vals else None


def fmt(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.3f}"


def ratio(x: float | None, y: float | None) -> str:
    return "  n/a" if not x or not y else f"{x / y:.3f}x"


def bench_agent(agent: Agent, runs: int, url: str, original_env: dict[str, str]) -> None:
    names = list(agent.paths)
    results: dict[str, list[Figures]] = {p: [] for p in names}
    errors: dict[str, str] = {}
    print(f"\n== {agent.id}: {runs} runs per path, order rotated each run")
    for p in names:  # warm-up, not counted: filesystem cache, the binary's first start, this process's imports
        try:
            r = one_run(agent, p, url)
            if p == "anyagentd":
                print(
                    f"  warm-up {p:>14}: end={fmt(r['end'])} open={r['open']:.3f} (first open in this process: "
                    f"imports the adapter's modules)"
                )
        except Exception as e:  # noqa: BLE001
            print(f"  warm-up {p} failed: {type(e).__name__}: {e}")
        finally:
            set_environ(original_env)
    for i in range(runs):
        order = names[i % len(names) :] + names[: i % len(names)]  # each path leads in turn: drift hits all alike
        for p in order:
            if p in errors:
                continue
            try:
                r = one_run(agent, p, url)
                results[p].append(r)
                extra = f" open={r['open']:.3f} turn={r['turn']:.3f}" if "open" in r else ""
                print(f"  run {i + 1} {p:>16}: first={fmt(r.get('first'))} end={fmt(r['end'])}{extra}")
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {e}"
                if p in agent.optional:
                    errors[p] = msg
                    print(f"  {p} failed, skipping it: {msg}")
                    traceback.print_exc()
                else:
                    print(f"  run {i + 1} {p} failed: {msg}")
            finally:
                set_environ(original_env)

    print(
        "  medians, seconds from spawn (anyagentd: from before Runtime.open); min: the fastest run's end; cpu: this"
        " process's CPU seconds"
    )
    print(f"  {'path':>18} {'first text':>10} {'turn end':>9} {'min':>7} {'cpu':>7} {'open':>7} {'prompt->end':>11}  n")
    for p in names:
        rs = results[p]
        low = min((r["end"] for r in rs), default=None)
        line = f"  {p:>18} {fmt(med(rs, 'first')):>10} {fmt(med(rs, 'end')):>9} {fmt(low):>7} {fmt(med(rs, 'cpu')):>7}"
        line += f" {fmt(med(rs, 'open')):>7} {fmt(med(rs, 'turn')):>11}" if p == "anyagentd" else f" {'':>7} {'':>11}"
        print(line + f"  {len(rs)}" + (f"  [{errors[p]}]" if p in errors else ""))
    print(
        "  ratios: of medians (first text / turn end), of the fastest runs' ends (min), median of per-run end ratios"
        " (the same run index: neighbours in time)"
    )
    base = names[0]
    pairs = [(p, base) for p in names[1:]]
    if "anyagentd" in names[1:]:
        pairs += [("anyagentd", p) for p in names[1:] if p != "anyagentd"]
    for x, y in pairs:
        fx, fy = med(results[x], "first"), med(results[y], "first")
        ex, ey = med(results[x], "end"), med(results[y], "end")
        lx = min((r["end"] for r in results[x]), default=None)
        ly = min((r["end"] for r in results[y]), default=None)
        paired = [a["end"] / b["end"] for a, b in zip(results[x], results[y], strict=False)]
        per_run = f"{statistics.median(paired):.3f}x" if paired else "n/a"
        print(f"  {x} / {y}: {ratio(fx, fy)} / {ratio(ex, ey)}   min {ratio(lx, ly)}   per-run {per_run}")


def main() -> None:
    end_on_signals()
    known = agents()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one run per path")
    ap.add_argument("--agents", default=",".join(known), help=f"comma-separated, of {', '.join(known)}")
    ap.add_argument(
        "--paths",
        help="comma-separated path names to keep, in this order (the first one an agent has is its baseline), e.g. "
        "'sdk same request,anyagentd'",
    )
    ap.add_argument(
        "--requests", metavar="FILE", help="append every request the model server gets to FILE (JSONL: headers, body)"
    )
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    chosen = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in known]
    if unknown:
        ap.error(f"unknown agent(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if args.paths:
        keep = [p.strip() for p in args.paths.split(",") if p.strip()]
        for name in chosen:
            paths = {p: known[name].paths[p] for p in keep if p in known[name].paths}
            if len(paths) < 2:
                ap.error(f"--paths keeps {len(paths)} of {name}'s paths ({', '.join(known[name].paths)}); need 2")
            known[name] = dataclasses.replace(known[name], paths=paths)
    original_env = dict(os.environ)

    versions = []
    for name in ("claude", "codex"):
        out = subprocess.run([str(agent_bin(name)), "--version"], capture_output=True, text=True).stdout.strip()
        versions.append(f"{name} {out}")
    try:
        import claude_agent_sdk

        versions.append(f"claude-agent-sdk {claude_agent_sdk.__version__}")
    except Exception as e:  # noqa: BLE001
        versions.append(f"claude-agent-sdk unavailable: {e!r}")
    print(f"{'; '.join(versions)}; load average {os.getloadavg()[0]:.2f}")
    with model_server(args.requests) as url:
        for name in chosen:
            bench_agent(known[name], runs, url, original_env)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
