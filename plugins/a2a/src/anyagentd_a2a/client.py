"""The client side for people: sign in to a remote daemon with the device grant, then talk to it.

``anyagentd a2a login URL`` runs RFC 8628 from a terminal: it asks the daemon for a code pair, prints the user
code and the verification URI, polls the token endpoint at the interval (adding 5 s on ``slow_down``), and stores
the token in the user's config dir (``$XDG_CONFIG_HOME/anyagentd/credentials.json``, mode 0600, keyed by the
daemon's URL). ``anyagentd a2a send URL TEXT`` and ``anyagentd a2a status URL`` use that token (or ``--token`` /
``$ANYAGENTD_A2A_TOKEN``) with the official a2a-sdk client. :func:`send` and :func:`command` are also how the daemon
talks to other daemons (a child instance's message, a child's reports to its parent).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from .auth.device import GRANT_TYPE
from .command.envelope import COMMAND_URI, DATA_PART_KEY, RESULT_MEDIA_TYPE

CLIENT_ID = "anyagentd-cli"


class ClientError(Exception):
    """What the client tells a person in one line (no traceback)."""


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
    current[_key(url)] = {"access_token": body["access_token"], "scope": body.get("scope"),
                          "obtained_at": int(time.time())}  # fmt: skip
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(current, handle)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    return path


def login(url: str, *, scope: str = "user", say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
          sleep: Callable[[float], None] = time.sleep, timeout: float = 900) -> dict[str, Any]:  # fmt: skip
    """Run the device grant against ``url``; returns the token response. Raises :class:`ClientError`."""
    base = _key(url)
    with httpx.Client(timeout=30) as http:
        try:
            answer = http.post(f"{base}/oauth2/device_authorization", data={"client_id": CLIENT_ID, "scope": scope})
        except httpx.HTTPError as err:
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
        say(f"To sign in, have an operator approve the code {pair['user_code']} "
            f"(verification URI: {pair['verification_uri']}).")  # fmt: skip
        say(f"Waiting for approval (the code expires in {pair['expires_in']} s)...")
        interval = float(pair.get("interval", 5))
        deadline = time.monotonic() + min(timeout, float(pair["expires_in"]))
        while time.monotonic() < deadline:
            sleep(interval)
            try:
                polled = http.post(f"{base}/oauth2/token", data={"grant_type": GRANT_TYPE, "client_id": CLIENT_ID,
                                                                 "device_code": pair["device_code"]})  # fmt: skip
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
    headers = {"A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if command:
        headers["A2A-Extensions"] = COMMAND_URI
    return headers


def _said(err: BaseException) -> str:
    """An SDK error's first line (the SDK raises many kinds; a person or a log needs one line)."""
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
async def connect(url: str, token: str | None, *, command: bool = False,
                  timeout: float = 600.0) -> AsyncIterator[Any]:  # fmt: skip
    """The official a2a-sdk client (unary sends) of the agent at ``url``, built from its card, presenting
    ``token``; with ``command`` every request activates the command extension (the ``A2A-Extensions`` header).
    ``timeout``: seconds one request may take (10 s to connect). Raises :class:`ClientError` when the card cannot be
    read."""
    from a2a.client import ClientConfig, ClientFactory

    headers = _headers(token, command=command)
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=10)) as http:
        try:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(url)
        except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the person needs one line
            raise ClientError(f"cannot reach an A2A agent at {url}: {_said(err)}") from None
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


async def send(url: str, text: str, token: str | None, *, context_id: str | None = None,
               task_id: str | None = None, metadata: dict[str, Any] | None = None,
               immediately: bool = False) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """Send ``text`` as a message with the a2a-sdk client (unary; in the conversation ``context_id``, carrying
    ``metadata``); returns ``(state, task_json)`` of the task it ran as, once it ended or waits for input (with
    ``immediately``: as it stands at once). ``task_id`` continues that task: the answer to one that waits for
    input (A2A 1.0 "Multi-turn interactions", the message's ``taskId``). Raises :class:`ClientError`."""
    from a2a.types import Message, Part, Role
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Struct

    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    if task_id:
        message.task_id = task_id
    if metadata:
        message.metadata.CopyFrom(ParseDict(metadata, Struct()))
    async with connect(url, token) as client:
        try:
            payload = await _send_one(client, message, immediately=immediately)
        except Exception as err:  # noqa: BLE001
            said = _said(err)
            if _transport_failed(err):  # the daemon went away (or never answered): it refused nothing
                raise ClientError(f"lost the connection to {url} before its answer: {said}") from None
            hint = f"; sign in with `anyagentd a2a login {_key(url)}`" if "401" in said else ""
            raise ClientError(f"{url} refused the message: {said}{hint}") from None
    task = payload.get("task")
    if not task:
        raise ClientError("the agent answered no task")
    return task.get("status", {}).get("state", ""), task


def task_text(task: dict[str, Any]) -> str:
    """The text a person reads of a task: its artifacts' text parts, else its status message's."""
    texts = [p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []) if "text" in p]
    return "".join(texts) if texts else question_text(task)


def question_text(task: dict[str, Any]) -> str:
    """The text of a task's status message: what a task that waits for input asks (the request, its options)."""
    message = task.get("status", {}).get("message", {})
    return "".join(p.get("text", "") for p in message.get("parts", []) if "text" in p)


async def command_with(client: Any, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``op`` of the command extension on ``client`` (from :func:`connect` with ``command=True``): a message
    marked with the extension carrying the envelope ``{"agentd": {"op", **args}}``
    (``docs/commands.md#commands-and-ops``). Returns a ``message`` op's result document, or a ``task`` op's Task
    (proto3 JSON). Raises :class:`ClientError` (the op refused: the daemon's message)."""
    from a2a.types import Message, Part, Role
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value

    envelope = {DATA_PART_KEY: {"op": op, **(args or {})}}
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, extensions=[COMMAND_URI],
                      parts=[Part(data=ParseDict(envelope, Value()), media_type=RESULT_MEDIA_TYPE)])  # fmt: skip
    try:
        payload = await _send_one(client, message)
    except Exception as err:  # noqa: BLE001 - the SDK raises many kinds; the caller needs one line
        raise ClientError(f"{op} refused: {_said(err)}") from None
    if "task" in payload:
        return payload["task"]
    parts = payload.get("message", {}).get("parts", [])
    return next((p["data"] for p in parts if "data" in p), {})


async def command(url: str, op: str, token: str | None, args: dict[str, Any] | None = None, *,
                  timeout: float = 60.0) -> dict[str, Any]:  # fmt: skip
    """:func:`command_with` on a client of ``url`` made for this one op (``timeout`` seconds a request may take).
    Raises :class:`ClientError` (unreachable, or refused)."""
    async with connect(url, token, command=True, timeout=timeout) as client:
        try:
            return await command_with(client, op, args)
        except ClientError as err:
            hint = f"; sign in with `anyagentd a2a login {_key(url)}`" if "401" in str(err) else ""
            raise ClientError(f"{err}{hint}") from None


__all__ = ["ClientError", "command", "command_with", "connect", "credentials_path", "load_token", "login",
           "question_text", "send", "store_token", "task_text"]
