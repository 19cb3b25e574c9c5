"""The base of every spec: a frozen, validated pydantic model that rejects unknown keys.

Specs are values: built once, validated when built, never mutated. A variant is a copy with changes
(``spec.evolve(field=value)``), validated again.
"""

from __future__ import annotations

from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ..errors import SpecError, from_pydantic

S = TypeVar("S", bound="Spec")

#: Tags of discriminated unions, dropped from error paths (``layers[3].kernel``, not ``layers.3.conv2d``).
UNION_TAGS: set[str] = set()


def _takes_tuple(annotation: Any) -> bool:
    """Whether a field's annotation is, or is a union with, a tuple (``tuple[int, ...]``, ``int | tuple``)."""
    if get_origin(annotation) is tuple:
        return True
    return any(_takes_tuple(a) for a in get_args(annotation)) if get_origin(annotation) is not None else False


class Spec(BaseModel):
    # strict: types as a spec file states them. "5" and true are not numbers, 5.5 is not a count (an
    # integer is a fine float). JSON arrays become tuples where a field holds a tuple (below).
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, strict=True)

    def __init__(self, **data: Any) -> None:
        # Keyword construction reports errors the same way as ``build``: one SpecError with a path.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_pydantic(exc, drop_parts=frozenset(UNION_TAGS)) from None

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        # Calculon-style exact-key check: a typo such as "bandwith_bits_per_s" fails loudly with the
        # list of allowed keys instead of silently falling back to a default.
        if isinstance(data, dict):
            allowed = cls.model_fields
            for key in data:
                if not isinstance(key, str) or key not in allowed:
                    raise PydanticCustomError(
                        "unknown_field",
                        "unknown field {key}",
                        {"key": key, "allowed": ", ".join(sorted(allowed))},
                    )
            lists = [k for k, v in data.items() if isinstance(v, list) and _takes_tuple(allowed[k].annotation)]
            if lists:  # JSON has arrays, strict validation wants the tuples the fields hold
                data = {**data, **{k: tuple(data[k]) for k in lists}}
        return data

    @classmethod
    def build(cls: type[S], data: Any, where: str = "") -> S:
        """Validate ``data`` (a mapping) into this spec, raising :class:`SpecError` with a field path."""
        if not isinstance(data, dict):
            raise SpecError(where or "<root>", data, f"is not valid: expected an object for {cls.__name__}")
        from .io import check_plain

        check_plain(data, where, magnitudes=True)  # plain JSON data: string keys, numbers a spec can hold
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise from_pydantic(exc, prefix=where, drop_parts=frozenset(UNION_TAGS)) from None

    @classmethod
    def field_description(cls, path: str) -> str:
        """The description of the field at dotted ``path`` (``"peak.macs_per_s_per_core"``), for
        tooltips and tables; nested specs are followed through their annotations."""
        model: Any = cls
        text = ""
        for part in path.split("."):
            info = model.model_fields[part]
            text = info.description or ""
            args = (info.annotation, *get_args(info.annotation))
            model = next((a for a in args if isinstance(a, type) and issubclass(a, Spec)), None)
        return text

    def evolve(self: S, **changes: Any) -> S:
        """A validated copy with ``changes`` applied (the spec itself is never mutated)."""
        data = self.to_dict()
        data.update({k: _plain(v) for k, v in changes.items()})
        return type(self).build(data)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def fail(field: str, value: Any, expected: str) -> Any:
    """Raise a validation error that keeps its own field path (used by cross-field validators)."""
    raise PydanticCustomError(
        "spec_error", "{field}: {expected}", {"field": field, "value": value, "expected": expected}
    )
