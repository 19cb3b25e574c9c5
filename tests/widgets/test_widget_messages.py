"""What showing the workbench costs the browser: the comm messages its widgets send, shared layouts and
styles that never change, and the layer editor's pages.

The kernel sends every widget model's state over its IOPub socket. That socket and the Jupyter server's
end of it queue about a thousand messages each (ZeroMQ's default high-water mark); a burst beyond what
both hold while the server is busy loses messages, and the browser then shows a panel without the
widgets whose models never arrived ("widget model not found"). The workbench stays well under one
queue's worth for every network, because the layer editor shows one page of layers at a time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import comm as comm_package
import ipywidgets.widgets.widget as widget_module
import pytest
from comm.base_comm import BaseComm
from dnnbench.widgets import Workbench, base
from dnnbench.widgets.network_panel import PAGE_LAYERS, NetworkPanel
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.specs import LAYER_TYPES

#: Messages the workbench may send when it is first shown (one ZeroMQ queue holds 1000).
MESSAGE_BUDGET = 1000


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every comm message widgets send from now on, counted by type (comm_open, update, close)."""
    counts: Counter[str] = Counter()

    class CountingComm(BaseComm):
        def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None,
                        **keys: Any) -> None:
            method = (data or {}).get("method") if msg_type == "comm_msg" else None
            counts[f"{msg_type}:{method}" if method else msg_type] += 1

    monkeypatch.setattr(comm_package, "create_comm", lambda *a, **k: CountingComm(*a, **k))
    monkeypatch.setattr(base, "_SHARED", {})  # shared models made before would not be counted
    return counts


@pytest.mark.parametrize("network", ["imagenet22k-adam", "lenet5", "resnet50", "bert-base", "mobilenet-v2"])
def test_showing_the_workbench_stays_within_one_queue(messages: Counter[str], network: str) -> None:
    wb = Workbench(network=network, cluster="adam-2014")
    try:
        assert messages["comm_open"] > 300  # the counting comm saw the widgets being made
        total = sum(messages.values())
        assert total <= MESSAGE_BUDGET, f"{network}: {total} messages ({dict(messages)})"
    finally:
        wb.close()


def test_turning_pages_closes_the_rows_it_leaves(messages: Counter[str]) -> None:
    """A page turn makes one page of rows and closes the last: widgets in the kernel stay bounded."""
    net = presets.network("resnet50")
    panel = NetworkPanel(net, "imagenet1k")
    try:
        panel.show_page(1)
        live = len(widget_module._instances)
        for page in (2, 3, 4, 1, 7, 0, 3):
            panel.show_page(page)
        panel.show_page(1)
        assert len(widget_module._instances) == live
        assert messages["comm_close"] > 0
    finally:
        panel.close()


def _exercise(wb: Workbench) -> None:
    """Edits that show, hide and rebuild parts of every panel."""
    cp = wb.cluster_panel
    for mode in ("MAC times", "accelerator", "peak rate"):
        assert cp.worker.rate is not None
        cp.worker.rate.value = mode
    cp.host_cores.value = 4
    cp.host_cores.value = 0
    cp.node_parts["devices"].widget.value = 8
    cp.node_parts["devices"].widget.value = 0
    cp.ps_same.value = not cp.ps_same.value
    cp.classes.add()
    cp.classes.remove(cp.classes.rows[0])
    cp.worker.fields["cores"].widget.value = -1  # an error line appears
    cp.worker.fields["cores"].widget.value = 8
    wb.network_panel.preset.value = "resnet50"
    wb.network_panel.show_page(3)
    wb.network_panel.row(2).kind.value = "dropout"
    wb.config_panel.fields["data_parallel"].widget.value = "allreduce"
    wb.config_panel.fields["replicas"].widget.value = -2


def test_shared_layouts_and_styles_never_change() -> None:
    wb = Workbench(network="imagenet22k-adam", cluster="adam-2014")
    try:
        before = {key: model.get_state() for key, model in base._SHARED.items()}
        assert len(before) >= 10
        _exercise(wb)
        after = {key: base._SHARED[key].get_state() for key in before}
        assert after == before
        # A field hidden got a layout of its own; the shared one is still shown.
        hidden = [f for f in wb.cluster_panel.worker.fields.values() if not f.visible]
        assert hidden and all(f.box.layout is not base.layout(margin="0") for f in hidden)
        assert base.layout(margin="0").display is None
    finally:
        wb.close()


def test_a_closed_shared_model_is_made_anew() -> None:
    first = base.layout(width="123px")
    assert base.layout(width="123px") is first
    first.close()
    again = base.layout(width="123px")
    assert again is not first and again.comm is not None and again.width == "123px"


def _normal(layer: dict[str, Any]) -> dict[str, Any]:
    """A layer's data with every default filled in (a row's data leaves defaults out)."""
    return dict(LAYER_TYPES[layer["kind"]].model_validate(layer).model_dump(mode="json"))


# Editing a network of several pages: the layers as typed follow the same edits on a plain list.
_OPS = st.lists(st.tuples(st.sampled_from(["up", "down", "delete", "page", "edit"]), st.integers(0, 10_000)),
                min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(ops=_OPS)
def test_the_layer_pages_edit_the_whole_network(ops: list[tuple[str, int]]) -> None:
    net = presets.network("vgg16")  # 26 layers: two pages
    assert len(net.layers) > PAGE_LAYERS
    panel = NetworkPanel(net, "imagenet1k")
    expected = [_normal(layer.model_dump(mode="json")) for layer in net.layers]
    try:
        for op, n in ops:
            if op == "page":
                panel.show_page(n % panel.pages)
                continue
            i = n % len(expected)
            row = panel.row(i)
            assert row.position == i and row.kind.value == expected[i]["kind"]
            if op == "edit" and i > 0:
                row.name.value = expected[i]["name"] = f"edited-{n}"
            elif op == "delete" and i > 0:
                row.remove.click()
                del expected[i]
            elif op in ("up", "down"):
                j = i + (-1 if op == "up" else 1)
                (row.up if op == "up" else row.down).click()
                if i > 0 and 1 <= j < len(expected):
                    expected[i], expected[j] = expected[j], expected[i]
            assert [_normal(d) for d in panel.data()["layers"]] == expected
            # The page on screen shows consecutive layers, numbered by their place in the network.
            first = panel.page * PAGE_LAYERS
            assert [r.position for r in panel.rows] == list(range(first, min(first + PAGE_LAYERS, len(expected))))
            assert [r.index.value for r in panel.rows] == [str(r.position) for r in panel.rows]
            assert [r.box for r in panel.rows] == list(panel.rows_box.children)
    finally:
        panel.close()
