"""The console's routes: ``GET /console`` (a redirect to ``/console/``), ``GET /console/`` (``static/index.html``)
and ``GET /console/static/{path}`` (a file of ``static/``; nothing outside it, 404 otherwise); with the daemon's
front, ``GET /console/events`` (:mod:`.events`: the task changes the caller may see, pushed).

Every answer under ``/console`` carries :data:`SECURITY_HEADERS` — the files, the redirect, the push stream and its
refusals (401, 403, 429), and the router's own 404 and 405 alike: the routes are served behind one route
(:class:`ConsoleRoutes`) that matches every ``/console`` path and adds the headers an answer lacks. They are a
Content-Security-Policy that lets the page load only its own
scripts and styles and connect only to its own origin (no inline script, no frame, no form, no base URL),
``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``.

Caching: every file carries a strong ``ETag`` (a hash of its bytes) and a request whose ``If-None-Match`` names it
gets ``304 Not Modified`` without the body. ``index.html`` and the console's own modules are ``Cache-Control:
no-cache`` (a browser revalidates each time, so a daemon upgraded serves its own pages at once); the vendored
libraries (``static/vendor/``, changed only by a release) may be reused for :data:`VENDOR_MAX_AGE` seconds without
asking. A file is read again when its size or modification time changes (an editable install serves what is on
disk); its bytes and hash are kept in memory otherwise (the whole directory is a few tens of KiB).
"""

from __future__ import annotations

import hashlib
import mimetypes
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
from starlette._utils import get_route_path
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Match, NoMatchFound, Route, Router
from starlette.types import Message, Receive, Scope, Send

if TYPE_CHECKING:
    from ..front import Front
    from .events import TaskEvents

CONSOLE_PATH = "/console/"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
"""The console's Content-Security-Policy."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

VENDOR_MAX_AGE = 86400
"""How long a browser may reuse a vendored library (``static/vendor/``) without revalidating it."""

_cache: dict[tuple[str, ...], tuple[tuple[int, int], bytes, str]] = {}
"""Per file of ``static/``: (size, mtime_ns) when read, its bytes and its ETag."""

_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def console_url(public_url: str) -> str:
    """The console's URL under the daemon's ``public_url``."""
    return public_url.rstrip("/") + CONSOLE_PATH


def _static() -> Any:
    return resources.files(__package__) / "static"


def _read(parts: list[str], node: Any) -> tuple[bytes, str]:
    """The bytes of ``node`` (the file ``static/<parts…>``) and their ETag, from :data:`_cache` while the file's
    size and modification time are unchanged."""
    key = tuple(parts)
    try:
        st = node.stat()  # a pathlib.Path for a package on disk (every install the daemon ships as)
        version = (st.st_size, st.st_mtime_ns)
    except (AttributeError, OSError):
        version = None
    cached = _cache.get(key)
    if version is not None and cached is not None and cached[0] == version:
        return cached[1], cached[2]
    body = node.read_bytes()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    if version is not None:
        _cache[key] = (version, body, etag)
    return body, etag


def _file(parts: list[str], request: Request) -> Response:
    """The file ``static/<parts…>`` with :data:`SECURITY_HEADERS` and its ETag (304 when the request's
    ``If-None-Match`` names it), or 404 for a path that names no file there (an empty, ``.`` or ``..`` segment, or
    one starting with a dot, names none)."""
    if not parts or any(not p or p.startswith(".") or "\\" in p for p in parts):
        return _not_found()
    node = _static()
    for part in parts:
        node = node / part
    if not node.is_file():
        return _not_found()
    body, etag = _read(parts, node)
    headers = {**SECURITY_HEADERS, "ETag": etag}
    if parts[0] == "vendor":
        headers["Cache-Control"] = f"max-age={VENDOR_MAX_AGE}"
    if etag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}:
        return Response(status_code=304, headers=headers)
    suffix = "." + parts[-1].rpartition(".")[2] if "." in parts[-1] else ""
    media = _TYPES.get(suffix) or mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
    if media.startswith("text/"):
        media += "; charset=utf-8"
    return Response(body, headers={**headers, "Content-Type": media})


def _not_found() -> Response:
    return PlainTextResponse("Not found.\n", status_code=404, headers=SECURITY_HEADERS)


async def _index(request: Request) -> Response:
    return _file(["index.html"], request)


async def _asset(request: Request) -> Response:
    return _file(request.path_params["path"].split("/"), request)


async def _bare(request: Request) -> Response:
    # relative: under a2a.url's path prefix too (/prefix/console → /prefix/console/)
    return RedirectResponse("console/", status_code=308, headers=SECURITY_HEADERS)


class ConsoleRoutes(BaseRoute):
    """One route for every ``/console`` path (``/console`` and ``/console/…``): its own router serves ``routes``
    (its 404 and 405 included), and every answer's start gets each of :data:`SECURITY_HEADERS` it does not set
    itself (a vendored file's ``Cache-Control`` and the stream's ``no-store`` stay)."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        self.router = Router(routes=routes, redirect_slashes=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            path = get_route_path(scope)
            if path == CONSOLE_PATH.rstrip("/") or path.startswith(CONSOLE_PATH):
                return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        try:
            await self.router(scope, receive, send_secured)
        except HTTPException as refused:  # the router's 404 and 405, raised for the app's handler: answered here
            answer = PlainTextResponse(refused.detail, status_code=refused.status_code, headers=refused.headers)
            await answer(scope, receive, send_secured)


def console_routes(
    front: Front | None = None, events: TaskEvents | None = None, drained: Callable[[], Awaitable[None]] | None = None
) -> list[BaseRoute]:
    """The routes of the module docstring (one :class:`ConsoleRoutes`), and with ``front`` and ``events`` the push
    stream ``GET /console/events`` (:mod:`.events`; it ends when ``drained`` returns: the daemon drains)."""
    routes: list[BaseRoute] = [
        Route("/console", _bare, methods=["GET"]),
        Route(CONSOLE_PATH, _index, methods=["GET"]),
        Route(CONSOLE_PATH + "static/{path:path}", _asset, methods=["GET"]),
    ]
    if front is not None and events is not None:
        from .events import events_route

        routes.append(events_route(front, events, drained or _never, SECURITY_HEADERS))
    return [ConsoleRoutes(routes)]


async def _never() -> None:
    await anyio.Event().wait()


__all__ = [
    "CONSOLE_PATH",
    "ConsoleRoutes",
    "CSP",
    "SECURITY_HEADERS",
    "VENDOR_MAX_AGE",
    "console_routes",
    "console_url",
]
