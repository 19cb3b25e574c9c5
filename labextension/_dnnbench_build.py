"""PEP 517 build backend: setuptools, after building the JupyterLab extension (docs/jupyterlab.md).

pyproject.toml points here (``backend-path = ["labextension"]``). Before a wheel, an editable
install or an sdist, ``npm ci`` (from package-lock.json) and ``npm run build`` turn
``labextension/src`` into ``labextension/build/labextension`` (TypeScript, then the federated bundle
made by ``@jupyter/builder``); ``[tool.setuptools.data-files]`` puts that folder into the wheel as
``share/jupyter/labextensions/dnnbench``, so users of the wheel need no node.

The step is skipped when the bundle is newer than every source file (a wheel built twice, or the
packaging tests) and when ``DNNBENCH_SKIP_LABEXTENSION=1`` (a Python-only build; the wheel then has
no front-end extension). Without node/npm it stops with a one-line message saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (re-exported PEP 517 hooks)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

EXT = Path(__file__).resolve().parent
BUNDLE = EXT / "build" / "labextension" / "package.json"
SOURCES = ("src", "style", "package.json", "package-lock.json", "tsconfig.json")


def _newest_source_mtime() -> float:
    newest = 0.0
    for name in SOURCES:
        p = EXT / name
        files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
        newest = max([newest, *(f.stat().st_mtime for f in files if f.exists())])
    return newest


def _npm(*args: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("dnnbench: building the JupyterLab extension needs node and npm (node >= 18) on PATH; "
                         "install them, or set DNNBENCH_SKIP_LABEXTENSION=1 for a build without it")
    print(f"dnnbench: npm {' '.join(args)} in {EXT}", file=sys.stderr, flush=True)
    # npm's progress and notices go to stderr: pip shows them with -v, and on failure.
    subprocess.run([npm, *args], cwd=EXT, check=True, stdout=sys.stderr)


def build_labextension() -> None:
    """Build ``labextension/build/labextension`` unless it is up to date (or skipped on purpose)."""
    if os.environ.get("DNNBENCH_SKIP_LABEXTENSION") == "1":
        print("dnnbench: DNNBENCH_SKIP_LABEXTENSION=1, the JupyterLab extension is not built", file=sys.stderr)
        return
    if not (EXT / "src").is_dir():  # an sdist built without the sources: use the bundle it carries
        return
    if BUNDLE.exists() and BUNDLE.stat().st_mtime >= _newest_source_mtime():
        return
    lock = EXT / "node_modules" / ".package-lock.json"
    if not lock.exists() or lock.stat().st_mtime < (EXT / "package-lock.json").stat().st_mtime:
        _npm("ci", "--no-audit", "--no-fund")
    _npm("run", "build")
    BUNDLE.touch()


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    build_labextension()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: dict | None = None,
                   metadata_directory: str | None = None) -> str:
    build_labextension()
    _editable_data_files()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def _editable_data_files() -> None:
    """Let setuptools' editable wheel carry ``data-files`` too (the extension must land in
    ``share/jupyter/labextensions`` with ``pip install -e .``). Its editable_wheel command installs
    them only if ``Distribution.has_data()`` is true, a method setuptools does not define (it has
    ``has_data_files``), so they are silently dropped; define it."""
    from setuptools.dist import Distribution

    if not hasattr(Distribution, "has_data"):
        Distribution.has_data = Distribution.has_data_files  # type: ignore[attr-defined]


def build_sdist(sdist_directory: str, config_settings: dict | None = None) -> str:
    build_labextension()
    return _setuptools.build_sdist(sdist_directory, config_settings)
