"""The ``config`` op family: the effective configuration with every credential redacted (operator only).

Credentials appear as the ``{{secret:NAME}}`` / ``{{secret-file:PATH}}`` references they were configured with,
never as values (``$defs/ops/config``).
"""

from __future__ import annotations

from typing import Any

from anyagentd.hookspecs import hookimpl
from anyagentd.ops import NoArgs, Op, OpContext, ResultModel


class ConfigResult(ResultModel):
    config: dict[str, Any]


class Config(Op):
    name = "config"
    reply = "message"
    floor = "operator"
    args = NoArgs
    result = ConfigResult
    description = "The effective configuration, credentials redacted"

    async def run(self, context: OpContext, args: NoArgs) -> ConfigResult:
        return ConfigResult(config=context.face.redacted_config())


@hookimpl
def register_ops(register):  # type: ignore[no-untyped-def]
    register(Config)
