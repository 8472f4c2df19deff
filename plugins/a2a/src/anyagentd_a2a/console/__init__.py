"""The web console: static pages the daemon serves at ``/console/`` (:mod:`.routes`), shipped in this package
(``static/``: no build step, the front-end libraries vendored with their licences, ``static/vendor/VENDORED.md``).

The pages hold no secret and talk to the daemon only through its own same-origin A2A endpoints (``GET /agents``,
``ListTasks``, ``GetTask``, ``SubscribeToTask``, ``SendMessage`` — an answer with ``taskId``, a command op), with
the bearer the person pasted, kept in the page's session storage; so who sees what is exactly what A2A and the
command extension allow that principal. The console's one route of its own reads only what ``ListTasks`` would
show the same principal: ``GET /console/events`` (:mod:`.events`), the task changes pushed as they happen.
"""

from __future__ import annotations

from .events import TaskEvents
from .routes import CONSOLE_PATH, console_routes, console_url

__all__ = ["CONSOLE_PATH", "TaskEvents", "console_routes", "console_url"]
