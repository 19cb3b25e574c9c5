"""Where the studies are: every ``notebooks/*_study.ipynb`` is a study named by its prefix.

``mnist_study.ipynb`` is the study ``mnist``; a new notebook dropped next to it (``esgd_study.ipynb``)
is found without any registration. The notebooks folder is installed as ``dnnbench.notebooks``.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..errors import SpecError

SUFFIX = "_study.ipynb"


def notebooks_dir() -> Path:
    """The folder of the shipped notebooks (the installed ``dnnbench.notebooks`` package)."""
    return Path(str(resources.files("dnnbench.notebooks")))


def available() -> dict[str, Path]:
    """Study name -> notebook path, sorted by name."""
    folder = notebooks_dir()
    found = {p.name[: -len(SUFFIX)]: p for p in folder.glob(f"*{SUFFIX}") if p.is_file()}
    return dict(sorted(found.items()))


def find(name: str | os.PathLike[str]) -> tuple[str, Path]:
    """(study name, notebook path) from a study name or a path to a ``*_study.ipynb`` notebook."""
    text = os.fspath(name)
    studies = available()
    if text in studies:
        return text, studies[text]
    p = Path(text)
    if p.suffix == ".ipynb":
        if not os.path.isfile(p):  # (never raises, even for a name too long)
            raise SpecError("study", text, "does not exist")
        stem = p.name[: -len(SUFFIX)] if p.name.endswith(SUFFIX) else p.stem
        return stem, p
    raise SpecError("study", text, f"is not a study; expected one of {', '.join(studies) or '(none installed)'}")
