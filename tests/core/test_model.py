"""The event model against the vendored wire schema: for every definition of ``anyagent-wire.schema.json``,
realistic example instances that (1) validate against the schema, (2) round-trip through the matching pydantic
model / ``TypeAdapter`` (validate → ``dump(mode="json")`` → equal, omitted optionals read as null) and (3) dump to
JSON the schema accepts. Every variant tag of every enum needs an example too, so a definition or variant added to
the schema cannot be forgotten. Negative cases: unknown tags, extra fields, missing fields, wrong types.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from wire_schema import DEFINITIONS, def_errors, validate_def

from anyagentd import errors, model, wire

# ------------------------------------------------------------------------------------------------ examples

NOW = {"secs_since_epoch": 1_764_441_600, "nanos_since_epoch": 123_456_789}
INSTALLATION = {
    "id": "claude",
    "name": "Claude Code",
    "executable_path": "/home/dev/.local/bin/claude",
    "source": "Path",
    "upgrade": None,
    "acp_args": None,
}
MISSING_CODEX = {
    "id": "codex",
    "name": "Codex",
    "searched": ["/usr/local/bin", "/home/dev/.local/bin"],
    "install_hint": "npm install -g @openai/codex",
}
SELECT_MODEL = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "kind": {
        "Select": {
            "choices": [
                {"value": "sonnet", "label": "Sonnet", "description": "Balanced"},
                {"value": "opus", "label": "Opus", "description": None},
            ]
        }
    },
    "current": "sonnet",
    "live": True,
}
FAST_OPTION = {"id": "fast", "name": "Fast mode", "category": None, "kind": "Boolean", "current": False, "live": False}
DETAILS = {
    "version": "2.0.14 (Claude Code)",
    "auth": {"Authenticated": {"kind": "Subscription", "account": {"email": "dev@example.com", "plan": "max"}}},
    "capabilities": {
        "features": ["Images", "Resume", "Permissions", "Questions", "Rollback", "RollbackFiles", "Compact"],
        "mcp_transports": ["Stdio", "Http", "Sse"],
    },
    "config_options": [SELECT_MODEL, FAST_OPTION],
    "commands": [
        {"name": "review", "description": "Review a pull request", "input_hint": "<pr number>"},
        {"name": "compact", "description": "Summarize the conversation", "input_hint": None},
    ],
}
SESSION_INFO = {
    "id": "s1",
    "agent": INSTALLATION,
    "details": DETAILS,
    "configuration": {"options": {"model": "sonnet", "fast": False}},
    "resume_token": "0b9d4c1e-5f7a-4e7b-9d1c-2a3b4c5d6e7f",
    "title": "Fix the flaky test",
    "status": "Working",
}
TOOL_EDIT = {
    "id": "toolu_01",
    "kind": "Edit",
    "title": "Edit src/app.py",
    "status": "Pending",
    "input": {"Path": "src/app.py"},
    "output": None,
    "diffs": [{"path": "src/app.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}],
    "locations": ["src/app.py"],
    "raw": None,
}
TOOL_MCP = {
    "id": "toolu_02",
    "kind": {"Mcp": {"server": "github", "tool": "create_issue"}},
    "title": "Create issue",
    "status": "Completed",
    "input": {"Text": "Bug: crash on start"},
    "output": "issue #42 created",
    "diffs": [],
    "locations": [],
    "raw": {"name": "mcp__github__create_issue", "input": {"title": "Bug", "labels": ["bug"]}},
}
PERMISSION_REQUEST = {
    "id": "req_1",
    "tool": TOOL_EDIT,
    "options": ["AllowOnce", "AllowAlways", "DenyOnce"],
    "detail": "Edit a file outside the plan",
}
QUESTION = {
    "id": "lang",
    "text": "Which language?",
    "header": "Language",
    "choices": [
        {"id": "en", "label": "English", "description": None},
        {"id": "fr", "label": "French", "description": "Français"},
    ],
    "multi_select": False,
    "allows_free_text": True,
}
QUESTION_REQUEST = {
    "id": "q_1",
    "questions": [
        QUESTION,
        {
            "id": "targets",
            "text": "Which targets should build?",
            "header": None,
            "choices": [
                {"id": "linux", "label": "Linux", "description": None},
                {"id": "mac", "label": "macOS", "description": None},
            ],
            "multi_select": True,
            "allows_free_text": False,
        },
    ],
}
PLAN_USAGE = {
    "plan": "max",
    "windows": [
        {"label": "Session", "used_percent": 37, "resets_at": NOW},
        {"label": "Week", "used_percent": 255, "resets_at": None},
    ],
    "fetched_at": NOW,
}
TURN = {"id": "t3", "parent_tool_id": None}


def _event(kind: Any, sequence: int = 7, turn_info: Any = TURN, extensions: Any = None) -> dict[str, Any]:
    return {
        "sequence": sequence,
        "occurred_at": NOW,
        "session_id": "s1",
        "turn_info": turn_info,
        "kind": kind,
        "extensions": extensions or {},
    }


EVENT_KINDS = [
    {"TurnStarted": {"origin": {"Prompt": "p2"}}},
    {"TurnStarted": {"origin": "Agent"}},
    {"TextDelta": {"message_id": "msg_01", "text": "I'll fix the test."}},
    {"ReasoningDelta": {"message_id": "msg_01r", "text": "The failure is a race."}},
    {"UserMessage": {"message_id": "msg_u1", "text": "Also check the docs."}},
    {"MessageEnded": {"message_id": "msg_01"}},
    {"ToolUpdated": TOOL_EDIT},
    {"ToolUpdated": TOOL_MCP},
    {"ToolOutputDelta": {"tool_id": "toolu_03", "text": "collected 12 items\n"}},
    {
        "PlanUpdated": {
            "entries": [
                {"text": "Reproduce", "status": "Completed"},
                {"text": "Fix", "status": "InProgress"},
                {"text": "Verify", "status": "Pending"},
            ]
        }
    },
    {"RequestOpened": {"Permission": PERMISSION_REQUEST}},
    {"RequestOpened": {"Question": QUESTION_REQUEST}},
    {"RequestClosed": {"request_id": "req_1"}},
    {"SessionUpdated": SESSION_INFO},
    {"StatusChanged": "NeedsInput"},
    {"ContextUsage": {"used_tokens": 48_210, "window_tokens": 200_000, "cost_usd": 0.4213}},
    {"ContextUsage": {"used_tokens": 9_000, "window_tokens": None, "cost_usd": None}},
    "ContextCompacted",
    {"PlanUsageUpdated": PLAN_USAGE},
    {"Diagnostic": {"level": "Warning", "message": "unknown frame type 'rate_limit_event'"}},
    {"TurnEnded": {"stop": {"Completed": {"source": "Protocol"}}, "background": []}},
    {"TurnEnded": {"stop": {"Failed": {"message": "agent exited during the turn"}}, "background": ["toolu_09"]}},
]

# A definition -> its examples. An example is an instance, or (instance, expected dump) when the model fills in
# defaults the instance leaves out.
EXAMPLES: dict[str, list[Any]] = {
    "AccountInfo": [{"email": "dev@example.com", "plan": "pro"}, ({}, {"email": None, "plan": None})],
    "AcpSpec": [
        {"name": "gemini", "path": "/usr/local/bin/gemini", "args": ["--experimental-acp"]},
        ({"name": "goose", "path": "/opt/goose"}, {"name": "goose", "path": "/opt/goose", "args": []}),
    ],
    "AgentDetails": [
        DETAILS,
        {
            "version": None,
            "auth": "Unknown",
            "capabilities": {"features": [], "mcp_transports": []},
            "config_options": [],
            "commands": [],
        },
    ],
    "AgentInstallation": [
        INSTALLATION,
        {
            "id": "antigravity",
            "name": "Antigravity",
            "executable_path": "/usr/bin/antigravity",
            "source": "KnownLocation",
            "upgrade": {
                "id": "antigravity-acp",
                "name": "Antigravity ACP",
                "searched": ["/usr/bin"],
                "install_hint": "npm i -g antigravity-acp",
            },
            "acp_args": ["--acp"],
        },
    ],
    "AgentRef": ["claude", {"acp": {"name": "gemini", "path": "/usr/local/bin/gemini", "args": ["--acp"]}}],
    "Answer": [{"Permission": "AllowAlways"}, {"Question": [{"Choices": ["en"]}, {"Text": "both, please"}]}],
    "AuthKind": ["Subscription", "ApiKey", "CloudProvider", {"Other": "enterprise-sso"}],
    "AuthStatus": [
        "Unknown",
        {"Authenticated": {"kind": "ApiKey", "account": None}},
        {
            "Unauthenticated": {
                "login": [
                    {
                        "Terminal": {
                            "command": ["claude", "/login"],
                            "env": {},
                            "description": "Log in with your browser",
                        }
                    },
                    {"EnvVar": {"name": "ANTHROPIC_API_KEY"}},
                ]
            }
        },
    ],
    "Capabilities": [DETAILS["capabilities"]],
    "Capability": [
        "Images",
        "Resume",
        "Steer",
        "Permissions",
        "Questions",
        "Rollback",
        "Fork",
        "SlashCommands",
        "Plan",
        "Subagents",
        "ContextUsage",
        "PlanUsage",
        "RollbackFiles",
        "Compact",
    ],
    "Choice": [{"id": "en", "label": "English", "description": "Use English"}],
    "CompletionSource": ["Protocol", "Inferred"],
    "ConfigChoice": [{"value": "high", "label": "High effort", "description": None}],
    "ConfigKind": ["Boolean", SELECT_MODEL["kind"]],
    "ConfigOption": [SELECT_MODEL, FAST_OPTION],
    "ConfigValue": ["opus", True],
    "Delivery": [
        {"prompt_id": "p1", "kind": {"Started": {"turn_id": "t1"}}},
        {"prompt_id": "p2", "kind": {"Steered": {"turn_id": "t1"}}},
        {"prompt_id": "p3", "kind": {"Queued": {"position": 1}}},
    ],
    "DeliveryKind": [{"Started": {"turn_id": "t2"}}, {"Steered": {"turn_id": "t2"}}, {"Queued": {"position": 0}}],
    "Diagnostic": [{"level": "Error", "message": "could not read ~/.claude.json"}],
    "DiagnosticLevel": ["Info", "Warning", "Error"],
    "DiscoveryReport": [
        {
            "agents": [INSTALLATION],
            "missing": [MISSING_CODEX],
            "diagnostics": [{"level": "Warning", "message": "ANYAGENTD_GEMINI_BIN is not executable"}],
        }
    ],
    "ErrorBody": [
        {"kind": "NotInstalled", "message": "agent 'codex' is not installed", "agent": "codex"},
        {"kind": "SpawnFailed", "message": "could not start the agent: ENOENT", "detail": "ENOENT"},
        {"kind": "AuthRequired", "message": "agent needs login", "login": [{"EnvVar": {"name": "OPENAI_API_KEY"}}]},
        {"kind": "HandshakeTimeout", "message": "the agent did not complete its handshake in time"},
        {"kind": "UnsupportedFeature", "message": "no rollback", "detail": "this agent cannot roll back"},
        {"kind": "InvalidConfiguration", "message": "bad value", "detail": "value 'huge' does not fit option 'model'"},
        {"kind": "InvalidRequest", "message": "not open", "detail": "request 'req_9' is not open"},
        {"kind": "ResumeFailed", "message": "no such session", "detail": "session 1234 not found"},
        {"kind": "SessionBusy", "message": "the session is busy with a turn"},
        {"kind": "ProtocolFailed", "message": "the agent used a tool during generate", "detail": "no tools"},
        {
            "kind": "ProcessExited",
            "message": "the agent exited (exit status: 3)",
            "status": "exit status: 3",
            "stderr": "Error: invalid API key\n",
        },
        {"kind": "SessionClosed", "message": "the session is closed"},
        {"kind": "BadFrame", "message": "not a JSON line", "detail": "Expecting value: line 1 column 1 (char 0)"},
        {"kind": "UnknownSession", "message": "unknown session 's9'", "session": "s9"},
        {"kind": "ConsumerLagged", "message": "session s1 closed", "detail": "more than 1024 events undrained"},
        {"kind": "SomethingNewer", "message": "from a newer sidecar", "hint": {"retry_after": 3}},
    ],
    "Event": [
        _event(EVENT_KINDS[2], extensions={"claude/uuid": "9f1c", "acp/raw_update": {"sessionUpdate": "x"}}),
        _event({"StatusChanged": "Idle"}, sequence=1, turn_info=None),
        _event(EVENT_KINDS[3], turn_info={"id": "t3", "parent_tool_id": "toolu_07"}),
        (
            {"sequence": 2, "session_id": "s2", "kind": "ContextCompacted", "extensions": {}},
            {
                "sequence": 2,
                "occurred_at": {"secs_since_epoch": 0, "nanos_since_epoch": 0},
                "session_id": "s2",
                "turn_info": None,
                "kind": "ContextCompacted",
                "extensions": {},
            },
        ),
    ],
    "EventKind": EVENT_KINDS,
    "FileDiff": [{"path": "NEW.md", "old_text": None, "new_text": "# New\n"}],
    "Frame": [
        {"id": 1, "cmd": "discover"},
        {"id": 2, "cmd": "probe", "agent": "claude"},
        {"id": 3, "cmd": "plan_usage", "agent": {"acp": {"name": "gemini", "path": "/bin/gemini", "args": []}}},
        {
            "id": 4,
            "cmd": "generate",
            "agent": "claude",
            "dir": "/repo",
            "prompt": "Write a commit message",
            "resume": None,
            "fork": None,
            "fork_at": None,
            "permission_mode": None,
            "mcp_servers": [],
            "configure": {"model": "haiku"},
        },
        {
            "id": 5,
            "cmd": "open",
            "agent": "claude",
            "dir": "/repo",
            "resume": "0b9d4c1e",
            "fork": None,
            "fork_at": None,
            "permission_mode": "AutoApprove",
            "mcp_servers": [
                {
                    "name": "github",
                    "connection": {
                        "Http": {"url": "https://mcp.example/github", "headers": {"Authorization": "Bearer x"}}
                    },
                }
            ],
            "configure": {"fast": True},
        },
        (
            {"id": 6, "cmd": "open", "agent": "mock", "dir": "/tmp"},
            {
                "id": 6,
                "cmd": "open",
                "agent": "mock",
                "dir": "/tmp",
                "resume": None,
                "fork": None,
                "fork_at": None,
                "permission_mode": None,
                "mcp_servers": [],
                "configure": {},
            },
        ),
        {"id": 7, "cmd": "prompt", "session": "s1", "text": "Look at this", "attachments": ["/tmp/shot.png"]},
        {"id": 8, "cmd": "dequeue", "session": "s1", "prompt": "p3"},
        {"id": 9, "cmd": "answer", "session": "s1", "request": "req_1", "answer": {"Permission": "DenyOnce"}},
        {"id": 10, "cmd": "configure", "session": "s1", "option": "model", "value": "opus"},
        {"id": 11, "cmd": "rollback", "session": "s1", "turns": 2, "scope": "ConversationAndFiles"},
        {"id": 12, "cmd": "compact", "session": "s1"},
        (
            {"id": 13, "cmd": "cancel", "session": "s1"},
            {"id": 13, "cmd": "cancel", "session": "s1", "clear_queue": False},
        ),
        {"id": 14, "cmd": "info", "session": "s1"},
        {"id": 18_446_744_073_709_551_615, "cmd": "close", "session": "s1"},
    ],
    "Hello": [{"protocol": 1, "anyagent": "0.1.0"}],
    "InstallationSource": ["EnvOverride", "Path", "LoginShellPath", "VersionManager", "KnownLocation", "Pinned"],
    "Line": [
        {"hello": {"protocol": 1, "anyagent": "0.1.0"}},
        {"id": 1, "ok": None},
        {"id": 2, "ok": "feat: add the wire"},
        {"id": 3, "ok": {"prompt_id": "p1", "kind": {"Started": {"turn_id": "t1"}}}},
        {"id": 4, "error": {"kind": "NotInstalled", "message": "agent 'x' is not installed", "agent": "x"}},
        {"id": None, "error": {"kind": "BadFrame", "message": "not a JSON line", "detail": "Expecting value"}},
        {"event": _event(EVENT_KINDS[0])},
        {
            "session": "s1",
            "error": {"kind": "ProcessExited", "message": "the agent exited (9)", "status": "9", "stderr": "killed"},
        },
        {"closed": "s1"},
    ],
    "LoginMethod": [
        {
            "Terminal": {
                "command": ["codex", "login"],
                "env": {"CODEX_HOME": "/home/dev/.codex"},
                "description": "Log in to Codex",
            }
        },
        {"EnvVar": {"name": "GEMINI_API_KEY"}},
    ],
    "McpConnection": [
        {
            "Stdio": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/repo"],
                "env": {"DEBUG": "1"},
            }
        },
        {"Http": {"url": "https://mcp.example/http", "headers": {}}},
        {"Sse": {"url": "https://mcp.example/sse", "headers": {"X-Key": "k"}}},
    ],
    "McpServer": [{"name": "fs", "connection": {"Stdio": {"command": "mcp-fs", "args": [], "env": {}}}}],
    "McpTransport": ["Stdio", "Http", "Sse"],
    "MissingAgent": [MISSING_CODEX],
    "PermissionChoice": ["AllowOnce", "AllowAlways", "DenyOnce", "DenyAlways"],
    "PermissionMode": ["Ask", "AutoApprove"],
    "PermissionRequest": [PERMISSION_REQUEST],
    "PlanEntry": [{"text": "Run the tests", "status": "Pending"}],
    "PlanStatus": ["Pending", "InProgress", "Completed"],
    "PlanUsage": [PLAN_USAGE, {"plan": None, "windows": [], "fetched_at": NOW}],
    "Question": [QUESTION],
    "QuestionAnswer": [{"Choices": ["linux", "mac"]}, {"Text": "Spanish"}],
    "QuestionRequest": [QUESTION_REQUEST],
    "RawTool": [{"name": "NotebookEdit", "input": {"cell": 3, "source": "print(1)"}}, {"name": "Noop", "input": None}],
    "Request": [{"Permission": PERMISSION_REQUEST}, {"Question": QUESTION_REQUEST}],
    "RollbackScope": ["Conversation", "ConversationAndFiles"],
    "SessionConfiguration": [{"options": {"model": "opus", "sandbox": "workspace-write", "fast": True}}],
    "SessionInfo": [
        SESSION_INFO,
        (
            {"id": "s2", "agent": INSTALLATION, "details": DETAILS, "configuration": {"options": {}}},
            {
                "id": "s2",
                "agent": INSTALLATION,
                "details": DETAILS,
                "configuration": {"options": {}},
                "resume_token": None,
                "title": None,
                "status": "Idle",
            },
        ),
    ],
    "SessionStatus": ["Idle", "Working", "NeedsInput"],
    "SlashCommand": [{"name": "init", "description": "Create a CLAUDE.md", "input_hint": None}],
    "StopReason": [
        {"Completed": {"source": "Inferred"}},
        {"Failed": {"message": "rate limited"}},
        "Cancelled",
        "Refused",
    ],
    "SystemTime": [NOW, {"secs_since_epoch": 0, "nanos_since_epoch": 0}],
    "ToolInput": [
        "None",
        {"Path": "README.md"},
        {"Command": {"command": "pytest -q", "cwd": "/repo"}},
        {"Pattern": "def test_"},
        {"Url": "https://docs.python.org"},
        {"Query": "pydantic discriminator"},
        {"Text": "free-form input"},
    ],
    "ToolKind": [
        "Read",
        "Edit",
        "Delete",
        "Move",
        "Search",
        "Execute",
        "Fetch",
        "Think",
        "Other",
        "Subagent",
        {"Mcp": {"server": "linear", "tool": "list_issues"}},
    ],
    "ToolStatus": ["Pending", "Running", "Completed", "Failed", "Cancelled"],
    "ToolUpdate": [
        TOOL_EDIT,
        TOOL_MCP,
        (
            {
                "id": "toolu_05",
                "kind": "Execute",
                "title": "pytest",
                "status": "Running",
                "input": {"Command": {"command": "pytest"}},
                "diffs": [],
                "locations": [],
            },
            {
                "id": "toolu_05",
                "kind": "Execute",
                "title": "pytest",
                "status": "Running",
                "input": {"Command": {"command": "pytest", "cwd": None}},
                "output": None,
                "diffs": [],
                "locations": [],
                "raw": None,
            },
        ),
    ],
    "TurnContext": [TURN, {"id": "t4", "parent_tool_id": "toolu_07"}],
    "TurnOrigin": ["Agent", {"Prompt": "p1"}],
    "UsageWindow": [{"label": "Week", "used_percent": 80, "resets_at": NOW}],
}


# ------------------------------------------------------------------------------------------------ round trips


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _adapter_roundtrip(target: Any) -> Callable[[Any], Any]:
    adapter = target if isinstance(target, TypeAdapter) else TypeAdapter(target)

    def roundtrip(instance: Any) -> Any:
        parsed = adapter.validate_python(instance)
        from_json = adapter.validate_json(json.dumps(instance))
        dumped = adapter.dump_python(parsed, mode="json")
        assert adapter.dump_python(from_json, mode="json") == dumped
        assert adapter.dump_python(adapter.validate_python(dumped), mode="json") == dumped  # idempotent
        return dumped

    return roundtrip


def _error_roundtrip(body: dict[str, Any]) -> Any:
    err = errors.error_from_body(body)
    known = errors.AnyagentError.registry.get(body["kind"])
    if known is not None:
        assert type(err) is known
    for key, value in body.items():
        if key not in ("kind", "message"):
            assert getattr(err, key) == value  # extra fields stay readable
    return err.body()


def _line_roundtrip(line: dict[str, Any]) -> Any:
    """Rebuild the line with the wire's own line writers from the parsed value."""
    if "hello" in line:
        return {"hello": model.Hello.model_validate(line["hello"]).model_dump(mode="json")}
    if "ok" in line:
        return json.loads(wire.ok_line(line["id"], line["ok"]))
    if "event" in line:
        return json.loads(wire.event_line(model.Event.model_validate(line["event"])))
    if "closed" in line:
        return json.loads(wire.closed_line(line["closed"]))
    if "session" in line:
        return json.loads(wire.session_error_line(line["session"], errors.error_from_body(line["error"])))
    return json.loads(wire.error_line(line["id"], errors.error_from_body(line["error"])))


def _frame_roundtrip(frame: dict[str, Any]) -> Any:
    parsed = wire.parse_frame(json.dumps(frame))
    assert parsed.cmd == frame["cmd"]
    return wire.FRAME.dump_python(parsed, mode="json")


def _handler(name: str) -> Callable[[Any], Any]:
    """How a definition round-trips: its pydantic model / type in ``anyagentd.model``, or the wire's own code."""
    special: dict[str, Callable[[Any], Any]] = {
        "ErrorBody": _error_roundtrip,
        "Line": _line_roundtrip,
        "Frame": _frame_roundtrip,
        # CompletionSource has no alias of its own: it is the type of CompletedStop.source.
        "CompletionSource": _adapter_roundtrip(model.CompletedStop.model_fields["source"].annotation),
    }
    if name in special:
        return special[name]
    target = getattr(model, name)
    assert isinstance(target, type) and issubclass(target, BaseModel) or typing.get_origin(target) is not None, (
        f"anyagentd.model.{name} is not a model or a type: {target!r}"
    )
    return _adapter_roundtrip(target)


def _cases() -> list[Any]:
    cases = []
    for name, examples in EXAMPLES.items():
        for i, example in enumerate(examples):
            instance, expected = example if isinstance(example, tuple) else (example, example)
            cases.append(pytest.param(name, instance, expected, id=f"{name}-{i}"))
    return cases


def _drop_nulls(value: Any) -> Any:
    """Omitted optional fields read as null: drop null-valued keys so both forms compare equal."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


@pytest.mark.parametrize(("name", "instance", "expected"), _cases())
def test_example_validates_and_round_trips(name: str, instance: Any, expected: Any) -> None:
    validate_def(name, instance)
    dumped = _handler(name)(instance)
    validate_def(name, dumped)  # what the model writes is schema-valid too
    assert _drop_nulls(dumped) == _drop_nulls(_jsonable(expected))


def test_every_definition_has_examples() -> None:
    missing = sorted(set(DEFINITIONS) - set(EXAMPLES))
    assert not missing, f"schema definitions without an example in test_model.py: {missing}"
    unknown = sorted(set(EXAMPLES) - set(DEFINITIONS))
    assert not unknown, f"examples for definitions the schema does not have: {unknown}"
    for name in DEFINITIONS:
        _handler(name)  # and each has a round trip


def _variant_tags(definition: dict[str, Any]) -> set[str]:
    """The tags of an enum-like definition: string enum values/consts, single-key object variants, frame cmds."""
    tags: set[str] = set(definition.get("enum", []))
    if "const" in definition:
        tags.add(definition["const"])
    for branch in definition.get("oneOf", []):
        tags |= set(branch.get("enum", []))
        if "const" in branch:
            tags.add(branch["const"])
        cmd = branch.get("properties", {}).get("cmd", {})
        if "const" in cmd:
            tags.add(cmd["const"])
        elif branch.get("type") == "object" and len(branch.get("required", [])) == 1:
            tags.add(branch["required"][0])
    return tags


def _example_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "cmd" in value:
            return value["cmd"]
        if len(value) == 1:
            return next(iter(value))
    return None


@pytest.mark.parametrize("name", sorted(n for n in DEFINITIONS if _variant_tags(DEFINITIONS[n])))
def test_every_variant_has_an_example(name: str) -> None:
    wanted = _variant_tags(DEFINITIONS[name])
    examples = [e[0] if isinstance(e, tuple) else e for e in EXAMPLES.get(name, [])]
    if name == "Capability":
        wanted |= set(typing.get_args(model.Capability))
    covered = {_example_tag(e) for e in examples}
    assert wanted <= covered, f"{name}: variants without an example: {sorted(wanted - covered)}"


def test_model_enums_match_the_schema() -> None:
    """The Literal unit variants of the model name exactly the schema's (no stale or invented names)."""
    pairs = {
        "Capability": model.Capability,
        "McpTransport": model.McpTransport,
        "ToolStatus": model.ToolStatus,
        "PlanStatus": model.PlanStatus,
        "PermissionChoice": model.PermissionChoice,
        "InstallationSource": model.InstallationSource,
        "SessionStatus": model.SessionStatus,
        "DiagnosticLevel": model.DiagnosticLevel,
        "PermissionMode": model.PermissionMode,
        "RollbackScope": model.RollbackScope,
    }
    for name, literal in pairs.items():
        assert set(typing.get_args(literal)) == _variant_tags(DEFINITIONS[name]), name


def test_event_kind_tags_match_the_model() -> None:
    schema_tags = _variant_tags(DEFINITIONS["EventKind"])
    for kind in EVENT_KINDS:
        parsed = model.EVENT_KIND.validate_python(kind)
        assert model.kind_tag(parsed) == _example_tag(kind)
    assert {_example_tag(k) for k in EVENT_KINDS} == schema_tags
    assert schema_tags >= model.ENGINE_OWNED_KINDS


# ------------------------------------------------------------------------------------------------ negatives

NEGATIVES = [
    # (definition, model type, instance): refused by both the schema and the model
    ("EventKind", model.EventKind, {"Bogus": {"message_id": "m", "text": "x"}}),
    ("EventKind", model.EventKind, "ContextExploded"),
    (
        "EventKind",
        model.EventKind,
        {"TextDelta": {"message_id": "m", "text": "x"}, "MessageEnded": {"message_id": "m"}},
    ),
    ("EventKind", model.EventKind, {"TextDelta": {"message_id": "m"}}),
    ("EventKind", model.EventKind, {"StatusChanged": "Sleeping"}),
    ("StopReason", model.StopReason, "Timeout"),
    ("StopReason", model.StopReason, {"Completed": {"source": "Guessed"}}),
    ("Answer", model.Answer, {"Permission": "AllowForever"}),
    ("Answer", model.Answer, {"Question": "yes"}),
    ("QuestionAnswer", model.QuestionAnswer, {"Choice": ["en"]}),
    ("ToolKind", model.ToolKind, "Teleport"),
    ("ToolInput", model.ToolInput, {"File": "a.txt"}),
    ("AuthStatus", model.AuthStatus, "LoggedIn"),
    ("AuthKind", model.AuthKind, {"Other": 5}),
    ("McpConnection", model.McpConnection, {"Websocket": {"url": "ws://x", "headers": {}}}),
    ("TurnOrigin", model.TurnOrigin, "User"),
    ("Capability", model.Capability, "Telepathy"),
    ("SessionStatus", model.SessionStatus, "Sleeping"),
    ("Delivery", model.Delivery, {"prompt_id": "p1", "kind": {"Dropped": {}}}),
    ("Delivery", model.Delivery, {"prompt_id": "p1", "kind": {"Queued": {"position": -1}}}),
    ("SystemTime", model.SystemTime, {"secs_since_epoch": -1, "nanos_since_epoch": 0}),
    ("SystemTime", model.SystemTime, {"secs_since_epoch": 1}),
    ("UsageWindow", model.UsageWindow, {"label": "Week", "used_percent": 256}),
    ("Event", model.Event, {"sequence": 1, "session_id": "s1", "kind": {"Nope": {}}, "extensions": {}}),
    ("Event", model.Event, {"sequence": [1], "session_id": "s1", "kind": "ContextCompacted", "extensions": {}}),
    ("Event", model.Event, {"sequence": 1, "kind": "ContextCompacted", "extensions": {}}),
    ("ConfigValue", model.ConfigValue, 3),
    ("AgentRef", model.AgentRef, {"path": "/bin/x"}),
    (
        "ToolUpdate",
        model.ToolUpdate,
        {"id": "t", "kind": "Read", "title": "", "status": "Done", "input": "None", "diffs": [], "locations": []},
    ),
]


@pytest.mark.parametrize(
    ("name", "target", "instance"), NEGATIVES, ids=[f"{n[0]}-{i}" for i, n in enumerate(NEGATIVES)]
)
def test_invalid_instance_is_refused_by_schema_and_model(name: str, target: Any, instance: Any) -> None:
    assert def_errors(name, instance), f"the schema accepts {instance!r} as {name}"
    with pytest.raises(ValidationError):
        TypeAdapter(target).validate_python(instance)


EXTRA_FIELDS = [
    # Objects the schema leaves open but the model refuses: a typo must fail loudly.
    (model.EventKind, {"TextDelta": {"message_id": "m", "text": "x", "txt": "y"}}),
    (model.Event, {**_event("ContextCompacted"), "seq": 3}),
    (model.ToolUpdate, {**TOOL_EDIT, "state": "Pending"}),
    (model.SessionInfo, {**SESSION_INFO, "agent_id": "claude"}),
    (model.AgentDetails, {**DETAILS, "auth_kind": "ApiKey"}),
    (model.PermissionRequest, {**PERMISSION_REQUEST, "choices": []}),
    (model.Question, {**QUESTION, "multiselect": True}),
    (model.StopReason, {"Failed": {"message": "x", "code": 1}}),
    (model.DeliveryKind, {"Started": {"turn_id": "t1", "prompt_id": "p1"}}),
    (model.McpServer, {"name": "fs", "connection": {"Stdio": {"command": "x", "args": [], "env": {}, "cwd": "/"}}}),
    (model.AcpRef, {"acp": {"name": "a", "path": "/a", "argv": []}}),
    (model.PlanUsage, {**PLAN_USAGE, "account": "x"}),
]


@pytest.mark.parametrize(("target", "instance"), EXTRA_FIELDS, ids=[str(i) for i in range(len(EXTRA_FIELDS))])
def test_extra_field_is_refused_by_the_model(target: Any, instance: Any) -> None:
    with pytest.raises(ValidationError, match="xtra"):
        TypeAdapter(target).validate_python(instance)


@pytest.mark.parametrize(
    "frame",
    [
        {"id": 1, "cmd": "launch"},
        {"id": 1, "cmd": "open", "agent": "mock"},
        {"id": "1", "cmd": "info", "session": "s1"},
        {"cmd": "discover"},
        {"id": 1, "cmd": "rollback", "session": "s1", "turns": 0, "scope": "Conversation"},
    ],
)
def test_invalid_frame_is_refused(frame: dict[str, Any]) -> None:
    with pytest.raises(errors.BadFrame):
        wire.parse_frame(json.dumps(frame))
    assert def_errors("Frame", frame)


def test_unknown_frame_fields_are_ignored_like_the_reference() -> None:
    frame = wire.parse_frame(json.dumps({"id": 1, "cmd": "info", "session": "s1", "verbose": True}))
    assert (frame.id, frame.session) == (1, "s1") and not hasattr(frame, "verbose")


def test_unknown_tag_error_names_the_tag() -> None:
    with pytest.raises(ValidationError) as info:
        model.EVENT_KIND.validate_python({"Bogus": {}})
    assert "Bogus" in str(info.value)


def _pydantic_models(*modules: Any) -> list[type[BaseModel]]:
    return [
        obj
        for module in modules
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
    ]


def test_list_fields_default_to_a_new_list_not_the_builtin() -> None:
    # pydantic reads a default factory's signature when it builds a schema; the builtin `list`'s is parsed with
    # tokenize (~3 ms the first time in a process): core's list fields use `model.new_list` (issue 31).
    from anyagentd.mock import script

    models = _pydantic_models(model, wire, script)
    factories = {
        f"{cls.__name__}.{name}": field.default_factory
        for cls in models
        for name, field in cls.model_fields.items()
        if field.default_factory is not None
    }
    assert factories["SessionOptions.mcp_servers"] is model.new_list and factories["Script.turns"] is model.new_list
    assert [name for name, factory in factories.items() if factory is list] == []
    first, second = model.AgentDetails(), model.AgentDetails()
    assert first.commands == [] and first.commands is not second.commands  # a new list per instance, as `list`
