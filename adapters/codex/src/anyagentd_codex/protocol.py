"""Typed messages of ``codex app-server`` (JSON-RPC 2.0, protocol v2) — the subset this adapter sends and reads.

The authoritative schema is the pinned CLI's own, generated with ``codex app-server generate-json-schema --out DIR``
and kept in ``schema/codex_app_server_protocol.schemas.json`` (version in ``schema/VERSION``); the tests check that
regenerating it with the pinned binary changes nothing, and that every model here names a schema definition
(:attr:`CodexModel.SCHEMA`) whose properties include each of the model's fields.

Models are lenient on input (``extra="allow"``: a newer CLI may add fields) and drop ``None`` on output
(:meth:`CodexModel.params`). Method names are constants (``M_*``) checked against the schema's method enums.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from anyagentd.adapters.mcp_startup import Status

SCHEMA_FILE = "codex_app_server_protocol.schemas.json"
"""The bundled schema (all definitions; the v2 ones nested under ``definitions.v2``)."""

# ------------------------------------------------------------------------------------------------ methods

# client → server requests
M_INITIALIZE = "initialize"
M_ACCOUNT_READ = "account/read"
M_MODEL_LIST = "model/list"
M_SKILLS_LIST = "skills/list"
M_THREAD_START = "thread/start"
M_THREAD_RESUME = "thread/resume"
M_THREAD_FORK = "thread/fork"
M_TURN_START = "turn/start"
M_TURN_STEER = "turn/steer"
M_TURN_INTERRUPT = "turn/interrupt"
M_COMPACT = "thread/compact/start"
M_RATE_LIMITS_READ = "account/rateLimits/read"
M_CONFIG_READ = "config/read"
CLIENT_REQUESTS = (
    M_INITIALIZE,
    M_ACCOUNT_READ,
    M_MODEL_LIST,
    M_SKILLS_LIST,
    M_THREAD_START,
    M_THREAD_RESUME,
    M_THREAD_FORK,
    M_TURN_START,
    M_TURN_STEER,
    M_TURN_INTERRUPT,
    M_COMPACT,
    M_RATE_LIMITS_READ,
    M_CONFIG_READ,
)

# client → server notifications
M_INITIALIZED = "initialized"

# server → client requests
M_COMMAND_APPROVAL = "item/commandExecution/requestApproval"
M_FILE_APPROVAL = "item/fileChange/requestApproval"
M_USER_INPUT = "item/tool/requestUserInput"
M_ELICITATION = "mcpServer/elicitation/request"
M_PERMISSIONS_APPROVAL = "item/permissions/requestApproval"
M_LEGACY_EXEC_APPROVAL = "execCommandApproval"
M_LEGACY_PATCH_APPROVAL = "applyPatchApproval"
SERVER_REQUESTS = (
    M_COMMAND_APPROVAL,
    M_FILE_APPROVAL,
    M_USER_INPUT,
    M_ELICITATION,
    M_PERMISSIONS_APPROVAL,
    M_LEGACY_EXEC_APPROVAL,
    M_LEGACY_PATCH_APPROVAL,
)

# server → client notifications
N_ERROR = "error"
N_WARNING = "warning"
N_CONFIG_WARNING = "configWarning"
N_DEPRECATION = "deprecationNotice"
N_GUARDIAN_WARNING = "guardianWarning"
N_THREAD_STARTED = "thread/started"
N_THREAD_NAME = "thread/name/updated"
N_TOKEN_USAGE = "thread/tokenUsage/updated"
N_TURN_STARTED = "turn/started"
N_TURN_COMPLETED = "turn/completed"
N_PLAN_UPDATED = "turn/plan/updated"
N_ITEM_STARTED = "item/started"
N_ITEM_COMPLETED = "item/completed"
N_AGENT_DELTA = "item/agentMessage/delta"
N_PLAN_DELTA = "item/plan/delta"
N_COMMAND_OUTPUT = "item/commandExecution/outputDelta"
N_FILE_OUTPUT = "item/fileChange/outputDelta"
N_REASONING_SUMMARY = "item/reasoning/summaryTextDelta"
N_REASONING_TEXT = "item/reasoning/textDelta"
N_MCP_PROGRESS = "item/mcpToolCall/progress"
N_RATE_LIMITS = "account/rateLimits/updated"
N_MODEL_REROUTED = "model/rerouted"
N_MCP_STARTUP = "mcpServer/startupStatus/updated"
"""``{threadId, name, status: starting|ready|failed|cancelled, error}``: a configured MCP server's startup, for a
thread (the connection holds the first turn on it; the mapper maps nothing from it)."""
MCP_STARTUP_STATUS: dict[str, Status] = {"ready": "connected", "failed": "failed", "cancelled": "failed"}
"""The ``McpServerStartupState`` values of a server that is done starting, as
:meth:`anyagentd.adapters.mcp_startup.McpStartup.settle` takes them (the other one, ``starting``, is ``pending``)."""
SERVER_NOTIFICATIONS = (
    N_ERROR,
    N_WARNING,
    N_CONFIG_WARNING,
    N_DEPRECATION,
    N_GUARDIAN_WARNING,
    N_THREAD_STARTED,
    N_THREAD_NAME,
    N_TOKEN_USAGE,
    N_TURN_STARTED,
    N_TURN_COMPLETED,
    N_PLAN_UPDATED,
    N_ITEM_STARTED,
    N_ITEM_COMPLETED,
    N_AGENT_DELTA,
    N_PLAN_DELTA,
    N_COMMAND_OUTPUT,
    N_FILE_OUTPUT,
    N_REASONING_SUMMARY,
    N_REASONING_TEXT,
    N_MCP_PROGRESS,
    N_RATE_LIMITS,
    N_MODEL_REROUTED,
)

QUIET_NOTIFICATIONS = frozenset(
    {
        "thread/status/changed",
        "thread/readState/changed",
        "thread/settings/updated",
        "thread/compacted",
        "remoteControl/status/changed",
        "serverRequest/resolved",
        "turn/diff/updated",
        "item/reasoning/summaryPartAdded",
        "item/fileChange/patchUpdated",
        N_MCP_STARTUP,
        "skills/changed",
        "hook/started",
        "hook/completed",
        "account/updated",
        "thread/environment/connected",
        "thread/goal/updated",
        "thread/queue/changed",
        "app/list/updated",
        "item/commandExecution/terminalInteraction",
    }
)
"""Notifications that carry nothing the event model needs (status the engine derives itself, bookkeeping)."""


# ------------------------------------------------------------------------------------------------ schema


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The bundled schema document."""
    text = resources.files(__package__).joinpath("schema", SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def schema_version() -> str:
    """The CLI version the bundled schema was generated with."""
    return resources.files(__package__).joinpath("schema", "VERSION").read_text(encoding="utf-8").strip()


def definition(name: str) -> dict[str, Any] | None:
    """A schema definition by name (v2 first, then the top-level ones), or a ``oneOf`` variant by its ``title``
    (e.g. ``TextUserInput``, a variant of ``UserInput``)."""
    defs = schema()["definitions"]
    found = defs.get("v2", {}).get(name) or defs.get(name)
    if found is not None:
        return found
    for group in (defs.get("v2", {}), defs):
        for value in group.values():
            for variant in value.get("oneOf", []) if isinstance(value, dict) else []:
                if isinstance(variant, dict) and variant.get("title") == name:
                    return variant
    return None


def methods(union: str) -> set[str]:
    """The method names of a union definition: ``ClientRequest``, ``ServerRequest``, ``ServerNotification``,
    ``ClientNotification``."""
    found = set()
    for variant in (definition(union) or {}).get("oneOf", []):
        method = variant.get("properties", {}).get("method", {})
        found.update(method.get("enum", []))
    return found


# ------------------------------------------------------------------------------------------------ models


class CodexModel(BaseModel):
    """Base of the typed messages: ``SCHEMA`` names the schema definition the model mirrors."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    SCHEMA: ClassVar[str] = ""

    def params(self) -> dict[str, Any]:
        """The JSON object to send, without ``None`` fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ClientInfo(CodexModel):
    SCHEMA = "ClientInfo"
    name: str
    title: str | None = None
    version: str


class InitializeParams(CodexModel):
    SCHEMA = "InitializeParams"
    clientInfo: ClientInfo
    capabilities: dict[str, Any] | None = None


class GetAccountParams(CodexModel):
    SCHEMA = "GetAccountParams"
    refreshToken: bool = False


class GetAccountResponse(CodexModel):
    SCHEMA = "GetAccountResponse"
    account: dict[str, Any] | None = None
    requiresOpenaiAuth: bool = False


class ModelListParams(CodexModel):
    SCHEMA = "ModelListParams"
    cursor: str | None = None
    includeHidden: bool | None = None
    limit: int | None = None


class ReasoningEffortOption(CodexModel):
    SCHEMA = "ReasoningEffortOption"
    reasoningEffort: str
    description: str = ""


class ModelInfo(CodexModel):
    SCHEMA = "Model"
    id: str
    model: str = ""
    displayName: str = ""
    description: str = ""
    hidden: bool = False
    isDefault: bool = False
    defaultReasoningEffort: str | None = None
    supportedReasoningEfforts: list[ReasoningEffortOption] = Field(default_factory=list)


class ModelListResponse(CodexModel):
    SCHEMA = "ModelListResponse"
    data: list[ModelInfo] = Field(default_factory=list)
    nextCursor: str | None = None


class ConfigReadParams(CodexModel):
    SCHEMA = "ConfigReadParams"
    cwd: str | None = None


class ConfigValues(CodexModel):
    """The effective settings (``config/read``'s ``config``)."""

    SCHEMA = "Config"
    model: str | None = None
    model_reasoning_effort: str | None = None
    approval_policy: Any = None
    sandbox_mode: str | None = None


class ConfigReadResponse(CodexModel):
    SCHEMA = "ConfigReadResponse"
    config: ConfigValues


class SkillsListParams(CodexModel):
    SCHEMA = "SkillsListParams"
    cwds: list[str] = Field(default_factory=list)


class ThreadStartParams(CodexModel):
    SCHEMA = "ThreadStartParams"
    cwd: str | None = None
    model: str | None = None
    approvalPolicy: str | None = None
    sandbox: str | None = None
    config: dict[str, Any] | None = None


class ThreadResumeParams(CodexModel):
    SCHEMA = "ThreadResumeParams"
    threadId: str
    cwd: str | None = None
    model: str | None = None
    approvalPolicy: str | None = None
    sandbox: str | None = None


class ThreadForkParams(CodexModel):
    SCHEMA = "ThreadForkParams"
    threadId: str
    lastTurnId: str | None = None
    cwd: str | None = None
    model: str | None = None
    approvalPolicy: str | None = None
    sandbox: str | None = None


class Thread(CodexModel):
    SCHEMA = "Thread"
    id: str
    name: str | None = None
    parentThreadId: str | None = None


class ThreadOpened(CodexModel):
    """The response of ``thread/start``, ``thread/resume`` and ``thread/fork`` (same required fields)."""

    SCHEMA = "ThreadStartResponse"
    thread: Thread
    model: str | None = None
    reasoningEffort: str | None = None
    approvalPolicy: Any = None
    sandbox: Any = None


class TextInput(CodexModel):
    SCHEMA = "TextUserInput"
    type: str = "text"
    text: str


class LocalImageInput(CodexModel):
    SCHEMA = "LocalImageUserInput"
    type: str = "localImage"
    path: str


class TurnStartParams(CodexModel):
    SCHEMA = "TurnStartParams"
    threadId: str
    input: list[dict[str, Any]]
    model: str | None = None
    effort: str | None = None
    summary: str | None = None
    approvalPolicy: str | None = None


class TurnSteerParams(CodexModel):
    SCHEMA = "TurnSteerParams"
    threadId: str
    expectedTurnId: str
    input: list[dict[str, Any]]


class TurnInterruptParams(CodexModel):
    SCHEMA = "TurnInterruptParams"
    threadId: str
    turnId: str


class ThreadCompactStartParams(CodexModel):
    SCHEMA = "ThreadCompactStartParams"
    threadId: str


class TurnError(CodexModel):
    SCHEMA = "TurnError"
    message: str = ""
    codexErrorInfo: Any = None
    additionalDetails: str | None = None


class Turn(CodexModel):
    SCHEMA = "Turn"
    id: str
    status: str = "inProgress"
    error: TurnError | None = None


class TurnNotification(CodexModel):
    """``turn/started`` and ``turn/completed`` params."""

    SCHEMA = "TurnCompletedNotification"
    threadId: str
    turn: Turn


class ItemNotification(CodexModel):
    """``item/started`` and ``item/completed`` params; ``item`` is a ``ThreadItem`` (read as a dict)."""

    SCHEMA = "ItemStartedNotification"
    threadId: str
    turnId: str = ""
    item: dict[str, Any]


class DeltaNotification(CodexModel):
    """``item/agentMessage/delta``, ``item/commandExecution/outputDelta``, reasoning and plan deltas."""

    SCHEMA = "AgentMessageDeltaNotification"
    threadId: str
    turnId: str = ""
    itemId: str
    delta: str


class TokenUsageBreakdown(CodexModel):
    SCHEMA = "TokenUsageBreakdown"
    totalTokens: int = 0
    inputTokens: int = 0
    cachedInputTokens: int = 0
    outputTokens: int = 0
    reasoningOutputTokens: int = 0


class ThreadTokenUsage(CodexModel):
    SCHEMA = "ThreadTokenUsage"
    total: TokenUsageBreakdown
    last: TokenUsageBreakdown
    modelContextWindow: int | None = None


class TokenUsageNotification(CodexModel):
    SCHEMA = "ThreadTokenUsageUpdatedNotification"
    threadId: str
    turnId: str = ""
    tokenUsage: ThreadTokenUsage


class RateLimitWindow(CodexModel):
    SCHEMA = "RateLimitWindow"
    usedPercent: int
    windowDurationMins: int | None = None
    resetsAt: int | None = None


class RateLimitSnapshot(CodexModel):
    SCHEMA = "RateLimitSnapshot"
    limitId: str | None = None
    limitName: str | None = None
    planType: str | None = None
    primary: RateLimitWindow | None = None
    secondary: RateLimitWindow | None = None


class RateLimitsNotification(CodexModel):
    SCHEMA = "AccountRateLimitsUpdatedNotification"
    rateLimits: RateLimitSnapshot


class TurnPlanStep(CodexModel):
    SCHEMA = "TurnPlanStep"
    step: str
    status: str


class PlanNotification(CodexModel):
    SCHEMA = "TurnPlanUpdatedNotification"
    threadId: str
    turnId: str = ""
    explanation: str | None = None
    plan: list[TurnPlanStep] = Field(default_factory=list)


class ErrorNotification(CodexModel):
    SCHEMA = "ErrorNotification"
    threadId: str = ""
    turnId: str = ""
    error: TurnError
    willRetry: bool = False


class WarningNotification(CodexModel):
    SCHEMA = "WarningNotification"
    message: str
    threadId: str | None = None


class CommandApprovalParams(CodexModel):
    SCHEMA = "CommandExecutionRequestApprovalParams"
    threadId: str
    turnId: str = ""
    itemId: str
    command: str | None = None
    cwd: str | None = None
    reason: str | None = None
    proposedExecpolicyAmendment: list[str] | None = None
    # ``availableDecisions`` is sent by 0.171.0 but not in its schema: read from ``model_extra``.


class FileChangeApprovalParams(CodexModel):
    SCHEMA = "FileChangeRequestApprovalParams"
    threadId: str
    turnId: str = ""
    itemId: str
    reason: str | None = None
    grantRoot: str | None = None


class UserInputOption(CodexModel):
    SCHEMA = "ToolRequestUserInputOption"
    label: str
    description: str = ""


class UserInputQuestion(CodexModel):
    SCHEMA = "ToolRequestUserInputQuestion"
    id: str
    header: str = ""
    question: str
    isOther: bool = False
    options: list[UserInputOption] | None = None


class UserInputParams(CodexModel):
    SCHEMA = "ToolRequestUserInputParams"
    threadId: str
    turnId: str = ""
    itemId: str
    questions: list[UserInputQuestion]


MODELS: tuple[type[CodexModel], ...] = tuple(
    cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, CodexModel) and cls is not CodexModel
)
"""Every typed message (checked against the schema by the tests)."""
