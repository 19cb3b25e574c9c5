"""Reading and writing spec files: JSON or YAML in, JSON out, atomically, with size limits.

Every failure is a :class:`~dnnbench.errors.SpecError` with one line naming the file or field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import SpecError

if TYPE_CHECKING:  # typing only: Spec.build reads check_plain from here
    from .base import Spec

S = TypeVar("S", bound="Spec")

#: Spec files are small; anything bigger is a mistake (a data file passed as a spec), not a spec.
MAX_SPEC_BYTES = 16 * 2**20
#: A spec document nests a few levels (a network's layers, a cluster's machine classes); deeper is refused.
MAX_DEPTH = 64
#: Values in one document, aliases expanded (a YAML alias bomb expands to billions: refused here).
MAX_NODES = 1_000_000


def read_document(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON or YAML file (by extension) into plain data (:func:`parse_text`), reading regular
    files of at most :data:`MAX_SPEC_BYTES` only (:func:`dnnbench.fileio.read_text`)."""
    from ..fileio import read_text

    name = os.fspath(path)
    text = read_text(name, "file", MAX_SPEC_BYTES)
    return parse_text(text, yaml_syntax=Path(name).suffix.lower() in (".yaml", ".yml"), where=name)


def parse_text(text: str, yaml_syntax: bool = False, where: str = "text") -> Any:
    """JSON (or YAML) text as plain JSON data: strings, finite numbers, booleans, null, lists and
    mappings with string keys, at most :data:`MAX_DEPTH` deep and :data:`MAX_NODES` values. Anything
    else (NaN, Infinity, YAML tags such as ``!!binary``, ``!!set`` or dates, non-string keys) is a
    one-line :class:`SpecError`."""
    data = _parse_yaml(text, where) if yaml_syntax else _parse_json(text, where)
    return check_plain(data, where)


def _parse_json(text: str, where: str) -> Any:
    def no_constant(name: str) -> Any:
        raise SpecError("file", where, f"is not valid JSON: {name} is not a number a spec can hold")

    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}"
        raise SpecError("file", where, f"is not valid JSON: {exc.msg} at {at}") from None
    except SpecError:
        raise
    except RecursionError:
        raise SpecError("file", where, f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise SpecError("file", where, f"is not valid JSON: {_first_line(exc).split(':')[0]}") from None


def _parse_yaml(text: str, where: str) -> Any:
    import yaml

    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_size(node, where)
        return loader.construct_document(node)
    except SpecError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError("file", where, f"is not valid YAML{at}") from None
    except RecursionError:
        raise SpecError("file", where, f"nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar PyYAML cannot construct
        raise SpecError("file", where, f"is not valid YAML: {_first_line(exc)}") from None
    finally:
        loader.dispose()


_LOADER: Any = None


def _loader_class() -> Any:
    """PyYAML's safe loader, reading ``1e9`` and ``2.5E-3`` as numbers (YAML 1.1 wants ``1.0e+9``:
    a spec writes bandwidths and times that way)."""
    global _LOADER
    if _LOADER is None:
        import re

        import yaml

        class SpecLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
            pass

        SpecLoader.add_implicit_resolver(
            "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
            list("-+0123456789"))
        _LOADER = SpecLoader
    return _LOADER


def _check_yaml_size(root: Any, where: str) -> None:
    """Refuse a composed YAML document whose expansion (aliases counted each time they are used) has
    more than :data:`MAX_NODES` values or is deeper than :data:`MAX_DEPTH`, without expanding it."""
    import yaml

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in size:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            size[key], depth[key] = 1, 1
            continue
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
            if len(stack) > MAX_NODES:
                raise SpecError("file", where, f"has more than {MAX_NODES:,} values")
            continue
        size[key] = 1 + sum(size.get(id(c), 1) for c in children)
        depth[key] = 1 + max((depth.get(id(c), 1) for c in children), default=0)
        if size[key] > MAX_NODES:
            raise SpecError("file", where, f"has more than {MAX_NODES:,} values once its aliases are expanded")
        if depth[key] > MAX_DEPTH:
            raise SpecError("file", where, f"nests deeper than {MAX_DEPTH} levels")


def check_plain(data: Any, where: str = "value", magnitudes: bool = False) -> Any:
    """``data`` if it is plain JSON data (see :func:`parse_text`), else a one-line SpecError naming
    the path of the first value that is not. Shared values (YAML aliases) are counted every time.
    Specs inside ``data`` (from Python callers) are validated values already and pass as they are.
    ``magnitudes``: also require every float to be 0 or within :data:`MIN_MAGNITUDE` ..
    :data:`MAX_MAGNITUDE` (what a spec's quantities are). Fields are named ``where: path``, or the path
    alone when ``where`` is empty (as pydantic names them)."""
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, level = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise SpecError.plain(where or "<root>", f"has more than {MAX_NODES:,} values")
        if level > MAX_DEPTH:
            raise SpecError.plain(where or "<root>", f"nests deeper than {MAX_DEPTH} levels")
        field = (f"{where}: {path}" if where else path) if path else (where or "<root>")
        if value is None or isinstance(value, (bool, str, BaseModel)):  # (a spec: a value validated already)
            continue
        if isinstance(value, int):
            if abs(value) > MAX_INTEGER:
                raise SpecError.plain(field, f"is an integer of {len(str(abs(value)))} digits; "
                                             f"expected at most {MAX_INTEGER:.3g}")
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise SpecError(field, value, "is not valid: expected a finite number")
            if magnitudes and value != 0.0 and not MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE:
                raise SpecError(field, value, f"is outside what a spec holds: 0, or {MIN_MAGNITUDE:g} to "
                                              f"{MAX_MAGNITUDE:g} in magnitude")
            continue
        if isinstance(value, (list, tuple)):  # (tuples: from Python callers; JSON has lists)
            stack.extend((v, f"{path}[{i}]", level + 1) for i, v in enumerate(value))
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise SpecError(field, k, "is not valid as a key: expected a string")
                stack.append((v, f"{path}.{k}" if path else k, level + 1))
            continue
        raise SpecError.plain(field, f"is a {type(value).__name__}; expected a string, number, boolean, "
                                     "null, list or mapping (plain JSON data)")
    return data


#: Larger integers than this are never a count, size or rate in a spec (and lose precision as floats).
MAX_INTEGER = 2**63
#: Every quantity in a spec (seconds, bytes, bits per second, MACs per second, fractions) is 0 or lies
#: within these magnitudes: products and quotients of a few of them stay far inside the range of a float
#: (no overflow to inf, no underflow to 0 and then a division by zero).
MIN_MAGNITUDE, MAX_MAGNITUDE = 1e-30, 1e30


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def load(cls: type[S], path: str | os.PathLike[str]) -> S:
    """Load a spec of type ``cls`` from a JSON/YAML file; errors are prefixed with the file name."""
    data = read_document(path)
    try:
        return cls.build(data)
    except SpecError as err:
        raise SpecError.plain(f"{Path(path).name}: {err.field}", str(err).split(": ", 1)[1]) from None


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as standard JSON so that ``path`` holds either the old file or the whole new one
    (:func:`dnnbench.fileio.write_json`)."""
    from ..fileio import write_json

    return write_json(path, data)


def save(spec: Spec, path: str | os.PathLike[str]) -> Path:
    """Save a spec as JSON, atomically."""
    return write_json_atomic(path, spec.to_dict())


def json_schema(cls: type[Spec]) -> dict[str, Any]:
    """The JSON Schema of a spec type (for editors and for validating files elsewhere)."""
    return cls.model_json_schema()
