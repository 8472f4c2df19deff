"""The client side for people: sign in to a remote daemon with the device grant, then talk to it.

``anyagentd a2a login URL`` runs RFC 8628 from a terminal: it asks the daemon for a code pair, prints the user
code and the verification URI, polls the token endpoint at the interval (adding 5 s on ``slow_down``), and stores
the token in the user's config dir (``$XDG_CONFIG_HOME/anyagentd/credentials.json``, mode 0600, keyed by the
daemon's URL). ``anyagentd a2a send URL TEXT`` uses that token (or ``--token`` / ``$ANYAGENTD_A2A_TOKEN``) with the
official a2a-sdk client. :func:`send` and :func:`command_with` are also how the daemon talks to other daemons (a
child instance's message, a child's reports to its parent).

Command ops (``status``, ``op``, ``runs``) and task listings (``tasks``) go through a :class:`Session`: the agent's
card read with the SDK's resolver, then JSON-RPC requests whose replies are parsed as the daemon wrote them. Not the
SDK's protobuf types, for two reasons: a DataPart is a protobuf ``Struct``, which keeps no key order and holds every
number as a double, so an op's result read through them changes its key order and prints ``"turns": 1.0``; and the
SDK's JSON of a ``Struct`` writes ``5.0`` for an argument given as ``5`` (the daemon takes that as 5 now, but an
older one refused it). Results still pass :func:`~.structjson.whole_numbers`: what the daemon read back from its
task store (GetTask, ListTasks) went through a ``Struct`` there.

``cacert`` everywhere: verify the daemon's TLS certificate against the CA certificates in that PEM file only (the
default: the system's trust store, as httpx has it). ``agent`` everywhere a daemon is talked to: that agent of the
daemon (:func:`agent_url`: its card and endpoint under ``URL/agents/ID``; ``GET URL/agents`` lists them), else the
daemon's default agent at ``URL`` itself. The daemon's URL stays what names it to a person and keys its stored token
(one device-grant issuer per daemon, whichever agent is talked to).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import ssl
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .auth.device import GRANT_TYPE
from .command.extension import COMMAND_URI, DATA_PART_KEY, RESULT_MEDIA_TYPE
from .structjson import whole_numbers

CLIENT_ID = "anyagentd-cli"


class ClientError(Exception):
    """What the client tells a person in one line (no traceback)."""


class UntrustedCertificate(ClientError):
    """The daemon's TLS certificate failed verification (against the ``cacert`` given, or the default trust store)."""


AGENT_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
"""What an agent id is (whole string): lowercase letters, digits and ``-``, 1 to 32 of them, not starting with ``-``."""


class BadAgentId(ClientError):
    """An agent id that cannot name an agent of a daemon (:data:`AGENT_ID`): refused before anything is sent."""


class AgentNotFound(ClientError):
    """The daemon at ``url`` serves no agent ``agent`` (its HTTP 404 ``AGENT_NOT_FOUND``); ``agents``: the ids it
    does serve, as it listed them (``None`` when it did not say). ``str()``: ``no agent 'x' at URL (its agents: a,
    b)``."""

    def __init__(self, url: str, agent: str, agents: list[str] | None = None) -> None:
        self.url, self.agent, self.agents = _key(url), agent, agents
        listed = f"its agents: {', '.join(agents)}" if agents else f"GET {_key(url)}/agents lists them"
        super().__init__(f"no agent {agent!r} at {_key(url)} ({listed})")


def agent_url(url: str, agent: str | None) -> str:
    """Where the daemon at ``url`` serves ``agent``: ``URL/agents/ID`` (its card under it at
    ``/.well-known/agent-card.json``, its JSON-RPC endpoint at it); ``url`` unchanged without ``agent`` (the
    daemon's default agent). Raises :class:`BadAgentId` for an id that is not one (:data:`AGENT_ID`)."""
    if agent is None:
        return url
    if not AGENT_ID.fullmatch(agent):
        raise BadAgentId(
            f"{agent!r} is not an agent id (lowercase letters, digits and '-', at most 32, not starting with '-'); "
            f"GET {_key(url)}/agents lists the daemon's agents"
        )
    return f"{_key(url)}/agents/{agent}"


_AGENT_PATH = re.compile(r"^(?P<prefix>.*)/agents/(?P<agent>[^/]+)/?$")


def split_agent(url: str, agent: str | None) -> tuple[str, str | None]:
    """``(daemon URL, agent)`` for a URL the user gave with ``--agent ID`` or not: an agent's own URL
    (``URL/agents/ID``, as ``GET /agents`` lists it) is its daemon's URL and that agent, so the token, the messages
    and the listing of agents use the daemon's URL. Raises :class:`ClientError` when the URL names one agent and
    ``agent`` another."""
    parts = urlsplit(url)
    found = _AGENT_PATH.match(parts.path)
    if found is None:
        return url, agent
    named = found["agent"]
    if agent is not None and agent != named:
        raise ClientError(
            f"{url} is agent {named!r}'s URL and --agent names {agent!r}: give the daemon's URL with --agent, "
            "or the agent's URL alone"
        )
    return urlunsplit((parts.scheme, parts.netloc, found["prefix"], "", "")), named


def _agent_missing(url: str, agent: str | None, body: Any) -> AgentNotFound | None:
    """The :class:`AgentNotFound` a daemon's 404 ``body`` says, when it says ``AGENT_NOT_FOUND``: a GET's
    ``{"error": {"reason", "agent", "agents"}}`` or a POST's JSON-RPC error whose ``ErrorInfo`` has that reason
    (``metadata.agent``; no list of agents in it). ``None`` for any other body."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    if error.get("reason") == "AGENT_NOT_FOUND":
        listed = error.get("agents")
        agents = [str(a) for a in listed] if isinstance(listed, list) else None
        return AgentNotFound(url, str(error.get("agent") or agent), agents)
    data = error.get("data")
    details = data if isinstance(data, list) else [data]
    for detail in details:
        if isinstance(detail, dict) and detail.get("reason") == "AGENT_NOT_FOUND":
            metadata = detail.get("metadata")
            named = metadata.get("agent") if isinstance(metadata, dict) else None
            return AgentNotFound(url, str(named or agent))
    return None


def _answered_missing(
    url: str, agent: str | None, err: BaseException | None, *, card: bool = True
) -> AgentNotFound | None:
    """The :class:`AgentNotFound` an HTTP 404 wrapped in ``err`` (as the SDK and httpx chain them) says, if any: one
    whose body says ``AGENT_NOT_FOUND``, or, for the ``card`` of ``agent``, any 404 (a daemon that serves agents
    under ``/agents`` only since it serves several answers the path of no agent so; one from before, not)."""
    status = _found(err, httpx.HTTPStatusError)
    if agent is None or not isinstance(status, httpx.HTTPStatusError) or status.response.status_code != 404:
        return None
    try:
        body = status.response.json()
    except (ValueError, httpx.HTTPError):
        body = None
    missing = _agent_missing(url, agent, body)
    return missing if missing is not None or not card else AgentNotFound(url, agent)


async def _listed_agents(http: httpx.AsyncClient, url: str) -> list[str] | None:
    """The agent ids ``GET URL/agents`` lists; ``None`` when it cannot be read (best effort, for a message)."""
    try:
        listed = (await http.get(f"{_key(url)}/agents", timeout=10)).json().get("agents")
        return [str(a["id"]) for a in listed if isinstance(a, dict) and a.get("id")] or None
    except Exception:  # noqa: BLE001 - only a message's detail
        return None


async def _with_agents(http: httpx.AsyncClient, missing: AgentNotFound) -> AgentNotFound:
    """``missing`` naming the daemon's agents (a POST's 404 does not list them: ``GET URL/agents`` does)."""
    if missing.agents:
        return missing
    return AgentNotFound(missing.url, missing.agent, await _listed_agents(http, missing.url))


class OpRefused(ClientError):
    """A JSON-RPC error the daemon answered to ``what`` (an op's name, or a method): its ``code`` and ``message``,
    the ``reason`` of its google.rpc ``ErrorInfo`` and the ``field: description`` of each ``BadRequest`` field
    violation. ``str()`` is the one line for a person: ``what refused: CODE REASON: message (field: description)``."""

    def __init__(self, what: str, error: dict[str, Any], hint: str = "") -> None:
        self.code = error.get("code")
        self.message = str(error.get("message") or "")
        data = error.get("data")
        details = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
        self.reason = next(
            (
                str(d.get("reason"))
                for d in details
                if str(d.get("@type", "")).endswith(".ErrorInfo") and d.get("reason")
            ),
            None,
        )
        self.violations = [
            f"{v.get('field')}: {v.get('description')}"
            for d in details
            if str(d.get("@type", "")).endswith(".BadRequest")
            for v in d.get("fieldViolations") or []
            if isinstance(v, dict)
        ]
        line = f"{what} refused: {self.code}" + (f" {self.reason}" if self.reason else "") + f": {self.message}"
        if self.violations:
            line += f" ({'; '.join(self.violations)})"
        super().__init__(line + hint)


def tls_verify(cacert: str | Path | None) -> ssl.SSLContext | bool:
    """What httpx verifies a daemon's certificate with: ``True`` (the default trust store) without ``cacert``, else
    a context trusting only the CA certificates in that PEM file. Raises :class:`ClientError` when the file cannot be
    read or holds no certificate."""
    if cacert is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(cacert))
    except OSError as err:  # ssl.SSLError included: not PEM, no certificate in it
        raise ClientError(f"cannot use the CA file {cacert}: {err.strerror or err}") from None


def _found(err: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """``err`` or the first exception it wraps (causes and contexts, as the SDK and httpx chain them) of ``kind``."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, kind):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def _unreachable(url: str, err: BaseException, agent: str | None = None) -> ClientError:
    """The one line for a daemon whose card (of ``agent``, else its default agent's) could not be read: an untrusted
    certificate says so, naming why; a daemon that serves no such agent says so (:class:`AgentNotFound`)."""
    missing = _answered_missing(url, agent, err)
    if missing is not None:
        return missing
    cert = _found(err, ssl.SSLCertVerificationError)
    if cert is not None:
        why = getattr(cert, "verify_message", "") or _said(cert)
        return UntrustedCertificate(f"cannot reach {_key(url)}: its TLS certificate is not trusted ({why})")
    transport = _found(err, httpx.TransportError)
    if transport is not None:  # refused, unresolvable, timed out: the SDK's wrapping adds nothing for a person
        return ClientError(f"cannot reach {_key(url)}: {_said(transport) or type(transport).__name__}")
    return ClientError(f"cannot reach an A2A agent at {agent_url(url, agent)}: {_said(err)}")


def credentials_path(env: dict[str, str] | None = None) -> Path:
    """Where tokens are kept: ``$XDG_CONFIG_HOME/anyagentd/credentials.json`` (``~/.config`` by default)."""
    env = dict(os.environ if env is None else env)
    base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", str(Path.home()))) / ".config")
    return base / "anyagentd" / "credentials.json"


def _key(url: str) -> str:
    return url.rstrip("/")


def load_token(url: str, path: Path | None = None) -> str | None:
    path = path or credentials_path()
    try:
        return json.loads(path.read_text(encoding="utf-8")).get(_key(url), {}).get("access_token")
    except (OSError, ValueError):
        return None


def store_token(url: str, body: dict[str, Any], path: Path | None = None) -> Path:
    """Keep ``body``'s token for ``url`` in a file only the user can read (0600, in a 0700 directory)."""
    path = path or credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        current = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = {}
    current[_key(url)] = {
        "access_token": body["access_token"],
        "scope": body.get("scope"),
        "obtained_at": int(time.time()),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(current, handle)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def login(
    url: str,
    *,
    scope: str = "user",
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
    sleep: Callable[[float], None] = time.sleep,
    timeout: float = 900,
    cacert: str | Path | None = None,
) -> dict[str, Any]:
    """Run the device grant against ``url`` (its certificate verified against ``cacert``); returns the token
    response. Raises :class:`ClientError`."""
    base = _key(url)
    with httpx.Client(timeout=30, verify=tls_verify(cacert)) as http:
        try:
            answer = http.post(f"{base}/oauth2/device_authorization", data={"client_id": CLIENT_ID, "scope": scope})
        except httpx.HTTPError as err:
            if _found(err, ssl.SSLCertVerificationError):
                raise _unreachable(url, err) from None
            raise ClientError(f"cannot reach {base}: {err}") from None
        if answer.status_code != 200:
            raise ClientError(f"{base} refused the sign-in: {_oauth_error(answer)}")
        try:
            pair = answer.json()
        except ValueError:
            pair = None
        needed = {"device_code", "user_code", "verification_uri", "expires_in"}
        if not isinstance(pair, dict) or not needed <= set(pair):
            raise ClientError(f"{base} does not serve the device grant (no code pair in its answer)")
        say(
            f"To sign in, have an operator approve the code {pair['user_code']} "
            f"(verification URI: {pair['verification_uri']})."
        )
        say(f"Waiting for approval (the code expires in {pair['expires_in']} s)...")
        interval = float(pair.get("interval", 5))
        deadline = time.monotonic() + min(timeout, float(pair["expires_in"]))
        while time.monotonic() < deadline:
            sleep(interval)
            try:
                polled = http.post(
                    f"{base}/oauth2/token",
                    data={"grant_type": GRANT_TYPE, "client_id": CLIENT_ID, "device_code": pair["device_code"]},
                )
            except httpx.HTTPError as err:
                raise ClientError(f"lost {base} while waiting for approval: {err}") from None
            if polled.status_code == 200:
                body = polled.json()
                if not isinstance(body, dict) or not body.get("access_token"):
                    raise ClientError(f"{base} answered no token")
                return body
            error = _oauth_code(polled)
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += 5
                continue
            raise ClientError(f"sign-in failed: {_oauth_error(polled)}")
    raise ClientError("sign-in timed out: nobody approved the code")


def _oauth_code(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", ""))
    except ValueError:
        return ""


def _oauth_error(response: httpx.Response) -> str:
    try:
        body = response.json()
        return f"{body.get('error')}: {body.get('error_description', '')}".strip(": ")
    except ValueError:
        return f"HTTP {response.status_code}"


def _headers(token: str | None, *, command: bool = False) -> dict[str, str]:
    """The request headers: ``A2A-Version``, the bearer ``token`` and, with ``command``, the extension. Raises
    :class:`ClientError` for a token no ``Authorization`` header can carry (RFC 6750 §2.1: visible ASCII, no
    spaces), before anything is sent."""
    headers = {"A2A-Version": "1.0"}
    if token:
        if not all("!" <= c <= "~" for c in token):
            raise ClientError(
                "the token holds a character a bearer token cannot (a space, a control or non-ASCII character: "
                "RFC 6750 allows visible ASCII only); check --token or ANYAGENTD_A2A_TOKEN"
            )
        headers["Authorization"] = f"Bearer {token}"
    if command:
        headers["A2A-Extensions"] = COMMAND_URI
    return headers


def _said(err: BaseException) -> str:
    """An SDK error's first line (the SDK raises many kinds; a person or a log needs one line). Where the daemon
    refused the request with an HTTP status and a JSON-RPC error body (the front's refusals: 401 -31401, 429
    -31429, …), that error's ``code: message``, as the other subcommands print it: the SDK keeps only the status."""
    from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP

    code = JSON_RPC_ERROR_CODE_MAP.get(type(err))  # a JSON-RPC error in an HTTP 200, raised as the SDK's class
    if code is not None:
        return f"{code}: {(str(err).strip().splitlines() or [type(err).__name__])[0]}"
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, httpx.HTTPStatusError):
            try:
                error = seen.response.json().get("error")
            except (ValueError, AttributeError, httpx.HTTPError):
                error = None
            if isinstance(error, dict) and "code" in error and error.get("message"):
                return f"{error['code']}: {error['message']}"
            break
        seen = seen.__cause__ or seen.__context__
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def _transport_failed(err: BaseException) -> bool:
    """Whether ``err`` (or what it wraps: the SDK re-raises httpx's errors as its own) is a failure of the
    connection itself (refused, reset, closed mid-answer, timed out) rather than an answer."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, httpx.TransportError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@asynccontextmanager
async def connect(
    url: str,
    token: str | None,
    *,
    command: bool = False,
    timeout: float = 600.0,
    cacert: str | Path | None = None,
    agent: str | None = None,
) -> AsyncIterator[Any]:
    """The official a2a-sdk client (unary sends) of the agent at ``url`` (its ``agent``: :func:`agent_url`), built
    from its card with the SDK's stock ``ClientFactory.create_from_url``, presenting ``token``; with ``command``
    every request activates the command extension (the ``A2A-Extensions`` header). ``timeout``: seconds one request
    may take (10 s to connect); ``cacert``: see :func:`tls_verify`. Raises :class:`ClientError` when the card cannot
    be read (:class:`AgentNotFound`: the daemon serves no ``agent``)."""
    from a2a.client import ClientConfig, ClientFactory

    target = agent_url(url, agent)
    headers = _headers(token, command=command)
    async with httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(timeout, connect=10), verify=tls_verify(cacert)
    ) as http:
        try:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(target)
        except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the person needs one line
            raise _unreachable(url, err, agent) from None
        yield client


async def _send_one(client: Any, message: Any, *, immediately: bool = False) -> dict[str, Any]:
    """Send ``message`` (an SDK ``Message``) and return the last response as proto3 JSON (``{"task": …}`` or
    ``{"message": …}``); ``immediately``: the agent answers at once with the task as it stands
    (``returnImmediately``) instead of when it ends. SDK errors propagate."""
    from a2a.types import SendMessageConfiguration, SendMessageRequest
    from google.protobuf.json_format import MessageToDict

    request = SendMessageRequest(message=message)
    if immediately:
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    responses = [r async for r in client.send_message(request)]
    return MessageToDict(responses[-1]) if responses else {}


async def send(
    url: str,
    text: str,
    token: str | None,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    immediately: bool = False,
    cacert: str | Path | None = None,
    poll: float = 1.0,
    agent: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Send ``text`` as a message with the a2a-sdk client (unary; in the conversation ``context_id``, carrying
    ``metadata``); returns ``(state, task_json)`` of the task it ran as, once it ended or waits for input (with
    ``immediately``: as it stands at once). ``task_id`` continues that task: the answer to one that waits for
    input (A2A 1.0 "Multi-turn interactions", the message's ``taskId``). A reply whose task has not stopped yet
    (:data:`STOPPED`; a daemon answering an ``ask`` step's answer with the task as it stood) is followed with
    GetTask every ``poll`` seconds until it has. ``cacert``: see :func:`tls_verify`; ``agent``: that agent of the
    daemon (:func:`agent_url`). Raises :class:`ClientError`."""
    import anyio
    from a2a.types import GetTaskRequest, Message, Part, Role
    from google.protobuf.json_format import MessageToDict, ParseDict
    from google.protobuf.struct_pb2 import Struct

    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    if task_id:
        message.task_id = task_id
    if metadata:
        message.metadata.CopyFrom(ParseDict(metadata, Struct()))
    async with connect(url, token, cacert=cacert, agent=agent) as client:
        try:
            payload = await _send_one(client, message, immediately=immediately)
        except Exception as err:  # noqa: BLE001
            missing = _answered_missing(url, agent, err, card=False)
            if missing is not None:  # the agent went away between its card and the message
                async with httpx.AsyncClient(headers=_headers(token), verify=tls_verify(cacert)) as http:
                    raise await _with_agents(http, missing) from None
            said = _said(err)
            if _transport_failed(err):  # the daemon went away (or never answered): it refused nothing
                raise ClientError(f"lost the connection to {url} before its answer: {said}") from None
            hint = f"; sign in with `anyagentd a2a login {_key(url)}`" if "401" in said else ""
            raise ClientError(f"{url} refused the message: {said}{hint}") from None
        task = payload.get("task")
        if not task:
            raise ClientError("the agent answered no task")
        while not immediately and task_state(task) not in STOPPED and task.get("id"):
            await anyio.sleep(poll)
            try:
                task = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
            except Exception as err:  # noqa: BLE001
                raise ClientError(f"lost task {task['id']} at {url} while it ran: {_said(err)}") from None
    return task_state(task), task


def _readable(part: dict[str, Any]) -> bool:
    """Whether a part (proto3 JSON) is text for a person: a text part of no media type or a ``text/*`` one, not the
    wire's JSON carried as text (``application/vnd.anyagent.*+json``)."""
    media = str(part.get("mediaType") or "")
    return "text" in part and (not media or media.startswith("text/"))


def task_text(task: dict[str, Any]) -> str:
    """The text a person reads of a task: its artifacts' text parts, else its status message's."""
    texts = [p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []) if _readable(p)]
    return "".join(texts) if texts else question_text(task)


def question_text(task: dict[str, Any]) -> str:
    """The text of a task's status message: what a task that waits for input asks (the request, its options)."""
    message = task.get("status", {}).get("message", {})
    return "".join(p.get("text", "") for p in message.get("parts", []) if _readable(p))


async def command_with(client: Any, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``op`` of the command extension on ``client`` (from :func:`connect` with ``command=True``): a message
    marked with the extension carrying the envelope ``{"agentd": {"op", **args}}``
    (``docs/commands.md#commands-and-ops``). Returns a ``message`` op's result document, or a ``task`` op's Task
    (proto3 JSON). Raises :class:`ClientError` (the op refused: the daemon's message)."""
    from a2a.types import Message, Part, Role
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value

    envelope = {DATA_PART_KEY: {"op": op, **(args or {})}}
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        extensions=[COMMAND_URI],
        parts=[Part(data=ParseDict(envelope, Value()), media_type=RESULT_MEDIA_TYPE)],
    )
    try:
        payload = await _send_one(client, message)
    except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the caller needs one line
        raise ClientError(f"{op} refused: {_said(err)}") from None
    if "task" in payload:
        return payload["task"]
    parts = payload.get("message", {}).get("parts", [])
    return next((p["data"] for p in parts if "data" in p), {})


async def command(
    url: str,
    op: str,
    token: str | None,
    args: dict[str, Any] | None = None,
    *,
    timeout: float = 60.0,
    cacert: str | Path | None = None,
    agent: str | None = None,
) -> dict[str, Any]:
    """:func:`run_op` for callers that want one document: a ``message`` op's result, or a ``task`` op's Task
    (proto3 JSON, as last read). ``timeout``: seconds a message op may take. Raises :class:`ClientError`
    (unreachable, or refused: :class:`OpRefused`)."""
    reply = await run_op(url, op, token, args, cacert=cacert, timeout=timeout, agent=agent)
    return reply.result if reply.task is None else reply.task


def _stopped() -> frozenset[str]:
    from .tasks.state import PAUSED, TERMINAL, name  # the one owner of the task-state sets

    return frozenset(name(state) for state in TERMINAL | PAUSED)


STOPPED = _stopped()
"""Task states (proto3 JSON names) a follower stops at: the terminal ones, and those that wait for the caller
(input, auth): :data:`.tasks.state.TERMINAL` | :data:`.tasks.state.PAUSED`."""


def task_state(task: dict[str, Any]) -> str:
    """A task's (proto3 JSON) state name, ``TASK_STATE_…`` (empty when it has none)."""
    return str(task.get("status", {}).get("state", ""))


def task_result(task: dict[str, Any]) -> Any:
    """A task op's result: the data of its ``<taskId>.result`` artifact (``None`` without one, as for an op whose
    result schema is ``false``)."""
    name = f"{task.get('id')}.result"
    for artifact in task.get("artifacts") or []:
        if name in (artifact.get("artifactId"), artifact.get("name")):
            return next((p["data"] for p in artifact.get("parts") or [] if "data" in p), None)
    return None


class OpReply:
    """What an op answered: ``kind`` ``"message"`` (``result``: its result document, ``task`` None) or ``"task"``
    (``task``: the Task as last read, once it stopped — see :data:`STOPPED`; ``result``: :func:`task_result` of
    it). Both with :func:`whole_numbers` applied, keys in the daemon's order."""

    def __init__(self, kind: str, result: Any, task: dict[str, Any] | None = None) -> None:
        self.kind, self.result, self.task = kind, result, task

    @property
    def state(self) -> str:
        """The task's state name (``TASK_STATE_…``); ``""`` for a message op."""
        return task_state(self.task) if self.task is not None else ""


class Session:
    """JSON-RPC 2.0 requests to one A2A agent (the daemon at ``url``, its ``agent`` or its default one): ``http``
    (headers, credential and TLS verification set) posting to ``endpoint`` (the JSON-RPC interface its card
    names). Replies are parsed as the agent wrote them (key order kept, ``1`` an int); a JSON-RPC error is
    :class:`OpRefused` (:class:`AgentNotFound` when the daemon serves no ``agent``). Made by :func:`session`."""

    def __init__(
        self, url: str, http: httpx.AsyncClient, endpoint: str, ops: dict[str, str], agent: str | None = None
    ) -> None:
        self.url, self.http, self.endpoint, self.agent = url, http, endpoint, agent
        self.ops = ops
        """What the card's command extension lists: op → reply kind (``message`` / ``task``)."""

    async def call(
        self, method: str, params: dict[str, Any], *, what: str | None = None, unbounded: bool = False
    ) -> dict[str, Any]:
        """``method`` with ``params``; returns the reply's ``result``. ``what``: how a refusal names the request
        (default: the method). ``unbounded``: wait for the reply as long as it takes (else the session's
        timeout). Raises :class:`OpRefused` (a JSON-RPC error) or :class:`ClientError` (lost connection, not
        JSON-RPC)."""
        what = what or method
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        extra: dict[str, Any] = {"timeout": httpx.Timeout(None, connect=10)} if unbounded else {}
        try:
            response = await self.http.post(self.endpoint, json=body, **extra)
        except httpx.TransportError as err:
            if isinstance(err, (httpx.ConnectError, httpx.ConnectTimeout)):
                raise _unreachable(self.url, err) from None
            raise ClientError(
                f"lost the connection to {_key(self.url)} before its answer to {what}: {_said(err)}"
            ) from None
        try:
            reply = response.json()
        except ValueError:
            reply = None
        missing = _agent_missing(self.url, self.agent, reply) if response.status_code == 404 and self.agent else None
        if missing is not None:
            raise await _with_agents(self.http, missing)
        if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
            unauthenticated = response.status_code == 401 or reply["error"].get("code") == -31401
            hint = f"; sign in with `anyagentd a2a login {_key(self.url)}`" if unauthenticated else ""
            raise OpRefused(what, reply["error"], hint)
        if response.status_code != 200 or not isinstance(reply, dict) or not isinstance(reply.get("result"), dict):
            raise ClientError(
                f"{what} refused: {_key(self.url)} answered HTTP {response.status_code} "
                f"{response.reason_phrase}, not a JSON-RPC result"
            )
        return reply["result"]

    async def op(self, op: str, args: dict[str, Any] | None = None, *, poll: float = 1.0) -> OpReply:
        """Run ``op`` of the command extension with ``args``: one message marked with the extension (the session
        activates it in every request's ``A2A-Extensions``) holding the DataPart ``{"agentd": {"op", **args}}``.
        A ``message`` op's reply may take the session's timeout; a ``task`` op's (as the card lists it) as long
        as the task takes to stop: the unary send answers when it ends or needs input, and a task that is still
        running in that answer is read again (GetTask every ``poll`` seconds) until it stops (:data:`STOPPED`).
        Returns an :class:`OpReply`. Raises :class:`OpRefused` (the op refused) or :class:`ClientError`."""
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "extensions": [COMMAND_URI],
            "parts": [{"data": {DATA_PART_KEY: {"op": op, **(args or {})}}, "mediaType": RESULT_MEDIA_TYPE}],
        }
        result = await self.call("SendMessage", {"message": message}, what=op, unbounded=self.ops.get(op) == "task")
        if isinstance(result.get("message"), dict):
            parts = result["message"].get("parts") or []
            return OpReply("message", whole_numbers(next((p["data"] for p in parts if "data" in p), None)))
        task = result.get("task")
        if not isinstance(task, dict) or not task.get("id"):
            raise ClientError(f"{op}: {_key(self.url)} answered neither a message nor a task")
        import anyio

        while task_state(task) not in STOPPED:
            await anyio.sleep(poll)
            try:
                task = await self.call("GetTask", {"id": task["id"]}, what=f"{op} (GetTask {task['id']})")
            except OpRefused:
                raise
            except ClientError as err:  # the daemon went away (a drain answers with the task as it stands)
                shown = task_state(task).removeprefix("TASK_STATE_").lower() or "open"
                listing = f"anyagentd a2a tasks {shlex.quote(_key(self.url))}" + _agent_option(self.agent)
                raise ClientError(
                    f"{op}: task {task['id']} was still {shown} when {_key(self.url)} stopped answering ({err}); "
                    f"the daemon keeps it: read it with `{listing}` once the daemon is back"
                ) from None
        task = whole_numbers(task)
        return OpReply("task", task_result(task), task)

    async def tasks(
        self, *, context_id: str | None = None, state: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """ListTasks: the caller's tasks (the operator's: everyone's), newest first as the agent orders them, at
        most ``limit`` (following ``nextPageToken``), in ``context_id`` and in ``state`` (``TASK_STATE_…``) when
        given; without history or artifacts. Each task as the agent wrote it, :func:`whole_numbers` applied."""
        found: list[dict[str, Any]] = []
        token = ""
        while len(found) < limit:
            params: dict[str, Any] = {
                "pageSize": min(limit - len(found), 100),
                "historyLength": 0,
                "includeArtifacts": False,
            }
            if context_id:
                params["contextId"] = context_id
            if state:
                params["status"] = state
            if token:
                params["pageToken"] = token
            page = await self.call("ListTasks", params)
            found += [t for t in page.get("tasks") or [] if isinstance(t, dict)]
            token = str(page.get("nextPageToken") or "")
            if not token or not page.get("tasks"):
                break
        return whole_numbers(found[:limit])


def _card_ops(card: Any) -> dict[str, str]:
    """The ``ops`` (op → reply kind) the card's command extension lists."""
    from google.protobuf.json_format import MessageToDict

    for extension in card.capabilities.extensions:
        if extension.uri == COMMAND_URI:
            listed = MessageToDict(extension.params).get("ops") or []
            return {str(o.get("op")): str(o.get("reply")) for o in listed if isinstance(o, dict)}
    return {}


@asynccontextmanager
async def session(
    url: str,
    token: str | None,
    *,
    cacert: str | Path | None = None,
    timeout: float = 60.0,
    agent: str | None = None,
) -> AsyncIterator[Session]:
    """A :class:`Session` with the agent at ``url`` (its ``agent``: :func:`agent_url`; else its default agent): its
    card read with the a2a-sdk's resolver, every request carrying ``token``, ``A2A-Version: 1.0`` and the command
    extension's activation (``A2A-Extensions``), the certificate verified per ``cacert`` (:func:`tls_verify`);
    ``timeout``: seconds a request may take by default (10 s to connect). Raises :class:`ClientError` when the card
    cannot be read (:class:`AgentNotFound`: the daemon serves no ``agent``) or names no JSON-RPC interface."""
    from a2a.client import A2ACardResolver

    target = agent_url(url, agent)
    headers = _headers(token, command=True)
    async with httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(timeout, connect=10), verify=tls_verify(cacert)
    ) as http:
        try:
            card = await A2ACardResolver(http, target).get_agent_card()
        except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the person needs one line
            raise _unreachable(url, err, agent) from None
        endpoint = next((i.url for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"), "")
        if not endpoint:
            raise ClientError(f"{_key(target)} serves no JSON-RPC interface (its agent card lists none)")
        yield Session(url, http, endpoint, _card_ops(card), agent)


async def run_op(
    url: str,
    op: str,
    token: str | None,
    args: dict[str, Any] | None = None,
    *,
    cacert: str | Path | None = None,
    timeout: float = 60.0,
    agent: str | None = None,
) -> OpReply:
    """:meth:`Session.op` on a :func:`session` made for this one op (of ``agent``, else the daemon's default
    agent). Raises :class:`ClientError` (unreachable, or refused: :class:`OpRefused`)."""
    async with session(url, token, cacert=cacert, timeout=timeout, agent=agent) as daemon:
        return await daemon.op(op, args)


async def list_tasks(
    url: str,
    token: str | None,
    *,
    context_id: str | None = None,
    state: str | None = None,
    limit: int = 50,
    cacert: str | Path | None = None,
    agent: str | None = None,
) -> list[dict[str, Any]]:
    """:meth:`Session.tasks` on a :func:`session` of ``url`` (its ``agent``'s tasks, else its default agent's).
    Raises :class:`ClientError`."""
    async with session(url, token, cacert=cacert, agent=agent) as daemon:
        return await daemon.tasks(context_id=context_id, state=state, limit=limit)


async def list_runs(
    url: str, token: str | None, *, cacert: str | Path | None = None, agent: str | None = None
) -> list[dict[str, Any]]:
    """The workflow runs the caller may see (the operator: every run): the ``workflow.status`` op (of ``agent``,
    else the daemon's default agent) without ``run``, each ``{run, workflow, status, output, error}``. Raises
    :class:`ClientError`."""
    reply = await run_op(url, "workflow.status", token, cacert=cacert, agent=agent)
    runs = reply.result.get("runs") if isinstance(reply.result, dict) else None
    return runs if isinstance(runs, list) else []


_WORDS = {"AllowOnce": "allow", "AllowAlways": "always", "DenyOnce": "deny", "DenyAlways": "deny"}


def open_request(task: dict[str, Any]) -> dict[str, Any] | None:
    """The request (the wire's ``Request`` JSON, ``{"Permission": …}`` or ``{"Question": …}``) a task that waits for
    input holds: a conversation's ``RequestOpened`` event (the wire's JSON in a text part of media type
    ``application/vnd.anyagent.event+json``, or in a DataPart from a daemon before that), or a workflow ``ask``
    step's ``{"request": …}`` DataPart — in its status message, or, for a task that waits for input with a status
    message holding none (after an answer that was not one, or was refused: the daemon then says why, in words,
    the request still open), in the newest agent message of its history that holds one (the status message that
    asked, which the next status moved there). ``None`` when it holds none."""
    found = _request_in(task.get("status", {}).get("message", {}))
    if found is not None or task_state(task) != "TASK_STATE_INPUT_REQUIRED":
        return found
    for message in reversed(task.get("history") or []):
        if message.get("role") == "ROLE_AGENT" and (found := _request_in(message)) is not None:
            return found
    return None


def _request_in(message: dict[str, Any]) -> dict[str, Any] | None:
    """The request one message (proto3 JSON) holds, as :func:`open_request` reads it; ``None`` when none."""
    for part in message.get("parts") or []:
        data = part.get("data")
        if "text" in part and str(part.get("mediaType", "")).startswith("application/vnd.anyagent."):
            try:
                data = json.loads(part["text"])
            except ValueError:
                continue
        if not isinstance(data, dict):
            continue
        request = (data.get("kind") or {}).get("RequestOpened") if isinstance(data.get("kind"), dict) else None
        request = request or data.get("request")
        if isinstance(request, dict) and ({"Permission", "Question"} & set(request)):
            return request
    return None


def _agent_option(agent: str | None) -> str:
    """`` --agent ID`` for a command a person pastes to talk to ``agent`` again; ``""`` without one."""
    return f" --agent {shlex.quote(agent)}" if agent else ""


def answer_hint(url: str, task: dict[str, Any], *, extra: str = "", agent: str | None = None) -> str:
    """One line for a person whose task waits for input: which answers it takes and the command that gives one,
    ready to paste: ``answer (allow, always or deny): anyagentd a2a send URL allow --task-id ID`` (`` --agent ID``
    for a task of that ``agent``) + ``extra`` (options to keep, e.g. ``--cacert FILE``; already shell-quoted). The
    words are the request's: a permission's offered allow/always/deny, a question's choice labels (and free text
    where allowed)."""

    def command(answer: str) -> str:
        task_id, kept = shlex.quote(str(task.get("id"))), _agent_option(agent) + extra
        return f"anyagentd a2a send {shlex.quote(_key(url))} {answer} --task-id {task_id}{kept}"

    request = open_request(task) or {}
    if "Permission" in request:
        offered = list(dict.fromkeys(_WORDS[o] for o in request["Permission"].get("options") or [] if o in _WORDS))
        offered = sorted(offered, key=["allow", "always", "deny"].index) or ["allow", "always", "deny"]
        return f"answer ({_or(offered)}): " + command(offered[0])
    questions = (request.get("Question") or {}).get("questions") or [] if "Question" in request else []
    if len(questions) > 1:
        return (
            f"task {task.get('id')} asks {len(questions)} questions at once: answer it with a message holding "
            'a DataPart with the Answer JSON ({"Question": [...]}); `anyagentd a2a send` sends one text'
        )
    if questions:
        labels = [str(c.get("label")) for c in questions[0].get("choices") or [] if c.get("label")]
        free = bool(questions[0].get("allows_free_text"))
        words = labels + (["free text"] if free else []) or ["an answer"]
        first = labels[0] if labels else "your answer"
        return f"answer ({_or(words)}): " + command(shlex.quote(first))
    return "answer with: " + command(shlex.quote("your answer"))


def _or(words: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" or {words[-1]}"


__all__ = [
    "AGENT_ID",
    "STOPPED",
    "AgentNotFound",
    "BadAgentId",
    "ClientError",
    "OpRefused",
    "OpReply",
    "Session",
    "UntrustedCertificate",
    "agent_url",
    "answer_hint",
    "command",
    "command_with",
    "connect",
    "credentials_path",
    "list_runs",
    "list_tasks",
    "load_token",
    "login",
    "open_request",
    "question_text",
    "run_op",
    "send",
    "session",
    "store_token",
    "task_result",
    "task_state",
    "task_text",
    "tls_verify",
]
