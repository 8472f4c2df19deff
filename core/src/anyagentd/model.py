"""The event model: one pydantic v2 model per definition of ``schema/anyagent-wire.schema.json``.

Every model serializes (``model_dump(mode="json")``) to exactly the schema's JSON: externally tagged variants
(``{"TextDelta": {...}}``), unit variants as bare strings (``"ContextCompacted"``, ``"Idle"``), ``SystemTime`` as
``{secs_since_epoch, nanos_since_epoch}``, untagged ``Line`` and ``ConfigValue``. Optional fields are written as
``null`` rather than left out, as ``docs/wire.md#json-encoding`` says.

Class names follow the schema's definition names; variants are named after their tag, with a suffix only where two
enums share a tag (``AnswerPermission`` vs ``PermissionRequested``... see each class's ``TAG``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .tagged import NewtypeVariant, Variant, tagged_union


class Model(BaseModel):
    """Base for the schema's plain objects: unknown fields are refused, so typos fail loudly.

    ``defer_build``: a model's validator and serializer are built on its first use, not at import, so a command
    pays only for the models it touches (issue 17)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


def new_list() -> list[Any]:
    """A new empty list: the default factory of every list field (``Field(default_factory=new_list)``), as ``list``.

    Not ``list`` itself: when it builds a schema, pydantic reads a default factory's signature (whether it takes the
    validated data), and the builtin ``list``'s signature is parsed from its text with ``tokenize``, which compiles
    tokenize's token regex the first time in a process (~3 ms) and costs ~0.1 ms a field after that; a Python
    function's signature costs neither. The first ``open`` of the mock built ~15 such fields (issue 31,
    bench/README.md)."""
    return []


# --------------------------------------------------------------------------------------------------- time


class SystemTime(Model):
    """Wall-clock time as serde writes ``std::time::SystemTime``: seconds and nanoseconds since the epoch."""

    secs_since_epoch: int = Field(ge=0)
    nanos_since_epoch: int = Field(ge=0, lt=1_000_000_000)

    @classmethod
    def now(cls) -> SystemTime:
        """The current wall clock (``time.time_ns``)."""
        ns = time.time_ns()
        return cls(secs_since_epoch=ns // 1_000_000_000, nanos_since_epoch=ns % 1_000_000_000)

    @classmethod
    def from_seconds(cls, seconds: float) -> SystemTime:
        """A time given as (fractional) seconds since the epoch."""
        ns = int(seconds * 1_000_000_000)
        return cls(secs_since_epoch=ns // 1_000_000_000, nanos_since_epoch=ns % 1_000_000_000)

    def to_seconds(self) -> float:
        """Seconds since the epoch as a float."""
        return self.secs_since_epoch + self.nanos_since_epoch / 1e9


# Constants are built without validation (their values are known good): validating them at import would build their
# schemas there, and load pydantic's plugin machinery, for every command (issue 17).
EPOCH = SystemTime.model_construct(secs_since_epoch=0, nanos_since_epoch=0)

# --------------------------------------------------------------------------------------------------- config

ConfigValue = str | bool
"""``ConfigValue``: untagged, a string (Select) or a boolean (Boolean)."""


class ConfigChoice(Model):
    value: str
    label: str
    description: str | None = None


class Select(Variant):
    """``ConfigKind::Select``: one of ``choices``."""

    choices: list[ConfigChoice]


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    ConfigKind: TypeAlias = Literal["Boolean"] | Select
else:
    ConfigKind = tagged_union(Literal["Boolean"], Select)


class ConfigOption(Model):
    """A session setting the agent advertises (well-known ids: ``model``, ``effort``, ``mode``, ``sandbox``,
    ``fast``). ``live`` = changeable through ``configure``; otherwise creation-only."""

    id: str
    name: str
    category: str | None = None
    kind: ConfigKind
    current: ConfigValue | None = None
    live: bool

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has this option's type: a bool for Boolean, one of the choice values for Select."""
        if self.kind == "Boolean":
            return isinstance(value, bool)
        return isinstance(value, str) and any(c.value == value for c in self.kind.choices)


class SessionConfiguration(Model):
    options: dict[str, ConfigValue] = Field(default_factory=dict)


class SlashCommand(Model):
    name: str
    description: str
    input_hint: str | None = None


# --------------------------------------------------------------------------------------------------- agents

InstallationSource = Literal["EnvOverride", "Path", "LoginShellPath", "VersionManager", "KnownLocation", "Pinned"]


class MissingAgent(Model):
    """A known agent that discovery did not find: where it looked (directories) and how to install it."""

    id: str
    name: str
    searched: list[str] = Field(default_factory=new_list)
    install_hint: str


class AgentInstallation(Model):
    """One installed agent, as ``discover`` returns it."""

    id: str
    name: str
    executable_path: str
    source: InstallationSource
    upgrade: MissingAgent | None = None
    acp_args: list[str] | None = None


class AccountInfo(Model):
    email: str | None = None
    plan: str | None = None


class OtherAuth(NewtypeVariant):
    TAG = "Other"
    value: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    AuthKind: TypeAlias = Literal["Subscription", "ApiKey", "CloudProvider"] | OtherAuth
else:
    AuthKind = tagged_union(Literal["Subscription", "ApiKey", "CloudProvider"], OtherAuth)


class Authenticated(Variant):
    kind: AuthKind
    account: AccountInfo | None = None


class Terminal(Variant):
    """``LoginMethod::Terminal``: run this full argv in a terminal the user can see."""

    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    description: str


class EnvVar(Variant):
    """``LoginMethod::EnvVar``: set this environment variable before ``open``."""

    name: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    LoginMethod: TypeAlias = Terminal | EnvVar
else:
    LoginMethod = tagged_union(Terminal, EnvVar)


class Unauthenticated(Variant):
    login: list[LoginMethod] = Field(default_factory=new_list)


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    AuthStatus: TypeAlias = Literal["Unknown"] | Authenticated | Unauthenticated
else:
    AuthStatus = tagged_union(Literal["Unknown"], Authenticated, Unauthenticated)

Capability = Literal[
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
]
McpTransport = Literal["Stdio", "Http", "Sse"]


class Capabilities(Model):
    """Effective caller actions for one agent or session."""

    features: list[Capability] = Field(default_factory=new_list)
    mcp_transports: list[McpTransport] = Field(default_factory=new_list)

    def has(self, feature: str) -> bool:
        return feature in self.features


class AgentDetails(Model):
    """What ``probe`` and ``open`` learn about an agent."""

    version: str | None = None
    auth: AuthStatus = "Unknown"
    capabilities: Capabilities = Field(default_factory=Capabilities)
    config_options: list[ConfigOption] = Field(default_factory=new_list)
    commands: list[SlashCommand] = Field(default_factory=new_list)

    def option(self, option_id: str) -> ConfigOption | None:
        return next((o for o in self.config_options if o.id == option_id), None)


SessionStatus = Literal["Idle", "Working", "NeedsInput"]


class SessionInfo(Model):
    """Snapshot of a live session; also carried by ``SessionUpdated``."""

    id: str
    agent: AgentInstallation
    details: AgentDetails
    configuration: SessionConfiguration = Field(default_factory=SessionConfiguration)
    resume_token: str | None = None
    title: str | None = None
    status: SessionStatus = "Idle"


class UsageWindow(Model):
    label: str
    used_percent: int = Field(ge=0, le=255)
    resets_at: SystemTime | None = None


class PlanUsage(Model):
    """Plan quota windows for the logged-in account."""

    plan: str | None = None
    windows: list[UsageWindow] = Field(default_factory=new_list)
    fetched_at: SystemTime = Field(default_factory=SystemTime.now)


DiagnosticLevel = Literal["Info", "Warning", "Error"]


class Diagnostic(Model):
    level: DiagnosticLevel
    message: str


class DiscoveryReport(Model):
    """What ``discover`` found and what it could not read."""

    agents: list[AgentInstallation] = Field(default_factory=new_list)
    missing: list[MissingAgent] = Field(default_factory=new_list)
    diagnostics: list[Diagnostic] = Field(default_factory=new_list)

    def find(self, agent_id: str) -> AgentInstallation | None:
        return next((a for a in self.agents if a.id == agent_id), None)


# --------------------------------------------------------------------------------------------------- tools

ToolStatus = Literal["Pending", "Running", "Completed", "Failed", "Cancelled"]
ACTIVE_TOOL_STATUSES = frozenset({"Pending", "Running"})


class Mcp(Variant):
    """``ToolKind::Mcp``: a tool served by the MCP server ``server``."""

    server: str
    tool: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    ToolKind: TypeAlias = (
        Literal["Read", "Edit", "Delete", "Move", "Search", "Execute", "Fetch", "Think", "Other", "Subagent"] | Mcp
    )
else:
    ToolKind = tagged_union(
        Literal["Read", "Edit", "Delete", "Move", "Search", "Execute", "Fetch", "Think", "Other", "Subagent"], Mcp
    )


class PathInput(NewtypeVariant):
    TAG = "Path"
    value: str


class Command(Variant):
    command: str
    cwd: str | None = None


class PatternInput(NewtypeVariant):
    TAG = "Pattern"
    value: str


class UrlInput(NewtypeVariant):
    TAG = "Url"
    value: str


class QueryInput(NewtypeVariant):
    TAG = "Query"
    value: str


class TextInput(NewtypeVariant):
    TAG = "Text"
    value: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    ToolInput: TypeAlias = Literal["None"] | PathInput | Command | PatternInput | UrlInput | QueryInput | TextInput
else:
    ToolInput = tagged_union(Literal["None"], PathInput, Command, PatternInput, UrlInput, QueryInput, TextInput)


class FileDiff(Model):
    path: str
    old_text: str | None = None
    new_text: str


class RawTool(Model):
    """The agent's own tool name and raw input, for unknown or MCP tools."""

    name: str
    input: Any = None


class ToolUpdate(Model):
    """Cumulative snapshot of one tool call."""

    id: str
    kind: ToolKind = "Other"
    title: str = ""
    status: ToolStatus = "Running"
    input: ToolInput = "None"
    output: str | None = None
    diffs: list[FileDiff] = Field(default_factory=new_list)
    locations: list[str] = Field(default_factory=new_list)
    raw: RawTool | None = None


PlanStatus = Literal["Pending", "InProgress", "Completed"]


class PlanEntry(Model):
    text: str
    status: PlanStatus


# --------------------------------------------------------------------------------------------------- requests

PermissionChoice = Literal["AllowOnce", "AllowAlways", "DenyOnce", "DenyAlways"]


class PermissionRequest(Model):
    id: str
    tool: ToolUpdate
    options: list[PermissionChoice]
    detail: str | None = None


class Choice(Model):
    id: str
    label: str
    description: str | None = None


class Question(Model):
    id: str
    text: str
    header: str | None = None
    choices: list[Choice] = Field(default_factory=new_list)
    multi_select: bool = False
    allows_free_text: bool = False


class QuestionRequest(Model):
    id: str
    questions: list[Question]


class PermissionRequested(NewtypeVariant):
    """``Request::Permission``."""

    TAG = "Permission"
    value: PermissionRequest


class QuestionAsked(NewtypeVariant):
    """``Request::Question``."""

    TAG = "Question"
    value: QuestionRequest


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    Request: TypeAlias = PermissionRequested | QuestionAsked
else:
    Request = tagged_union(PermissionRequested, QuestionAsked)


def request_id(request: PermissionRequested | QuestionAsked) -> str:
    """The id of a ``Request`` of either kind."""
    return request.value.id


class Choices(NewtypeVariant):
    """``QuestionAnswer::Choices``: the ids of the chosen choices."""

    value: list[str]


class TextAnswer(NewtypeVariant):
    """``QuestionAnswer::Text``: free text."""

    TAG = "Text"
    value: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    QuestionAnswer: TypeAlias = Choices | TextAnswer
else:
    QuestionAnswer = tagged_union(Choices, TextAnswer)


class AnswerPermission(NewtypeVariant):
    """``Answer::Permission``."""

    TAG = "Permission"
    value: PermissionChoice


class AnswerQuestion(NewtypeVariant):
    """``Answer::Question``: one entry per question, in order."""

    TAG = "Question"
    value: list[QuestionAnswer]


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    Answer: TypeAlias = AnswerPermission | AnswerQuestion
else:
    Answer = tagged_union(AnswerPermission, AnswerQuestion)

# --------------------------------------------------------------------------------------------------- events


class TurnContext(Model):
    id: str
    parent_tool_id: str | None = None


class PromptOrigin(NewtypeVariant):
    """``TurnOrigin::Prompt``: the turn runs the prompt with this id."""

    TAG = "Prompt"
    value: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    TurnOrigin: TypeAlias = Literal["Agent"] | PromptOrigin
else:
    TurnOrigin = tagged_union(Literal["Agent"], PromptOrigin)


class CompletedStop(Variant):
    """``StopReason::Completed``: ``source`` is Protocol (the agent said so) or Inferred (it went quiet)."""

    TAG = "Completed"
    source: Literal["Protocol", "Inferred"]


class FailedStop(Variant):
    """``StopReason::Failed``."""

    TAG = "Failed"
    message: str


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    StopReason: TypeAlias = Literal["Cancelled", "Refused"] | CompletedStop | FailedStop
else:
    StopReason = tagged_union(Literal["Cancelled", "Refused"], CompletedStop, FailedStop)
COMPLETED_PROTOCOL = CompletedStop.model_construct(source="Protocol")
COMPLETED_INFERRED = CompletedStop.model_construct(source="Inferred")


class TurnStarted(Variant):
    origin: TurnOrigin


class TextDelta(Variant):
    message_id: str
    text: str


class ReasoningDelta(Variant):
    message_id: str
    text: str


class UserMessage(Variant):
    """Provider-originated user-role content (e.g. a parent agent steering a subagent)."""

    message_id: str
    text: str


class MessageEnded(Variant):
    message_id: str


class ToolUpdated(NewtypeVariant):
    value: ToolUpdate


class ToolOutputDelta(Variant):
    tool_id: str
    text: str


class PlanUpdated(Variant):
    entries: list[PlanEntry]


class RequestOpened(NewtypeVariant):
    value: Request


class RequestClosed(Variant):
    request_id: str


class SessionUpdated(NewtypeVariant):
    value: SessionInfo


class StatusChanged(NewtypeVariant):
    value: SessionStatus


class ContextUsage(Variant):
    """Context-window occupancy, in tokens; ``cost_usd`` in US dollars when the agent reports it."""

    used_tokens: int = Field(ge=0)
    window_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = None


class PlanUsageUpdated(NewtypeVariant):
    value: PlanUsage


class DiagnosticEvent(NewtypeVariant):
    """``EventKind::Diagnostic``."""

    TAG = "Diagnostic"
    value: Diagnostic


class TurnEnded(Variant):
    stop: StopReason
    background: list[str] = Field(default_factory=new_list)


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    EventKind: TypeAlias = (
        TurnStarted
        | TextDelta
        | ReasoningDelta
        | UserMessage
        | MessageEnded
        | ToolUpdated
        | ToolOutputDelta
        | PlanUpdated
        | RequestOpened
        | RequestClosed
        | SessionUpdated
        | StatusChanged
        | ContextUsage
        | Literal["ContextCompacted"]
        | PlanUsageUpdated
        | DiagnosticEvent
        | TurnEnded
    )
else:
    EventKind = tagged_union(
        TurnStarted,
        TextDelta,
        ReasoningDelta,
        UserMessage,
        MessageEnded,
        ToolUpdated,
        ToolOutputDelta,
        PlanUpdated,
        RequestOpened,
        RequestClosed,
        SessionUpdated,
        StatusChanged,
        ContextUsage,
        Literal["ContextCompacted"],
        PlanUsageUpdated,
        DiagnosticEvent,
        TurnEnded,
    )

ENGINE_OWNED_KINDS = frozenset({"TurnStarted", "TurnEnded", "RequestClosed", "SessionUpdated", "StatusChanged"})
"""Kinds only the engine emits; an adapter emitting one is dropped with a Warning diagnostic."""


def kind_tag(kind: str | Variant) -> str:
    """The tag of a tagged-union value: a unit variant is its string, a variant its ``TAG`` (``"TextDelta"``,
    ``"ContextCompacted"``, a StopReason's ``"Completed"``…)."""
    return kind if isinstance(kind, str) else kind.TAG


def diagnostic(level: DiagnosticLevel, message: str) -> DiagnosticEvent:
    """A ``Diagnostic`` event kind."""
    return DiagnosticEvent(value=Diagnostic(level=level, message=message))


class Event(Model):
    """One normalized event: ``sequence`` starts at 1 per session; ``occurred_at`` is the engine's wall clock."""

    sequence: int = Field(ge=0)
    occurred_at: SystemTime = EPOCH
    session_id: str
    turn_info: TurnContext | None = None
    kind: EventKind
    extensions: dict[str, Any] = Field(default_factory=dict)

    @property
    def tag(self) -> str:
        """The kind's tag (``"TextDelta"``, ``"ContextCompacted"``…), whether the kind is a struct or a unit."""
        return kind_tag(self.kind)


# --------------------------------------------------------------------------------------------------- delivery


class Started(Variant):
    turn_id: str


class Steered(Variant):
    turn_id: str


class Queued(Variant):
    """``position`` = number of prompts ahead of this one, not counting the running turn."""

    position: int = Field(ge=0)


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    DeliveryKind: TypeAlias = Started | Steered | Queued
else:
    DeliveryKind = tagged_union(Started, Steered, Queued)


class Delivery(Model):
    """Immediate result of submitting a prompt; ``prompt_id`` is stable across queue promotion."""

    prompt_id: str
    kind: DeliveryKind


# --------------------------------------------------------------------------------------------------- commands

PermissionMode = Literal["Ask", "AutoApprove"]
RollbackScope = Literal["Conversation", "ConversationAndFiles"]


class Stdio(Variant):
    command: str
    args: list[str] = Field(default_factory=new_list)
    env: dict[str, str] = Field(default_factory=dict)


class Http(Variant):
    url: str
    headers: dict[str, str] = Field(default_factory=dict)


class Sse(Variant):
    url: str
    headers: dict[str, str] = Field(default_factory=dict)


if TYPE_CHECKING:  # the union as checkers see it; at run time the tagged union pydantic validates
    McpConnection: TypeAlias = Stdio | Http | Sse
else:
    McpConnection = tagged_union(Stdio, Http, Sse)


class McpServer(Model):
    """A client-owned MCP server the agent should connect to, forwarded at open."""

    name: str
    connection: McpConnection


class AcpSpec(Model):
    name: str
    path: str
    args: list[str] = Field(default_factory=new_list)


class AcpRef(Model):
    """``AgentRef`` for an ACP agent the catalog does not know: ``{"acp": {...}}``."""

    acp: AcpSpec


AgentRef = str | AcpRef


class SessionOptions(Model):
    """The options of ``open`` (and ``generate``): where, how to resume or fork, permissions, MCP, settings."""

    dir: str
    resume: str | None = None
    fork: str | None = None
    fork_at: str | None = None
    permission_mode: PermissionMode | None = None
    mcp_servers: list[McpServer] = Field(default_factory=new_list)
    configure: dict[str, ConfigValue] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- lines


class Hello(Model):
    protocol: int = 1
    anyagent: str


# Type adapters for the untagged / union types, built once on first use (they are used on hot paths).
_DEFERRED = ConfigDict(defer_build=True)
EVENT_KIND = TypeAdapter(EventKind, config=_DEFERRED)
ANSWER = TypeAdapter(Answer, config=_DEFERRED)
REQUEST = TypeAdapter(Request, config=_DEFERRED)
STOP_REASON = TypeAdapter(StopReason, config=_DEFERRED)
CONFIG_VALUE = TypeAdapter(ConfigValue, config=_DEFERRED)
AGENT_REF = TypeAdapter(AgentRef, config=_DEFERRED)
