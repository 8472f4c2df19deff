"""The bundled app-server schema is exactly what the pinned Codex generates, and every typed message and method
name of :mod:`anyagentd_codex.protocol` exists in it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from anyagentd_codex import protocol as p
from anyagentd_testing.agents import agent_bin

SCHEMA_DIR = Path(p.__file__).parent / "schema"


@pytest.mark.timeout(60)
def test_regenerating_the_schema_with_the_pinned_cli_changes_nothing(tmp_path: Path) -> None:
    codex = agent_bin("codex", start=__file__)  # AgentNotInstalledError: the test fails, it does not skip
    version = subprocess.run([str(codex), "--version"], check=True, capture_output=True, text=True, timeout=30).stdout
    assert p.schema_version() in version
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    fresh = json.loads((tmp_path / p.SCHEMA_FILE).read_text())
    assert fresh == json.loads((SCHEMA_DIR / p.SCHEMA_FILE).read_text())


@pytest.mark.parametrize("model", p.MODELS, ids=lambda m: m.__name__)
def test_typed_messages_match_the_schema(model: type[p.CodexModel]) -> None:
    definition = p.definition(model.SCHEMA)
    assert definition is not None, f"{model.__name__}: no schema definition {model.SCHEMA!r}"
    properties = set(definition.get("properties", {}))
    fields = {info.alias or name for name, info in model.model_fields.items()}
    assert fields <= properties, f"{model.__name__}: not in {model.SCHEMA}: {sorted(fields - properties)}"
    required = set(definition.get("required", []))
    for name, info in model.model_fields.items():
        if info.is_required():
            assert (info.alias or name) in required, f"{model.__name__}.{name} is optional in the schema"


def test_method_names_exist_in_the_schema() -> None:
    assert set(p.CLIENT_REQUESTS) <= p.methods("ClientRequest")
    assert p.M_INITIALIZED in p.methods("ClientNotification")
    assert set(p.SERVER_REQUESTS) <= p.methods("ServerRequest")
    assert set(p.SERVER_NOTIFICATIONS) <= p.methods("ServerNotification")
    assert p.methods("ServerNotification") >= p.QUIET_NOTIFICATIONS
    # the compact method of this version (not "thread/compact")
    assert p.M_COMPACT == "thread/compact/start"
