"""``docs/engine.md#tunables`` is true to ``EngineSettings``: its table lists exactly the settings' fields, in their
order, each with its default and the environment variable ``EngineSettings.from_env`` reads for it."""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path

from anyagentd.engine.settings import EngineSettings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engine.md"
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \| `(\w+)` \|")


def tunables_rows() -> list[tuple[str, str, str, str]]:
    """(field, default, unit, environment) of each row of the Tunables section's table."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Tunables\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            rows.append(tuple(part.strip() for part in match.groups()))
    return rows  # type: ignore[return-value]


def test_the_tunables_table_lists_every_setting_with_its_default() -> None:
    rows = tunables_rows()
    settings = [(f.name, f.default) for f in fields(EngineSettings)]
    assert all(default is not MISSING for _, default in settings)
    assert [name for name, *_ in rows] == [name for name, _ in settings]
    for (name, default, _, _), (_, value) in zip(rows, settings, strict=True):
        assert float(default) == value, f"{name}: the table says {default}, EngineSettings says {value}"


def test_each_row_names_the_variable_that_overrides_it() -> None:
    for name, _, _, variable in tunables_rows():
        assert variable == f"ANYAGENTD_{name.upper()}"
        value = getattr(EngineSettings.from_env({variable: "7"}), name)
        assert value == 7 and value != getattr(EngineSettings(), name), name
