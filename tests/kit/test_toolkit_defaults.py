"""One home for each default (issue 30): the timers the adapters share are defined once, in the toolkit
(``anyagentd.adapters.connection`` / ``.process``, the handshake's in ``EngineSettings``), and no adapter defines
its own copy of one of them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from anyagentd.adapters import connection, process
from anyagentd.adapters.connection import ProcessConnection
from anyagentd.adapters.process import AgentProcess
from anyagentd.engine.settings import EngineSettings

ROOT = Path(__file__).resolve().parents[2]
TOOLKIT = {
    name
    for module in (connection, process)
    for name in vars(module)
    if name.isupper() and isinstance(getattr(module, name), (int, float))
}


def _module_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_no_adapter_redefines_a_toolkit_default() -> None:
    assert {"HANDSHAKE_TIMEOUT", "REQUEST_TIMEOUT", "INTERRUPT_ON_CLOSE", "EXIT_WAIT", "CLOSE_STEP"} <= TOOLKIT
    copies = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "adapters").glob("*/src/*/*.py")
        for name in _module_constants(path) & TOOLKIT
    )
    assert copies == []


def test_the_toolkit_defaults_have_one_value_each() -> None:
    assert EngineSettings.handshake_timeout == connection.HANDSHAKE_TIMEOUT  # named there, defined in the settings
    assert connection.CLOSE_STEP is process.CLOSE_STEP and ProcessConnection.close_step == process.CLOSE_STEP
    assert inspect.signature(AgentProcess.terminate).parameters["grace"].default == process.CLOSE_STEP
    assert EngineSettings.close_grace > 2 * process.CLOSE_STEP  # both close steps fit before the engine kills
