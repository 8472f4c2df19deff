"""The lint and type-check commands are one list: the README's "Lint and types" block is what ``.ci/run`` runs
(line for line, in order, before the tests), and the tools it names are pinned to the same versions in
``requirements-dev.txt`` and in ``pyproject.toml``'s ``dev`` dependency group (where uv reads them)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_lint_commands() -> list[str]:
    """The ``sh`` block of the README's "Lint and types" section, one command per line."""
    section = ROOT.joinpath("README.md").read_text().split("\n## Lint and types\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the README's Lint and types section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_the_readme_lint_commands_before_the_tests() -> None:
    commands = readme_lint_commands()
    assert commands, "the README shows no lint command"
    ci = [line.strip() for line in ROOT.joinpath(".ci/run").read_text().splitlines()]
    assert "set -euo pipefail" in ci  # a finding (a non-zero exit) fails the run
    at = [ci.index(command) for command in commands]  # ValueError names a README command .ci/run does not run
    assert at == sorted(at)
    assert max(at) < ci.index(".venv/bin/python -m pytest")


def test_the_lint_tools_are_pinned_alike_for_pip_and_uv() -> None:
    tools = {command.split()[0].removeprefix(".venv/bin/") for command in readme_lint_commands()}
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", ROOT.joinpath("requirements-dev.txt").read_text(), re.M))
    group = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["dependency-groups"]["dev"]
    uv = dict(entry.split("==", 1) for entry in group if "==" in entry)
    for tool in tools:
        assert tool in pins, f"{tool} is not pinned (==) in requirements-dev.txt"
        assert uv.get(tool) == pins[tool], f"{tool}: pyproject's dev group pins {uv.get(tool)}, pip {pins[tool]}"
