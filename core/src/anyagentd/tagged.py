"""Externally tagged variants, the JSON shape the wire schema uses for every Rust-style enum.

A struct variant serializes as ``{"Name": {fields}}``, a newtype variant as ``{"Name": value}`` and a unit
variant as the bare string ``"Name"`` (serde's default enum representation, which
``anyagent-wire.schema.json`` describes with ``oneOf`` objects of one required key).

Variant classes subclass :class:`Variant` (struct) or :class:`NewtypeVariant` (one field, ``value``); unit
variants are plain ``Literal`` strings. :func:`tagged_union` joins them into one pydantic type whose
discriminator is the tag, so validation looks at one key instead of trying every member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self, Union, Unpack, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, model_serializer, model_validator

if TYPE_CHECKING:
    from pydantic import ModelWrapValidatorHandler, SerializerFunctionWrapHandler


class Variant(BaseModel):
    """A struct variant: ``{"<TAG>": {field: value, ...}}``.

    ``TAG`` defaults to the class name; set it where two enums reuse a name (``Answer::Permission`` vs
    ``Request::Permission``).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)  # built on first use
    TAG: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Unpack[ConfigDict]) -> None:
        super().__init_subclass__(**kwargs)
        if "TAG" not in cls.__dict__:
            cls.TAG = cls.__name__

    @model_validator(mode="wrap")
    @classmethod
    def _untag(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # `data`: the raw input, arbitrary (decoded JSON, or a model or keyword dict from Python)
        if isinstance(data, dict) and len(data) == 1 and cls.TAG in data:
            data = cls._wrap_payload(data[cls.TAG])
        return handler(data)

    @classmethod
    def _wrap_payload(cls, payload: Any) -> Any:
        """The validator's input for the payload under the tag (arbitrary JSON: the variant's fields)."""
        return payload

    # `-> Any` on the serializers: pydantic builds a serialization schema from a serializer's return annotation.
    @model_serializer(mode="wrap")
    def _tag(self, handler: SerializerFunctionWrapHandler) -> Any:
        return {self.TAG: handler(self)}


class NewtypeVariant(Variant):
    """A newtype variant: ``{"<TAG>": value}``; the payload lives in the field ``value``."""

    @classmethod
    def _wrap_payload(cls, payload: Any) -> dict[str, Any]:
        return {"value": payload}

    @model_serializer(mode="wrap")
    def _tag(self, handler: SerializerFunctionWrapHandler) -> Any:
        return {self.TAG: handler(self)["value"]}


def _tag_of(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Variant):
        return value.TAG
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if isinstance(key, str) else None
    return None


def tagged_union(*members: object) -> Any:
    """Build ``Annotated[Union[...], Discriminator]`` from variant classes and ``Literal`` unit variants.

    Takes: :class:`Variant` subclasses and ``Literal["A", "B"]`` types. Returns a type usable as a pydantic
    field annotation or with ``TypeAdapter`` (typed ``Any``: a type built at run time, which checkers see through
    the ``if TYPE_CHECKING`` alias beside each call). An input whose tag names no member fails validation with
    pydantic's ``union_tag_invalid`` error.
    """
    tagged: list[Any] = []
    for member in members:
        if get_origin(member) is Literal:
            tagged.extend(Annotated[Literal[name], Tag(name)] for name in get_args(member))
        else:
            tagged.append(Annotated[member, Tag(cast("type[Variant]", member).TAG)])
    return Annotated[Union[tuple(tagged)], Discriminator(_tag_of)]  # noqa: UP007 - runtime-built union
