"""An agent's lineage: every process it started, bound to anyagentd's life and found again at close.

Agents start processes anyagentd never sees: Claude Code runs each Bash command in a new session, so
``sleep 312 &`` leaves the agent's process group, and an agent that crashes leaves its running command behind.
What :class:`~anyagentd.adapters.process.AgentProcess` does with this module, on Linux:

- :func:`die_with_parent` (a ``preexec_fn``), or where util-linux's ``setpriv`` is installed the cheaper command
  prefix of :func:`die_with_parent_prefix`: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the child before it runs the
  agent, so the agent dies with the thread that spawned it, however anyagentd dies (``kill -9`` included);
- :func:`become_subreaper`: ``prctl(PR_SET_CHILD_SUBREAPER)`` on anyagentd itself (the process that starts the
  first agent; ``ANYAGENTD_SUBREAPER=0`` opts out), so processes orphaned inside an agent's tree re-parent to
  anyagentd instead of PID 1 and stay reachable (and are reaped here, at the next sweep);
- :data:`LINEAGE_ENV`: a per-agent marker put in the agent's environment, which its descendants inherit (agents
  pass their environment to the commands they run); :func:`lineage` finds the living processes carrying it, or
  descending from the agent, or from one of those, by reading ``/proc``;
- :func:`command_tree` finds the process tree of a command an agent runs for a tool call by its command line, and
  :func:`stop_command` SIGKILLs it (a tool call the agent left running when its turn was interrupted;
  :mod:`.cancelled_commands` stops one gracefully);
- :func:`guard` registers an agent's mark with a guardian: a small process of its own (started once, in a session
  of its own) reading a pipe from anyagentd; when anyagentd dies, however it dies, the pipe reaches EOF and the
  guardian SIGKILLs every process still carrying a registered mark — the jobs the agent left outside its group,
  which the parent-death signal does not reach;
- :func:`kill_lineage` SIGKILLs what :func:`lineage` found, and :func:`reap` collects those of them that became
  anyagentd's children — only those pids, with ``waitpid`` on each, never a blanket ``wait``: asyncio watches its
  own children by pid and must keep finding them.

Elsewhere (macOS, BSD) there is neither a parent-death signal nor ``/proc``: :func:`die_with_parent` is a no-op,
:func:`lineage` finds nothing, no guardian runs, and what is left is the process-group sweep of
``AgentProcess.terminate``; a process that left the agent's group, or an agent outliving a ``kill -9`` of
anyagentd, is not caught there (a guardian could kill the registered process groups instead; not done).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import anyio

LINEAGE_ENV = "ANYAGENTD_AGENT_LINEAGE"
"""Environment variable marking an agent's processes; its value is unique per agent process (:func:`new_mark`)."""

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_PROC = "/proc"
_LINUX = sys.platform.startswith("linux")
_subreaper = False


@functools.cache
def _libc() -> Any:
    """The C library through ``ctypes`` (a ``ctypes.CDLL``) on Linux, else ``None``; loaded by the first call, in
    this process (never in a ``preexec_fn``, which must not load libraries). Not at import: ``ctypes`` is ~1.5 ms
    of every start, `serve` and the scripted agent included, that only a spawn needs (issue 31, bench/README.md)."""
    if not _LINUX:
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def new_mark() -> str:
    """A fresh :data:`LINEAGE_ENV` value: anyagentd's pid and a random part."""
    return f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGKILL when its parent (the spawning thread) dies; ``None``
    where that does not exist. Runs between fork and exec: it only calls ``prctl`` and checks it was not
    already orphaned."""
    libc = _libc()
    if libc is None:
        return None
    parent = os.getpid()
    prctl = libc.prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: the signal will never come
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


_SETPRIV: list[str | None] = []  # [path or None] once looked up


def die_with_parent_prefix(executable: str, path: str | None) -> list[str] | None:
    """A command prefix that gives the process SIGKILL as its parent-death signal and then execs the agent in the
    same process: util-linux's ``setpriv --pdeathsig KILL --``. With it the spawn needs no ``preexec_fn`` (see
    :func:`die_with_parent`), so Python vforks (about 0.4 ms) instead of forking this process and running Python in
    the child (about 3 ms). ``None`` off Linux, without ``setpriv``, or when ``executable`` does not resolve on
    ``path`` (the child's ``PATH``): the spawn then raises the error Popen raises for it. Unlike the
    ``preexec_fn`` it does not check that the parent was still alive at ``prctl`` time; the guardian
    (:func:`guard`) kills a process orphaned in that window, which carries the lineage mark. setpriv execs with
    ``execvp``, which runs an executable text file without a ``#!`` line with ``/bin/sh`` where Popen would raise
    ``ENOEXEC``."""
    import shutil

    if _libc() is None:
        return None
    if not _SETPRIV:
        _SETPRIV.append(shutil.which("setpriv"))
    if _SETPRIV[0] is None or shutil.which(executable, path=path) is None:
        return None
    return [_SETPRIV[0], "--pdeathsig", "KILL", "--"]


def become_subreaper() -> bool:
    """Make this process a child subreaper (once); True when it is one. ``ANYAGENTD_SUBREAPER=0`` opts out (an
    application embedding anyagentd that does not want the orphans of its other children re-parented to it; what
    agents orphan then escapes to PID 1 unless it carries the lineage mark)."""
    global _subreaper
    if not _subreaper and _libc() is not None and os.environ.get("ANYAGENTD_SUBREAPER", "1") != "0":
        _subreaper = _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


GUARDIAN = r"""
import os, signal, sys, time
marks = set()
for line in sys.stdin.buffer:
    line = line.strip()
    if line[:1] == b"+":
        marks.add(b"ANYAGENTD_AGENT_LINEAGE=" + line[1:])
    elif line[:1] == b"-":
        marks.discard(b"ANYAGENTD_AGENT_LINEAGE=" + line[1:])
for _ in range(3 if marks else 0):
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/" + name + "/environ", "rb") as fh:
                    if marks.intersection(fh.read().split(b"\0")):
                        os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
"""
"""The guardian's program (``python -S -c``): reads ``+mark`` / ``-mark`` lines until EOF, then SIGKILLs the
processes carrying a registered mark, three passes 0.2 s apart (a dying tree may still fork)."""

_guardian: Any = None


def guard(mark: str, *, register: bool = True) -> None:
    """Register (or, ``register=False``, release) ``mark`` with the guardian, starting it on first use (Linux
    only; a guardian that cannot be started or has died is not replaced: the other mechanisms remain)."""
    global _guardian
    if not _LINUX:
        return
    if _guardian is None:
        if not register:
            return
        try:
            _guardian = subprocess.Popen(
                [sys.executable, "-S", "-c", GUARDIAN],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            _guardian = False
            return
    if not _guardian:
        return
    try:
        _guardian.stdin.write(f"{'+' if register else '-'}{mark}\n".encode())
        _guardian.stdin.flush()
    except (OSError, ValueError):
        _guardian = False


def guardian_pid() -> int | None:
    """The pid of the guardian this process started (:func:`guard`), ``None`` when none was (not Linux, no agent
    registered yet, or it could not start or be written to): anyagentd's own helper, a child of anyagentd but no
    agent's process (the pool's memory count leaves it out). It lives until anyagentd exits (it reads its stdin to
    EOF), and nothing here reaps it before, so its pid is never another process's."""
    return _guardian.pid if _guardian else None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of ``pid`` from ``/proc/<pid>/stat``, or None when it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[0].decode(), int(fields[1]), int(fields[2])


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False


def processes() -> dict[int, tuple[str, int, int]]:
    """Every process visible in ``/proc``: pid → (state, ppid, pgid). Empty where there is no ``/proc``."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return {}
    table = {}
    for name in names:
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                table[int(name)] = stat
    return table


def lineage(root: int, mark: str | None, table: dict[int, tuple[str, int, int]] | None = None) -> set[int]:
    """The living processes of the agent ``root`` (not ``root`` itself): its process group, its descendants,
    processes whose environment carries ``LINEAGE_ENV=mark``, and their descendants."""
    table = processes() if table is None else table
    needle = f"{LINEAGE_ENV}={mark}".encode() if mark else None
    me = os.getpid()
    found = {pid for pid, (state, _, pgid) in table.items() if pgid == root and state != "Z"}
    if needle is not None:
        found |= {pid for pid, (state, _, _) in table.items() if state != "Z" and pid != me and _marked(pid, needle)}
    found.add(root)
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child != me:
                found.add(child)
                todo.append(child)
    found.discard(root)
    return {pid for pid in found if table.get(pid, ("Z",))[0] != "Z"}  # a zombie is dead already


def cmdline(pid: int) -> list[str]:
    """The argv of ``pid`` (empty when it is gone, a zombie, or unreadable)."""
    try:
        with open(f"{_PROC}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def stop_command(agent: int, command: str) -> list[int] | None:
    """SIGKILL a command the agent ``agent`` (its pid, which leads its process group) runs for a tool call: the tree
    :func:`command_tree` finds for ``command``. Returns the pids signalled (empty when it could not be), or ``None``
    when no such command runs. Linux (``/proc``) only."""
    tree = command_tree(agent, [command])
    return None if tree is None else kill_lineage(sorted(tree))


def command_tree(
    agent: int,
    commands: Iterable[str],
    *,
    mark: str | None = None,
    table: dict[int, tuple[str, int, int]] | None = None,
    exclude: Iterable[int] = (),
) -> set[int] | None:
    """The process trees of the commands the agent ``agent`` (its pid, which leads its process group) runs for a tool
    call, found by command line; ``None`` when none of them runs.

    A command is found among the agent's living :func:`lineage` (with ``mark``, also what re-parented away),
    leaving out the pids in ``exclude`` (processes that ran before the tool could have started one), by its command
    line: one of ``commands`` as one argument (``bash -c COMMAND``, ``bash -lc COMMAND``) or as the whole
    space-joined command line. What belongs to it is the tree from its highest ancestor outside the agent's process
    group (a sandbox wrapper, e.g. Codex's ``codex-linux-sandbox`` / ``bwrap``) down: the agent's own processes
    are never part of it. ``table`` is a :func:`processes` snapshot (read now when ``None``). Linux only."""
    table = processes() if table is None else table
    inside = lineage(agent, mark, table)
    wanted = [c for c in commands if c]
    skip = set(exclude)
    matches = [
        pid for pid in sorted(inside - skip) if table[pid][0] != "Z" and any(_runs(cmdline(pid), c) for c in wanted)
    ]
    if not matches:
        return None
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree: set[int] = set()
    for match in matches:
        top = match
        while True:
            parent = table.get(top, ("", 0, 0))[1]
            if parent not in inside or table[parent][2] == agent:
                break
            top = parent
        todo = [top]
        tree.add(top)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
    return {pid for pid in tree if table.get(pid, ("Z",))[0] != "Z"}


def _runs(argv: list[str], command: str) -> bool:
    return bool(argv) and (command in argv[1:] or " ".join(argv) == command)


def kill_lineage(pids: Iterable[int]) -> list[int]:
    """SIGKILL each pid; returns those signalled."""
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


async def reap(pids: Iterable[int], *, exclude: Iterable[int] = (), timeout: float = 1.0) -> None:
    """Collect the exit status of those ``pids`` that are (or become, once their parent died) this process's
    children, so no zombie is left; ``exclude`` holds children someone else waits for (asyncio's own). Waits up
    to ``timeout`` seconds for SIGKILLed processes to die."""
    me = os.getpid()
    left = set(pids) - set(exclude)
    with anyio.move_on_after(timeout):
        while left:
            for pid in list(left):
                stat = _stat(pid)
                if stat is None:
                    left.discard(pid)
                    continue
                if stat[1] != me:
                    continue  # still someone else's child: its own parent reaps it, or it re-parents to us later
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    left.discard(pid)
                    continue
                if done:
                    left.discard(pid)
            if left:
                await anyio.sleep(0.02)


def orphaned_zombies(exclude: Iterable[int] = ()) -> list[int]:
    """Zombie children of this process that it never spawned: orphans re-parented here (a subreaper) that died
    on their own. Told apart from our own spawns by their session: ours lead one (``start_new_session``) or share
    ours; an orphan's belongs to an agent's tree. ``exclude``: pids asyncio waits for. (An orphan that led a
    session of its own and exited before any sweep saw it alive looks like one of ours: it stays a zombie until
    anyagentd exits.)"""
    me = os.getpid()
    own_session = os.getsid(0)
    skip = set(exclude)
    out = []
    for pid, (state, ppid, _) in processes().items():
        if state != "Z" or ppid != me or pid in skip:
            continue
        try:
            sid = os.getsid(pid)
        except OSError:
            continue
        if sid not in (pid, own_session):
            out.append(pid)
    return out


__all__ = [
    "LINEAGE_ENV",
    "become_subreaper",
    "cmdline",
    "die_with_parent",
    "guard",
    "guardian_pid",
    "kill_lineage",
    "lineage",
    "new_mark",
    "orphaned_zombies",
    "processes",
    "reap",
    "stop_command",
    "command_tree",
]
