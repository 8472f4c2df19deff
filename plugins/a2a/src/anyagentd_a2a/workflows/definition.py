"""Workflow definitions: the ``[[workflows]]`` tables of the daemon's TOML configuration, validated at load.

A workflow is a DAG of named steps (``[workflows.steps.<id>]``) of three kinds: ``agent`` (a prompt run on an
agent session), ``wait`` (suspended until a signal or a timeout) and ``finish`` (renders the run's output).
Validation refuses unknown keys, unknown ``depends_on`` targets, cycles and template references to inputs or steps
that do not exist or are not upstream; every error names the workflow, the step and the key
(:class:`WorkflowError`). Durations are strings like ``"90s"``, ``"10m"``, ``"1h"`` (or seconds as a number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from anyagentd.model import AcpRef

from .template import references

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class WorkflowError(ValueError):
    """A workflow definition refused at load; ``where`` is ``workflows.<name>.steps.<id>.<key>`` (as far as
    known) and the message says what is wrong there."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


def parse_duration(value: Any) -> float:
    """Seconds from ``"250ms"``, ``"90s"``, ``"10m"``, ``"1h"``, ``"2d"`` or a non-negative number of seconds.
    Raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration is not negative")
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f'not a duration: {value!r} (e.g. "90s", "10m", "1h")')
    return float(match.group(1)) * _UNITS[match.group(2)]


Duration = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    # strict, as the daemon's own configuration: a value of the wrong type is refused naming its key, never coerced
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Retry(_Strict):
    """``retry = {max = 2, backoff = "5s"}``: at most ``max`` further attempts, ``backoff`` seconds apart."""

    max: Annotated[int, Field(ge=0, le=100)] = 0
    backoff: Duration = 0.0

    @field_validator("backoff", mode="before")
    @classmethod
    def _backoff(cls, value: Any) -> float:
        return parse_duration(value)


class Step(_Strict):
    """One step. ``kind``: ``agent`` (``agent``, ``prompt``, ``approval``, ``output``, ``output_schema``),
    ``subagent`` (``agent``, ``instruction`` (a template), ``mode``: a subagent of the run's owner; a ``warm``
    one outlives the step, addressed by the handle in the step's output), ``wait`` (``on = "signal"``,
    ``signal``) or ``finish`` (``output``, a template); every kind takes ``depends_on``, ``timeout`` (seconds) and
    ``retry``."""

    kind: Literal["agent", "subagent", "wait", "finish"]
    depends_on: list[str] = Field(default_factory=list)
    timeout: Duration | None = None
    retry: Retry = Field(default_factory=Retry)
    # agent
    agent: str | AcpRef | None = None
    prompt: str | None = None
    approval: Literal["auto", "ask"] = "auto"
    output: str | None = None
    output_schema: dict[str, Any] | None = None
    dir: str | None = None
    # subagent
    instruction: str | None = None
    mode: Literal["sync", "async", "detached", "warm"] = "sync"
    # wait
    on: Literal["signal"] | None = None
    signal: str | None = None

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _by_kind(self) -> Step:
        if self.kind == "agent":
            if not self.prompt:
                raise ValueError("an agent step needs a prompt")
            if self.output not in (None, "text", "json"):
                raise ValueError('an agent step\'s output is "text" or "json"')
            if self.output_schema is not None and self.output != "json":
                raise ValueError('output_schema goes with output = "json"')
            if self.on is not None or self.signal is not None:
                raise ValueError("on/signal belong to wait steps")
        elif self.kind == "subagent":
            if not self.agent or not self.instruction:
                raise ValueError("a subagent step needs an agent and an instruction")
            if self.prompt is not None or self.on is not None or self.output is not None:
                raise ValueError("a subagent step takes agent, instruction and mode (its output is the subagent's)")
        elif self.kind == "wait":
            if self.on != "signal" or not self.signal:
                raise ValueError('a wait step needs on = "signal" and a signal name')
            if self.prompt is not None or self.agent is not None:
                raise ValueError("prompt/agent belong to agent steps")
        else:
            if self.output is None:
                raise ValueError("a finish step needs an output template")
            if self.prompt is not None or self.agent is not None or self.on is not None:
                raise ValueError("a finish step takes only depends_on and output")
        return self

    def templates(self) -> dict[str, str]:
        """The step's template-bearing keys and their text."""
        found = {"prompt": self.prompt} if self.kind == "agent" and self.prompt else {}
        if self.kind == "subagent" and self.instruction:
            found["instruction"] = self.instruction
        if self.kind == "finish" and self.output is not None:
            found["output"] = self.output
        return found


class Workflow(_Strict):
    """One ``[[workflows]]`` entry: ``name``, ``description``, ``roles`` (roles that may start it besides
    grants ``workflow.run:<name>``), ``inputs`` (JSON Schema properties of the inputs), ``command`` (a
    workflow-declared command name), ``dir`` (the base of per-run working directories) and ``steps``."""

    name: Annotated[str, Field(pattern=NAME)]
    description: str = ""
    roles: list[Literal["user", "agent"]] = Field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] | None = None
    command: Annotated[str, Field(pattern=NAME)] | None = None
    dir: str | None = None
    steps: dict[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")], Step]

    @model_validator(mode="after")
    def _graph(self) -> Workflow:
        check_graph(self)
        return self

    def inputs_schema(self) -> dict[str, Any]:
        """The JSON Schema ``workflow.run`` validates inputs against: an object of :attr:`inputs`, every input
        required unless :attr:`required` narrows it, no other keys."""
        required = list(self.inputs) if self.required is None else list(self.required)
        return {"type": "object", "properties": dict(self.inputs), "required": required, "additionalProperties": False}

    def order(self) -> list[str]:
        """The steps in a topological order (dependencies first; ties by declaration order)."""
        done: list[str] = []
        pending = list(self.steps)
        while pending:
            for step_id in pending:
                if all(dep in done for dep in self.steps[step_id].depends_on):
                    done.append(step_id)
                    pending.remove(step_id)
                    break
        return done

    def upstream(self, step_id: str) -> set[str]:
        """Every step ``step_id`` depends on, directly or not."""
        seen: set[str] = set()
        stack = list(self.steps[step_id].depends_on)
        while stack:
            dep = stack.pop()
            if dep not in seen:
                seen.add(dep)
                stack.extend(self.steps[dep].depends_on)
        return seen


def check_graph(workflow: Workflow) -> None:
    """Refuse unknown ``depends_on`` targets, cycles and template references that cannot resolve."""
    base = f"workflows.{workflow.name}"
    if not workflow.steps:
        raise WorkflowError(f"{base}.steps", "a workflow needs at least one step")
    for step_id, step in workflow.steps.items():
        for dep in step.depends_on:
            if dep not in workflow.steps:
                raise WorkflowError(f"{base}.steps.{step_id}.depends_on", f"unknown step {dep!r}")
            if dep == step_id:
                raise WorkflowError(f"{base}.steps.{step_id}.depends_on", "a step cannot depend on itself")
    _refuse_cycles(workflow, base)
    if workflow.required is not None:
        for name in workflow.required:
            if name not in workflow.inputs:
                raise WorkflowError(f"{base}.required", f"unknown input {name!r}")
    for step_id, step in workflow.steps.items():
        upstream = workflow.upstream(step_id)
        for key, text in step.templates().items():
            where = f"{base}.steps.{step_id}.{key}"
            try:
                refs = references(text)
            except ValueError as err:
                raise WorkflowError(where, str(err)) from None
            for ref in refs:
                _check_ref(ref, workflow, upstream, where)


def _refuse_cycles(workflow: Workflow, base: str) -> None:
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(step_id: str, path: list[str]) -> None:
        if state.get(step_id) == 2:
            return
        if state.get(step_id) == 1:
            cycle = " -> ".join(path[path.index(step_id) :] + [step_id])
            raise WorkflowError(f"{base}.steps.{step_id}.depends_on", f"cycle: {cycle}")
        state[step_id] = 1
        for dep in workflow.steps[step_id].depends_on:
            visit(dep, path + [step_id])
        state[step_id] = 2

    for step_id in workflow.steps:
        visit(step_id, [])


def _check_ref(ref: tuple[str, ...], workflow: Workflow, upstream: set[str], where: str) -> None:
    head = ref[0]
    if head == "inputs":
        if len(ref) < 2 or ref[1] not in workflow.inputs:
            raise WorkflowError(where, f"unknown input in {{{{{'.'.join(ref)}}}}}")
    elif head == "steps":
        if len(ref) < 3 or ref[1] not in workflow.steps or ref[2] not in ("output", "status", "error"):
            raise WorkflowError(where, f"unknown step reference {{{{{'.'.join(ref)}}}}}")
        if ref[1] not in upstream:
            raise WorkflowError(
                where, f"{{{{{'.'.join(ref)}}}}} names a step that is not upstream (add it to depends_on)"
            )
    elif head == "run":
        if ref[1:] not in (("id",), ("workflow",)):
            raise WorkflowError(where, f"unknown run reference {{{{{'.'.join(ref)}}}}}")
    else:
        raise WorkflowError(where, f"unknown reference {{{{{'.'.join(ref)}}}}} (inputs.*, steps.*.output, run.id)")


def load_workflows(raw: Iterable[dict[str, Any]]) -> dict[str, Workflow]:
    """Validate the ``[[workflows]]`` array; raises :class:`WorkflowError` naming the first bad key. Names and
    commands must be unique."""
    workflows: dict[str, Workflow] = {}
    commands: dict[str, str] = {}
    for index, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, dict) else None
        base = f"workflows.{name}" if isinstance(name, str) else f"workflows[{index}]"
        try:
            workflow = Workflow.model_validate(entry)
        except WorkflowError:
            raise
        except ValidationError as err:
            first = err.errors()[0]
            inner = first.get("ctx", {}).get("error")
            if isinstance(inner, WorkflowError):
                raise inner from None
            loc = ".".join(str(p) for p in first["loc"])
            message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
            raise WorkflowError(f"{base}.{loc}" if loc else base, message) from None
        if workflow.name in workflows:
            raise WorkflowError(base, "a workflow of this name is already defined")
        if workflow.command is not None:
            if workflow.command in commands:
                raise WorkflowError(
                    f"{base}.command",
                    f"command {workflow.command!r} is already declared by {commands[workflow.command]!r}",
                )
            commands[workflow.command] = workflow.name
        workflows[workflow.name] = workflow
    return workflows


__all__ = ["Retry", "Step", "Workflow", "WorkflowError", "load_workflows", "parse_duration"]
