"""The package's module graph (README, "Development"): no import cycles, and the core never imports
the face or the widgets. Every import counts, lazy ones inside functions included; only typing-only
imports (under ``if TYPE_CHECKING:``) are left out."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Package -> its folder (dnnbench.widgets lives at the top level and installs into the package).
PACKAGES = {"dnnbench": ROOT / "dnnbench", "dnnbench.widgets": ROOT / "widgets"}
#: What people see and start: the face subpackage and the widgets.
FACE = ("dnnbench.face", "dnnbench.widgets")
#: Front ends that may use the face: the study reports (their figures are the face's plot builders)
#: and the command line (dnnbench lab and dnnbench app start the face's servers).
FRONT_ENDS = ("dnnbench.studies", "dnnbench.cli")


def _modules() -> dict[str, tuple[Path, bool]]:
    mods: dict[str, tuple[Path, bool]] = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if pkg == "dnnbench" and parts[0] in ("widgets", "labextension"):
                continue
            is_pkg = parts[-1] == "__init__"
            mods[".".join([pkg, *(parts[:-1] if is_pkg else parts)])] = (path, is_pkg)
    return mods


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package's own __init__ excluded for its members)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod and not (mods[target][1] and mod.startswith(target + ".")):
                    graph[mod].add(target)
    return graph


def test_there_are_no_import_cycles() -> None:
    graph = import_graph()
    assert "dnnbench.model.evaluate" in graph and graph["dnnbench.model.evaluate"]  # the walker sees imports
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None


def test_the_core_never_imports_the_face() -> None:
    graph = import_graph()
    core = [m for m in graph if not m.startswith(FACE + FRONT_ENDS) and m != "dnnbench"]
    assert "dnnbench.model.evaluate" in core and "dnnbench.measure.validate" in core
    wrong = sorted(f"{m} -> {t}" for m in core for t in graph[m] if t.startswith(FACE))
    assert not wrong, wrong
