"""``dnnbench app``'s Voila as a long-running service: idle kernels of closed pages are culled.

No browser: a plain GET renders the notebook (and starts its kernel) and nothing keeps a connection
open afterwards, which is what a closed tab leaves behind.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
import servers

pytestmark = [pytest.mark.slow]


def test_app_culls_the_kernel_of_a_closed_page(tmp_path: Path) -> None:
    with servers.voila(tmp_path, cull_idle_timeout_s=2, cull_interval_s=1) as server:
        with urllib.request.urlopen(server.url, timeout=180) as resp:
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
