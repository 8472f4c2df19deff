"""A bare a2a-sdk JSON-RPC server (the baseline of bench_a2a.py): each message becomes a task that completes with
the message's text as its artifact and final message. Started like the daemon: ``--listen HOST:PORT`` (port 0
binds a free port), first stdout line ``{"listening": URL}``. ``--store sqlite:PATH`` uses the SDK's database task
store (on SQLite in WAL mode, as anyagentd's) instead of its in-memory one. ``--nagle`` builds the listening socket
as ``socket.socket()`` (protocol 0), so asyncio leaves Nagle's algorithm on for its connections — how anyagentd's
listener was built before (see ``anyagentd.listen``); without it the socket is ``IPPROTO_TCP`` and asyncio sets
``TCP_NODELAY``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import uuid

import uvicorn
from a2a.helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Message, Part, Role, Task, TaskState, TaskStatus
from starlette.applications import Starlette


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        text = get_message_text(context.message)
        await updater.add_artifact([Part(text=text)], artifact_id="response", name="response")
        await updater.complete(Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=[Part(text=text)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--store", default="memory")
    parser.add_argument("--nagle", action="store_true")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    sock = socket.socket() if args.nagle else socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind((host, int(port)))
    sock.listen(128)
    url = f"http://{host}:{sock.getsockname()[1]}"
    card = AgentCard(
        name="echo",
        description="echo",
        version="1",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
    )
    if args.store.startswith("sqlite:"):
        from a2a.server.tasks import DatabaseTaskStore
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(f"sqlite+aiosqlite:///{args.store[7:]}")

        @event.listens_for(engine.sync_engine, "connect")
        def wal(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]  # as anyagentd's store has it
            dbapi_conn.execute("PRAGMA journal_mode=WAL")

        store = DatabaseTaskStore(engine)
    else:
        store = InMemoryTaskStore()
    handler = DefaultRequestHandler(Echo(), store, card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        sys.stdout.write(json.dumps({"listening": url}) + "\n")
        sys.stdout.flush()

    asyncio.get_running_loop().create_task(announce())
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
