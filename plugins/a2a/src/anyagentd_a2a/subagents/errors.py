"""The subagent errors, apart so that the op family can name them without importing the manager."""


class SubagentRefused(ValueError):
    """A spawn or message the limits or the subagent's state refuse; the message says which."""


class SubagentNotFound(LookupError):
    """No subagent by that handle for this caller (the same whether it does not exist or is someone else's)."""


__all__ = ["SubagentNotFound", "SubagentRefused"]
