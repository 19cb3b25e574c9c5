"""Reading and writing spec files: JSON or YAML in, JSON out, atomically, with size limits.

Every failure is a :class:`~dnnbench.errors.SpecError` with one line naming the file or field.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from ..errors import SpecError
from .base import Spec

S = TypeVar("S", bound=Spec)

#: Spec files are small; anything bigger is a mistake (a data file passed as a spec), not a spec.
MAX_SPEC_BYTES = 16 * 2**20


def read_document(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON or YAML file (by extension) into plain data, refusing huge or unreadable files."""
    p = Path(path)
    if not p.exists():
        raise SpecError("file", str(p), "does not exist")
    if p.is_dir():
        raise SpecError("file", str(p), "is a folder, expected a spec file")
    size = p.stat().st_size
    if size > MAX_SPEC_BYTES:
        limit = MAX_SPEC_BYTES // 2**20
        raise SpecError("file", str(p), f"is {size / 2**20:.1f} MiB, larger than the {limit} MiB limit for a spec file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError("file", str(p), f"cannot be read as UTF-8 text ({type(exc).__name__})") from None
    return parse_text(text, yaml_syntax=p.suffix.lower() in (".yaml", ".yml"), where=str(p))


def parse_text(text: str, yaml_syntax: bool = False, where: str = "text") -> Any:
    if yaml_syntax:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise SpecError("file", where, f"is not valid YAML{at}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}"
        raise SpecError("file", where, f"is not valid JSON: {exc.msg} at {at}") from None


def load(cls: type[S], path: str | os.PathLike[str]) -> S:
    """Load a spec of type ``cls`` from a JSON/YAML file; errors are prefixed with the file name."""
    data = read_document(path)
    try:
        return cls.build(data)
    except SpecError as err:
        raise SpecError.plain(f"{Path(path).name}: {err.field}", str(err).split(": ", 1)[1]) from None


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as JSON so that ``path`` holds either the old file or the whole new one.

    The text goes to a temporary file in the same folder, is flushed to disk, then renamed over the
    target (``os.replace`` is atomic on POSIX and Windows).
    """
    p = Path(path)
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a saved spec reads like any other file
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def save(spec: Spec, path: str | os.PathLike[str]) -> Path:
    """Save a spec as JSON, atomically."""
    return write_json_atomic(path, spec.to_dict())


def json_schema(cls: type[Spec]) -> dict[str, Any]:
    """The JSON Schema of a spec type (for editors and for validating files elsewhere)."""
    return cls.model_json_schema()
