"""The commands a cancelled turn left running: which processes are a tool call's, and stopping them.

Some agents answer a cancel by ending the turn while a command they started for a tool call runs on: codex-acp
0.16.0 answers ``session/cancel`` with ``stopReason: cancelled`` at once and leaves the shell (under its
``codex-linux-sandbox`` / ``bwrap``) to finish, side effects included. Reporting that tool ``Cancelled`` would be
false. An adapter that ends a cancelled turn asks this module to stop those commands first, and reports a tool
ended only once its processes are gone.

What is stopped (the decision, the same for every adapter using it; Linux, read from ``/proc``):

- only processes of the agent's lineage (:func:`.lineage.lineage`: its descendants and what carries its mark)
  that did not exist when the turn started (:func:`snapshot` taken then): MCP servers, helpers and commands from
  earlier turns are never touched;
- among those, the processes whose command line runs one of the tool's commands (:func:`command_texts`; matched
  as one argument, ``bash -c COMMAND``, or as the whole command line), with the whole tree from their highest
  ancestor outside the agent's process group down (a sandbox wrapper included: :func:`.lineage.command_tree`);
- never the agent's process group (the agent, its npm wrapper) unless a command runs in it, and never a process
  whose command line names none of the tool's commands: a tool the adapter cannot name a command for is not
  stopped.

How: SIGTERM to every process of those trees; once ``grace`` seconds pass with some still alive, SIGKILL to
those; up to :data:`KILL_WAIT` seconds more for them to die (SIGKILL is asynchronous). The caller then reaps what
re-parents to anyagentd (a subreaper) with :func:`.lineage.reap` in a task of its own: the agent reaps its own
children, orphans come later. A process still alive then (one that could not be signalled, or stuck in the
kernel) is a survivor: its tool is not over, the adapter leaves it running (the engine lists it in
``TurnEnded.background``) and ends it once :func:`wait_gone` returns.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from . import lineage

KILL_WAIT = 1.0
"""Seconds to wait for SIGKILLed processes to be gone before counting them as survivors."""

POLL = 0.02
"""Seconds between two looks at ``/proc`` while processes are dying."""

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})


@dataclass(frozen=True)
class Stopped:
    """What :func:`stop_commands` did for one tool: ``pids`` signalled (sorted), ``signal`` the last one sent
    (``"SIGTERM"``, or ``"SIGKILL"`` when some outlived the grace), ``survivors`` the pids still alive after it."""

    pids: tuple[int, ...]
    signal: str
    survivors: tuple[int, ...] = ()


def snapshot(agent: int, mark: str | None) -> frozenset[int]:
    """The pids of the agent's lineage now (``agent``: its pid; ``mark``: its lineage mark): taken when a turn
    starts, these are never stopped at its end. Empty where there is no ``/proc``.

    Blocking: it reads every process's ``/proc/<pid>/stat`` and ``environ`` (the mark also finds what left the
    agent's tree), about 1 ms with 75 processes and 25 ms with 1,075 on a 2-core CI machine, so callers run it in
    a worker thread (``anyio.to_thread.run_sync``), as the ACP adapter does at each prompt."""
    return frozenset(lineage.lineage(agent, mark))


def command_texts(command: str | Sequence[str]) -> list[str]:
    """The command lines to look for, for a tool's command given as a string (itself) or as an argv (the script of
    a shell ``-c`` call, ``["/bin/bash", "-lc", SCRIPT]`` → ``SCRIPT``, then the space-joined argv): agents may run
    the script under another shell invocation than the one they report (codex-acp reports ``-lc``, runs ``-c``)."""
    if isinstance(command, str):
        return [command] if command else []
    argv = [str(part) for part in command]
    texts = []
    if len(argv) >= 3 and os.path.basename(argv[0]) in SHELLS and argv[-2].startswith("-") and "c" in argv[-2]:
        texts.append(argv[-1])
    if argv:
        texts.append(" ".join(argv))
    return texts


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :][:1] != b"Z"


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


async def _wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to die; the ones still alive."""
    left = {pid for pid in pids if _alive(pid)}
    with anyio.move_on_after(seconds):
        while left:
            await anyio.sleep(POLL)
            left = {pid for pid in left if _alive(pid)}
    return left


def _trees(
    agent: int, mark: str | None, commands: Mapping[str, Sequence[str]], exclude: set[int]
) -> dict[str, set[int]]:
    """Tool id → the process tree running its command (:func:`.lineage.command_tree`), for the tools with one;
    reads all of ``/proc`` once (blocking: run in a worker thread)."""
    table = lineage.processes()
    trees = {}
    for tool_id, texts in commands.items():
        tree = lineage.command_tree(agent, texts, mark=mark, table=table, exclude=exclude)
        if tree:
            trees[tool_id] = tree
    return trees


async def stop_commands(
    agent: int, mark: str | None, commands: Mapping[str, Sequence[str]], *, before: Iterable[int], grace: float
) -> dict[str, Stopped]:
    """Stop what runs the tools' commands (see the module doc). ``agent``: the agent's pid (it leads its process
    group); ``mark``: its lineage mark; ``commands``: tool id → the command lines to look for
    (:func:`command_texts`); ``before``: the :func:`snapshot` of the turn's start; ``grace``: seconds between
    SIGTERM and SIGKILL. Returns, for each tool with a running command, what was done; a tool whose command is
    not running is left out. Shielded from cancellation; never raises for a process that went away. Takes at most
    ``grace`` + :data:`KILL_WAIT` seconds, and only the ``/proc`` walk when no tool's command runs. That walk (as
    :func:`snapshot`'s, about 40 ms with 1,075 processes) runs in a worker thread: the event loop, which serves
    every session, stalls under 1 ms meanwhile."""
    with anyio.CancelScope(shield=True):
        trees = await anyio.to_thread.run_sync(_trees, agent, mark, commands, set(before))
        every = set().union(*trees.values()) if trees else set()
        if not every:
            return {}
        _signal(sorted(every), signal.SIGTERM)
        left = await _wait_gone(every, grace)
        sent = "SIGTERM"
        if left:
            sent = "SIGKILL"
            _signal(sorted(left), signal.SIGKILL)
            left = await _wait_gone(left, KILL_WAIT)
        return {
            tool_id: Stopped(pids=tuple(sorted(tree)), signal=sent, survivors=tuple(sorted(tree & left)))
            for tool_id, tree in trees.items()
        }
    # a CancelScope's exit may swallow (its own cancellation); this shielded one has no deadline to cancel it
    raise AssertionError("unreachable")  # pragma: no cover


async def wait_gone(pids: Iterable[int], poll: float = 0.25) -> None:
    """Return once none of ``pids`` is alive (a zombie counts as gone), looking every ``poll`` seconds."""
    left = set(pids)
    while left:
        left = {pid for pid in left if _alive(pid)}
        if left:
            await anyio.sleep(poll)


__all__ = ["KILL_WAIT", "Stopped", "command_texts", "snapshot", "stop_commands", "wait_gone"]
