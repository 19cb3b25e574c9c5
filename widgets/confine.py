"""Where the workbench's file fields may reach (docs/security.md, "The app").

In JupyterLab the workbench runs in the user's own kernel and any path the user types is theirs to
use. Under ``dnnbench app`` the kernel's environment says otherwise (set by :mod:`dnnbench.face.launch`):

- ``DNNBENCH_APP_ROOT``: file fields (state, HTML export, network and cluster files) are confined to
  this folder: no absolute paths, no ``~``, no ``..``, and nothing that a symlink leads out of it;
- ``DNNBENCH_APP_ALLOW_TORCH``: ``1`` lets the network panel load ``package.module:factory``, which
  imports a module and so runs its code; anything else refuses it with one line.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from dnnbench.errors import SpecError
from dnnbench.face.launch import APP_ROOT_ENV, APP_TORCH_ENV  # set there, for the app's kernels


def app_root() -> Path | None:
    """The folder the app's file fields are confined to; None outside the app (no confinement)."""
    root = os.environ.get(APP_ROOT_ENV, "")
    return Path(root).resolve() if root else None


def torch_factories_allowed() -> bool:
    """True outside the app; inside it, only when the app was started with ``--allow-torch-factories``."""
    return app_root() is None or os.environ.get(APP_TORCH_ENV, "0") == "1"


def confine(text: str, field: str) -> str:
    """The path ``text`` names, if the app allows it (outside the app: ``text`` unchanged); otherwise a
    one-line :class:`SpecError` naming ``field``. Inside the app the result is the resolved path."""
    root = app_root()
    if root is None:
        return text
    rel = PurePath(text)
    if not text or rel.is_absolute() or text.startswith("~"):
        raise SpecError(field, text, "is not valid here: give a path inside the app's folder, relative to it")
    if ".." in rel.parts:
        raise SpecError(field, text, "is not valid here: '..' leads out of the app's folder")
    resolved = (root / rel).resolve()
    if not resolved.is_relative_to(root):
        raise SpecError(field, text, "is not valid here: it is a symlink out of the app's folder")
    return str(resolved)


def check_torch_allowed(source: str) -> None:
    if not torch_factories_allowed():
        raise SpecError("source", source, "is a PyTorch factory, which imports and runs a module: the app "
                                          "loads them only when started with --allow-torch-factories")


__all__ = ["APP_ROOT_ENV", "APP_TORCH_ENV", "app_root", "check_torch_allowed", "confine", "torch_factories_allowed"]
