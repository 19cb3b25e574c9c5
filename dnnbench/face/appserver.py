"""The server behind ``dnnbench app``: Voila with JupyterLab's guards (docs/security.md).

Run as ``python -m dnnbench.face.appserver NOTEBOOK [Voila options]`` (``dnnbench app`` does). On top of
Voila it adds:

- **a token**, as JupyterLab asks for: every page and websocket needs ``?token=...`` (then a cookie).
  ``dnnbench app`` generates it and hands it over in ``JUPYTER_TOKEN`` (never on a command line, which
  other local users can read), and prints the URL that carries it;
- **a Host-header check**: only loopback addresses and :attr:`DnnbenchApp.local_hostnames` are served
  (Voila itself allows any Host, which lets a web page reach the app through DNS rebinding); a server
  started on another address allows remote Hosts, as Jupyter does, and still asks for the token;
- **a cap on kernels** (:class:`CappedKernelManager`): each page load starts a kernel; beyond
  ``max_kernels`` a page gets "503: too many open pages" instead of another kernel process.

Imported only by that command: the core never imports Voila.
"""

from __future__ import annotations

import threading
import webbrowser
from typing import Any

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado import web
from traitlets import Bool, Integer, List, Unicode
from voila.app import Voila

#: Pages (kernels) the app serves at once unless told otherwise.
DEFAULT_MAX_KERNELS = 8


class CappedKernelManager(AsyncMappingKernelManager):  # type: ignore[misc]  # untyped base
    """A kernel manager that refuses a new kernel when ``max_kernels`` are running."""

    max_kernels = Integer(DEFAULT_MAX_KERNELS, config=True,
                          help="Kernels (open pages) at most; a page beyond gets 503. 0: no limit.")

    async def start_kernel(self, *args: Any, **kwargs: Any) -> str:
        if kwargs.get("kernel_id") is None and 0 < self.max_kernels <= len(self.list_kernel_ids()):
            self.log.warning("dnnbench app: %d kernels running, the limit; refusing a new page", self.max_kernels)
            raise web.HTTPError(503, f"too many open pages ({self.max_kernels}); close one or wait for an idle "
                                     "one to be culled", reason="Too many open pages")
        return str(await super().start_kernel(*args, **kwargs))


class DnnbenchApp(Voila):  # type: ignore[misc]  # untyped base
    """Voila with a Host check and the token in the browser's first URL."""

    name = "dnnbench-app"
    allow_remote_access = Bool(False, config=True,
                               help="Serve any Host header (set when listening on a non-loopback address).")
    local_hostnames = List(Unicode(), ["localhost"], config=True,
                           help="Host names served besides loopback addresses.")

    def init_settings(self) -> dict[str, Any]:
        settings = dict(super().init_settings())
        settings["allow_remote_access"] = bool(self.allow_remote_access)
        settings["local_hostnames"] = list(self.local_hostnames)
        return settings

    def launch_browser(self) -> None:
        token = getattr(self.identity_provider, "token", "")
        url = self.connection_url + (f"?token={token}" if token else "")
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    DnnbenchApp.launch_instance(argv)


if __name__ == "__main__":
    main()
