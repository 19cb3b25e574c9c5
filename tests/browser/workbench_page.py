"""Driving the workbench in a page: open, run, set a field, read BokehJS data (tests and benchmarks)."""

from __future__ import annotations

import time
from typing import Any

from servers import SOURCE_DATA_JS


def open_in_lab(page: Any, base_url: str, timeout_ms: float = 180_000) -> None:
    """Open workbench.ipynb in JupyterLab, wait for the kernel, run all cells, wait for the plots."""
    page.goto(base_url + "lab/tree/workbench.ipynb", timeout=timeout_ms)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=timeout_ms)
    page.locator(".jp-Notebook").first.click()  # focus the notebook so "Run" acts on it
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    wait_for_plots(page, timeout_ms)


def open_in_voila(page: Any, base_url: str, timeout_ms: float = 180_000) -> None:
    page.goto(base_url, timeout=timeout_ms)
    wait_for_plots(page, timeout_ms)


def wait_for_plots(page: Any, timeout_ms: float) -> None:
    page.locator(".dnnbench-workbench").first.wait_for(timeout=timeout_ms)
    page.wait_for_function(f"() => ({SOURCE_DATA_JS})('speedup_current') !== null", timeout=timeout_ms)


def source(page: Any, name: str) -> dict[str, list[Any]] | None:
    return page.evaluate(SOURCE_DATA_JS, name)


def visible_input(page: Any, css: str, timeout_s: float = 60.0) -> Any:
    """The first input under ``css`` once it is visible: between polls it is scrolled into view (the
    browser may skip rendering the part of a notebook below the viewport). On timeout the error says
    whether the input was in the page at all and which workbench tab was selected."""
    box = page.locator(f"{css} input").first
    deadline = time.monotonic() + timeout_s
    while not box.is_visible():
        if time.monotonic() > deadline:
            found = page.evaluate("(c) => document.querySelectorAll(c).length", f"{css} input")
            tab = page.evaluate("() => Array.from(document.querySelectorAll("
                                "'.dnnbench-tabs .lm-TabBar-tab[aria-selected=\"true\"]')).map(t => t.textContent)")
            panel = page.evaluate("() => Array.from(document.querySelectorAll("
                                  "'.dnnbench-tabs > .lm-TabPanel-stackedPanel > .lm-Widget:not(.lm-mod-hidden)'))"
                                  ".map(e => e.innerText.slice(0, 300))")
            raise AssertionError(f"no visible input under {css!r} after {timeout_s} s ({found} in the page; "
                                 f"selected tab {tab}; its panel shows {panel}; page errors "
                                 f"{getattr(page, 'errors', None)})")
        page.evaluate("(c) => { const e = document.querySelector(c); if (e) e.scrollIntoView({block: 'center'}); }",
                      f"{css} input")
        page.wait_for_timeout(200)
    return box


def set_text(page: Any, css: str, value: str) -> None:
    """Type into the first input under ``css`` and commit it (Enter), as a user would."""
    box = visible_input(page, css)
    box.fill(value)
    box.press("Enter")


def wait_for_change(page: Any, name: str, column: str, before: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll BokehJS until column ``column`` of source ``name`` differs from ``before``; return the data."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = source(page, name)
        if data is not None and data.get(column) != before:
            return data
        page.wait_for_timeout(5)
    raise AssertionError(f"{name}.{column} did not change from {before} within {timeout_s} s")


def wait_for_more(page: Any, css: str, count: int, timeout_s: float = 180.0) -> None:
    """Poll until more than ``count`` elements match ``css``, scrolling the last of them into view
    between polls: JupyterLab may leave the part of an output far below the viewport unrendered."""
    deadline = time.monotonic() + timeout_s
    js = "(c) => document.querySelectorAll(c).length"
    while page.evaluate(js, css) <= count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{page.evaluate(js, css)} elements match {css!r} after {timeout_s} s, "
                                 f"expected more than {count}")
        page.evaluate("(c) => { const all = document.querySelectorAll(c); "
                      "if (all.length) all[all.length - 1].scrollIntoView({block: 'center'}); }", css)
        page.wait_for_timeout(200)


def open_tab(page: Any, title: str, timeout_s: float = 60.0) -> None:
    """Click the workbench's tab ``title`` until Lumino marks it selected (a click that lands while the
    tab bar re-renders is lost, and the panel's inputs would stay hidden)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    tab = page.locator(".dnnbench-tabs .lm-TabBar-tab", has_text=title).first
    selected = page.locator('.dnnbench-tabs .lm-TabBar-tab[aria-selected="true"]', has_text=title).first
    deadline = time.monotonic() + timeout_s
    while True:
        tab.click()
        try:
            selected.wait_for(timeout=2_000)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise


def assert_offline(page: Any) -> None:
    """Fail if the page (or any page of its context) requested anything outside 127.0.0.1."""
    external = list(getattr(page, "external_requests", []))
    assert not external, f"requests left 127.0.0.1 (nothing may load from the internet): {external}"


#: True once a Font Awesome face (the ipywidgets button icons) has loaded — from the server, offline.
FONT_AWESOME_LOADED_JS = """
() => Array.from(document.fonts).some(f => f.family.includes('Font Awesome') && f.status === 'loaded')
"""


def wait_for_icons(page: Any, timeout_ms: float = 30_000) -> None:
    """Wait until the button icons' font (Font Awesome) has loaded."""
    page.wait_for_function(FONT_AWESOME_LOADED_JS, timeout=timeout_ms)


def wait_for_file(path: Any, page: Any, timeout_s: float = 60.0) -> None:
    """Poll until ``path`` exists (a file the kernel writes), letting the page run meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"{path} was not written within {timeout_s} s")


def input_value(page: Any, css: str) -> str:
    return visible_input(page, css).input_value()
