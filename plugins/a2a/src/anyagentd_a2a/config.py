"""The daemon's configuration: a TOML file validated with pydantic, secrets resolved at load.

Takes a file (``load(path)``: a regular file of at most 1 MiB, UTF-8, a leading byte order mark ignored) or nothing
(``default_config()``: the embedded ``mock`` agent on loopback). Unknown keys are refused, naming them. Credentials
are references only: ``{{secret:NAME}}`` (an environment variable) or ``{{secret-file:PATH}}`` (a regular file's
content, at most 64 KiB, trailing newline stripped); a literal value in a credential field is
refused, and a reference that does not resolve is a start-up error naming it. Resolved values are ``SecretStr``:
they never appear in a repr, a log line or an error message.

Raises :class:`ConfigError` (``key``: the dotted path of the offending key; ``message``: one line for a person).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

_REFERENCE = re.compile(r"^\{\{(secret|secret-file):([^}]+)\}\}$")
_RATE = re.compile(r"^(\d+)/(\d+(?:\.\d+)?)s$")


class ConfigError(Exception):
    """A configuration that cannot be served; ``key`` names the offending key (dotted), ``message`` says why.
    ``also``: the further errors found with it (every key pydantic refused in one file, in its order), for
    ``--check-config`` to print each; ``str()`` is this one alone."""

    def __init__(self, key: str, message: str, *, also: tuple[ConfigError, ...] = ()) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message
        self.also = also

    @property
    def all(self) -> list[ConfigError]:
        """This error and the further ones."""
        return [self, *self.also]


CONFIG_BYTES = 1024 * 1024
"""The largest configuration file read (1 MiB): a longer one is refused, never read to its end."""
SECRET_FILE_BYTES = 64 * 1024
"""The largest ``{{secret-file:…}}`` read (64 KiB): a credential is a line, not a file's worth."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class Unreadable(Exception):
    """A file :func:`read_regular` will not read; ``str()``: the reason, to follow the file's name."""


def read_regular(path: str | Path, limit: int, *, head: bool = False) -> bytes:
    """The content of ``path`` (``~`` expanded, symlinks followed) when it is a regular file of at most ``limit``
    bytes (``head``: its first ``limit`` bytes, however long it is). Raises :class:`Unreadable`: ``cannot be read
    (<OS reason>)``, ``is not a regular file (a FIFO)`` — a FIFO, a device, a socket or a directory is never read
    (``/dev/zero`` has no end, a FIFO blocks until a writer comes) — or ``is larger than <limit>``: what is past
    the limit is never read."""
    path = Path(path).expanduser()

    def regular(mode: int) -> None:
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise Unreadable(f"is not a regular file ({kind})")

    try:
        regular(os.stat(path).st_mode)
        # O_NONBLOCK: should the path become a FIFO between the stat and the open, the open does not wait
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise Unreadable(f"cannot be read ({err.strerror or err})") from None
    try:
        regular(os.fstat(fd).st_mode)
        with os.fdopen(fd, "rb", closefd=False) as file:
            raw = file.read(limit if head else limit + 1)
    except OSError as err:
        raise Unreadable(f"cannot be read ({err.strerror or err})") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        shown = f"{limit // 1024 // 1024} MiB" if limit % (1024 * 1024) == 0 else f"{limit // 1024} KiB"
        raise Unreadable(f"is larger than {shown}")
    return raw


def not_utf8(what: str, raw: bytes, err: UnicodeDecodeError) -> str:
    """One line saying ``what`` (a file's name) is not UTF-8: where (byte offset, line) and why; never the bytes."""
    line = raw.count(b"\n", 0, err.start) + 1
    return f"{what} is not UTF-8: byte offset {err.start} (line {line}): {err.reason}"


def check_store_url(url: str) -> None:
    """Raise ``ValueError`` unless SQLAlchemy can open ``url`` (``a2a.store``) from the event loop: a database URL
    whose dialect exists, whose driver is an async one and is installed. The message shows the URL with its
    password hidden. SQLAlchemy is imported only when a store is configured."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(
            "not a database URL (dialect+driver://user:password@host/database, e.g. "
            "sqlite+aiosqlite:///path/a2a.db or postgresql+asyncpg://host/db)"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"{shown}: SQLAlchemy has no database {parsed.drivername!r}") from None
    if not getattr(dialect, "is_async", False):
        raise ValueError(
            f"{shown}: {parsed.drivername!r} is not an async driver (sqlite+aiosqlite, postgresql+asyncpg)"
        )
    try:
        dialect.import_dbapi()
    except ImportError as err:
        missing = err.name or parsed.get_driver_name()
        raise ValueError(f"{shown}: its driver is not installed (pip install {missing})") from None


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite ``url`` names, ``~`` expanded and made absolute (symlinks resolved where they exist), or
    ``None`` for another database or an in-memory one; ``url`` has passed :func:`check_store_url`. Here, not in the
    store, so ``--check-config`` does not import the store (and the a2a-sdk server)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).expanduser().resolve()


def missing_sqlite_directory(url: str) -> Path | None:
    """The directory of the SQLite file ``url`` names when it does not exist (SQLite creates the file, never its
    directory), else ``None`` (another database, an in-memory one, a directory that exists): what
    :func:`anyagentd_a2a.store.check_sqlite_directory` refuses at the start and the preflight reports."""
    database = sqlite_file(url)
    return database.parent if database is not None and not database.parent.is_dir() else None


class _Strict(BaseModel):
    # strict: a TOML value of the wrong type is refused naming its key, never coerced ("yes", 1 or "off" for a bool)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _reference(value: Any) -> Any:
    """A credential field: the ``{{secret:…}}`` / ``{{secret-file:…}}`` reference, kept unresolved until load."""
    if value is None:
        return None
    if not isinstance(value, str) or not _REFERENCE.match(value):
        raise ValueError("a credential must be a reference {{secret:ENV}} or {{secret-file:PATH}}, not a literal value")
    return value


class AcpAgent(_Strict):
    name: str
    path: str
    args: list[str] = Field(default_factory=list)


AGENT_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
"""An agent's id (``[[agents]] id``): its sub-path ``/agents/<id>``, lower-case letters, digits and ``-``, at most
32 characters, not starting with ``-``."""
RESERVED_IDS = frozenset({"last-updated"})
"""Ids no agent may take: ``last-updated`` would name its task table ``anyagentd_tasks_last_updated``, the name of
the index of the task table written before agents had ids (SQLite names tables and indexes in one namespace)."""


def _agent_id(value: str | None) -> str | None:
    """``id`` of ``[agent]`` / ``[[agents]]``: ``None`` (given nowhere) or an id :data:`AGENT_ID` matches that is
    not :data:`RESERVED_IDS`; else ``ValueError`` with one line (pydantic names the key)."""
    if value is not None and not AGENT_ID.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an agent id: lower-case letters, digits and '-', at most 32 characters, "
            "starting with a letter or a digit (it is the agent's sub-path /agents/<id>)"
        )
    if value in RESERVED_IDS:
        raise ValueError(f"{value!r} is reserved; give the agent another id")
    return value


class SkillSection(_Strict):
    """``[[agents.skills]]``: one skill the agent's card lists (A2A ``AgentSkill``): ``id``, ``name``,
    ``description``, ``tags`` and ``examples``."""

    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class AgentPoolSection(_Strict):
    """``[agents.pool]``: one agent's own bounds beside the daemon-wide ``[a2a.pool]``. ``max_live``: its live
    agents at most (0, the default: no cap of its own, only the daemon's); ``idle_close``: seconds one of its
    conversations' agents stays open with no live task (``None``, the default: ``[a2a.pool] idle_close``)."""

    max_live: Annotated[int, Field(ge=0)] = 0
    idle_close: Annotated[float, Field(ge=0)] | None = None


OptionValue = StrictStr | StrictInt | StrictFloat | StrictBool
"""A value of ``[agents.options]``: what ``Runtime.open(configure=…)`` takes (a string, a number, a boolean)."""


class AgentSection(_Strict):
    """``[agent]`` (the one-agent shorthand) or one ``[[agents]]`` entry: which agent its conversations run, where,
    and how permissions are answered. ``id``: its sub-path ``/agents/<id>`` (required in ``[[agents]]``; in
    ``[agent]`` it defaults to the agent's name made an id, :func:`.agentspec.slug`); ``default``: whether the root
    serves it (at most one; else the first); ``description`` and ``skills``: its card's; ``options``: passed as
    ``configure=`` to ``Runtime.open`` (``model`` and any option ``anyagentd probe`` lists); ``pool``: its own
    bounds (:class:`AgentPoolSection`)."""

    id: str | None = None
    name: str | dict[Literal["acp"], AcpAgent] = "mock"
    dir: str = "."
    approval: Literal["ask", "auto"] = "ask"
    mock_script: str | None = None
    default: StrictBool = False
    description: str | None = None
    skills: list[SkillSection] = Field(default_factory=list)
    options: dict[str, OptionValue] = Field(default_factory=dict)
    pool: AgentPoolSection = AgentPoolSection()

    _check_id = field_validator("id")(_agent_id)

    def agent_ref(self) -> Any:
        """The ``AgentRef`` the runtime opens: a catalog id or ``{"acp": {...}}``."""
        if isinstance(self.name, str):
            return self.name
        return {"acp": self.name["acp"].model_dump()}

    def label(self) -> str:
        return self.name if isinstance(self.name, str) else self.name["acp"].name


class PushSection(_Strict):
    """``[a2a.push]``: push notifications; ``allow_private`` lets them reach loopback and private addresses."""

    enabled: bool = True
    allow_private: bool = False


class TlsSection(_Strict):
    cert: str
    key: str


class Rate(_Strict):
    """A request budget: ``requests`` per ``seconds`` (``"120/60s"``)."""

    requests: int
    seconds: float


def _rate(value: Any) -> Any:
    if isinstance(value, str):
        match = _RATE.match(value.strip())
        if not match or int(match.group(1)) < 1 or float(match.group(2)) <= 0:
            raise ValueError('a rate is "N/Ss" with N >= 1 and S > 0, e.g. "120/60s"')
        return {"requests": int(match.group(1)), "seconds": float(match.group(2))}
    return value


class PrincipalSection(_Strict):
    """``[[a2a.principals]]``: a caller known by its bearer. ``grants`` are op patterns of the command extension
    (``*``, ``workflow.*``, ``workflow.run:<glob>``; none by default: the role's floors apply); ``methods`` are the
    A2A methods it may call (patterns, ``*`` by default, e.g. ``["Get*", "List*"]`` for a reader); ``agents`` the
    agents it may reach (patterns of ``[[agents]]`` ids, ``*`` by default, e.g. ``["claude", "codex-*"]``)."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    role: Literal["user", "agent"] = "user"
    bearer: str
    grants: list[str] = Field(default_factory=list)
    methods: list[str] = Field(default_factory=lambda: ["*"])
    agents: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] = Field(
        default_factory=lambda: ["*"]
    )
    rate: Rate = Rate(requests=120, seconds=60.0)

    _check_bearer = field_validator("bearer", mode="before")(_reference)
    _check_rate = field_validator("rate", mode="before")(_rate)

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in {"operator", "anonymous", "unknown", "launcher", "runtime", "system"}:
            raise ValueError(f"{value!r} is a reserved principal name")
        return value


class DeviceGrantSection(_Strict):
    """``[a2a.device_grant]``: sign-in by the OAuth device authorization grant (RFC 8628); needs an operator
    credential, since an operator approves each device. ``lifetime`` is a device code's life, ``token_days`` a
    signed-in session's."""

    enabled: bool = False
    lifetime: Annotated[int, Field(ge=60, le=3600)] = 600
    token_days: Annotated[int, Field(ge=1, le=365)] = 30


_NETLOC = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[^\[\]@:]+)(?::[0-9]+)?$")
_USERINFO = re.compile(r"(?<=//).*@")  # up to the last @: a password may hold a / or a ?


def check_http_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL a client can use (``a2a.url``, ``subagents.instances.N.url``,
    ``subagents.parents.N.url``), read once with :func:`urllib.parse.urlsplit`: a host (a name, an IPv4 address
    or a bracketed IPv6 one), a port if any from 1 to 65535, no ``user:password@`` (a card would publish it), a
    path without an empty segment (``//``) and no query or fragment (the URL is where requests are posted, and a
    path is served under: :mod:`.pathprefix`); no whitespace or control character. The scheme is
    case-insensitive (``HTTP://`` is kept as ``http://``). Raises ``ValueError`` with one line (a password in the
    value is never shown)."""
    shown = _USERINFO.sub("…@", value)  # what a message quotes: never a user name or password
    shape = f"{shown!r} is not an http:// or https:// URL with a host (e.g. https://agents.example)"
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(shape)
    try:
        parts = urlsplit(value)
        port = parts.port  # a port that is not a number, or past 65535, raises here
    except ValueError as err:  # urllib's reason may quote the netloc (a password read as a port): not with an @
        why = "" if shown != value else f": {err}"
        raise ValueError(f"{shown!r} is not a URL{why}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(shape)
    if "@" in parts.netloc:
        raise ValueError(
            f"{shown!r} carries a user name or password (user:password@): the card would publish it "
            "to every client; give the URL without it"
        )
    if not parts.hostname or not _NETLOC.match(parts.netloc):
        raise ValueError(shape)
    if port == 0:
        raise ValueError(f"{shown!r} names port 0, which no client can reach")
    if "//" in parts.path:
        raise ValueError(f"{shown!r}: its path {parts.path!r} has an empty segment ('//')")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise ValueError(f"{shown!r} has a query or a fragment: give the URL without it")
    return f"{parts.scheme}{value[len(parts.scheme) :]}"


def _http_url(value: str | None) -> str | None:
    """``a2a.url``: the URL the card advertises (its path, if any, is served: :mod:`.pathprefix`), checked by
    :func:`check_http_url`; anything else is refused naming the key."""
    return None if value is None else check_http_url(value)


class InstanceSection(_Strict):
    """``[[subagents.instances]]``: a child instance (another anyagentd, or any A2A agent) spawned as the agent
    ``name``: its A2A ``url``, the ``bearer`` the parent presents to it (a credential reference) and ``reports``:
    whether the child reports back with ``_instance.result`` / ``_instance.emit`` (an anyagentd child that lists
    this daemon among its ``[[subagents.parents]]``) rather than in its reply (``docs/commands.md#child-instances``)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    url: Annotated[str, AfterValidator(check_http_url)]
    bearer: str | None = None
    reports: StrictBool = False

    _check_bearer = field_validator("bearer", mode="before")(_reference)


class ParentSection(_Strict):
    """``[[subagents.parents]]``: a parent daemon this one reports to when it runs the parent's subagent. ``url``
    is the parent's A2A URL (as its messages name it), ``bearer`` the parent's operator credential (a credential
    reference), ``principal`` who the parent is here (the principal its messages arrive as: ``operator``, or
    ``user:<id>`` / ``agent:<id>`` of a ``[[a2a.principals]]`` rule); a message naming the parent from anyone else
    is run without reports."""

    url: Annotated[str, AfterValidator(check_http_url)]
    bearer: str
    principal: Annotated[str, Field(pattern=r"^(operator|(user|agent):[a-z0-9][a-z0-9._-]{0,63})$")] = "operator"

    _check_bearer = field_validator("bearer", mode="before")(_reference)


class SubagentsSection(_Strict):
    """``[subagents]``: whether driven agents get anyagentd's MCP server to delegate with, and its limits: which
    agents may be spawned (patterns), how many run at once per owner, how deep they nest, a turn's timeout; the
    child ``instances`` that may be spawned by name (over A2A); and the ``parents`` this daemon reports to when it
    is their child instance (served whether or not ``enabled``)."""

    enabled: bool = False
    agents: list[str] = Field(default_factory=lambda: ["*"])
    per_owner: Annotated[int, Field(ge=1, le=64)] = 4
    depth: Annotated[int, Field(ge=1, le=8)] = 1
    timeout: Annotated[float, Field(gt=0)] = 600.0
    instances: list[InstanceSection] = Field(default_factory=list)
    parents: list[ParentSection] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_instances(self) -> SubagentsSection:
        names = [i.name for i in self.instances]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise ValueError(f"instance {duplicate!r} is configured twice")
        urls = [parent_key(p.url) for p in self.parents]
        duplicate = next((u for u in urls if urls.count(u) > 1), None)
        if duplicate:
            raise ValueError(f"parent {duplicate!r} is configured twice")
        return self


def parent_key(url: str) -> str:
    """A parent's URL as parents are matched: without a trailing slash."""
    return url.rstrip("/")


class PoolSection(_Strict):
    """``[a2a.pool]``: how many conversations keep a live agent between turns. ``idle_close``: seconds a
    conversation's agent stays open with no live task before it is closed (0: never; env
    ``ANYAGENTD_A2A_IDLE_CLOSE`` overrides); the next message reopens it with the agent's resume token.
    ``max_live``: live agents at most (0: no cap); opening one more first closes the least recently used idle one.
    ``max_rss_mb``: the same when the agents' process tree (read from /proc) holds more than this many MiB."""

    idle_close: Annotated[float, Field(ge=0)] = 900.0
    max_live: Annotated[int, Field(ge=0)] = 32
    max_rss_mb: Annotated[int, Field(ge=1)] | None = None


MIB = 1024 * 1024
FILE_BYTES = 20 * MIB
"""The largest file part saved for a prompt (``translate.MAX_FILE_BYTES``): the ceiling of ``part_bytes``."""


class LimitsSection(_Strict):
    """``[a2a.limits]``: how much one request and one task may hold. A request over a limit is refused by the front
    before anything is stored or started, the refusal naming the limit's key (:mod:`.limits`).

    ``body_bytes`` (default 4 MiB, 4096 to 64 MiB): a ``POST /`` body; more is HTTP 413 — a ``Content-Length``
    over it before any of the body is read, a body sent without one as soon as it passes it. 4 MiB is gRPC's
    default message limit, so what the A2A gRPC binding takes by default this binding takes too; the daemon
    holds a few copies of a body while it parses one, so this bounds what one request costs in memory.
    ``message_parts`` (default 64): parts of one sent message. ``part_bytes`` (default 2 MiB, at most
    ``body_bytes`` and at most 20 MiB, the largest file saved for a prompt): one part's content — a text part's
    UTF-8 bytes, an inline file's bytes (sent as base64, 4/3 of that, so a 2 MiB file fits a 4 MiB body with room
    for the envelope), a data part's JSON, a URL's characters; a file by URL is fetched up to 20 MiB whatever
    this says. 2 MiB of text is about half a million tokens, more than any agent's context window.
    ``task_history`` (default 100, at least 2): messages of a task's history answered — GetTask, ListTasks and a
    send's Task carry at most this many, the newest (an absent ``historyLength`` is taken as this, a larger one as
    this: A2A 1.0 §3.2.4 lets a server return fewer); :func:`.limits.bound_history` is the rule for trimming the
    history a store keeps to it (the prompt and the newest)."""

    body_bytes: Annotated[int, Field(ge=4096, le=64 * MIB)] = 4 * MIB
    message_parts: Annotated[int, Field(ge=1, le=10_000)] = 64
    part_bytes: Annotated[int, Field(ge=1, le=FILE_BYTES)] = 2 * MIB
    task_history: Annotated[int, Field(ge=2, le=100_000)] = 100

    @model_validator(mode="after")
    def _part_fits_a_body(self) -> LimitsSection:
        if self.part_bytes > self.body_bytes:
            raise ConfigError(
                "a2a.limits.part_bytes",
                f"{self.part_bytes} is more than a2a.limits.body_bytes "
                f"({self.body_bytes}): no request could carry such a part",
            )
        return self


_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = 100 * 365 * 86400
"""The longest retention age or interval, in seconds (100 years of 365 days): past it a cutoff date or a sleep
overflows (``timedelta``, the event loop's timer), so it is refused where the file is read."""


def _duration(value: Any) -> Any:
    """A retention age: a string ``"<n><unit>"`` (unit ``s``, ``m``, ``h`` or ``d``: ``"30d"``, ``"1s"``) or
    ``0`` (keep forever); returned as seconds (``int``). Anything else (a bare number other than 0, ``"1w"``,
    ``"1.5h"``, a bool, longer than :data:`MAX_DURATION`) is refused, pydantic naming the key."""
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return 0
    if isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        if seconds > MAX_DURATION:
            raise ValueError(
                f"{value!r} is longer than 100 years ({MAX_DURATION // 86400}d), the longest duration; 0 keeps forever"
            )
        return seconds
    raise ValueError(
        f'{value!r} is not a duration: "<n>s", "<n>m", "<n>h" or "<n>d" (e.g. "30d"), or 0 to keep forever'
    )


class RetentionSection(_Strict):
    """``[a2a.retention]``: how long ended things stay in the daemon's database and state dir (:mod:`.retention`
    prunes them). Each age is a duration string (``"30d"``, ``"12h"``, ``"90m"``, ``"1s"``) or ``0`` (keep
    forever), held as seconds, at most 100 years (:data:`MAX_DURATION`; a longer one is refused naming its key).
    ``tasks`` (default 30 days): terminal tasks (COMPLETED, FAILED, CANCELED, REJECTED) last updated longer ago,
    their push configs, and the conversations whose tasks are all gone and that are not live (their resume-token
    row and their ``conversations/<digest>/`` files). ``runs`` (30 days): workflow runs
    ended longer ago, their steps and signals and their ``runs/<run id>/`` work dir. ``sessions`` (7 days):
    device-grant sessions expired, or revoked and issued, longer ago. ``subagents`` (30 days): subagent records
    ended (completed, failed, cancelled) and last updated longer ago, and their ``subagents/<handle>/`` work dir.
    ``interval`` (default 1 hour, at least 1 s, at most 100 years): how often a prune runs; one runs at start
    too."""

    tasks: Annotated[int, BeforeValidator(_duration)] = 30 * 86400
    runs: Annotated[int, BeforeValidator(_duration)] = 30 * 86400
    sessions: Annotated[int, BeforeValidator(_duration)] = 7 * 86400
    subagents: Annotated[int, BeforeValidator(_duration)] = 30 * 86400
    interval: Annotated[int, BeforeValidator(_duration), Field(ge=1)] = 3600


class MetricsSection(_Strict):
    """``[a2a.metrics]``: ``GET /metrics`` (Prometheus text format, :mod:`.observe.metrics`). ``enabled`` (default
    true; false: no route, and the Prometheus client is never imported); ``token``: a scrape credential (a
    credential reference) accepted besides the operator's, for a scraper that should hold nothing else — so not the
    bearer of ``a2a.bearer`` nor of a principal (refused naming ``a2a.metrics.token``)."""

    enabled: bool = True
    token: str | None = None

    _check_token = field_validator("token", mode="before")(_reference)


class ConsoleSection(_Strict):
    """``[a2a.console]``: the web console at ``/console/`` (:mod:`.console`). ``enabled``: true serves it, false
    does not; unset (the default) serves it when the listener is loopback and not otherwise
    (:meth:`A2ASection.console_enabled`)."""

    enabled: bool | None = None


def _proxy(value: str) -> str:
    """A ``trusted_proxies`` entry, checked by :func:`.proxies.parse_proxy` (an error names the entry's index)."""
    from .proxies import parse_proxy

    parse_proxy(value)
    return value


class A2ASection(_Strict):
    """``[a2a]``: the listener, the card's URL, credentials, CORS, the reverse proxies trusted to name the client
    (``trusted_proxies``: addresses and CIDR networks; only from one of them is ``X-Forwarded-For`` read, see
    :mod:`.proxies`), the task store, push, TLS, the device grant, the pool of live agents and the request and
    task limits."""

    listen: str = "127.0.0.1:8787"
    url: str | None = None
    bearer: str | None = None
    cors_origins: list[str] = Field(default_factory=list)
    trusted_proxies: list[Annotated[str, AfterValidator(_proxy)]] = Field(default_factory=list)
    store: str | None = None
    store_synchronous: Literal["normal", "full"] = "normal"
    """SQLite's ``PRAGMA synchronous`` for a SQLite store: ``normal`` commits survive the daemon's death, ``full``
    (an fsync per commit) a power cut too (:mod:`.sqlite_writes`); other databases ignore it."""
    introspection: bool = False
    access_log: bool = True  # one JSON line per HTTP request (.observe.access)
    device_grant: DeviceGrantSection = DeviceGrantSection()
    push: PushSection = PushSection()
    pool: PoolSection = PoolSection()
    limits: LimitsSection = LimitsSection()
    metrics: MetricsSection = MetricsSection()
    console: ConsoleSection = ConsoleSection()
    retention: RetentionSection = RetentionSection()
    tls: TlsSection | None = None
    principals: list[PrincipalSection] = Field(default_factory=list)

    _check_bearer = field_validator("bearer", mode="before")(_reference)
    _check_url = field_validator("url")(_http_url)

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        split_host_port(value)
        return value

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is not None:
            check_store_url(value)
        return value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            if not re.match(r"^https?://[^/\s]+$", origin):
                raise ValueError(f"{origin!r} is not an exact origin (scheme://host[:port], no path)")
        return value

    def console_enabled(self) -> bool:
        """Whether the web console is served: ``[a2a.console] enabled`` when set, else whether ``listen`` is a
        loopback address."""
        if self.console.enabled is not None:
            return self.console.enabled
        return is_loopback(split_host_port(self.listen)[0])

    @model_validator(mode="after")
    def _unique_principals(self) -> A2ASection:
        ids = [p.id for p in self.principals]
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate:
            raise ValueError(f"principal {duplicate!r} is configured twice")
        return self


class WorkflowEngineSection(_Strict):
    """``[workflow_engine]``: which engine drives the ``[[workflows]]`` (a TOML file cannot hold both
    ``[[workflows]]`` and ``[workflows.engine]``, hence its own table). ``kind``: an installed engine, found in the
    entry-point group ``anyagentd_a2a.workflow_engines`` (``local``, the embedded default: runs on this daemon,
    committed to its store; ``temporal``: ``pip install 'anyagentd-a2a[temporal]'``, see ``docs/scaling-out.md``).
    For ``temporal``: ``address`` (``host:port`` of the Temporal frontend), ``namespace``, ``task_queue_prefix``
    (the runs' queue is ``<prefix>-runs``, an agent's ``<prefix>-agent-<name>``), ``hosts`` (the agents whose steps
    this daemon runs; default: the agents of its ``[[agents]]``), ``heartbeat`` (seconds, or a duration such as
    ``"10s"``, an agent step may go without a heartbeat before it counts as interrupted), ``work_root`` (where runs' working directories are made; default:
    the state directory's ``runs``; several daemons hosting one agent on one machine share it so a step resumed by
    another daemon finds its files)."""

    kind: Annotated[str, Field(min_length=1)] = "local"
    address: Annotated[str, Field(pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$")] = "127.0.0.1:7233"
    namespace: Annotated[str, Field(min_length=1)] = "default"
    task_queue_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")] = "anyagentd"
    hosts: list[Annotated[str, Field(min_length=1)]] | None = None
    heartbeat: Annotated[float, Field(gt=0)] = 10.0
    work_root: str | None = None

    @field_validator("heartbeat", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        """A number of seconds or a duration string (``"10s"``), as a step's ``timeout``."""
        from .workflows.definition import parse_duration

        return parse_duration(value) if not isinstance(value, float) else value


class Config(_Strict):
    """The whole file: the agents (``[[agents]]``, or ``[agent]``: the one-agent shorthand, one entry; not both),
    ``[a2a]``, ``[subagents]`` and the ``[[workflows]]`` (validated by
    :func:`anyagentd_a2a.workflows.definition.load_workflows`; errors name the workflow, step and key). Of the
    ``[[agents]]``, each needs an ``id``, no two the same, and at most one is ``default = true``
    (:class:`ConfigError` naming ``agents``, ``agents.N.id`` or ``agents.N.default``, every one found)."""

    agent: AgentSection = AgentSection()
    agents: list[AgentSection] = Field(default_factory=list)
    a2a: A2ASection = A2ASection()
    subagents: SubagentsSection = SubagentsSection()
    workflows: list[dict[str, Any]] = Field(default_factory=list)
    workflow_engine: WorkflowEngineSection = WorkflowEngineSection()

    def entries(self) -> list[tuple[str, AgentSection]]:
        """The agents as configured, each with its key prefix as written: ``[("agent", agent)]`` for the shorthand,
        else ``[("agents.0", …), ("agents.1", …)]`` in the file's order."""
        if self.agents:
            return [(f"agents.{n}", entry) for n, entry in enumerate(self.agents)]
        return [("agent", self.agent)]

    @model_validator(mode="after")
    def _agents(self) -> Config:
        if "agents" in self.model_fields_set and not self.agents:
            raise ConfigError("agents", "no agent is configured: give at least one [[agents]] table (or [agent])")
        if not self.agents:
            return self
        if "agent" in self.model_fields_set:
            raise ConfigError(
                "agents",
                "[agent] and [[agents]] are both given: [agent] is the one-agent shorthand; move it into [[agents]]",
            )
        errors: list[ConfigError] = []
        seen: set[str] = set()
        default: str | None = None
        for n, entry in enumerate(self.agents):
            if entry.id is None:
                errors.append(ConfigError(f"agents.{n}.id", "required: the agent's sub-path /agents/<id>"))
            elif entry.id in seen:
                errors.append(ConfigError(f"agents.{n}.id", f"{entry.id!r} is configured twice"))
            else:
                seen.add(entry.id)
            if entry.default and default is not None:
                errors.append(ConfigError(f"agents.{n}.default", f"{default!r} is the default already"))
            elif entry.default:
                default = entry.id or f"agents.{n}"
        if errors:
            first, *others = errors
            raise ConfigError(first.key, first.message, also=tuple(others))
        return self

    @model_validator(mode="after")
    def _definitions(self) -> Config:
        if self.workflows:
            from .workflows.definition import WorkflowError, load_workflows

            try:
                load_workflows(self.workflows)
            except WorkflowError as err:
                raise ConfigError(err.where, str(err).split(": ", 1)[-1]) from None
        return self


def split_host_port(listen: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``[v6]:PORT`` too) → (host, port); raises ``ValueError``."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{listen!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names the loopback interface (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Secrets(BaseModel):
    """The resolved credentials: the operator bearer, each principal's by principal id, the bearer presented to
    each child instance by instance name, and to each parent by its URL (:func:`parent_key`)."""

    model_config = ConfigDict(frozen=True)
    operator: SecretStr | None = None
    principals: dict[str, SecretStr] = Field(default_factory=dict)
    instances: dict[str, SecretStr] = Field(default_factory=dict)
    parents: dict[str, SecretStr] = Field(default_factory=dict)
    metrics: SecretStr | None = None  # the scrape token, ``a2a.metrics.token``


class Loaded(BaseModel):
    """A validated configuration with its secrets resolved."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    config: Config
    secrets: Secrets
    source: str | None = None

    @property
    def credentialed(self) -> bool:
        """Whether any credential is configured (then nobody is the implicit operator)."""
        return self.secrets.operator is not None or bool(self.secrets.principals)


def resolve_reference(reference: str, key: str, env: dict[str, str]) -> SecretStr:
    """The value of a ``{{secret:NAME}}`` / ``{{secret-file:PATH}}`` reference; ``ConfigError`` naming ``key`` and
    the reference's name (never a value) when it does not resolve or is empty."""
    match = _REFERENCE.match(reference)
    assert match is not None, "validated before"
    kind, name = match.groups()
    if kind == "secret":
        value = env.get(name)
        if not value:
            raise ConfigError(key, f"secret {name!r} is not set in the environment")
    else:
        try:
            raw = read_regular(name, SECRET_FILE_BYTES)
        except Unreadable as err:
            raise ConfigError(key, f"secret file {name!r} {err}") from None
        try:
            value = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise ConfigError(key, not_utf8(f"secret file {name!r}", raw, err)) from None
        if not value:
            raise ConfigError(key, f"secret file {name!r} is empty")
    return SecretStr(value)


_MEMBER = re.compile(r"[][A-Z]|^(str|int|float|bool|list|dict|none)$")
"""A segment pydantic adds to an error's place that is no key: a union member's label (``str``,
``dict[literal['acp'],AcpAgent]``, a model's name) or a dict key's ``[key]``; every key of the file is lowercase."""


def _errors(err: ValidationError) -> ConfigError:
    """Every error pydantic found, each naming its key (union members' labels left out), the first with the others
    as its ``also``. Of a union (``agent.name``: a catalog id or ``{acp = …}``) whose value reached a member's own
    keys, the other members' type errors are left out; errors on one key are one, their messages joined."""
    found: dict[str, list[str]] = {}
    unions: dict[str, bool] = {}  # a union's key → whether an error went past it (into a member's keys)
    places = []
    for error in err.errors():
        loc = [str(p) for p in error["loc"]]
        kept = [p for p in loc if not _MEMBER.search(p)]
        key = ".".join(kept)
        union = None
        if len(kept) != len(loc):
            union = ".".join(loc[: next(i for i, p in enumerate(loc) if _MEMBER.search(p))])
            unions[union] = unions.get(union, False) or key != union
        message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
        places.append((key, union, message))
    for key, union, message in places:
        if union is not None and key == union and unions[union]:
            continue
        if message not in found.setdefault(key, []):
            found[key].append(message)
    first, *others = [ConfigError(key, " or ".join(messages)) for key, messages in found.items()]
    return ConfigError(first.key, first.message, also=tuple(others))


def parse(data: dict[str, Any], *, source: str | None = None, env: dict[str, str] | None = None) -> Loaded:
    """Validate a parsed TOML document and resolve its secrets; raises ``ConfigError``."""
    env = dict(os.environ) if env is None else env
    try:
        config = Config.model_validate(data)
    except ValidationError as err:
        raise _errors(err) from None
    operator = resolve_reference(config.a2a.bearer, "a2a.bearer", env) if config.a2a.bearer else None
    principals = {
        p.id: resolve_reference(p.bearer, f"a2a.principals.{i}.bearer", env)
        for i, p in enumerate(config.a2a.principals)
    }
    bearers = [s.get_secret_value() for s in ([operator] if operator else []) + list(principals.values())]
    if len(set(bearers)) != len(bearers):
        raise ConfigError("a2a.principals", "two credentials resolve to the same bearer")
    instances = {
        i.name: resolve_reference(i.bearer, f"subagents.instances.{n}.bearer", env)
        for n, i in enumerate(config.subagents.instances)
        if i.bearer
    }
    parents = {
        parent_key(p.url): resolve_reference(p.bearer, f"subagents.parents.{n}.bearer", env)
        for n, p in enumerate(config.subagents.parents)
    }
    known = {f"{p.role}:{p.id}" for p in config.a2a.principals} | {"operator"}
    for n, parent in enumerate(config.subagents.parents):
        if parent.principal not in known:
            raise ConfigError(
                f"subagents.parents.{n}.principal",
                f"{parent.principal!r} is not a configured principal (operator, or one of [[a2a.principals]])",
            )
    token = config.a2a.metrics.token
    metrics = resolve_reference(token, "a2a.metrics.token", env) if token else None
    if metrics is not None:  # a scraper holds only this token: it must not be a credential that does more
        named = {"a2a.bearer": operator} | {
            f"a2a.principals.{i}.bearer": principals[p.id] for i, p in enumerate(config.a2a.principals)
        }
        same = next(
            (k for k, v in named.items() if v is not None and v.get_secret_value() == metrics.get_secret_value()), None
        )
        if same is not None:
            raise ConfigError(
                "a2a.metrics.token",
                f"resolves to the same bearer as {same}: the scrape token must be a credential of its own",
            )
    secrets = Secrets(operator=operator, principals=principals, instances=instances, parents=parents, metrics=metrics)
    loaded = Loaded(config=config, secrets=secrets, source=source)
    check_listener(loaded)
    check_tls(config.a2a.tls)
    if config.a2a.device_grant.enabled and operator is None:
        raise ConfigError(
            "a2a.device_grant.enabled",
            "the device grant needs an operator credential (a2a.bearer): an operator approves every device",
        )
    return loaded


def check_listener(loaded: Loaded) -> None:
    """Refuse a non-loopback listener without TLS or without any credential (``ConfigError`` on ``a2a.listen``)."""
    a2a = loaded.config.a2a
    host, _ = split_host_port(a2a.listen)
    if is_loopback(host):
        return
    if a2a.tls is None:
        raise ConfigError("a2a.listen", f"{a2a.listen} is not loopback: configure [a2a.tls] cert and key")
    if not loaded.credentialed:
        raise ConfigError("a2a.listen", f"{a2a.listen} is not loopback: configure a2a.bearer or [[a2a.principals]]")


def check_tls(tls: TlsSection | None) -> None:
    """Refuse ``[a2a.tls]`` files the listener could not load, before anything starts: ``ConfigError`` on
    ``a2a.tls.cert`` / ``a2a.tls.key`` for a file that cannot be read (its OS reason), on ``a2a.tls`` for a pair
    that is not a PEM certificate chain and its unencrypted private key (``ssl.SSLContext.load_cert_chain``, what
    uvicorn's ``ssl_certfile``/``ssl_keyfile`` do; an encrypted key is refused here rather than prompted for)."""
    if tls is None:
        return
    import ssl

    for key, path in (("a2a.tls.cert", tls.cert), ("a2a.tls.key", tls.key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as err:
            raise ConfigError(key, f"cannot read {path}: {err.strerror or err}") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(tls.cert, tls.key, password=lambda: b"")
    except ssl.SSLError as err:
        raise ConfigError(
            "a2a.tls",
            f"{tls.cert} and {tls.key} are not a PEM certificate chain and its unencrypted "
            f"private key ({err.reason or err})",
        ) from None


def with_listen(loaded: Loaded, listen: str | None) -> Loaded:
    """``loaded`` with ``a2a.listen`` replaced (the ``--listen`` override), checked again; ``ConfigError`` on
    ``--listen`` for a value that is not HOST:PORT."""
    if listen is None:
        return loaded
    try:
        split_host_port(listen)
    except ValueError as err:
        raise ConfigError("--listen", str(err)) from None
    a2a = loaded.config.a2a.model_copy(update={"listen": listen})
    changed = loaded.model_copy(update={"config": loaded.config.model_copy(update={"a2a": a2a})})
    check_listener(changed)
    return changed


def load(path: str | Path, *, env: dict[str, str] | None = None) -> Loaded:
    """Read and validate a TOML file; raises ``ConfigError`` (``key`` empty for an unreadable/unparsable file)."""
    try:
        raw = read_regular(path, CONFIG_BYTES)
    except Unreadable as err:
        raise ConfigError("", f"{path} {err}") from None
    try:
        text = raw.decode("utf-8")  # TOML is UTF-8 whatever the locale
    except UnicodeDecodeError as err:
        raise ConfigError("", not_utf8(str(path), raw, err)) from None
    text = text.removeprefix("\ufeff")  # a byte order mark some editors write (decoded here, offsets stay the file's)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("", f"{path} is not valid TOML: {err}") from None
    return parse(data, source=str(path), env=env)


def default_config() -> Loaded:
    """The embedded default: the ``mock`` agent in the current directory, on loopback, no credentials."""
    return parse({}, source=None, env={})
