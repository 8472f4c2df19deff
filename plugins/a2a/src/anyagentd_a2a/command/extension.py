"""The command extension's fixed names (``agentd-command.schema.json``: ``uri``, ``dataPartKey``, the result's
media type), in a module that imports nothing: the client (``anyagentd a2a op|status``) reads them without loading
the op machinery that :mod:`.envelope` needs (``anyagentd.ops``, pydantic: about 0.25 s of a CLI call)."""

COMMAND_URI = "https://agentd.dev/a2a/ext/command"
DATA_PART_KEY = "agentd"
RESULT_MEDIA_TYPE = "application/json"

__all__ = ["COMMAND_URI", "DATA_PART_KEY", "RESULT_MEDIA_TYPE"]
