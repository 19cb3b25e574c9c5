"""The one error type users see: a spec or argument that is not valid.

Every message is one line that names the field path, the value and what was expected, e.g.
``layers[3].kernel: 7 is larger than the 5x5 input``. The CLI prints it and exits with code 2.
"""

from __future__ import annotations

import reprlib
from typing import Any

_NO_VALUE = object()


class SpecError(ValueError):
    """A spec, file or argument that is not valid; ``str(err)`` is a single line for the user."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        text = f"{field}: {expected}" if value is _NO_VALUE else f"{field}: {_short(value)} {expected}"
        super().__init__(" ".join(text.split()))

    @classmethod
    def plain(cls, field: str, text: str) -> SpecError:
        """An error whose message needs no value (a missing field, an unknown key)."""
        return cls(field, _NO_VALUE, text)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 2, 4, 4, 4, 4
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 60, 40, 60


def _short(value: Any, limit: int = 80) -> str:
    """A bounded ``repr``: a huge or deeply nested value (a YAML alias bomb) is never expanded."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a value whose repr fails still gets a message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def from_pydantic(exc: Any, prefix: str = "", drop_parts: frozenset[str] = frozenset()) -> SpecError:
    """Turn a pydantic ``ValidationError`` into a one-line :class:`SpecError` for its first error.

    The field path is written ``layers[3].kernel``; ``drop_parts`` removes the tags pydantic adds
    for discriminated unions (``layers.3.conv2d.kernel``). Later errors are usually consequences of
    the first (a misspelt key is also a missing one), so only the first is reported.
    """
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = _path(first.get("loc", ()), prefix, drop_parts)
    kind = first.get("type", "")
    ctx = first.get("ctx") or {}
    if isinstance(ctx.get("error"), SpecError):  # raised by a validator of ours, already one line
        inner = ctx["error"]
        err = SpecError.plain(_join(path, inner.field), str(inner).split(": ", 1)[1])
        err.value = inner.value
    elif kind == "spec_error":
        err = SpecError(_join(path, ctx["field"]), ctx["value"], ctx["expected"])
    elif kind == "unknown_field":
        key = ctx.get("key", "?")
        err = SpecError.plain(
            _join(path, str(key)),
            f"unknown field {key!r} (check the spelling); allowed: {ctx.get('allowed', '')}",
        )
    elif kind == "union_tag_not_found":
        tag_field = str(ctx.get("discriminator", "'kind'")).strip("'")
        err = SpecError.plain(_join(path, tag_field), "is missing (a required field)")
    elif kind == "union_tag_invalid":
        tag_field = str(ctx.get("discriminator", "'kind'")).strip("'")
        err = SpecError(_join(path, tag_field), ctx.get("tag"), _unknown_tag(tag_field, str(ctx.get("tag", "")),
                                                                            str(ctx.get("expected_tags", ""))))
    elif kind == "missing":
        err = SpecError.plain(path, "is missing (a required field)")
    else:
        msg = str(first.get("msg", "is not valid"))
        for lead in ("Value error, ", "Assertion failed, "):
            if msg.startswith(lead):
                msg = msg[len(lead):]
        msg = msg.replace("Input should be", "expected").replace("input should be", "expected")
        value = first.get("input")
        err = SpecError(path, value, f"is not valid: {msg[:1].lower() + msg[1:]}")
    return err


#: What an unknown tag that is something else is told, by (field, tag): the spec modules fill it
#: (``{"kind": "relu"}``: relu is a function of the activation kind).
TAG_HINTS: dict[tuple[str, str], str] = {}

#: Longest list of the known tags an unknown one's message spells out (the message stays one short line).
TAGS_LISTED_CHARS = 240


def _unknown_tag(field: str, tag: str, expected: str) -> str:
    """What an unknown tag (a layer kind) gets told: the close known ones, else all of them, or where
    to find them when they do not fit one line."""
    import difflib

    tags = [t.strip().strip("'") for t in expected.split(",") if t.strip()]
    hint = TAG_HINTS.get((field, tag))
    if hint is not None:
        return f"is not a known {field}; {hint}"
    close = difflib.get_close_matches(tag, tags, n=3)
    listed = ", ".join(tags)
    if close:
        return f"is not a known {field}; did you mean {' or '.join(close)}? (every {field}: docs/model.md §3)"
    if len(listed) <= TAGS_LISTED_CHARS:
        return f"is not a known {field}; expected one of {listed}"
    return f"is not a known {field}; expected one of the {len(tags)} in docs/model.md §3 ({', '.join(tags[:8])}, ...)"


def _join(path: str, key: str) -> str:
    if not path or path == "<root>":
        return key
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}"


#: Parts pydantic adds to an error's location for the member of a union it tried (``kernel.int``).
_TYPE_TAGS = frozenset({"int", "float", "str", "bool", "none", "tuple", "list", "dict"})
_TYPE_TAG_PREFIXES = ("function-", "tuple[", "list[", "dict[", "literal[", "union[", "nullable[")


def _path(loc: tuple[Any, ...], prefix: str, drop_parts: frozenset[str]) -> str:
    out = prefix
    previous_was_index = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            previous_was_index = True
            continue
        text = str(part)
        if previous_was_index and text in drop_parts:
            previous_was_index = False
            continue
        previous_was_index = False
        if text.startswith(_TYPE_TAG_PREFIXES) or text in _TYPE_TAGS:  # a union member's tag, not a field
            continue
        out += ("." if out else "") + text
    return out or "<root>"
