"""The Python side of the dnnbench JupyterLab extension (GitHub issue 9, docs/jupyterlab.md).

The front end (``labextension/``) asks the Jupyter server for notebooks; this module makes them from
the templates shipped in ``dnnbench.notebooks``:

- a new workbench: ``workbench.ipynb`` as it ships (``workbench-1.ipynb``, ... when taken);
- a study notebook: a copy of the packaged one, made once and then reused (edits are kept);
- a spec file ``x.dnn.json`` (a network, a cluster or a saved workbench state): ``x.workbench.ipynb``
  next to it, the template plus a papermill-style ``injected-parameters`` cell that points the
  template's ``network``, ``cluster`` or ``state_file`` parameter at the file. Made once, then reused;
  it reads the spec file each time it runs.

Pure functions here; the server extension and its HTTP handlers are :mod:`dnnbench.face.labext_server`
(it needs jupyter_server, imported only when the server loads the extension). Enabled by
``etc/jupyter/jupyter_server_config.d/dnnbench.json`` (shipped in the wheel).
"""

from __future__ import annotations

import copy
import json
import math
import os
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from ..errors import SpecError
from ..specs.io import MAX_SPEC_BYTES, parse_text

#: Spec files the workbench opens: ``*.dnn.json`` (the front end registers the same file type).
SPEC_SUFFIX = ".dnn.json"
WORKBENCH = "workbench"
#: The template parameter each kind of spec file sets (notebooks/workbench.ipynb, ``parameters`` cell).
PARAMETER_FOR_KIND = {"network": "network", "cluster": "cluster", "state": "state_file"}


def _notebook_dir() -> Any:
    return resources.files("dnnbench.notebooks")


def read_packaged(name: str) -> dict[str, Any]:
    """The packaged notebook ``name`` (stem, e.g. ``"mnist_study"``) as nbformat JSON, outputs cleared."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise SpecError("notebook", name, "is not a notebook name (letters, digits, underscores)")
    source = _notebook_dir() / f"{name}.ipynb"
    if not source.is_file():
        raise SpecError("notebook", name, f"is not shipped with dnnbench (have: {', '.join(notebook_names())})")
    nb = json.loads(source.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def notebook_names() -> list[str]:
    """Stems of every packaged notebook, sorted."""
    return sorted(p.name[: -len(".ipynb")] for p in _notebook_dir().iterdir() if p.name.endswith(".ipynb"))


def notebook_title(nb: dict[str, Any], default: str) -> str:
    """The first Markdown heading of a notebook, without the ``#``; ``default`` when there is none."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        for line in "".join(cell.get("source", "")).splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return default


def study_notebooks() -> list[dict[str, str]]:
    """``[{"name", "title"}]`` for every packaged notebook except the workbench template."""
    out = []
    for name in notebook_names():
        if name != WORKBENCH:
            out.append({"name": name, "title": notebook_title(read_packaged(name), name.replace("_", " "))})
    return out


def spec_kind(data: Any, where: str) -> str:
    """``"network"``, ``"cluster"`` or ``"state"`` for a parsed spec document; validated, so a bad file
    fails here with the field path (one-line :class:`SpecError`) instead of in the notebook."""
    from ..specs import Cluster, Network
    from .state import WorkbenchState

    if not isinstance(data, dict):
        raise SpecError("file", where, "is not a JSON object (expected a network, cluster or workbench spec)")
    if "network" in data and "cluster" in data:
        kind, cls = "state", WorkbenchState
    elif "layers" in data:
        kind, cls = "network", Network
    elif "worker" in data or "machines" in data:
        kind, cls = "cluster", Cluster
    else:
        raise SpecError("file", where, "is neither a network (layers), a cluster (worker, machines) "
                                       "nor a saved workbench (network, cluster)")
    try:
        cls.build(data)
    except SpecError as exc:
        raise SpecError("file", where, f"is not a valid {kind} spec: {exc}") from None
    return kind


def workbench_notebook(parameters: dict[str, str] | None = None, source: str = "") -> dict[str, Any]:
    """The workbench template; with ``parameters``, an ``injected-parameters`` cell after its
    ``parameters`` cell sets them (the papermill convention), ``source`` naming where they came from."""
    nb = read_packaged(WORKBENCH)
    if not parameters:
        return nb
    cells = nb["cells"]
    at = next((i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if at is None:
        raise SpecError("notebook", "workbench.ipynb", "has no cell tagged 'parameters' (reinstall dnnbench)")
    text = "".join(cells[at].get("source", ""))
    for key in parameters:
        if not re.search(rf"^{re.escape(key)}\s*[:=]", text, flags=re.MULTILINE):
            raise SpecError("notebook", "workbench.ipynb", f"has no parameter {key!r} (reinstall dnnbench)")
    # Names and paths reach the notebook only as Python string literals (repr), never inside a comment
    # or as text of their own: a name holding a newline or a quote stays one literal.
    lines = ["# Injected by dnnbench (the spec file it was opened from)" if source else "# Injected by dnnbench"]
    lines += [f"{key} = {python_literal(value)}" for key, value in parameters.items()]
    injected = {"cell_type": "code", "execution_count": None, "metadata": {"tags": ["injected-parameters"]},
                "outputs": [], "source": "\n".join(lines)}
    if "id" in cells[at]:
        injected["id"] = "dnnbench-injected-parameters"
    new = copy.deepcopy(nb)
    new["cells"].insert(at + 1, injected)
    return new


def python_literal(value: str | int | float | bool | None) -> str:
    """``value`` as Python source that evaluates to it and to nothing else (``repr`` of a plain
    scalar; ``ast.literal_eval`` gives it back). Anything else is refused."""
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise SpecError("parameter", value, "is not valid: expected a string, number, boolean or None")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError("parameter", value, "is not valid: expected a finite number")
    return repr(value)


#: Characters never accepted in a file name the extension writes into a notebook: control characters
#: (newline, carriage return, NUL, ...), line and paragraph separators, and lone surrogates.
_REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})


def check_name(path: str, field: str = "file") -> str:
    """``path`` if none of its characters is refused (:data:`_REFUSED_CATEGORIES`), else a SpecError."""
    for i, ch in enumerate(path):
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            raise SpecError(field, path, f"is not valid: its name holds a control character (U+{ord(ch):04X} "
                                         f"at {i}); rename the file")
    return path


def spec_notebook(spec_path: str, text: str) -> tuple[str, dict[str, Any], str]:
    """For the spec file at server path ``spec_path`` with contents ``text``: the workbench notebook's
    path (next to it), the notebook, and the spec kind. The notebook names the file by its base name:
    the kernel starts in the notebook's folder."""
    check_name(spec_path)
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_SPEC_BYTES:
        raise SpecError("file", spec_path, f"is larger than the {MAX_SPEC_BYTES // 2**20} MiB limit for a spec file")
    base = posixpath.basename(spec_path)
    if not base.lower().endswith(SPEC_SUFFIX) or len(base) == len(SPEC_SUFFIX):
        raise SpecError("file", spec_path, f"is not a dnnbench spec file (*{SPEC_SUFFIX})")
    kind = spec_kind(parse_text(text, where=spec_path), spec_path)
    stem = base[: -len(SPEC_SUFFIX)]
    path = posixpath.join(posixpath.dirname(spec_path), f"{stem}.{WORKBENCH}.ipynb")
    return path, workbench_notebook({PARAMETER_FOR_KIND[kind]: base}, source=base), kind


def candidates(directory: str, stem: str, suffix: str = ".ipynb", limit: int = 10_000) -> Iterator[str]:
    """``directory/stem.ipynb``, then ``stem-1.ipynb``, ``stem-2.ipynb``, ... (``limit`` names)."""
    for i in range(limit):
        yield posixpath.join(directory, f"{stem}{'' if i == 0 else f'-{i}'}{suffix}")


def free_name(directory: str, stem: str, exists: Callable[[str], bool], suffix: str = ".ipynb") -> str:
    """The first of :func:`candidates` that ``exists`` says is free."""
    for path in candidates(directory, stem, suffix):
        if not exists(path):
            return path
    raise SpecError("folder", directory or "/", f"already has 10000 {stem}-N{suffix} notebooks")


def set_kernel(nb: dict[str, Any], available: dict[str, str], default: str) -> dict[str, Any]:
    """Keep the template's kernelspec when the server has it, otherwise use the server's default kernel.
    ``available`` maps kernel names to display names."""
    name = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if name not in available and default in available:
        nb.setdefault("metadata", {})["kernelspec"] = {"name": default, "display_name": available[default],
                                                       "language": "python"}
    return nb


#: Set by ``dnnbench lab`` for its server: the notebook (relative to the server's root) it opened, which
#: the front end runs once, so the command lands on the running workbench (docs/jupyterlab.md).
RUN_ON_START_ENV = "DNNBENCH_LAB_RUN"


def run_on_start(environ: dict[str, str] | None = None) -> str | None:
    """The notebook to run once at start (:data:`RUN_ON_START_ENV`), if it is a relative ``.ipynb``
    path without ``..`` or control characters; None otherwise."""
    text = (os.environ if environ is None else environ).get(RUN_ON_START_ENV, "")
    path = posixpath.normpath(text.replace(os.sep, "/")) if text else ""
    if not path.endswith(".ipynb") or path.startswith(("/", "../")) or path == ".." or "/../" in path:
        return None
    try:
        check_name(path)
    except SpecError:
        return None
    return path


__all__ = ["SPEC_SUFFIX", "candidates", "check_name", "free_name", "notebook_names", "python_literal",
           "read_packaged", "run_on_start", "set_kernel", "spec_kind", "spec_notebook", "study_notebooks",
           "workbench_notebook"]
