"""CLI plugin: ``dnnbench study`` and ``dnnbench report`` (registered by ``dnnbench.cli.PLUGINS``).

    dnnbench study NAME [-p KEY VALUE ...] [-y YAML] [--out DIR] [--parameters]
    dnnbench report NAME --grid KEY=V1,V2 ... [-p KEY VALUE ...] [-y YAML] [--out DIR] [--scheduler ADDR]

Wrong names, types or spec values are one line on stderr and exit code 2 before any kernel starts;
a failing notebook is one line naming the cell and exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import SpecError


def _values(args: argparse.Namespace, study: str) -> dict[str, Any]:
    """Parameter values from -y (first) and -p (overriding), typed by the notebook's declarations."""
    from . import params
    from .registry import find

    name, notebook = find(study)
    declared = params.declared(notebook)
    values: dict[str, Any] = {}
    for y in args.yaml or []:
        values.update(params.read_yaml(y))
    for key, text in args.param or []:
        values[key] = params.parse_cli_value(name, declared, key, text)
    return values


def cmd_study(args: argparse.Namespace) -> int:
    from . import params
    from .registry import available, find
    from .runner import StudyError, prepare, run

    if args.name in ("list", "ls") and args.name not in available():
        for name, path in available().items():
            print(f"{name:<14}{path}")
        return 0
    if args.parameters:  # the declared parameters, after checking any values given with -p and -y
        name, notebook = find(args.name)
        prepare(args.name, _values(args, args.name))
        for p in params.declared(notebook).values():
            if p.name != params.RESULTS_PARAMETER:
                print(p.describe())
        return 0
    from ..fileio import check_output_folder

    values = _values(args, args.name)
    prepare(args.name, values)  # every check before the kernel starts (SpecError -> exit 2)
    check_output_folder(args.out, "--out")
    try:
        res = run(args.name, values, args.out, progress=not args.quiet, report=not args.no_report)
    except StudyError as err:
        print(f"dnnbench study: {err}", file=sys.stderr)
        return 1
    print(f"study {res.name}: {res.elapsed_s:.1f} s")
    print(f"  notebook {res.notebook_path}")
    print(f"  results  {res.results_path}")
    if res.html_path:
        print(f"  report   {res.html_path}")
    return 0


def _grid(items: list[str], study: str, args: argparse.Namespace) -> dict[str, list[Any]]:
    from . import params
    from .registry import find

    name, notebook = find(study)
    declared = params.declared(notebook)
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, rest = item.partition("=")
        if not sep or not key or not rest:
            raise SpecError("--grid", item, "is not valid: expected KEY=V1,V2,...")
        p = declared.get(key)
        if p is not None and params.matches([], p.type_name) and not params.matches("x", p.type_name):
            # A list-valued parameter: values separated by ';' (each a list like 8,16,32).
            texts = [t for t in rest.split(";") if t]
        else:
            texts = [t for t in rest.split(",") if t]
        grid[key] = [params.parse_cli_value(name, declared, key, t) for t in texts]
    return grid


def cmd_report(args: argparse.Namespace) -> int:
    from .batch import batch

    if not args.grid:
        raise SpecError("--grid", None, "is missing: give at least one KEY=V1,V2")
    from ..fileio import check_output_folder

    base = _values(args, args.name)
    grid = _grid(args.grid, args.name, args)
    check_output_folder(args.out, "--out")
    res = batch(args.name, grid, args.out, scheduler=args.scheduler, parameters=base, progress=not args.quiet)
    print(f"study {res.study}: {len(res.points)} reports in {res.elapsed_s:.1f} s, {len(res.failed)} failed")
    print(f"  index {res.index_path}")
    for p in res.failed:
        print(f"  failed {p['stem']}: {p['error']}", file=sys.stderr)
    return 1 if res.failed else 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("study", help="run a study notebook with papermill: notebook, results JSON, HTML report")
    p.add_argument("name", help="study name (mnist, imagenet22k, ...; 'list' lists them) or a *_study.ipynb path")
    _common(p)
    p.add_argument("--out", default=".", help="output folder (default: the current one)")
    p.add_argument("--parameters", action="store_true",
                   help="list the study's parameters and exit (after checking any -p and -y values)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.set_defaults(func=cmd_study)

    p = subparsers.add_parser("report", help="one study over a grid of parameters, with an index page")
    p.add_argument("name", help="study name or a *_study.ipynb path")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                   help="a parameter and its values (repeat for more keys; list values: KEY=8,16;8,32)")
    _common(p)
    p.add_argument("--out", default="reports", help="output folder (default: ./reports)")
    p.add_argument("--scheduler", help="Dask scheduler address, or 'local' for a LocalCluster (default: run here)")
    p.set_defaults(func=cmd_report)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="a parameter value (typed as the notebook declares it)")
    p.add_argument("-y", "--yaml", action="append", metavar="YAML",
                   help="parameters as YAML text or a YAML file (nested specs, e.g. a cluster mapping)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
