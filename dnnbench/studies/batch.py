"""Batch reports: one study over a grid of parameters into one folder with an index page.

Every point of the grid is checked before any kernel starts. Points run one after another on this
machine by default, or on Dask distributed when given a scheduler address, ``"local"`` (a
LocalCluster of this machine) or a ``distributed.Client`` (architecture.md: sweeps that outgrow one
machine go to Dask, never to a home-made process pool). A failing point is recorded on the index
page with its one-line error; the other points still run.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .runner import StudyError, prepare, run


@dataclass(frozen=True)
class BatchResult:
    study: str
    out_dir: Path
    index_path: Path
    points: list[dict[str, Any]] = field(default_factory=list)  # one summary per grid point
    elapsed_s: float = 0.0

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [p for p in self.points if p["status"] != "ok"]


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The Cartesian product of ``grid`` (key -> list of values), in key order."""
    for key, values in grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise SpecError(f"grid {key}", values, "is not valid: expected a non-empty list of values")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def slug(point: dict[str, Any]) -> str:
    """A file-name-safe, readable, unique stem for a grid point: ``cluster-adam-2014__budgets-8-16``."""
    parts = []
    for key, value in point.items():
        if isinstance(value, (list, tuple)):
            text = "-".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = value.get("name") or hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:8]
        else:
            text = Path(str(value)).stem if os.sep in str(value) else str(value)
        parts.append(f"{key}-{text}")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts)).strip("._") or "point"
    if len(name) > 100:
        name = name[:80] + "-" + hashlib.sha1(name.encode()).hexdigest()[:10]
    return name


def _run_point(study: str, values: dict[str, Any], out_dir: str, stem: str) -> dict[str, Any]:
    """Run one point and summarise it (runs in this process or on a Dask worker)."""
    t0 = time.perf_counter()
    try:
        res = run(study, values, out_dir, stem=stem)
    except (StudyError, SpecError) as err:
        return {"stem": stem, "status": "failed", "error": str(err), "elapsed_s": time.perf_counter() - t0}
    return {"stem": stem, "status": "ok", "error": None, "elapsed_s": res.elapsed_s,
            "report": res.html_path.name if res.html_path else None, "results": res.results_path.name,
            "notebook": res.notebook_path.name, "headline": res.results.get("headline", {})}


def batch(name: str, grid: dict[str, list[Any]], out_dir: str | os.PathLike[str], scheduler: Any = None, *,
          parameters: dict[str, Any] | None = None, progress: bool = False) -> BatchResult:
    """Run study ``name`` at every point of ``grid`` (merged over ``parameters``) into ``out_dir``.

    ``scheduler``: None runs locally, one point after another; a Dask scheduler address, ``"local"``
    or a ``distributed.Client`` spreads the points over Dask workers. Writes ``index.html`` and
    ``index.json`` next to the reports.
    """
    points = grid_points(grid)
    base = dict(parameters or {})
    checked = []
    study = name
    for point in points:
        study, _, values = prepare(name, {**base, **point})
        checked.append((point, values, slug(point)))
    stems = [s for _, _, s in checked]
    if len(set(stems)) != len(stems):
        raise SpecError("grid", grid, "gives two points the same file name; use distinct values")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summaries = (_run_local(study, checked, out, progress) if scheduler is None
                 else _run_dask(study, checked, out, scheduler, progress))
    for (point, _, _), s in zip(checked, summaries, strict=True):
        s["point"] = point
    result = BatchResult(study=study, out_dir=out, index_path=out / "index.html", points=summaries,
                         elapsed_s=time.perf_counter() - t0)
    write_index(result, list(grid), base)
    return result


def _bar(total: int, progress: bool, study: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"study {study}", unit="report", disable=not progress)


def _run_local(study: str, checked: list[tuple[dict, dict, str]], out: Path, progress: bool) -> list[dict]:
    rows = []
    with _bar(len(checked), progress, study) as bar:
        for _, values, stem in checked:
            rows.append(_run_point(study, values, str(out), stem))
            bar.update(1)
    return rows


def _run_dask(study: str, checked: list[tuple[dict, dict, str]], out: Path, scheduler: Any,
              progress: bool) -> list[dict]:
    from distributed import Client, LocalCluster, as_completed

    own: list[Any] = []
    if isinstance(scheduler, Client):
        client = scheduler
    elif scheduler == "local":
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
        own = [client, cluster]
    else:
        client = Client(str(scheduler))
        own = [client]
    try:
        futures = [client.submit(_run_point, study, values, str(out), stem, pure=False, key=f"{study}-{stem}")
                   for _, values, stem in checked]
        with _bar(len(futures), progress, study) as bar:
            for _ in as_completed(futures):
                bar.update(1)
        return list(client.gather(futures))
    finally:
        for obj in own:
            obj.close()


def write_index(result: BatchResult, keys: list[str], base: dict[str, Any]) -> Path:
    """``index.html`` (a table linking every report) and ``index.json`` (the same as data)."""
    from ..specs.io import write_json_atomic
    from .report import _write_text_atomic, render_page

    heads = sorted({k for p in result.points for k in (p.get("headline") or {})})
    rows = []
    for p in result.points:
        cells = [f"<td>{html.escape(_short(p['point'].get(k)))}</td>" for k in keys]
        if p["status"] == "ok":
            links = (f'<a href="{html.escape(p["report"])}">report</a> · '
                     f'<a href="{html.escape(p["notebook"])}">notebook</a> · '
                     f'<a href="{html.escape(p["results"])}">results</a>')
            status = "ok"
        else:
            links, status = "", f"failed: {html.escape(p['error'] or '')}"
        nums = [f"<td>{_num((p.get('headline') or {}).get(h))}</td>" for h in heads]
        rows.append(f"<tr>{''.join(cells)}<td>{links}</td>{''.join(nums)}<td>{status}</td>"
                    f"<td>{p['elapsed_s']:.1f}</td></tr>")
    header = ("".join(f"<th>{html.escape(k)}</th>" for k in keys) + "<th>files</th>"
              + "".join(f"<th>{html.escape(h.replace('_', ' '))}</th>" for h in heads)
              + "<th>status</th><th>run s</th>")
    fixed = "".join(f"<li><code>{html.escape(k)}</code> = {html.escape(_short(v))}</li>" for k, v in base.items())
    body = (f"<h1>Study {html.escape(result.study)}: {len(result.points)} reports</h1>\n"
            f"<p>One report per grid point; {len(result.failed)} failed. Total run time {result.elapsed_s:.1f} s.</p>\n"
            + (f"<p>Parameters common to all points:</p><ul>{fixed}</ul>\n" if fixed else "")
            + f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    _write_text_atomic(result.index_path, render_page(f"dnnbench study {result.study}: batch", body, []))
    from .analysis import json_ready

    write_json_atomic(result.out_dir / "index.json", json_ready({
        "study": result.study, "grid_keys": keys, "parameters": base, "elapsed_s": result.elapsed_s,
        "points": result.points}))
    return result.index_path


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("name") or "{...}")
    return str(v)


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape("" if v is None else str(v))
