"""Command-extension ops as plugins: the :class:`Op` contract (:mod:`.interface`) and the start-up table that
resolves and authorizes them (:mod:`.registry`). No face (HTTP, JSON-RPC, A2A) lives here."""

from .interface import (
    OPERATOR,
    ArgsModel,
    Floor,
    InvalidOpArguments,
    InvalidOpState,
    NoArgs,
    Op,
    OpContext,
    OpError,
    OpNotPermitted,
    Principal,
    Progress,
    ProgressState,
    Reply,
    ResultModel,
    Role,
    TargetNotFound,
)
from .registry import OpTable, command_schema, grant_matches, permits, seed_mismatches

__all__ = [
    "OPERATOR",
    "ArgsModel",
    "Floor",
    "InvalidOpArguments",
    "InvalidOpState",
    "NoArgs",
    "Op",
    "OpContext",
    "OpError",
    "OpNotPermitted",
    "OpTable",
    "Principal",
    "Progress",
    "ProgressState",
    "Reply",
    "ResultModel",
    "Role",
    "TargetNotFound",
    "command_schema",
    "grant_matches",
    "permits",
    "seed_mismatches",
]
