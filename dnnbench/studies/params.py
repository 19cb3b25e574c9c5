"""Study parameters: read the notebook's ``parameters`` cell and check values before any kernel starts.

A study notebook declares typed, commented defaults (``budgets: list[int] = [8, 16]  # machines``).
papermill's ``inspect_notebook`` gives each name, its annotation as text and its default; this module
turns the annotation into a checker, so a wrong name or type is a one-line :class:`SpecError` and the
CLI can exit with code 2 without starting Jupyter. Supported annotations: ``int``, ``float``,
``bool``, ``str``, ``dict``, ``list``, ``list[T]``, ``Union[A, B]``, ``Optional[T]`` and ``None``
(papermill's parser does not read ``A | B``, so notebooks write ``Union[A, B]``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError

#: Set by the runner, never by the user: where the notebook writes its results JSON.
RESULTS_PARAMETER = "results_path"

#: Parameters that name a spec: a preset, a spec file path, or a nested mapping (``-y``).
SPEC_PARAMETERS = {"network": "networks", "cluster": "clusters", "dataset": "datasets"}


@dataclass(frozen=True)
class Parameter:
    name: str
    type_name: str  # the annotation as written, e.g. "list[int]" ("None" when absent)
    default: str  # the default's source text
    help: str  # the trailing comment

    def describe(self) -> str:
        text = f"{self.name}: {self.type_name} = {self.default}"
        return f"{text}  # {self.help}" if self.help else text


def declared(notebook: str | os.PathLike[str]) -> dict[str, Parameter]:
    """The parameters of a notebook, in cell order (papermill's ``inspect_notebook``)."""
    from papermill.inspection import inspect_notebook

    raw = inspect_notebook(str(notebook))
    return {name: Parameter(name=name, type_name=str(p["inferred_type_name"]), default=str(p["default"]),
                            help=str(p["help"])) for name, p in raw.items()}


# ---- annotation -> checker ------------------------------------------------------------------------

_SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "dict": (dict,),
    "list": (list, tuple), "Any": (object,), "object": (object,),
}


def _type_node(type_name: str) -> ast.expr | None:
    if type_name in ("", "None") or type_name is None:
        return None  # no annotation: any value
    try:
        return ast.parse(type_name, mode="eval").body
    except SyntaxError:
        return None


def matches(value: Any, type_name: str) -> bool:
    """True if ``value`` fits the annotation ``type_name`` (no annotation: anything fits)."""
    node = _type_node(type_name)
    return True if node is None else _matches(value, node)


def _matches(value: Any, node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and node.value is None:
        return value is None
    if isinstance(node, ast.Name):
        if node.id == "None":
            return value is None
        kinds = _SCALARS.get(node.id)
        if kinds is None:
            return True  # a type we do not know: let the notebook judge
        if node.id in ("int", "float") and isinstance(value, bool):
            return False  # True is not a number of machines
        return isinstance(value, kinds)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _matches(value, node.left) or _matches(value, node.right)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        head = node.value.id
        if head == "Union":
            return any(_matches(value, a) for a in args)
        if head == "Optional":
            return value is None or _matches(value, args[0])
        if head in ("list", "List", "tuple", "Tuple", "Sequence"):
            return isinstance(value, (list, tuple)) and all(_matches(v, args[0]) for v in value)
        if head in ("dict", "Dict", "Mapping"):
            return isinstance(value, dict) and (len(args) < 2 or all(_matches(v, args[1]) for v in value.values()))
    return True


def _allows(type_name: str, scalar: str) -> bool:
    node = _type_node(type_name)
    if node is None:
        return True
    return scalar in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# ---- checking ------------------------------------------------------------------------------------

def check(study: str, params: dict[str, Parameter], values: dict[str, Any]) -> dict[str, Any]:
    """Check names and types of ``values`` against the declared parameters; returns the values.

    Integers are accepted where a float is declared (and converted). Raises :class:`SpecError`
    (``parameter NAME: ...``) at the first wrong name or type.
    """
    from ..specs.io import check_plain

    out: dict[str, Any] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError("parameter", name, "is not valid: expected a parameter name")
        # Only plain JSON data reaches papermill, which writes it into the notebook as literals.
        check_plain(value, f"parameter {name}")
        if name == RESULTS_PARAMETER:
            raise SpecError(f"parameter {name}", value, "is set by the study runner (use --out to choose the folder)")
        p = params.get(name)
        if p is None:
            allowed = ", ".join(n for n in params if n != RESULTS_PARAMETER)
            raise SpecError(f"parameter {name}", value,
                            f"is not a parameter of study {study}; expected one of {allowed}")
        if not matches(value, p.type_name):
            raise SpecError(f"parameter {name}", value, f"is not valid: expected {p.type_name}")
        if p.type_name == "float" and isinstance(value, int):
            value = float(value)
        out[name] = value
    return out


def parse_cli_value(study: str, params: dict[str, Parameter], name: str, text: str) -> Any:
    """A ``-p NAME VALUE`` string turned into the declared type (checked afterwards by :func:`check`).

    ``str`` parameters keep the text as is (a preset name or a path); numbers, booleans, lists and
    mappings are read as YAML (``-p budgets "[8, 16, 32]"`` or ``-p budgets 8,16,32``).
    """
    p = params.get(name)
    if p is None or name == RESULTS_PARAMETER:
        return text  # reported by check()
    t = p.type_name
    if t == "str":
        return text
    from ..specs.io import parse_text

    where = f"parameter {name}"
    try:
        value = parse_text(text, yaml_syntax=True, where=where)
    except SpecError:
        if not _allows(t, "str"):
            raise
        value = text  # not YAML: a preset name or a path, judged against the type below
    if isinstance(value, str) and "," in value and _allows(t, "list"):
        value = [parse_text(v.strip(), yaml_syntax=True, where=where) for v in value.split(",") if v.strip()]
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and not matches(value, t) \
            and _allows(t, "list"):
        value = [value]  # -p budgets 16: a list of one
    if not matches(value, t) and _allows(t, "str"):
        return text  # a preset name or a path that YAML read as something else
    return value


def read_yaml(text_or_path: str) -> dict[str, Any]:
    """The mapping of a ``-y`` argument: a YAML (or JSON) file path or YAML text, as plain JSON data."""
    from ..specs.io import parse_text, read_document

    if text_or_path.lower().endswith((".yaml", ".yml", ".json")) or os.path.isfile(text_or_path):
        data = read_document(text_or_path)  # os.path.isfile never raises (a name too long is False)
        where = text_or_path
    else:
        where = "-y"
        data = parse_text(text_or_path, yaml_syntax=True, where=where)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(where, data, "is not valid: expected a mapping of parameter names to values")
    return data


def check_specs(values: dict[str, Any], base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Validate network/cluster/dataset values now (one-line errors) and make spec paths absolute.

    The kernel runs in the output folder, so a relative spec file path is resolved here against the
    caller's folder (``base_dir``, default the current one).
    """
    from .. import presets
    from ..specs import Cluster, Dataset, Network
    from .analysis import _resolve

    loaders = {"network": (Network, presets.network), "cluster": (Cluster, presets.cluster),
               "dataset": (Dataset, presets.dataset)}
    out = dict(values)
    for name, (cls, loader) in loaders.items():
        v = out.get(name)
        if v is None or v == "":
            continue
        if isinstance(v, str) and v not in presets.names(SPEC_PARAMETERS[name]):
            path = Path(base_dir or os.getcwd()) / v
            if os.path.exists(path):  # (never raises, even for text too long to be a file name)
                v = str(path.resolve())
                out[name] = v
        try:
            _resolve(cls, v, name, loader)
        except SpecError as err:
            _reraise(name, err)
    if isinstance(out.get("configuration"), dict):
        from ..specs import Configuration

        try:
            Configuration.build(out["configuration"], where="configuration")
        except SpecError as err:
            _reraise("configuration", err)
    return out


def _reraise(name: str, err: SpecError) -> None:
    field = err.field if err.field.startswith(name) else f"{name} {err.field}"
    raise SpecError.plain(f"parameter {field}", str(err).split(": ", 1)[-1]) from None
