"""The least a wire server on anyagentd's stack pays to answer one ``open``: bench_wire.py's stack floor.

Imports what every engine path must (click for the command line, pydantic's ``BaseModel``, anyio with its asyncio
backend), writes a hello line, reads one line on stdin in a worker thread (as ``anyagentd serve`` does), validates
it with a pydantic model, writes a reply built by another and exits. No engine, no plugins, no agent: the gap
between this and ``serve -> reply to open mock`` is anyagentd's own start-up. Not a server; a baseline only.
"""

from __future__ import annotations

import sys

import anyio
import click
from pydantic import BaseModel


class Open(BaseModel):
    id: int
    cmd: str
    agent: str
    dir: str


class Opened(BaseModel):
    id: int
    ok: dict[str, str]


async def answer() -> None:
    out = sys.stdout.buffer
    out.write(b'{"hello":{"protocol":1,"anyagent":"floor"}}\n')
    out.flush()
    line = await anyio.to_thread.run_sync(sys.stdin.buffer.readline)
    frame = Open.model_validate_json(line)
    out.write(Opened(id=frame.id, ok={"id": "s1", "agent": frame.agent}).model_dump_json().encode() + b"\n")
    out.flush()


@click.command()
def main() -> None:
    anyio.run(answer)


if __name__ == "__main__":
    main()
