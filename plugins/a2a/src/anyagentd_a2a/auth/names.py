"""Who a device may sign in as, apart so that the op family can check it without importing the grant's store."""

import re

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
RESERVED_NAMES = frozenset({"operator", "anonymous", "unknown", "launcher", "runtime", "system"})


class ApprovalRefused(ValueError):
    """``auth.device.approve``/``deny`` refused: ``field`` names the argument at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


__all__ = ["ApprovalRefused", "NAME", "RESERVED_NAMES"]
