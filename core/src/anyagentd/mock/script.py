"""The scripted agent's script format (``anyagent-semantics.md`` §4, "Mock agent"), as pydantic models.

A script is a JSON object, every field optional::

    {"turns": [[Step, ...], ...],          # each StartTurn plays the next turn; an exhausted script hangs
     "options": [ConfigOption, ...],       # config options the agent advertises (live ones can be configured)
     "steer": false, "steer_rejects": false,
     "deterministic": true, "deterministic_agent": true,
     "buffer": 64, "stale_before_ack": false}

Steps: ``{"Emit": <EventKind>}``, ``"AwaitAnswer"``, ``{"End": <StopReason>}`` (steps after it play at once),
``"Die"``, ``{"Sleep": <milliseconds>}``, ``{"Repeat": {"times": N, "steps": [...]}}``.
Scripts written for the original sidecar run unchanged.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from ..errors import InvalidConfiguration
from ..model import ConfigOption, EventKind, Model, StopReason
from ..tagged import NewtypeVariant, Variant, tagged_union


class Emit(NewtypeVariant):
    value: EventKind


class End(NewtypeVariant):
    value: StopReason


class Sleep(NewtypeVariant):
    """Pause for ``value`` milliseconds."""

    value: int = Field(ge=0)


class Repeat(Variant):
    times: int = Field(ge=0)
    steps: list[Step]


Step = tagged_union(Emit, Literal["AwaitAnswer", "Die"], End, Sleep, Repeat)
Repeat.model_rebuild()


class Script(Model):
    turns: list[list[Step]] = Field(default_factory=list)
    options: list[ConfigOption] = Field(default_factory=list)
    steer: bool = False
    steer_rejects: bool = False
    deterministic: bool = True
    deterministic_agent: bool = True
    buffer: int = Field(default=64, ge=1)
    stale_before_ack: bool = False


EXAMPLES = resources.files(__package__) / "scripts"


def example_names() -> list[str]:
    """The names of the shipped example scripts (``permission``, ``chatter``, ``flood``…)."""
    return sorted(p.name.removesuffix(".json") for p in EXAMPLES.iterdir() if p.name.endswith(".json"))


def resolve_script(ref: str | Path) -> Path:
    """A script path: ``ref`` itself when it is a file, else the shipped example of that name.

    Raises ``InvalidConfiguration`` naming the examples when neither exists.
    """
    path = Path(ref)
    if path.is_file():
        return path
    example = EXAMPLES / f"{ref}.json"
    if example.is_file():
        return Path(str(example))
    raise InvalidConfiguration(
        f"no script file {str(ref)!r} and no example of that name (examples: {', '.join(example_names())})"
    )


def load_script(source: str | Path | dict[str, Any]) -> Script:
    """Parse a script from a dict, a file path or an example name. Raises ``InvalidConfiguration`` with the
    validation errors when it does not fit the format."""
    try:
        if isinstance(source, dict):
            return Script.model_validate(source)
        path = resolve_script(source)
        return Script.model_validate(json.loads(path.read_text()))
    except (ValidationError, json.JSONDecodeError) as err:
        raise InvalidConfiguration(f"invalid mock script {source if not isinstance(source, dict) else ''}: {err}")
