"""Benchmark of ``anyagentd a2a``: SendMessage latency and throughput against a bare a2a-sdk echo server, time to
the listening line, and the CLI's cold start with and without the A2A stack. Prints figures; asserts nothing.

Usage: .venv/bin/python bench/bench_a2a.py [--requests N] [--concurrency C] [--quick] [--warm-only] [--claude]
       .venv/bin/python bench/bench_a2a.py --phases

Warm conversations (issue #19, always run; ``--warm-only`` runs nothing else): 10 sequential turns in one
conversation over A2A (SendMessage, one contextId) against the same 10 turns over the JSON-lines wire
(``anyagentd serve``: open, then prompt → TurnEnded), first turn and p50/p90 of the later ones, on the mock and
(``--claude``) on the pinned Claude Code CLI against the scripted model endpoint; then 40 contexts with
``[a2a.pool] max_live = 8``: the live-agent count, the agents' RSS (status.values) and the daemon's own VmRSS.
Beside the mock's later turns: the same request on the bare SDK (the echo server: in-memory store, SQLite store,
and with Nagle on, as anyagentd's listener was before), and the mock's turns sent with the a2a-sdk's own client.
Every client keeps one connection for all its requests, as a real client does (checked). ``--phases``: where a
later turn's time goes on the server (``a2a_phases.py``), anyagentd beside the echo server.

Servers (each a child process started the same way, ``--listen 127.0.0.1:0``, its listening line read):
- **anyagentd** — ``anyagentd a2a --mock <short reply x many turns>``, default configuration (SQLite task store);
- **echo (memory)** — ``bench/a2a_echo_server.py``: the SDK's DefaultRequestHandler, an executor that completes
  each task with the message's text, the SDK's in-memory task store;
- **echo (sqlite)** — the same with the SDK's database task store on SQLite (what anyagentd uses by default).

Figures: spawn → listening line (median of 3); unary SendMessage p50/p90 over N sequential requests in one
contextId (one turn each); throughput with C concurrent clients, each in its own contextId; cold start of
``python -c "import anyagentd.cli"`` (what ``anyagentd serve`` pays) vs that plus ``import anyagentd_a2a.daemon``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

PY = sys.executable
HERE = Path(__file__).parent
WORK = Path(tempfile.mkdtemp(prefix="anyagentd-bench-a2a-"))
CHILDREN: list[subprocess.Popen[str]] = []


def short_reply_script(turns: int) -> Path:
    turn = [{"Emit": {"TextDelta": {"message_id": "m1", "text": "ok"}}}, {"End": {"Completed": {"source": "Protocol"}}}]
    path = WORK / "short.json"
    path.write_text(json.dumps({"turns": [turn] * turns}))
    return path


def start(
    argv: list[str], env: dict[str, str] | None = None, stderr: Any = subprocess.DEVNULL
) -> tuple[subprocess.Popen[str], str, float]:
    """Spawn, read the listening line; returns (process, url, seconds from spawn to the line)."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=WORK, env={**os.environ, **(env or {})}
    )
    CHILDREN.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    took = time.perf_counter() - began
    if not line:
        raise RuntimeError(f"{argv[0]} printed no listening line")
    return proc, json.loads(line)["listening"], took


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that runs anyagentd from the checkout ``tree`` (its packages' sources first on PYTHONPATH)."""
    parts = [tree / "core/src", *sorted(tree.glob("plugins/*/src")), *sorted(tree.glob("adapters/*/src"))]
    return {"PYTHONPATH": os.pathsep.join(str(p) for p in parts)}


def servers(
    turns: int, baseline: Path | None = None, full_sync: bool = False
) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """name -> (argv, extra environment) of each server; ``baseline`` adds anyagentd run from that checkout,
    ``full_sync`` anyagentd with ``[a2a] store_synchronous = "full"``."""
    script = short_reply_script(turns)
    anyagentd = str(Path(PY).with_name("anyagentd"))

    def daemon(*extra: str) -> list[str]:
        state = str(WORK / f"state-{uuid.uuid4().hex[:6]}")
        return [anyagentd, "a2a", "--listen", "127.0.0.1:0", "--mock", str(script), "--state-dir", state, *extra]

    found: dict[str, tuple[list[str], dict[str, str] | None]] = {"anyagentd": (daemon(), None)}
    if baseline is not None:
        found[f"anyagentd ({baseline.name})"] = (daemon(), tree_env(baseline))
    if full_sync:
        config = WORK / "full-sync.toml"
        config.write_text('[a2a]\nstore_synchronous = "full"\n')
        found["anyagentd (full sync)"] = (daemon("--config", str(config)), None)
    found["echo (memory)"] = ([PY, str(HERE / "a2a_echo_server.py"), "--listen", "127.0.0.1:0"], None)
    found["echo (sqlite)"] = (
        [
            PY,
            str(HERE / "a2a_echo_server.py"),
            "--listen",
            "127.0.0.1:0",
            "--store",
            f"sqlite:{WORK / f'echo-{uuid.uuid4().hex[:6]}.db'}",
        ],
        None,
    )
    return found


def send(client: httpx.Client, url: str, context_id: str) -> float:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "contextId": context_id,
                "parts": [{"text": "ok"}],
            }
        },
    }
    began = time.perf_counter()
    reply = client.post(url + "/", json=body, headers={"A2A-Version": "1.0"}).json()
    took = time.perf_counter() - began
    state = reply["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"task ended {state}")
    return took


COMMAND = "https://agentd.dev/a2a/ext/command"


def send_status(client: httpx.Client, url: str, context_id: str) -> float:
    """One ``status`` command (a message op: answered as a Message, no task, no agent turn)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "extensions": [COMMAND],
                "parts": [{"data": {"agentd": {"op": "status"}}}],
            }
        },
    }
    began = time.perf_counter()
    reply = client.post(url + "/", json=body, headers={"A2A-Version": "1.0", "A2A-Extensions": COMMAND}).json()
    took = time.perf_counter() - began
    if "message" not in reply.get("result", {}):
        raise RuntimeError(f"status answered {reply}")
    return took


def latency(url: str, n: int, sender=send) -> list[float]:  # type: ignore[no-untyped-def]
    with httpx.Client(timeout=60) as client:
        context_id = str(uuid.uuid4())
        sender(client, url, context_id)  # warm-up: opens the conversation's session
        return [sender(client, url, context_id) for _ in range(n)]


def throughput(url: str, n: int, concurrency: int, sender=send) -> float:  # type: ignore[no-untyped-def]
    per_client = max(1, n // concurrency)
    errors: list[Exception] = []

    def worker() -> None:
        try:
            with httpx.Client(timeout=60) as client:
                context_id = str(uuid.uuid4())
                sender(client, url, context_id)
                barrier.wait()
                for _ in range(per_client):
                    sender(client, url, context_id)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)
            barrier.abort()

    barrier = threading.Barrier(concurrency + 1)
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return per_client * concurrency / (time.perf_counter() - began)


def cold(code: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([PY, "-c", code], check=True, cwd=WORK)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


TURNS = 10
WARM_SAMPLES = 40
"""Sequential turns of the mock and of the baselines beside it (the first opens the agent; p50/p90 of the rest)."""


def a2a_turns(argv: list[str], env: dict[str, str] | None = None, turns: int = TURNS) -> list[float]:
    """Seconds per SendMessage of ``turns`` sequential turns in one contextId (the first opens the agent), sent as
    a real client sends them: one ``httpx.Client`` whose kept-alive connection carries every request (the
    connection count is checked: a second connection raises)."""
    proc, url, _ = start(argv, env)
    peers: set[tuple[str, int]] = set()
    remember = lambda r: peers.add(r.extensions["network_stream"].get_extra_info("client_addr"))  # noqa: E731
    try:
        with httpx.Client(timeout=120, event_hooks={"response": [remember]}) as client:
            context_id = str(uuid.uuid4())
            took = [send(client, url, context_id) for _ in range(turns)]
            if len(peers) != 1:
                raise RuntimeError(f"the client opened {len(peers)} connections for {turns} requests")
            return took
    finally:
        stop(proc)


def sdk_client_turns(argv: list[str], env: dict[str, str] | None = None, turns: int = TURNS) -> list[float]:
    """The same turns sent with the a2a-sdk's own client (``ClientFactory.create_from_url``: the card is read
    once, then unary SendMessage over one ``httpx.AsyncClient``) — what another agent's A2A client pays."""
    import asyncio

    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest

    proc, url, _ = start(argv, env)

    async def run() -> list[float]:
        async with httpx.AsyncClient(timeout=120) as http:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(url)
            context_id, took = str(uuid.uuid4()), []
            for _ in range(turns):
                message = Message(
                    message_id=str(uuid.uuid4()), role=Role.ROLE_USER, context_id=context_id, parts=[Part(text="ok")]
                )
                began = time.perf_counter()
                [_ async for _ in client.send_message(SendMessageRequest(message=message))]
                took.append(time.perf_counter() - began)
            return took

    try:
        return asyncio.run(run())
    finally:
        stop(proc)


def wire_turns(agent: str, mock: str | None, env: dict[str, str] | None = None, turns: int = TURNS) -> list[float]:
    """Seconds per prompt → TurnEnded of ``turns`` turns over ``anyagentd serve``; the first includes open."""
    argv = [str(Path(PY).with_name("anyagentd")), "serve"] + (["--mock", mock] if mock else [])
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=WORK,
        env={**os.environ, **(env or {})},
    )
    CHILDREN.append(proc)
    assert proc.stdin is not None and proc.stdout is not None

    def write(frame: dict) -> None:
        proc.stdin.write(json.dumps(frame) + "\n")
        proc.stdin.flush()

    def until(check) -> dict:
        for line in proc.stdout:
            frame = json.loads(line)
            if check(frame):
                return frame
        raise RuntimeError("anyagentd serve ended")

    try:
        until(lambda f: "hello" in f)
        took = []
        began = time.perf_counter()
        write({"id": 1, "cmd": "open", "agent": agent, "dir": str(WORK)})
        session = until(lambda f: f.get("id") == 1)["ok"]["id"]
        for turn in range(turns):
            if turn:
                began = time.perf_counter()
            write({"id": 10 + turn, "cmd": "prompt", "session": session, "text": "ok"})
            until(lambda f: "TurnEnded" in f.get("event", {}).get("kind", {}))
            took.append(time.perf_counter() - began)
        return took
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def later(times: list[float]) -> tuple[float, float]:
    rest = sorted(times[1:])
    return rest[len(rest) // 2], rest[min(len(rest) - 1, int(len(rest) * 0.9))]


def report_turns(label: str, a2a: list[float], wire: list[float]) -> None:
    (a50, a90), (w50, w90) = later(a2a), later(wire)
    print(f"{label:7s} A2A  first {ms(a2a[0])}  later p50 {ms(a50)} p90 {ms(a90)}")
    print(
        f"{label:7s} wire first {ms(wire[0])}  later p50 {ms(w50)} p90 {ms(w90)}   "
        f"A2A - wire: p50 {ms(a50 - w50)}, first {ms(a2a[0] - wire[0])}"
    )


def report_baselines(a2a: list[float], wire: list[float], script: Path) -> None:
    """The mock's later turns beside the same request on the SDK alone (the echo server), at its best (in-memory
    store), on the SDK's SQLite store, and with Nagle on (how anyagentd's listener was built before), and beside
    the a2a-sdk client: p50 of :data:`WARM_SAMPLES` sequential requests, one connection."""
    echo = [PY, str(HERE / "a2a_echo_server.py"), "--listen", "127.0.0.1:0"]
    sqlite = f"sqlite:{WORK / f'e-{uuid.uuid4().hex[:6]}.db'}"
    rows = {
        "echo (memory)": echo,
        "echo (sqlite)": [*echo, "--store", sqlite],
        "echo (memory, Nagle on)": [*echo, "--nagle"],
    }
    (a50, _), (w50, _) = later(a2a), later(wire)
    print(f"{'anyagentd mock':24s} p50 {ms(a50)}   - wire {ms(a50 - w50)}")
    for name, argv in rows.items():
        e50, e90 = later(a2a_turns(argv, turns=WARM_SAMPLES))
        print(f"{name:24s} p50 {ms(e50)} p90 {ms(e90)}   anyagentd - it {ms(a50 - e50)} (x{a50 / e50:.2f})")
    anyagentd = str(Path(PY).with_name("anyagentd"))
    state = str(WORK / f"state-{uuid.uuid4().hex[:6]}")
    sdk = later(
        sdk_client_turns(
            [anyagentd, "a2a", "--listen", "127.0.0.1:0", "--mock", str(script), "--state-dir", state],
            turns=WARM_SAMPLES,
        )
    )
    echo_sdk = later(sdk_client_turns(echo, turns=WARM_SAMPLES))
    print(
        f"{'a2a-sdk client':24s} anyagentd p50 {ms(sdk[0])}   echo (memory) p50 {ms(echo_sdk[0])}   "
        f"anyagentd - echo {ms(sdk[0] - echo_sdk[0])}"
    )


def phases(script: Path) -> None:
    """Per-phase medians (``a2a_phases.py``) of :data:`WARM_SAMPLES` sequential later turns: the mock on anyagentd
    and the echo server on the SDK's SQLite store, side by side."""
    anyagentd = str(Path(PY).with_name("anyagentd"))
    tracer = [PY, str(HERE / "a2a_phases.py")]
    rows = {
        "anyagentd mock": [
            *tracer,
            anyagentd,
            "a2a",
            "--listen",
            "127.0.0.1:0",
            "--mock",
            str(script),
            "--state-dir",
            str(WORK / f"state-{uuid.uuid4().hex[:6]}"),
        ],
        "echo (sqlite)": [
            *tracer,
            str(HERE / "a2a_echo_server.py"),
            "--listen",
            "127.0.0.1:0",
            "--store",
            f"sqlite:{WORK / f'p-{uuid.uuid4().hex[:6]}.db'}",
        ],
    }
    for name, argv in rows.items():
        with tempfile.TemporaryFile("w+") as err:
            proc, url, _ = start(argv, stderr=err)
            with httpx.Client(timeout=60) as client:
                context_id = str(uuid.uuid4())
                for _ in range(WARM_SAMPLES):
                    send(client, url, context_id)
            stop(proc)
            err.seek(0)
            found = [json.loads(line)["phases"] for line in err if line.startswith('{"phases"')]
        print(f"phases, {name}: " + ", ".join(f"{k} {v}" for k, v in (found[0] if found else {}).items()))


def status_values(url: str) -> dict:
    command = "https://agentd.dev/a2a/ext/command"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "extensions": [command],
                "parts": [{"data": {"agentd": {"op": "status"}}, "mediaType": "application/json"}],
            }
        },
    }
    reply = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0", "A2A-Extensions": command}, timeout=60)
    return reply.json()["result"]["message"]["parts"][0]["data"]["values"]


def pool(argv: list[str], env: dict[str, str] | None = None, contexts: int = 40) -> None:
    config = WORK / f"pool-{uuid.uuid4().hex[:6]}.toml"
    config.write_text(config_text(argv) + "[a2a.pool]\nmax_live = 8\nidle_close = 0\n")
    proc, url, _ = start([*strip_config(argv), "--config", str(config)], env)
    try:
        with httpx.Client(timeout=120) as client:
            began = time.perf_counter()
            for _ in range(contexts):
                send(client, url, str(uuid.uuid4()))
            took = time.perf_counter() - began
        values = status_values(url)
        rss = next(
            int(l.split()[1])
            for l in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if l.startswith("VmRSS")
        )
        print(
            f"pool: {contexts} contexts, cap 8 -> liveAgents {values['liveAgents']}, evictions "
            f"{values['evictions']}, agents' RSS {values['agentRssBytes'] / 2**20:.1f} MiB, daemon VmRSS "
            f"{rss / 1024:.1f} MiB, {took / contexts * 1000:.0f} ms per context (open + turn)"
        )
    finally:
        stop(proc)


def config_text(argv: list[str]) -> str:
    return Path(argv[argv.index("--config") + 1]).read_text() + "\n" if "--config" in argv else ""


def strip_config(argv: list[str]) -> list[str]:
    if "--config" not in argv:
        return argv
    at = argv.index("--config")
    return argv[:at] + argv[at + 2 :]


def warm(claude: bool) -> None:
    script = short_reply_script(TURNS * 50)
    anyagentd = str(Path(PY).with_name("anyagentd"))
    state = lambda: str(WORK / f"state-{uuid.uuid4().hex[:6]}")  # noqa: E731
    mock = [anyagentd, "a2a", "--listen", "127.0.0.1:0", "--mock", str(script), "--state-dir", state()]
    a2a, wire = a2a_turns(mock, turns=WARM_SAMPLES), wire_turns("mock", str(script), turns=WARM_SAMPLES)
    report_turns("mock", a2a, wire)
    report_baselines(a2a, wire, script)
    pool([anyagentd, "a2a", "--listen", "127.0.0.1:0", "--mock", str(script), "--state-dir", state()])
    if not claude:
        return
    from anyagentd_testing.agents import agent_bin, claude_env, clean_environ
    from anyagentd_testing.model_server import ModelServer

    with ModelServer({"turns": [{"text": "ok"}] * 200}) as server:
        home = WORK / "home"
        home.mkdir(exist_ok=True)
        env = clean_environ(claude_env(server.url, home))
        env["ANYAGENTD_CLAUDE_BIN"] = str(agent_bin("claude"))
        config = WORK / "claude.toml"
        config.write_text(f'[agent]\nname = "claude"\ndir = "{WORK}"\n')
        argv = [anyagentd, "a2a", "--listen", "127.0.0.1:0", "--config", str(config), "--state-dir", state()]
        report_turns("claude", a2a_turns(argv, env), wire_turns("claude", None, env))
        pool([*argv[:-1], state()], env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200, help="sequential turns and throughput requests")
    parser.add_argument("--concurrency", type=int, default=8, help="clients of the throughput run")
    parser.add_argument("--quick", action="store_true", help="40 requests, one round, one start per server")
    parser.add_argument("--warm-only", action="store_true", help="only the warm conversations")
    parser.add_argument("--claude", action="store_true", help="warm conversations on Claude Code too")
    parser.add_argument("--phases", action="store_true", help="only the per-phase medians (a2a_phases.py)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds of every server (default 3, --quick 1)")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm conversations")
    parser.add_argument(
        "--baseline-tree", type=Path, help="also run anyagentd from this checkout (before/after side by side)"
    )
    parser.add_argument("--full-sync", action="store_true", help='also anyagentd with store_synchronous = "full"')
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds: at least 1")
    if args.baseline_tree is not None and not (args.baseline_tree / "core/src/anyagentd").is_dir():
        parser.error(f"--baseline-tree: {args.baseline_tree} is not an anyagentd checkout (no core/src/anyagentd)")
    if args.phases:
        phases(short_reply_script(WARM_SAMPLES * 2))
        return
    if not args.no_warm:
        warm(args.claude)
    if args.warm_only:
        return
    n = 40 if args.quick else args.requests
    rounds = args.rounds or (1 if args.quick else 3)
    print(
        f"bench_a2a: {n} requests, concurrency {args.concurrency}, {rounds} interleaved round(s), "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    chosen = servers(n * 2 + args.concurrency * 4, args.baseline_tree, args.full_sync)
    names = list(chosen)
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    status_rows: list[dict[str, float]] = []
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # the first server rotates
            argv, env = chosen[name]
            startups = []
            for _ in range(1 if args.quick else 3):
                proc, url, took = start(argv, env)
                startups.append(took)
                stop(proc)
            proc, url, _ = start(argv, env)
            try:
                lat = sorted(latency(url, n))
                rate = throughput(url, n, args.concurrency)
                if name == "anyagentd":
                    status_lat = sorted(latency(url, n, send_status))
                    status_rows.append(
                        {
                            "p50": status_lat[len(status_lat) // 2],
                            "p90": status_lat[int(len(status_lat) * 0.9)],
                            "rate": throughput(url, n, args.concurrency, send_status),
                        }
                    )
            finally:
                stop(proc)
            rows[name].append(
                {
                    "start": statistics.median(startups),
                    "p50": lat[len(lat) // 2],
                    "p90": lat[int(len(lat) * 0.9)],
                    "rate": rate,
                }
            )
    results = {name: {k: statistics.median(r[k] for r in rows[name]) for k in rows[name][0]} for name in names}
    status = {k: statistics.median(r[k] for r in status_rows) for k in status_rows[0]}
    for name in names:
        r = results[name]
        print(
            f"{name:22s} listening {ms(r['start'])}   SendMessage p50 {ms(r['p50'])} p90 {ms(r['p90'])}   "
            f"throughput {r['rate']:7.1f} req/s"
        )
    print(
        f"{'anyagentd status op':22s}                         p50 {ms(status['p50'])} p90 {ms(status['p90'])}   "
        f"throughput {status['rate']:7.1f} req/s"
    )
    per_round = "the median of per-round ratios" if rounds > 1 else "one round"
    print(f"ratios ({per_round}):")
    for mine in [name for name in names if name.startswith("anyagentd")]:
        for name in ("echo (memory)", "echo (sqlite)"):

            def ratio(key: str, mine: str = mine, name: str = name) -> float:
                return statistics.median(a[key] / b[key] for a, b in zip(rows[mine], rows[name], strict=True))

            print(
                f"  {mine} / {name}: listening x{ratio('start'):.2f}, p50 x{ratio('p50'):.2f}, "
                f"throughput x{ratio('rate'):.2f}"
            )
    for name in ("echo (memory)", "echo (sqlite)"):
        other = results[name]
        print(
            f"  anyagentd status op / {name}: p50 x{status['p50'] / other['p50']:.2f}, "
            f"throughput x{status['rate'] / other['rate']:.2f}"
        )
    serve = cold("import anyagentd.cli")
    a2a = cold("import anyagentd.cli, anyagentd_a2a.daemon")
    print(
        f"cold start: import anyagentd.cli {ms(serve)} (anyagentd serve's path)   "
        f"+ anyagentd_a2a.daemon {ms(a2a)}   (x{a2a / serve:.2f})"
    )


if __name__ == "__main__":
    try:
        main()
    finally:
        for child in CHILDREN:
            if child.poll() is None:
                child.kill()
