"""``dnnbench lab`` and ``dnnbench app``: open the workbench notebook in JupyterLab or as a Voila app.

The notebook ships inside the package (``dnnbench.notebooks/workbench.ipynb``). It is copied to a
user file (``./dnnbench-workbench.ipynb`` unless ``--notebook`` says otherwise) only when that file
does not exist yet, so the user's edits are never overwritten. Both servers listen on 127.0.0.1
unless ``--ip`` says otherwise and ask for a token (docs/security.md): JupyterLab its own, the app
(:mod:`dnnbench.face.appserver`) one generated here, handed over in ``JUPYTER_TOKEN`` and printed in the
app's URL. The app's kernels are confined (``DNNBENCH_APP_ROOT``: file fields only reach the app's
folder; ``DNNBENCH_APP_ALLOW_TORCH``: PyTorch factories, which import code, only with
``--allow-torch-factories``), at most ``--max-kernels`` run at once and idle ones are culled.

Nothing loads from the internet (docs/workbench.md, "Offline"): Voila gets ``BOKEH_RESOURCES=inline``
(BokehJS from the package, never a CDN) and dnnbench's Voila template ``dnnbench`` (Voila's ``lab``
template without its Font Awesome links to cdn.jsdelivr.net; it ships in ``dnnbench.widgets`` and is
found through ``JUPYTER_PATH``). The app is a long-running service that starts a kernel per page load,
so it culls kernels whose page is gone (docs/workbench.md, "Kernel culling").
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from ..cliargs import whole_number_at_least
from ..errors import SpecError

#: The user copy of the workbench notebook, in the current folder.
DEFAULT_NOTEBOOK = "dnnbench-workbench.ipynb"
LOCALHOST = "127.0.0.1"
#: Voila's port when none is given.
VOILA_PORT = 8866
#: dnnbench's Voila template (widgets/jupyter_data/voila/templates/dnnbench): "lab" without CDN links.
VOILA_TEMPLATE = "dnnbench"
#: Kernel culling of the app: a kernel with no open page and no activity for this long is shut down ...
CULL_IDLE_TIMEOUT_S = 120
#: ... checked this often. A page that is still open keeps its kernel (cull_connected stays False).
CULL_INTERVAL_S = 15
#: Pages (kernels) the app serves at once.
MAX_KERNELS = 8
#: Environment of the app's kernels: the folder file fields are confined to, and whether a network may
#: come from a PyTorch factory (``package.module:factory`` imports and runs that module).
APP_ROOT_ENV = "DNNBENCH_APP_ROOT"
APP_TORCH_ENV = "DNNBENCH_APP_ALLOW_TORCH"


def packaged_notebook() -> Path:
    """The workbench notebook inside the installed package (read-only for users of a wheel)."""
    return Path(str(resources.files("dnnbench.notebooks") / "workbench.ipynb"))


def user_notebook(path: str | os.PathLike[str] = DEFAULT_NOTEBOOK) -> Path:
    """``path``, copied from the packaged notebook if it does not exist yet (never overwritten)."""
    p = Path(path)
    if os.path.isdir(p):  # (os.path's tests answer False for a name too long, never raise)
        p = p / DEFAULT_NOTEBOOK
    if p.suffix != ".ipynb":
        raise SpecError("--notebook", str(p), "is not a .ipynb file")
    if os.path.lexists(p):
        if not os.path.isfile(p):
            raise SpecError("--notebook", str(p), "is not a regular file")
        return p
    source = packaged_notebook()
    if not source.is_file():
        raise SpecError("notebook", str(source), "is missing from the installed package (reinstall dnnbench)")
    from ..fileio import atomic_write, read_bytes

    atomic_write(p, read_bytes(source, "notebook"), "--notebook")
    return p


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_root(notebook: Path) -> tuple[Path, str]:
    """(the server's root folder, the notebook's path inside it): the current folder when the notebook
    is inside it, else the notebook's own folder."""
    full = notebook.resolve()
    here = Path.cwd().resolve()
    root = here if full.is_relative_to(here) else full.parent
    return root, full.relative_to(root).as_posix()


def lab_command(notebook: Path, ip: str = LOCALHOST, port: int | None = None, browser: bool = True) -> list[str]:
    """The JupyterLab command line (token authentication left on), serving :func:`lab_root`."""
    root, rel = lab_root(notebook)
    cmd = [sys.executable, "-m", "jupyter", "lab", rel, f"--ServerApp.ip={ip}", f"--ServerApp.root_dir={root}"]
    if _is_root():  # JupyterLab refuses root without it (containers, CI machines); the token still guards it
        cmd.append("--allow-root")
    if port is not None:
        cmd.append(f"--ServerApp.port={port}")
    if not browser:
        cmd.append("--no-browser")
    return cmd


def lab_environment(notebook: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) telling dnnbench's JupyterLab extension to run
    ``notebook`` once when the page opens (``dnnbench.face.labext.RUN_ON_START_ENV``): the command lands on
    the running workbench, as the launcher tile does."""
    from .labext import RUN_ON_START_ENV

    env = dict(os.environ if base is None else base)
    env[RUN_ON_START_ENV] = lab_root(notebook)[1]
    # Defaults for this JupyterLab only (a user's own settings still win): no "Jupyter news" prompt and
    # no update check over the workbench. JupyterLab reads labconfig/default_setting_overrides.json from
    # every folder of the Jupyter config path.
    extra = str(lab_config_dir())
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (extra, env.get("JUPYTER_CONFIG_PATH", "")) if p)
    return env


def lab_config_dir() -> Path:
    """dnnbench's Jupyter config folder for ``dnnbench lab`` (labconfig/default_setting_overrides.json)."""
    return Path(str(resources.files("dnnbench.widgets") / "jupyter_data" / "lab_config"))


def app_command(notebook: Path, port: int | None = None, browser: bool = True,
                cull_idle_timeout_s: int = CULL_IDLE_TIMEOUT_S, cull_interval_s: int = CULL_INTERVAL_S,
                ip: str = LOCALHOST, max_kernels: int = MAX_KERNELS) -> list[str]:
    """The app's command line (:mod:`dnnbench.face.appserver`, Voila with a token and a Host check):
    dnnbench's offline template, at most ``max_kernels`` kernels, idle ones culled
    (``cull_idle_timeout_s`` 0 turns culling off). Run it with :func:`app_environment`."""
    cmd = [sys.executable, "-m", "dnnbench.face.appserver", str(notebook), f"--Voila.ip={ip}",
           "--Voila.auto_token=True",
           f"--VoilaConfiguration.template={VOILA_TEMPLATE}",
           "--VoilaConfiguration.multi_kernel_manager_class=dnnbench.face.appserver.CappedKernelManager",
           f"--CappedKernelManager.max_kernels={int(max_kernels)}",
           f"--MappingKernelManager.cull_idle_timeout={int(cull_idle_timeout_s)}",
           f"--MappingKernelManager.cull_interval={int(cull_interval_s)}"]
    if not _is_loopback(ip):  # served to other hosts: any Host header, as Jupyter does; the token stays
        cmd.append("--DnnbenchApp.allow_remote_access=True")
    if port is not None:
        cmd.append(f"--port={port}")
    if not browser:
        cmd.append("--no-browser")
    return cmd


def _is_loopback(ip: str) -> bool:
    import ipaddress

    if ip == "localhost":
        return True
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def voila_data_dir() -> Path:
    """The Jupyter data folder that holds dnnbench's Voila template (``voila/templates/dnnbench``)."""
    return Path(str(resources.files("dnnbench.widgets") / "jupyter_data"))


def app_environment(base: Mapping[str, str] | None = None, *, token: str | None = None, root: Path | None = None,
                    allow_torch: bool = False) -> dict[str, str]:
    """``base`` (default: this process's environment) with inline BokehJS, dnnbench's Voila template on
    ``JUPYTER_PATH`` (first, so it wins), the app's token (``JUPYTER_TOKEN``; a new random one when
    ``token`` is None) and its kernels' confinement: file fields reach only ``root`` (default: the
    current folder) and PyTorch factories only with ``allow_torch``."""
    import secrets

    env = dict(os.environ if base is None else base)
    env["BOKEH_RESOURCES"] = "inline"  # BokehJS from the package: nothing from a CDN
    data = str(voila_data_dir())
    rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != data]
    env["JUPYTER_PATH"] = os.pathsep.join([data, *rest])
    env["JUPYTER_TOKEN"] = secrets.token_urlsafe(32) if token is None else token
    env.pop("JUPYTER_TOKEN_FILE", None)
    env[APP_ROOT_ENV] = str((root or Path.cwd()).resolve())
    env[APP_TORCH_ENV] = "1" if allow_torch else "0"
    return env


def app_url(ip: str, port: int, token: str) -> str:
    """The URL the app prints and opens: it carries the token."""
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}/?token={token}"


def _run(cmd: list[str], env: dict[str, str] | None, dry_run: bool) -> int:
    if dry_run:
        print(shlex.join(cmd))
        return 0
    try:
        return subprocess.call(cmd, env=env)
    except FileNotFoundError as exc:
        raise SpecError("command", cmd[0], f"cannot be started ({exc.strerror})") from None


def cmd_lab(args: argparse.Namespace) -> int:
    notebook = user_notebook(args.notebook)
    print(f"dnnbench lab: opening {notebook} (your copy; edits are kept)", file=sys.stderr)
    return _run(lab_command(notebook, args.ip, args.port, browser=not args.no_browser), lab_environment(notebook),
                args.dry_run)


def cmd_app(args: argparse.Namespace) -> int:
    notebook = user_notebook(args.notebook)
    port = args.port if args.port is not None else VOILA_PORT
    cmd = app_command(notebook, port, browser=not args.no_browser, cull_idle_timeout_s=args.cull_idle_timeout,
                      ip=args.ip, max_kernels=args.max_kernels)
    env = app_environment(root=notebook.resolve().parent, allow_torch=args.allow_torch_factories)
    if not args.dry_run:  # the token is printed for the user, never put on a command line
        print(f"dnnbench app: serving {notebook} at {app_url(args.ip, port, env['JUPYTER_TOKEN'])}", file=sys.stderr)
    return _run(cmd, env, args.dry_run)


_port = whole_number_at_least(1, 65535, what="port number")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``lab`` and ``app`` to the ``dnnbench`` command (cli.PLUGINS)."""
    p = subparsers.add_parser("lab", help="open the workbench notebook in JupyterLab")
    p.add_argument("--notebook", default=DEFAULT_NOTEBOOK,
                   help=f"your copy of the workbench notebook (default: ./{DEFAULT_NOTEBOOK}; created if absent)")
    p.add_argument("--ip", default=LOCALHOST, help=f"address to listen on (default: {LOCALHOST})")
    p.add_argument("--port", type=_port, help="port (default: JupyterLab's, 8888 or the next free one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(func=cmd_lab)

    p = subparsers.add_parser("app", help="serve the workbench as a standalone app (Voila, 127.0.0.1, token)")
    p.add_argument("--notebook", default=DEFAULT_NOTEBOOK,
                   help=f"your copy of the workbench notebook (default: ./{DEFAULT_NOTEBOOK}; created if absent); "
                        "the app's file fields reach only its folder")
    p.add_argument("--ip", default=LOCALHOST, help=f"address to listen on (default: {LOCALHOST}; another address "
                                                   "serves other hosts, still with the token)")
    p.add_argument("--port", type=_port, help=f"port (default: {VOILA_PORT})")
    p.add_argument("--max-kernels", type=whole_number_at_least(1, 1000), default=MAX_KERNELS, metavar="N",
                   help=f"pages served at once, each with its own kernel (default: {MAX_KERNELS})")
    p.add_argument("--allow-torch-factories", action="store_true",
                   help="let the network panel load package.module:factory (imports and runs that module)")
    p.add_argument("--cull-idle-timeout", type=whole_number_at_least(0, 30 * 86400), default=CULL_IDLE_TIMEOUT_S,
                   metavar="SECONDS",
                   help=f"shut down a kernel whose page is closed after this many idle seconds "
                        f"(default: {CULL_IDLE_TIMEOUT_S}; 0: never)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(func=cmd_app)
