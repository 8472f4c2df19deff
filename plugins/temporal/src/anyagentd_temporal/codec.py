"""A run as JSON between the daemon and Temporal (workflow input, query result, the commit activity's argument):
:class:`~anyagentd_a2a.workflows.store.RunRecord` ↔ a plain dict Temporal's JSON converter carries. Pure; imported by
the workflow code in Temporal's sandbox."""

from __future__ import annotations

from typing import Any

from anyagentd_a2a.workflows.state import RunFlags, StepState


def flags_json(flags: RunFlags) -> dict[str, bool]:
    return {"cancelled": flags.cancelled, "paused": flags.paused, "refused": flags.refused}


def step_of(value: dict[str, Any]) -> StepState:
    """A step state from :meth:`StepState.to_json`'s dict."""
    return StepState(**value)


def record_json(record: Any) -> dict[str, Any]:
    """A ``RunRecord`` (or anything with its fields) as a JSON dict: its fields, ``flags`` as a dict, ``steps`` as
    ``{step_id: StepState.to_json()}`` in the record's order."""
    return {
        "id": record.id,
        "workflow": record.workflow,
        "principal": record.principal,
        "task_id": record.task_id,
        "status": record.status,
        "inputs": record.inputs,
        "output": record.output,
        "error": record.error,
        "flags": flags_json(record.flags),
        "tokens": record.tokens,
        "created": record.created,
        "updated": record.updated,
        "finished": record.finished,
        "steps": {step_id: state.to_json() for step_id, state in record.steps.items()},
    }


def record_of(value: dict[str, Any]) -> Any:
    """The ``RunRecord`` of :func:`record_json`'s dict (imports the store's module: not for the workflow sandbox)."""
    from anyagentd_a2a.workflows.store import RunRecord

    fields = dict(value)
    fields["flags"] = RunFlags(**fields["flags"])
    fields["steps"] = {step_id: step_of(state) for step_id, state in fields["steps"].items()}
    return RunRecord(**fields)


__all__ = ["flags_json", "record_json", "record_of", "step_of"]
