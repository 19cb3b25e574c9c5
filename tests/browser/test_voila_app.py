"""``dnnbench app``'s server as a long-running service (docs/security.md, "The app"): a token on every
page, a Host check against DNS rebinding, a cap on kernels, and idle kernels of closed pages culled.

No browser: a plain GET renders the notebook (and starts its kernel) and nothing keeps a connection
open afterwards, which is what a closed tab leaves behind.
"""

from __future__ import annotations

import http.client
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import servers

pytestmark = [pytest.mark.slow]


def _get(url: str, host: str | None = None, timeout_s: float = 180) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={"Host": host} if host else {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def _kernels_started(log: Path) -> int:
    return log.read_text(errors="replace").count("Kernel started")


def test_app_asks_for_the_token_checks_the_host_and_caps_kernels(tmp_path: Path) -> None:
    with servers.voila(tmp_path, max_kernels=1, cull_idle_timeout_s=0) as server:
        # Without the token (or with a wrong one): the login page, and no kernel is started.
        for url in (server.url, server.url + "?token=wrong"):
            status, body = _get(url)
            assert status in (200, 302, 403) and "dnnbench-workbench" not in body and "jupyter-config-data" not in body
        # A web page that rebinds its own name to 127.0.0.1 sends its own Host header: refused, even
        # with the token (which such a page would not have anyway).
        status, _ = _get(server.page, host="attacker.example:80")
        assert status == 403
        assert _kernels_started(server.log) == 0
        # With the token: the app.
        status, page = _get(server.page)
        assert status == 200 and ("dnnbench-workbench" in page or "jupyter-config-data" in page)
        # App mode reads as an app: the title and its one line, not the notebook's instructions.
        assert "dnnbench workbench" in page and "the configuration that trains it fastest" in page
        assert "Run all cells" not in page and "dnnbench-notebook-only" not in page
        assert _kernels_started(server.log) == 1
        # A second page while the first page's kernel runs: over the cap of 1.
        status, body = _get(server.page)
        assert status == 503 and "kernels running, the limit" in server.log.read_text(errors="replace")
        assert _kernels_started(server.log) == 1


def test_app_culls_the_kernel_of_a_closed_page(tmp_path: Path) -> None:
    with servers.voila(tmp_path, cull_idle_timeout_s=2, cull_interval_s=1) as server:
        with urllib.request.urlopen(server.page, timeout=180) as resp:
            page = resp.read().decode("utf-8")
        assert "dnnbench-workbench" in page or "jupyter-config-data" in page
        assert "fontawesome-free" not in page  # dnnbench's template: no CDN stylesheets
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            log = server.log.read_text(errors="replace")
            if "Kernel shutdown" in log:
                break
            time.sleep(0.5)
        assert "Culling kernels with idle durations > 2 seconds at 1 second intervals" in log
        assert "Culling 'idle' kernel" in log and "Kernel shutdown" in log
