"""The scripted agent's script format (``docs/agents/mock.md#script-format``), as pydantic models.

A script is a JSON object, every field optional::

    {"turns": [[Step, ...], ...],          # each StartTurn plays the next turn; an exhausted script hangs
     "options": [ConfigOption, ...],       # config options the agent advertises (live ones can be configured)
     "commands": [SlashCommand, ...],      # slash commands it advertises ({"name", "description"})
     "steer": false, "steer_rejects": false,
     "deterministic": true, "deterministic_agent": true,
     "buffer": 256, "stale_before_ack": false}

Steps: ``{"Emit": <EventKind>}``, ``{"EmitWith": {"event": <EventKind>, "extensions": {...}}}`` (the event
with extensions on it), ``"AwaitAnswer"``, ``{"End": <StopReason>}`` (steps after it play at once),
``"Die"``, ``{"Sleep": <milliseconds>}``, ``{"Repeat": {"times": N, "steps": [...]}}``, and
``{"AwaitAnswer": {"allow": [...], "deny": [...]}}``: wait for the answer, then play ``allow`` (a permission
allowed, or any question answered) or ``deny`` (a permission denied), so a script can follow what it was told.
Scripts written for the original sidecar run unchanged.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union, get_args

from pydantic import ConfigDict, Discriminator, Field, PlainValidator, Tag, TypeAdapter, ValidationError

from ..errors import InvalidConfiguration
from ..model import EVENT_KIND, ConfigOption, EventKind, Model, SlashCommand, StopReason, new_list
from ..tagged import NewtypeVariant, Variant, _tag_of, tagged_union

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

_KIND_ADAPTERS: dict[str, TypeAdapter[EventKind]] = {}


def _event_kind(value: Any) -> EventKind:
    """One ``EventKind`` of an ``Emit`` step (``value``: its JSON, or a model), validated with the schema of its own kind only.

    A script emits a few kinds; building the schema of every kind (``SessionUpdated`` holds the whole
    ``SessionInfo``) cost about 20 ms of the first ``open`` (issue 17). The result and the errors are those of
    ``EventKind``: the kind is a one-member tagged union, so its tag stays in the error's place, and a value whose
    tag names no kind is validated by ``EventKind`` itself, which reports it as before."""
    tag = _tag_of(value)
    if not isinstance(tag, str):
        return EVENT_KIND.validate_python(value)
    adapter = _KIND_ADAPTERS.get(tag)
    if adapter is None:
        member = _KIND_MEMBERS.get(tag)
        if member is None:
            return EVENT_KIND.validate_python(value)
        adapter = _KIND_ADAPTERS[tag] = TypeAdapter(tagged_union(member))
    return adapter.validate_python(value)


def _kind_members() -> dict[str, object]:
    """Each member of ``EventKind`` (a variant class or a ``Literal``) by its tag."""
    union = get_args(get_args(EventKind)[0])  # Annotated[Union[Annotated[member, Tag], ...], Discriminator]
    members: dict[str, object] = {}
    for tagged in union:
        member, tag = get_args(tagged)[0], get_args(tagged)[1].tag
        members[tag] = member
    return members


_KIND_MEMBERS = _kind_members()


class Emit(NewtypeVariant):
    # An EventKind (validated by its own kind); `Any` so that pydantic builds no EventKind serializer (issue 17).
    value: Annotated[Any, PlainValidator(_event_kind)]


class EmitWith(Variant):
    """``{"EmitWith": {"event": <EventKind>, "extensions": {...}}}``: report one event with ``extensions`` on it
    (e.g. ``{"anyagentd/tokens": {"in": N, "out": M}}`` on a ``ContextUsage``, as the real adapters put it)."""

    event: Annotated[Any, PlainValidator(_event_kind)]  # an EventKind, as Emit's value
    extensions: dict[str, Any] = Field(default_factory=dict)  # name -> arbitrary JSON


class End(NewtypeVariant):
    value: StopReason


class Sleep(NewtypeVariant):
    """Pause for ``value`` milliseconds."""

    value: int = Field(ge=0)


class Repeat(Variant):
    times: int = Field(ge=0)
    steps: list[Step]


class AwaitBranch(Variant):
    """``{"AwaitAnswer": {"allow": [...], "deny": [...]}}``: wait for the answer, then play the steps of the
    branch it chose (``allow`` for an allowed permission or an answered question, ``deny`` for a denial)."""

    TAG = "AwaitAnswer"
    allow: list[Step] = Field(default_factory=new_list)
    deny: list[Step] = Field(default_factory=new_list)


STEP_TAGS = ("Emit", "EmitWith", "AwaitAnswer", "Die", "End", "Sleep", "Repeat")


def _step_tag(value: object) -> str | None:
    # "AwaitAnswer" (a unit step) and {"AwaitAnswer": {...}} (a branch) share a name: tell them apart by shape.
    if isinstance(value, str):
        return value
    if isinstance(value, Variant):
        return "AwaitBranch" if isinstance(value, AwaitBranch) else value.TAG
    if isinstance(value, dict) and len(value) == 1:
        tag = next(iter(value))
        return "AwaitBranch" if tag == "AwaitAnswer" else tag
    return None


_STEP_MEMBERS: dict[str, object] = {
    "Emit": Annotated[Emit, Tag("Emit")],
    "EmitWith": Annotated[EmitWith, Tag("EmitWith")],
    "AwaitAnswer": Annotated[Literal["AwaitAnswer"], Tag("AwaitAnswer")],
    "AwaitBranch": Annotated[AwaitBranch, Tag("AwaitBranch")],
    "Die": Annotated[Literal["Die"], Tag("Die")],
    "End": Annotated[End, Tag("End")],
    "Sleep": Annotated[Sleep, Tag("Sleep")],
    "Repeat": Annotated[Repeat, Tag("Repeat")],
}
"""Each kind of step, tagged as :func:`_step_tag` names it (the unit ``"AwaitAnswer"`` and the branch
``{"AwaitAnswer": {...}}`` apart)."""

_STEP_ADAPTERS: dict[str, TypeAdapter[Any]] = {}
_STEP_UNION: Any = Annotated[Union[tuple(_STEP_MEMBERS.values())], Discriminator(_step_tag)]  # noqa: UP007
_ANY_STEP: TypeAdapter[Any] = TypeAdapter(_STEP_UNION, config=ConfigDict(defer_build=True))


def _step(value: object) -> Any:
    """One step of a turn (``value``: its JSON, or a model), validated with the schema of its own kind of step only.

    A script uses a few kinds of step: with the union of all of them (two of them recursive, holding steps) in it,
    the schema of :class:`Script` that the first ``open`` of the mock builds took 8–11 ms; without, 1.3–2.6 ms, and
    the ``hello`` example's Emit and End steps ~1 ms more (issue 31, bench/README.md). Result and errors are the
    union's: the kind is a one-member tagged union, so its tag stays in the error's place, and a value whose tag
    names no kind of step (or that has no tag) is validated by the union itself, which reports it as before. Same
    way as the ``Emit`` kinds (:func:`_event_kind`)."""
    tag = _step_tag(value)
    member = _STEP_MEMBERS.get(tag) if tag is not None else None
    if tag is None or member is None:
        return _ANY_STEP.validate_python(value)
    adapter = _STEP_ADAPTERS.get(tag)
    if adapter is None:
        one: Any = Annotated[Union[(member,)], Discriminator(_step_tag)]  # noqa: UP007 - built at runtime
        adapter = _STEP_ADAPTERS[tag] = TypeAdapter(one)
    return adapter.validate_python(value)


if TYPE_CHECKING:  # the union as checkers see it; at run time each step is validated by its own kind (_step)
    Step: TypeAlias = Emit | EmitWith | Literal["AwaitAnswer", "Die"] | AwaitBranch | End | Sleep | Repeat
else:
    Step = Annotated[Any, PlainValidator(_step)]


class Script(Model):
    turns: list[list[Step]] = Field(default_factory=new_list)
    options: list[ConfigOption] = Field(default_factory=new_list)
    commands: list[SlashCommand] = Field(default_factory=new_list)
    steer: bool = False
    steer_rejects: bool = False
    deterministic: bool = True
    deterministic_agent: bool = True
    buffer: int = Field(default=256, ge=1)
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


MAX_REPORTED_ERRORS = 3
"""Script errors named in one ``InvalidConfiguration`` message (the rest are counted)."""


def load_script(source: str | Path | dict[str, Any]) -> Script:
    """Parse a script from a dict (decoded JSON), a file path or an example name. Raises ``InvalidConfiguration`` naming each
    problem by its place in the script and what was expected there (``turns[0][1]: unknown step 'Bogus'
    (expected Emit, AwaitAnswer, …)``)."""
    name = "" if isinstance(source, dict) else f" {source}"
    try:
        if isinstance(source, dict):
            return Script.model_validate(source)
        path = resolve_script(source)
        return Script.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise InvalidConfiguration(f"invalid mock script{name}: not JSON: {err}") from None
    except UnicodeDecodeError as err:  # JSON is UTF-8 (RFC 8259 §8.1)
        raise InvalidConfiguration(
            f"invalid mock script{name}: not UTF-8 text: {err.reason} at byte {err.start}"
        ) from None
    except ValidationError as err:
        problems = [describe_error(e) for e in err.errors(include_url=False)]
        more = len(problems) - MAX_REPORTED_ERRORS
        shown = "; ".join(problems[:MAX_REPORTED_ERRORS]) + (f"; and {more} more" if more > 0 else "")
        raise InvalidConfiguration(f"invalid mock script{name}: {shown}") from None


def describe_error(error: ErrorDetails) -> str:
    """One pydantic error as ``place: what was wrong or expected``; the place is a path into the script
    (``turns[0][2].Emit.TextDelta.text``) without pydantic's internal segments."""
    place = ""
    for part in error["loc"]:
        if isinstance(part, int):
            place += f"[{part}]"
        elif part != "value":
            part = "AwaitAnswer" if part == "AwaitBranch" else part
            place += f".{part}" if place else str(part)
    kind = error["type"]
    if kind == "union_tag_invalid":
        expected = error["ctx"]["expected_tags"].replace("'", "")
        expected = expected.replace("AwaitBranch, ", "") if "AwaitBranch" in expected else expected
        what = "step" if expected.startswith("Emit") else "kind"
        message = f"unknown {what} {error['ctx']['tag']!r} (expected one of {expected})"
    elif kind == "union_tag_not_found":
        message = "expected an object with one key naming the variant, or a bare name"
    elif kind == "missing":
        message = "missing (required)"
    elif kind == "extra_forbidden":
        message = "unknown field"
    else:
        message = f"{error['msg']} (got {json.dumps(error.get('input'), default=str)[:60]})"
    return f"{place or '(script)'}: {message}"
