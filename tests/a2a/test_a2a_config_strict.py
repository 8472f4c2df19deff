"""Configuration values are never coerced (``config._Strict`` and ``workflows.definition._Strict`` are pydantic
``strict``): a string or a number where TOML should say ``true``/``false``, or a string where it should say a
number, is refused naming its key — the same for every section, where before ``introspection = "yes"``,
``enabled = 1`` or ``"off"`` passed while ``reports = "yes"`` was refused. Checked through ``--check-config`` as an
operator runs it, and through ``parse`` for every boolean key the configuration has."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from a2a_helpers import ANYAGENTD

from anyagentd_a2a.config import ConfigError, parse

BOOLEAN_KEYS = [
    ("a2a.introspection", {"a2a": {"introspection": "yes"}}),
    ("a2a.push.enabled", {"a2a": {"push": {"enabled": 1}}}),
    ("a2a.push.allow_private", {"a2a": {"push": {"allow_private": "true"}}}),
    ("a2a.device_grant.enabled", {"a2a": {"device_grant": {"enabled": 0}}}),
    ("subagents.enabled", {"subagents": {"enabled": "off"}}),
    (
        "subagents.instances.0.reports",
        {"subagents": {"instances": [{"name": "kid", "url": "http://127.0.0.1:9", "reports": "yes"}]}},
    ),
]


@pytest.mark.parametrize(("key", "data"), BOOLEAN_KEYS, ids=[k for k, _ in BOOLEAN_KEYS])
def test_every_boolean_key_takes_only_a_boolean(key: str, data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as err:
        parse(data, env={})
    assert err.value.key == key and "boolean" in err.value.message


def test_numbers_are_not_read_from_strings_but_integers_serve_as_seconds() -> None:
    with pytest.raises(ConfigError) as err:
        parse({"a2a": {"pool": {"max_live": "5"}}}, env={})
    assert err.value.key == "a2a.pool.max_live"
    assert parse({"a2a": {"pool": {"idle_close": 300}}}, env={}).config.a2a.pool.idle_close == 300.0


def test_check_config_names_the_coerced_key(tmp_path: Path) -> None:
    config = tmp_path / "agentd.toml"
    config.write_text('[a2a]\nintrospection = "yes"\n')
    result = subprocess.run(
        [ANYAGENTD, "a2a", "--check-config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "anyagentd a2a: configuration error: a2a.introspection: Input should be a valid boolean"
    ], result.stderr


def test_a_workflow_definition_is_as_strict() -> None:
    step = {"kind": "finish", "output": "x", "retry": {"max": "3"}}
    with pytest.raises(ConfigError) as err:
        parse({"workflows": [{"name": "w", "steps": {"a": step}}]}, env={})
    assert err.value.key == "workflows.w.steps.a.retry.max" and "integer" in err.value.message
