"""Workflow definitions refused at load with the workflow, step and key named; templates; durations."""

from __future__ import annotations

from typing import Any

import pytest

from anyagentd_a2a.workflows.definition import WorkflowError, load_workflows, parse_duration
from anyagentd_a2a.workflows.template import references, render


def wf(**steps: dict[str, Any]) -> dict[str, Any]:
    return {"name": "fix", "inputs": {"issue": {"type": "string"}}, "steps": steps}


GOOD = wf(
    write={
        "kind": "agent",
        "agent": "claude",
        "prompt": "Fix: {{inputs.issue}}",
        "timeout": "10m",
        "retry": {"max": 2, "backoff": "5s"},
    },
    review={"kind": "agent", "agent": "codex", "depends_on": ["write"], "prompt": "Review {{steps.write.output}}"},
    go={"kind": "wait", "on": "signal", "signal": "go", "timeout": "1h", "depends_on": ["review"]},
    done={"kind": "finish", "depends_on": ["go"], "output": "{{steps.review.output}}"},
)


def refused(entry: dict[str, Any]) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        load_workflows([entry])
    return caught.value


def test_a_good_workflow_loads_in_order() -> None:
    workflow = load_workflows([GOOD])["fix"]
    assert workflow.order() == ["write", "review", "go", "done"]
    assert workflow.steps["write"].timeout == 600 and workflow.steps["write"].retry.backoff == 5
    assert workflow.upstream("done") == {"write", "review", "go"}
    assert workflow.inputs_schema()["required"] == ["issue"]


def test_unknown_keys_are_named() -> None:
    bad = wf(write={"kind": "agent", "prompt": "x", "promt": "typo"})
    assert refused(bad).where == "workflows.fix.steps.write.promt"
    assert "unknown key" in str(refused(bad))
    assert refused({**GOOD, "colour": 1}).where == "workflows.fix.colour"


def test_unknown_dependencies_and_cycles() -> None:
    assert (
        refused(wf(a={"kind": "finish", "output": "x", "depends_on": ["nope"]})).where
        == "workflows.fix.steps.a.depends_on"
    )
    cycle = refused(
        wf(
            a={"kind": "finish", "output": "x", "depends_on": ["b"]},
            b={"kind": "finish", "output": "y", "depends_on": ["a"]},
        )
    )
    assert "cycle: a -> b -> a" in str(cycle)


def test_template_references_must_resolve_upstream() -> None:
    assert "unknown input" in str(refused(wf(a={"kind": "agent", "prompt": "{{inputs.nope}}"})))
    not_upstream = wf(a={"kind": "agent", "prompt": "x"}, b={"kind": "agent", "prompt": "{{steps.a.output}}"})
    error = refused(not_upstream)
    assert error.where == "workflows.fix.steps.b.prompt" and "not upstream" in str(error)
    assert "unknown reference" in str(refused(wf(a={"kind": "agent", "prompt": "{{env.HOME}}"})))
    assert "unbalanced" in str(refused(wf(a={"kind": "agent", "prompt": "{{inputs.issue"})))


def test_kind_rules() -> None:
    assert "needs a prompt" in str(refused(wf(a={"kind": "agent"})))
    assert "signal" in str(refused(wf(a={"kind": "wait", "on": "signal"})))
    assert "output template" in str(refused(wf(a={"kind": "finish"})))


def test_duplicate_names_and_commands() -> None:
    with pytest.raises(WorkflowError, match="already defined"):
        load_workflows([GOOD, GOOD])
    other = {**GOOD, "name": "other"}
    with pytest.raises(WorkflowError, match="command 'fix' is already declared"):
        load_workflows([{**GOOD, "command": "fix"}, {**other, "command": "fix"}])


def test_templates_and_durations() -> None:
    assert references("a {{ inputs.x }} b {{steps.s.output.field}}") == [
        ("inputs", "x"),
        ("steps", "s", "output", "field"),
    ]
    scope = {"inputs": {"x": "X"}, "steps": {"s": {"output": {"field": [1, 2]}}}}
    assert render("a {{ inputs.x }} b {{steps.s.output.field}}", scope) == "a X b [1,2]"
    with pytest.raises(KeyError):
        render("{{inputs.y}}", scope)
    assert [parse_duration(v) for v in ("250ms", "90s", "10m", "1h", 3)] == [0.25, 90, 600, 3600, 3]
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_subagent_steps() -> None:
    ok = load_workflows(
        [wf(a={"kind": "subagent", "agent": "codex", "instruction": "Review {{inputs.issue}}", "mode": "warm"})]
    )["fix"]
    assert ok.steps["a"].mode == "warm" and ok.steps["a"].templates() == {"instruction": "Review {{inputs.issue}}"}
    assert "needs an agent and an instruction" in str(refused(wf(a={"kind": "subagent", "agent": "codex"})))
    assert "unknown input" in str(refused(wf(a={"kind": "subagent", "agent": "x", "instruction": "{{inputs.no}}"})))
    assert (
        refused(wf(a={"kind": "subagent", "agent": "x", "instruction": "y", "mode": "later"})).where
        == "workflows.fix.steps.a.mode"
    )
