"""The study reports in headless Debian chromium: every Bokeh plot renders, nothing leaves file://."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

_COUNT_CANVASES = """() => {
  const count = (root) => { let n = root.querySelectorAll('canvas').length;
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) n += count(el.shadowRoot); return n; };
  return count(document);
}"""


def _open(html: Path) -> dict[str, Any]:
    """Open the report in a fresh thread: Playwright's sync API refuses a thread whose asyncio loop is
    running, and earlier in-process notebook runs (papermill, nbclient) may leave one installed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_open_here, html).result()


def _open_here(html: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    seen: dict[str, Any] = {"requests": [], "failed": [], "errors": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("request", lambda r: seen["requests"].append(r.url))
            page.on("requestfailed", lambda r: seen["failed"].append(r.url))
            page.on("pageerror", lambda e: seen["errors"].append(str(e)))
            page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
            page.goto(html.resolve().as_uri())
            n = page.evaluate("document.querySelectorAll('.bokeh-figure').length")
            page.wait_for_function(f"() => window.Bokeh && Bokeh.documents.length >= {n}", timeout=60_000)
            page.wait_for_function(f"() => ({_COUNT_CANVASES})() >= {n}", timeout=60_000)
            seen["figures"] = n
            seen["documents"] = page.evaluate("Bokeh.documents.length")
            seen["names"] = page.evaluate("Bokeh.documents.map(d => d.roots()[0].name)")
            seen["canvases"] = page.evaluate(_COUNT_CANVASES)
            seen["math"] = page.evaluate("document.querySelectorAll('math').length")
            seen["heights"] = page.evaluate(
                "[...document.querySelectorAll('.bokeh-figure')].map(e => e.getBoundingClientRect().height)")
            seen["speedup_points"] = page.evaluate(
                "(() => { const d = Bokeh.documents.find(d => d.get_model_by_name('speedup_optimal'));"
                " return d ? d.get_model_by_name('speedup_optimal').data.machines.length : null; })()")
        finally:
            browser.close()
    return seen


@pytest.mark.parametrize("fixture", ["mnist_run", "imagenet_run"])
def test_report_renders_offline(fixture, request):  # type: ignore[no-untyped-def]
    run = request.getfixturevalue(fixture)
    seen = _open(run["html"])
    assert [u for u in seen["requests"] if not u.startswith("file://")] == []
    assert seen["failed"] == [] and seen["errors"] == []
    assert seen["figures"] >= 9 and seen["documents"] == seen["figures"]
    assert {"layers", "breakdown", "model_parallel", "data_parallel", "speedup", "heatmap", "sensitivity",
            "update_batch"} <= set(seen["names"])
    assert seen["canvases"] >= seen["figures"]
    assert all(h > 100 for h in seen["heights"])  # each plot has laid out, not an empty div
    assert seen["math"] >= 20  # the equations are MathML
    assert seen["speedup_points"] == 16  # the optimizer's curve up to the largest budget of the run
