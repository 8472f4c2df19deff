"""One scripted Claude turn, three ways: bare CLI, anyagentd's adapter, the official claude-agent-sdk.

Run: ``.venv/bin/python bench/bench_claude.py [--runs N] [--quick]``. Prints figures, asserts nothing.

Every path talks to the same :class:`ModelServer` (one scripted reply), with a fresh HOME and work dir per
run. All times are seconds from just before the agent process is spawned (for anyagentd: before
``Runtime.open``): ``first`` = first text (stream delta or assistant text), ``end`` = turn over
(``result`` frame / ``TurnEnded`` / ``ResultMessage``). anyagentd also reports ``open`` (``rt.open``) and
``turn`` (``prompt`` -> ``TurnEnded``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
import traceback
from pathlib import Path

from anyagentd_testing.agents import agent_bin, claude_env, clean_environ
from anyagentd_testing.model_server import ModelServer

PROMPT = "hi"
SCRIPT = {"turns": [{"text": "Hello from the scripted model."}]}
TIMEOUT = 120.0


def set_environ(env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)


# --------------------------------------------------------------------------- (a) bare CLI
def run_cli(claude: Path, env: dict[str, str], cwd: str) -> dict[str, float]:
    cmd = [
        str(claude), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
        "--include-partial-messages",
    ]  # fmt: skip
    frame = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]}}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    out: dict[str, float] = {}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(frame) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            kind = msg.get("type")
            if "first" not in out:
                if kind == "stream_event":
                    ev = msg.get("event", {})
                    if ev.get("type") == "content_block_delta" and ev.get("delta", {}).get("type") == "text_delta":
                        out["first"] = time.perf_counter() - t0
                elif kind == "assistant":
                    if any(b.get("type") == "text" for b in msg.get("message", {}).get("content", [])):
                        out["first"] = time.perf_counter() - t0
            if kind == "result":
                out["end"] = time.perf_counter() - t0
                break
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if "end" not in out:
        raise RuntimeError(f"no result frame (exit {proc.returncode})")
    return out


# --------------------------------------------------------------------------- (b) anyagentd
async def run_anyagentd(cwd: str) -> dict[str, float]:
    from anyagentd.model import TextDelta, TurnEnded
    from anyagentd.runtime import Runtime

    out: dict[str, float] = {}
    async with Runtime() as rt:
        t0 = time.perf_counter()
        s = await rt.open("claude", dir=cwd)
        out["open"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        await s.prompt(PROMPT)
        async with asyncio.timeout(TIMEOUT):
            async for event in s.events():
                kind = event.kind
                if isinstance(kind, TextDelta) and "first" not in out:
                    now = time.perf_counter()
                    out["first"] = now - t0
                    out["turn_first"] = now - t1
                elif isinstance(kind, TurnEnded):
                    now = time.perf_counter()
                    out["end"] = now - t0
                    out["turn"] = now - t1
                    break
        await s.close()
    if "end" not in out:
        raise RuntimeError("no TurnEnded")
    return out


# --------------------------------------------------------------------------- (c) claude-agent-sdk
async def run_sdk(claude: Path, env: dict[str, str], cwd: str) -> dict[str, float]:
    from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, StreamEvent, TextBlock, query

    options = ClaudeAgentOptions(cli_path=str(claude), cwd=cwd, env=env, include_partial_messages=True)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    async with asyncio.timeout(TIMEOUT):
        async for msg in query(prompt=PROMPT, options=options):
            if "first" not in out:
                if isinstance(msg, StreamEvent):
                    ev = msg.event
                    if ev.get("type") == "content_block_delta" and ev.get("delta", {}).get("type") == "text_delta":
                        out["first"] = time.perf_counter() - t0
                elif isinstance(msg, AssistantMessage) and any(isinstance(b, TextBlock) for b in msg.content):
                    out["first"] = time.perf_counter() - t0
            if isinstance(msg, ResultMessage):
                out["end"] = time.perf_counter() - t0
                # keep draining so the CLI exits cleanly (query ends after result)
    if "end" not in out:
        raise RuntimeError("no ResultMessage")
    return out


# --------------------------------------------------------------------------- driver
def one_run(path: str, claude: Path, url: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-home-") as home, tempfile.TemporaryDirectory(
        prefix="bench-work-"
    ) as work:
        env = clean_environ(claude_env(url, home))
        env["ANYAGENTD_CLAUDE_BIN"] = str(claude)
        set_environ(env)
        if path == "a":
            return run_cli(claude, env, work)
        if path == "b":
            return asyncio.run(run_anyagentd(work))
        return asyncio.run(run_sdk(claude, env, work))


def med(results: list[dict[str, float]], key: str) -> float | None:
    vals = [r[key] for r in results if key in r]
    return statistics.median(vals) if vals else None


def fmt(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:6.3f}"


def ratio(x: float | None, y: float | None) -> str:
    return "n/a" if not x or not y else f"{x / y:.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one run per path")
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    original_env = dict(os.environ)

    claude = agent_bin("claude")
    version = subprocess.run([str(claude), "--version"], capture_output=True, text=True).stdout.strip()
    try:
        import claude_agent_sdk

        sdk_note = f"claude-agent-sdk {claude_agent_sdk.__version__}"
    except Exception as e:  # noqa: BLE001
        sdk_note = f"claude-agent-sdk unavailable: {e!r}"
    print(f"claude CLI: {claude} ({version}); {sdk_note}; runs per path: {runs}")

    paths: dict[str, str] = {"a": "bare CLI", "b": "anyagentd", "c": "claude-agent-sdk"}
    results: dict[str, list[dict[str, float]]] = {p: [] for p in paths}
    errors: dict[str, str] = {}
    with ModelServer(SCRIPT) as srv:
        # warm-up (filesystem cache, node startup) — not counted
        try:
            one_run("a", claude, srv.url)
        except Exception:  # noqa: BLE001
            pass
        for i in range(runs):
            for p in paths:  # interleave so drift hits all paths alike
                if p in errors:
                    continue
                try:
                    r = one_run(p, claude, srv.url)
                    results[p].append(r)
                    extra = f" open={r['open']:.3f} turn={r['turn']:.3f}" if "open" in r else ""
                    print(f"  run {i + 1} {paths[p]:>16}: first={fmt(r.get('first'))} end={fmt(r['end'])}{extra}")
                except Exception as e:  # noqa: BLE001
                    msg = f"{type(e).__name__}: {e}"
                    if p == "c":
                        errors[p] = msg
                        print(f"  {paths[p]} failed, skipping it: {msg}")
                        traceback.print_exc()
                    else:
                        print(f"  run {i + 1} {paths[p]} failed: {msg}")
                finally:
                    set_environ(original_env)

    print()
    print("medians, seconds from spawn (b: from before Runtime.open)")
    print(f"  {'path':>20} {'first text':>10} {'turn end':>9} {'open':>7} {'prompt->end':>11}  n")
    for p, name in paths.items():
        rs = results[p]
        line = f"  ({p}) {name:>16} {fmt(med(rs, 'first')):>10} {fmt(med(rs, 'end')):>9}"
        line += f" {fmt(med(rs, 'open')):>7} {fmt(med(rs, 'turn')):>11}" if p == "b" else f" {'':>7} {'':>11}"
        print(line + f"  {len(rs)}" + (f"  [{errors[p]}]" if p in errors else ""))
    print()
    print("ratios of medians (first text / turn end)")
    for x, y in (("b", "a"), ("c", "a"), ("b", "c")):
        fx, fy = med(results[x], "first"), med(results[y], "first")
        ex, ey = med(results[x], "end"), med(results[y], "end")
        print(f"  {x}/{y}: {ratio(fx, fy)} / {ratio(ex, ey)}")


if __name__ == "__main__":
    main()
