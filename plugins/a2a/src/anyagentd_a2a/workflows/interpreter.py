"""What a workflow's definition makes of a run, for every engine: pure, deterministic, without I/O or clocks.

Both engines (the embedded ``local`` runner, :mod:`.runner`, and ``temporal``, the ``anyagentd-temporal``
distribution, whose workflow code runs in Temporal's deterministic sandbox) drive a run through these functions and
:mod:`.state`'s rules; they differ only in where a transition is made durable and where a step's work is done. The
caller passes the time (``at``, epoch ms): a Temporal workflow's clock is ``workflow.now()``, the runner's the wall.

- :func:`settle` — the steps that end without running (behind a step that did not end ``done``, or pending in a
  cancelled run);
- :func:`scope`, :func:`render_value` — what a step's templates see, and a template rendered to a value;
- :func:`outcome_of_turn` — an agent turn's ``TurnEnded`` stop (and the text it produced) as a step outcome;
- :func:`conclude` — a step outcome made the step's next state, the run's error and its refusal;
- :func:`run_output` — the run's output once it completed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from .state import RunFlags, StepState, after_failure, move, to_skip
from .template import references, render

if TYPE_CHECKING:
    from .definition import Step, Workflow

OutcomeStatus = Literal["done", "failed", "timeout", "refused", "cancelled"]

_ONE_REF = re.compile(r"\s*\{\{[^{}]*\}\}\s*")


@dataclass(frozen=True)
class Outcome:
    """How one attempt of a step ended: ``status``, its ``output`` (a failed attempt's output is what it left to
    find, e.g. a subagent's handle) and ``error`` (a sentence)."""

    status: OutcomeStatus
    output: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Concluded:
    """What :func:`conclude` made of an outcome: the step's new ``state`` (``pending`` again: another attempt
    follows after the step's backoff), the run's ``error`` to record (``None``: unchanged) and whether the run is
    now ``refused``."""

    state: StepState
    error: str | None = None
    refused: bool = False

    @property
    def retry(self) -> bool:
        return self.state.status == "pending"


def settle(workflow: Workflow, steps: dict[str, StepState], flags: RunFlags, at: int) -> dict[str, StepState]:
    """The steps that end now without running: ``skipped`` behind a dependency that ended other than ``done``
    (:func:`.state.to_skip`, followed down the graph: a step behind a skipped one is skipped too), ``cancelled``
    when pending in a cancelled run. Returns only the changed steps."""
    changed: dict[str, StepState] = {}
    while skip := to_skip(workflow, {**steps, **changed}):
        changed.update({s: move(steps[s], "skipped", finished=at) for s in skip})
    if flags.cancelled:
        for step_id, state in steps.items():
            if state.status == "pending" and step_id not in changed:
                changed[step_id] = move(state, "cancelled", finished=at)
    return changed


def scope(run_id: str, workflow_name: str, inputs: dict[str, Any], steps: dict[str, StepState]) -> dict[str, Any]:
    """What a step's ``{{...}}`` references see: ``inputs``, ``run`` (``id``, ``workflow``) and ``steps`` (each
    step's ``output``, ``status``, ``error``)."""
    return {
        "inputs": inputs,
        "run": {"id": run_id, "workflow": workflow_name},
        "steps": {s: {"output": st.output, "status": st.status, "error": st.error} for s, st in steps.items()},
    }


def render_value(text: str, values: dict[str, Any]) -> Any:
    """``text`` rendered against ``values`` (:func:`.template.render`); a template that is exactly one reference
    keeps its value's type (a JSON output stays JSON). Raises ``KeyError`` naming a reference that is missing."""
    refs = references(text)
    if len(refs) == 1 and _ONE_REF.fullmatch(text):
        node: Any = values
        for key in refs[0]:
            if not isinstance(node, dict) or key not in node:  # a field of a string output: missing, as render says
                raise KeyError(".".join(refs[0]))
            node = node[key]
        return node
    return render(text, values)


def outcome_of_turn(stop: str, message: str | None, text: str, step: Step) -> Outcome:
    """An agent step's turn ended with the wire's ``TurnEnded`` ``stop`` tag (``Completed``, ``Refused``,
    ``Cancelled``, ``Failed``…, with its ``message``), having said ``text`` at the top level: ``done`` with the text
    (or, for ``output = "json"``, the JSON value, checked against ``output_schema``), else the matching outcome."""
    if stop == "Completed":
        if step.output == "json":
            try:
                value = json_output(text)
            except ValueError as err:
                return Outcome("failed", None, f"the output is not JSON: {err}")
            if step.output_schema is not None:
                problem = schema_problem(value, step.output_schema)
                if problem:
                    return Outcome("failed", None, f"the output does not fit output_schema: {problem}")
            return Outcome("done", value)
        return Outcome("done", text)
    if stop == "Refused":
        return Outcome("refused", None, "the agent refused the prompt")
    if stop == "Cancelled":
        return Outcome("cancelled", None, "the agent's turn was cancelled")
    return Outcome("failed", None, f"the agent's turn ended {stop}" + (f": {message}" if message else ""))


def conclude(step_id: str, state: StepState, step: Step, outcome: Outcome, at: int) -> Concluded:
    """The step's state after ``outcome``: ``done`` with its output; a refusal fails the step and refuses the run;
    ``cancelled``; a failure or timeout starts another attempt while the retry policy allows
    (:func:`.state.after_failure`), else ends the step and records ``step <id>: <error>`` as the run's error."""
    if outcome.status == "done":
        return Concluded(move(state, "done", output=outcome.output, finished=at, wait=None))
    if outcome.status == "refused":
        failed = move(state, "failed", error=outcome.error, finished=at, wait=None)
        return Concluded(failed, error=outcome.error, refused=True)
    if outcome.status == "cancelled":
        return Concluded(move(state, "cancelled", error=outcome.error, finished=at, wait=None))
    error = outcome.error or outcome.status
    after = after_failure(state, step.retry.max, outcome.status, error, at)
    if outcome.output is not None:
        after = replace(after, output=outcome.output)
    return Concluded(after, error=None if after.status == "pending" else f"step {step_id}: {error}")


def run_output(workflow: Workflow, steps: dict[str, StepState]) -> Any:
    """A completed run's output: its last ``finish`` step's output, else its last step's."""
    finish = [s for s in workflow.order() if workflow.steps[s].kind == "finish"]
    last = finish[-1] if finish else workflow.order()[-1]
    return steps[last].output


def json_output(text: str) -> Any:
    """The JSON value of an agent's text, a Markdown code fence around it allowed. Raises ``ValueError``."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return json.loads(body)


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` does not fit the JSON Schema ``schema`` (``None`` when it does)."""
    import jsonschema

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as err:
        return err.message
    return None


__all__ = [
    "Concluded",
    "Outcome",
    "conclude",
    "json_output",
    "outcome_of_turn",
    "render_value",
    "run_output",
    "schema_problem",
    "scope",
    "settle",
]
