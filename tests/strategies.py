"""Hypothesis strategies shared by the property tests: random valid networks, clusters, configurations."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.specs import Cluster


@st.composite
def network_dicts(draw: Any) -> dict[str, Any]:
    """A random valid network spec as plain data (convs and pools that fit, then FC layers)."""
    c = draw(st.integers(1, 4))
    h = draw(st.integers(4, 40))
    w = draw(st.integers(4, 40))
    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [c, h, w]}]
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(1, 5))
        pad = draw(st.integers(0, k // 2))
        if k > min(h, w) + 2 * pad:
            break
        stride = draw(st.integers(1, 2))
        layers.append({"kind": "conv2d", "out_channels": draw(st.integers(1, 24)), "kernel": k, "stride": stride,
                       "padding": pad, "activation": draw(st.sampled_from(["none", "relu", "tanh", "sigmoid"]))})
        h = (h + 2 * pad - k) // stride + 1
        w = (w + 2 * pad - k) // stride + 1
        if draw(st.booleans()) and min(h, w) >= 2:
            layers.append({"kind": "pool", "mode": draw(st.sampled_from(["max", "avg"])), "window": 2})
            h, w = h // 2, w // 2
        if draw(st.booleans()):
            layers.append({"kind": draw(st.sampled_from(["lrn", "batchnorm", "activation", "dropout"]))})
    layers.append({"kind": "flatten"})
    for _ in range(draw(st.integers(1, 3))):
        layers.append({"kind": "fc", "out_features": draw(st.integers(1, 300)),
                       "activation": draw(st.sampled_from(["none", "relu"]))})
    if draw(st.booleans()):
        layers.append({"kind": "softmax"})
    return {"name": "random", "layers": layers}


def scaled_cluster(base: Cluster, *, bandwidth: float = 1.0, mac: float = 1.0, elem: float = 1.0,
                   latency: float = 1.0) -> Cluster:
    """``base`` with NIC bandwidths multiplied by ``bandwidth`` and times by the other factors."""

    def nic(n: Any) -> Any:
        return n.evolve(upload_bits_per_s=n.upload_bits_per_s * bandwidth,
                        download_bits_per_s=n.download_bits_per_s * bandwidth, latency_s=n.latency_s * latency)

    def machine(m: Any) -> Any:
        rate = {"conv": m.mac_time("conv") * mac, "fc": m.mac_time("fc") * mac}
        return m.evolve(mac_time_s=rate, peak=None, elem_time_s=m.elem_time_s * elem)

    return base.evolve(worker=machine(base.worker), ps=machine(base.ps), worker_nic=nic(base.worker_nic),
                       ps_nic=nic(base.ps_nic))


preset_networks = st.sampled_from(presets.names("networks"))
preset_clusters = st.sampled_from(presets.names("clusters"))


def spec_floats(low: float, high: float) -> Any:
    """Floats from ``low`` to ``high`` that a spec holds: 0, or magnitudes of at least 1e-30
    (dnnbench.specs.io.MIN_MAGNITUDE; subnormal and tinier values are refused when a spec is built)."""
    from dnnbench.specs.io import MIN_MAGNITUDE

    if low > 0.0:
        return st.floats(max(low, MIN_MAGNITUDE), high)
    return st.just(0.0) | st.floats(MIN_MAGNITUDE, high)
