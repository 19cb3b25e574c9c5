"""Gradient compression in the performance model: wire bits per encoding and selection compute."""

from __future__ import annotations

import pytest

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.model import predict
from dnnbench.specs import Compression, Configuration

NET, DS = "mnist-adam", "mnist"


def _push_s(cluster: str, comp: Compression) -> float:
    cfg = Configuration(replicas=4, ps_machines=2, fc_update="deltas", compression=comp)
    return predict(presets.network(NET), presets.cluster(cluster), presets.dataset(DS), cfg).item()[
        "breakdown_s_per_sample"]["ps_push"]


def test_push_volume_follows_the_encoding() -> None:
    dense = _push_s("adam-2014", Compression())
    lat = presets.cluster("adam-2014").worker_nic.latency_s / 32  # one message per push of 32 samples
    # esgd.md §4: (index, value) pairs at 50 % density save nothing: 64 · 0.5 = 32 bits per element.
    assert _push_s("adam-2014", Compression(method="esgd", density=0.5)) == pytest.approx(dense, rel=1e-12)
    # bitmap + fp32 values at 12.5 %: 1 + 32 · 0.125 = 5 bits per element.
    bitmap = _push_s("adam-2014", Compression(method="esgd", density=0.125, encoding="bitmap"))
    assert (bitmap - lat) == pytest.approx((dense - lat) * 5 / 32, rel=1e-12)


def test_compression_pays_on_the_edge_not_on_a_fast_compute_bound_cluster() -> None:
    comp = Compression(method="esgd", density=0.5, encoding="bitmap")

    def epoch(net: str, cluster: str, ds: str, c: Compression, **kw: object) -> float:
        cfg = Configuration(fc_update="deltas", compression=c, **kw)  # type: ignore[arg-type]
        return float(predict(presets.network(net), presets.cluster(cluster), presets.dataset(ds), cfg).epoch_time_s)

    edge = dict(replicas=8, ps_machines=1, mode="sync")
    assert epoch("mnist-adam", "edge-wifi", "mnist", comp, **edge) < 0.7 * epoch("mnist-adam", "edge-wifi", "mnist",
                                                                              Compression(), **edge)
    # vgg16 on 100 Gbit/s with 8 PS machines is compute-bound: selection work makes compression a loss.
    fast = dict(replicas=4, ps_machines=8, overlap=1.0)
    assert epoch("vgg16", "modern-2025", "imagenet22k", comp, **fast) > epoch("vgg16", "modern-2025", "imagenet22k",
                                                                             Compression(), **fast)


def test_compression_fields_are_checked() -> None:
    with pytest.raises(SpecError, match="method: 'esdg' is not a compression method"):
        Compression(method="esdg")
    with pytest.raises(SpecError, match="encoding"):
        Compression(method="esgd", encoding="zip")
    with pytest.raises(SpecError, match="shared seed"):
        Compression(method="esgd", encoding="values_only")
    with pytest.raises(SpecError, match="density"):
        Compression(method="esgd", density=0.0)


def test_quantisers_and_array_replicas() -> None:
    import numpy as np

    from dnnbench.model import evaluate

    dense = _push_s("adam-2014", Compression())
    lat = presets.cluster("adam-2014").worker_nic.latency_s / 32
    # EF-signSGD: 1 bit per element plus one fp32 scale per tensor (esgd.md; dnnbench.compression.wire).
    sign = _push_s("adam-2014", Compression(method="signsgd", density=1.0))
    assert (sign - lat) < (dense - lat) / 30
    # compress_pull with an array of replica counts: the union density grows with R.
    cfg = Configuration(ps_machines=1, fc_update="deltas",
                        compression=Compression(method="topk_ef", density=0.01, compress_pull=True))
    pred = evaluate(presets.network(NET), presets.cluster("adam-2014"), presets.dataset(DS), cfg,
                    replicas=np.array([1.0, 4.0, 64.0]))
    pulls = pred.breakdown.ps_pull_s
    assert pulls[0] < pulls[1] < pulls[2]
