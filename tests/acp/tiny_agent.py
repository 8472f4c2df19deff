"""A tiny ACP agent for the tests, on the official ``agent-client-protocol`` library (agent side).

It shows what the real agents don't: agent-originated content, malformed updates, non-JSON and oversized lines, a
crash mid-turn, refusals, modes and config options, session/load. The first word of the prompt picks the act:

``hello`` thought + text + usage (with cost) + title · ``tools`` plan + a tool call with diff, locations, output ·
``unfinished`` a tool call left in_progress, then end_turn (codex-acp 0.16.0 sometimes drops the final update) ·
``permission`` asks permission (all four option kinds), says which option came back · ``slow`` waits up to 10 s
for session/cancel · ``deaf N`` ignores session/cancel for N s · ``later`` ends the turn, then writes unprompted text · ``malformed`` a bogus update and a
non-JSON line, then text · ``oversized N`` an N-byte line, then text · ``crash`` text then exit 3 ·
``refuse`` stopReason refusal · ``limit`` stopReason max_tokens · ``echo`` describes the prompt blocks ·
``mcp`` lists the MCP servers it got. Environment: ``TINY_AUTH=1`` makes session/new fail auth_required;
``TINY_NO_LOAD=1`` drops loadSession.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp import schema as s
from acp.core import AgentSideConnection
from acp.stdio import stdio_streams


def text(t: str) -> s.TextContentBlock:
    return s.TextContentBlock(type="text", text=t)


class TinyAgent:
    def __init__(self) -> None:
        self.conn: AgentSideConnection | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.mode = "ask"
        self.model = "tiny-small"
        self.fast = False
        self.mcp: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def update(self, session_id: str, update: Any) -> None:
        assert self.conn is not None
        await self.conn.session_update(session_id=session_id, update=update)

    async def raw(self, data: bytes) -> None:
        assert self.writer is not None
        self.writer.write(data)
        await self.writer.drain()

    # ------------------------------------------------------------------------------------------ lifecycle

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> s.InitializeResponse:
        auth = [
            s.TerminalAuthMethod(
                type="terminal", id="login", name="Log in", description="Log in to tiny", args=["--login"]
            )
        ]
        return s.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=s.AgentCapabilities(
                load_session=os.environ.get("TINY_NO_LOAD") != "1",
                prompt_capabilities=s.PromptCapabilities(image=True),
                mcp_capabilities=s.McpCapabilities(http=True, sse=False),
            ),
            agent_info=s.Implementation(name="tiny", version="0.0.1"),
            auth_methods=auth,
        )

    def _modes(self) -> s.SessionModeState:
        return s.SessionModeState(
            current_mode_id=self.mode,
            available_modes=[s.SessionMode(id="ask", name="Ask"), s.SessionMode(id="code", name="Code")],
        )

    def _config(self) -> list[Any]:
        return [
            s.SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=self.model,
                options=[
                    s.SessionConfigSelectOption(value="tiny-small", name="Small"),
                    s.SessionConfigSelectOption(value="tiny-large", name="Large"),
                ],
            ),
            s.SessionConfigOptionBoolean(type="boolean", id="fast", name="Fast", current_value=self.fast),
        ]

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> s.NewSessionResponse:
        if os.environ.get("TINY_AUTH") == "1":
            raise RequestError.auth_required({"reason": "not logged in"})
        self.mcp = list(mcp_servers or [])
        return s.NewSessionResponse(
            session_id=f"tiny-{uuid.uuid4().hex[:8]}", modes=self._modes(), config_options=self._config()
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> s.LoadSessionResponse:
        if not session_id.startswith("tiny-"):
            raise RequestError.resource_not_found(session_id)
        # replay the history, as ACP agents do
        await self.update(session_id, s.UserMessageChunk(session_update="user_message_chunk", content=text("old")))
        await self.update(
            session_id, s.AgentMessageChunk(session_update="agent_message_chunk", content=text("old answer"))
        )
        return s.LoadSessionResponse(modes=self._modes(), config_options=self._config())

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> s.SetSessionModeResponse:
        if mode_id not in ("ask", "code"):
            raise RequestError.invalid_params({"mode": mode_id})
        self.mode = mode_id
        await self.update(
            session_id, s.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id)
        )
        return s.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kwargs: Any
    ) -> s.SetSessionConfigOptionResponse:
        if config_id == "model":
            self.model = value
        elif config_id == "fast":
            self.fast = bool(value)
        else:
            raise RequestError.invalid_params({"config": config_id})
        return s.SetSessionConfigOptionResponse(config_options=self._config())

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    # ------------------------------------------------------------------------------------------ prompts

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        first = prompt[0].text if prompt and isinstance(prompt[0], s.TextContentBlock) else ""
        word, _, rest = first.partition(" ")
        self.cancelled[session_id] = asyncio.Event()
        act = getattr(self, f"act_{word}", None)
        if act is None:
            await self.say(session_id, f"unknown act {word!r}")
            return s.PromptResponse(stop_reason="end_turn")
        return s.PromptResponse(stop_reason=await act(session_id, rest, prompt))

    async def say(self, session_id: str, t: str) -> None:
        await self.update(session_id, s.AgentMessageChunk(session_update="agent_message_chunk", content=text(t)))

    async def act_hello(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.update(sid, s.AgentThoughtChunk(session_update="agent_thought_chunk", content=text("hmm")))
        await self.say(sid, "Hello ")
        await self.say(sid, "world.")
        await self.update(
            sid,
            s.UsageUpdate(
                session_update="usage_update", used=1200, size=200000, cost=s.Cost(amount=0.25, currency="USD")
            ),
        )
        await self.update(sid, s.SessionInfoUpdate(session_update="session_info_update", title="Tiny chat"))
        await self.update(
            sid,
            s.AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=[s.AvailableCommand(name="joke", description="Tell a joke")],
            ),
        )
        return "end_turn"

    async def act_tools(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.update(
            sid,
            s.AgentPlanUpdate(
                session_update="plan",
                entries=[
                    s.PlanEntry(content="edit the file", priority="high", status="in_progress"),
                    s.PlanEntry(content="check", priority="low", status="pending"),
                ],
            ),
        )
        await self.update(
            sid,
            s.ToolCallStart(
                session_update="tool_call",
                tool_call_id="t1",
                title="Edit a.txt",
                kind="edit",
                status="pending",
                locations=[s.ToolCallLocation(path="/w/a.txt", line=3)],
                raw_input={"path": "/w/a.txt"},
            ),
        )
        await self.update(
            sid,
            s.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id="t1",
                status="in_progress",
                content=[s.FileEditToolCallContent(type="diff", path="/w/a.txt", old_text="a", new_text="b")],
            ),
        )
        await self.update(
            sid,
            s.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id="t1",
                status="completed",
                content=[s.ContentToolCallContent(type="content", content=text("edited"))],
            ),
        )
        await self.say(sid, "Done.")
        return "end_turn"

    async def act_unfinished(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.update(
            sid,
            s.ToolCallStart(
                session_update="tool_call",
                tool_call_id="u1",
                title="printf hi",
                kind="execute",
                status="in_progress",
                raw_input={"command": ["/bin/bash", "-lc", "printf hi"]},
            ),
        )
        await self.say(sid, "Done.")
        return "end_turn"

    async def act_permission(self, sid: str, rest: str, prompt: list[Any]) -> str:
        assert self.conn is not None
        await self.update(
            sid,
            s.ToolCallStart(
                session_update="tool_call",
                tool_call_id="p1",
                title="rm -rf /tmp/x",
                kind="execute",
                status="pending",
                raw_input={"command": ["rm", "-rf", "/tmp/x"]},
            ),
        )
        options = [
            s.PermissionOption(option_id=f"opt-{k}", name=k, kind=k)
            for k in ("allow_once", "allow_always", "reject_once", "reject_always")
        ]
        reply = await self.conn.request_permission(
            session_id=sid,
            options=options,
            tool_call=s.ToolCallUpdate(tool_call_id="p1", title="rm -rf /tmp/x", kind="execute", status="pending"),
        )
        outcome = reply.outcome
        if isinstance(outcome, s.DeniedOutcome) or outcome.outcome == "cancelled":
            return "cancelled"
        await self.update(
            sid,
            s.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id="p1",
                status="completed" if "allow" in outcome.option_id else "failed",
            ),
        )
        await self.say(sid, f"selected {outcome.option_id}")
        return "end_turn"

    async def act_slow(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(sid, "thinking slowly")
        try:
            await asyncio.wait_for(self.cancelled[sid].wait(), 10)
        except TimeoutError:
            return "end_turn"
        return "cancelled"

    async def act_deaf(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(sid, "not listening")
        await asyncio.sleep(float(rest or "3"))
        await self.say(sid, "late words")
        return "end_turn"

    async def act_later(self, sid: str, rest: str, prompt: list[Any]) -> str:
        async def unprompted() -> None:
            await asyncio.sleep(0.3)
            await self.say(sid, "unprompted news")

        asyncio.get_running_loop().create_task(unprompted())
        await self.say(sid, "now")
        return "end_turn"

    async def act_malformed(self, sid: str, rest: str, prompt: list[Any]) -> str:
        assert self.conn is not None
        await self.conn._conn.send_notification(
            "session/update", {"sessionId": sid, "update": {"sessionUpdate": "bogus_kind", "x": 1}}
        )
        await self.conn._conn.send_notification(
            "session/update", {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk"}}
        )  # missing content
        await self.raw(b"this is not json\n")
        await self.say(sid, "after")
        return "end_turn"

    async def act_oversized(self, sid: str, rest: str, prompt: list[Any]) -> str:
        size = int(rest or "100000")
        await self.raw(b'{"jsonrpc":"2.0","method":"session/update","params":{"pad":"' + b"x" * size + b'"}}\n')
        await self.say(sid, "survived")
        return "end_turn"

    async def act_crash(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(sid, "about to crash")
        await asyncio.sleep(0.2)
        sys.stderr.write("tiny: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    async def act_refuse(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(sid, "no")
        return "refusal"

    async def act_limit(self, sid: str, rest: str, prompt: list[Any]) -> str:
        return "max_tokens"

    async def act_echo(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(
            sid, " ".join(f"{b.type}:{getattr(b, 'uri', None) or getattr(b, 'mime_type', None) or ''}" for b in prompt)
        )
        return "end_turn"

    async def act_mcp(self, sid: str, rest: str, prompt: list[Any]) -> str:
        await self.say(sid, ",".join(f"{type(m).__name__}:{m.name}" for m in self.mcp))
        return "end_turn"


async def main() -> None:
    agent = TinyAgent()
    reader, writer = await stdio_streams(limit=64 * 1024 * 1024)
    agent.writer = writer
    await run_agent(agent, writer, reader)


if __name__ == "__main__":
    asyncio.run(main())
