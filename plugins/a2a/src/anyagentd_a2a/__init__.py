"""anyagentd-a2a: the A2A face of anyagentd (Agent2Agent 1.0, JSON-RPC over HTTP) on the official a2a-sdk.

Nothing heavy is imported here: ``anyagentd``'s CLI loads this plugin at start-up, and the HTTP stack (a2a-sdk,
starlette, uvicorn, SQLAlchemy) is imported only when ``anyagentd a2a`` runs.
"""

__version__ = "0.1.0"
