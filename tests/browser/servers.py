"""Start JupyterLab or Voila for browser tests: free port, temp dirs, no token (tests only), no news.

Shared by tests/browser/conftest.py and benchmarks/bench_browser.py. Every server is a child process
started here and stopped by its own pid.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@dataclass
class Server:
    url: str  # base URL, ending in "/"
    root: Path  # the folder the server serves (holds workbench.ipynb)
    process: subprocess.Popen[bytes]
    log: Path
    token: str = ""  # the app's token ("": JupyterLab started without one, tests only)

    @property
    def page(self) -> str:
        """The URL that opens the server's first page (with the token, as ``dnnbench app`` prints it)."""
        return f"{self.url}?token={self.token}" if self.token else self.url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jupyter_env(home: Path, news_settings: bool = True) -> dict[str, str]:
    """An environment whose Jupyter and IPython state lives under ``home`` (never the user's)."""
    env = dict(os.environ)
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
            "IPYTHONDIR": "ipython", "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
            "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces"}
    for var, sub in dirs.items():
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["BOKEH_RESOURCES"] = "inline"
    env["PYTHONUNBUFFERED"] = "1"
    if not news_settings:
        return env
    # No "Jupyter news" toast and no update check (the CLI flag does not stop it): user settings.
    notif = home / "lab-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notif.parent.mkdir(parents=True, exist_ok=True)
    notif.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8")
    # Every cell attached and rendered (the default skips rendering cells outside the viewport, which a
    # test that reads and types into the workbench's output would have to scroll for).
    tracker = home / "lab-settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}), encoding="utf-8")
    return env


def copy_notebook(root: Path) -> Path:
    from dnnbench.face.launch import packaged_notebook

    root.mkdir(parents=True, exist_ok=True)
    target = root / "workbench.ipynb"
    shutil.copyfile(packaged_notebook(), target)
    return target


def _wait(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"server at {url} did not answer within {timeout_s} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def jupyterlab(home: Path, as_dnnbench_lab: bool = False) -> Iterator[Server]:
    """JupyterLab on 127.0.0.1 and a free port, serving ``home/work`` with the workbench notebook;
    ``as_dnnbench_lab``: in ``dnnbench lab``'s environment (``dnnbench.face.launch.lab_environment``: the
    extension runs the notebook when the page opens; its own settings, not the tests', keep the news
    prompt away)."""
    root = home / "work"
    notebook = copy_notebook(root)
    if as_dnnbench_lab:
        from dnnbench.face.launch import lab_environment

        env = lab_environment(notebook, base=jupyter_env(home, news_settings=False))
    else:
        env = jupyter_env(home)
    port = free_port()
    log = home / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
           "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
           "--ServerApp.open_browser=False"] + ([] if as_dnnbench_lab else ["--LabApp.news_url="])
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait(url + "api/status", process, log)
        yield Server(url, root, process, log)
    finally:
        _stop(process)


@contextmanager
def voila(home: Path, **app_options: Any) -> Iterator[Server]:
    """Voila serving the workbench notebook on 127.0.0.1 and a free port, started as ``dnnbench app``
    starts it (:func:`dnnbench.face.launch.app_command` and ``app_environment``: BokehJS inline, dnnbench's
    offline template, kernel culling; ``app_options`` go to ``app_command``, e.g. a short culling)."""
    from dnnbench.face.launch import app_command, app_environment

    root = home / "work"
    notebook = copy_notebook(root)
    env = app_environment(jupyter_env(home), root=root)
    port = free_port()
    log = home / "voila.log"
    cmd = [*app_command(notebook, port, browser=False, **app_options), "--ServerApp.port_retries=0"]
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_port(port, process, log)  # GET / would already start a kernel: the test's first page load does
        yield Server(url, root, process, log, token=env["JUPYTER_TOKEN"])
    finally:
        _stop(process)


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s} s:\n{log.read_text()[-3000:]}")


# ---- nothing from the internet ----------------------------------------------------------------------

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
#: URL schemes that never touch the network.
LOCAL_SCHEMES = ("data", "blob", "about", "file", "chrome", "chrome-extension", "devtools")


def is_external(url: str) -> bool:
    """True for a URL that would leave this computer (anything but 127.0.0.1 / localhost, data:, file: ...)."""
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return False
    return (parts.hostname or "") not in LOCAL_HOSTS


def watch_external_requests(context: Any) -> list[str]:
    """Record, in the returned list, every request and WebSocket of ``context``'s pages (present and future)
    that leaves 127.0.0.1; tests assert the list is empty."""
    seen: list[str] = []

    def request(req: Any) -> None:
        if is_external(req.url):
            seen.append(f"{req.method} {req.url}")

    def websocket(ws: Any) -> None:
        if is_external(ws.url):
            seen.append(f"WebSocket {ws.url}")

    def watch(page: Any) -> None:
        page.on("websocket", websocket)

    context.on("request", request)
    context.on("page", watch)
    for page in context.pages:
        watch(page)
    return seen


# ---- BokehJS access from the page ------------------------------------------------------------------

#: The data of a named ColumnDataSource in any Bokeh document of the page, as plain arrays (or null).
SOURCE_DATA_JS = """
(name) => {
  if (typeof Bokeh === 'undefined' || !Bokeh.documents) return null;
  for (const doc of Bokeh.documents) {
    const m = doc.get_model_by_name(name);
    if (m && m.data) {
      const d = m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
      const out = {};
      for (const [k, v] of Object.entries(d)) out[k] = Array.from(v);
      return out;
    }
  }
  return null;
}
"""
