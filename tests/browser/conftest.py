"""Browser fixtures: JupyterLab and Voila started by the tests themselves, headless Debian chromium.

Servers bind 127.0.0.1 on free ports with temporary Jupyter/IPython dirs, no token (tests only) and
no news toast. Chromium is /usr/bin/chromium (``apt-get install chromium``; never ``playwright install``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import servers  # noqa: E402


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(servers.CHROMIUM).exists():
        pytest.fail(f"{servers.CHROMIUM} is missing: apt-get install -y chromium (browser tests need it)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=servers.CHROMIUM, args=servers.CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    with servers.jupyterlab(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="session")
def voila_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    with servers.voila(tmp_path_factory.mktemp("voila")) as server:
        yield server


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page; ``page.errors`` collects page errors and ``page.external_requests`` every request
    (and WebSocket) that leaves 127.0.0.1 — nothing may load from the internet (workbench_page.assert_offline)."""
    context = chromium.new_context(viewport={"width": 1500, "height": 1100})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors  # type: ignore[attr-defined]
    pg.external_requests = servers.watch_external_requests(context)  # type: ignore[attr-defined]
    yield pg
    context.close()
