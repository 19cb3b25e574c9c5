"""One precision's efficiency of an accelerator from one measured throughput (docs/model.md §11).

A device preset's efficiencies are a priori estimates. Given one measured training throughput of a
network on one device in one precision (e.g. ``benchmarks/gpu_resnet50.py``), :func:`fit_precision_efficiency`
scales that precision's efficiency curve (convolution and matrix-product efficiency alike, m_half
unchanged) until the model predicts the measurement, and stores it in
``Accelerator.efficiency_by_precision`` so the other precisions keep theirs.

The fitted device also carries :data:`ONE_ROW_FIT_BAND` as its compute error band, so its predictions
come with a p10–p90 interval: how far 24 measured training steps of other networks fell from the
predictions of a device fitted to one ResNet-50 row (docs/validation.md, "One GPU").
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..specs import Cluster, Configuration, DeviceEfficiency, Machine, Network
from ..specs.shape import ErrorBand

__all__ = ["ONE_ROW_FIT_BAND", "fit_precision_efficiency"]

#: Measured step time / prediction − 1 (p10, p90) of a device fitted to one ResNet-50 row, over 24
#: out-of-sample rows (8 imported and 3 preset networks, fp16, bf16 and tf32, on an H200 SXM;
#: docs/validation.md): the interval such a device's predictions carry.
ONE_ROW_FIT_BAND = ErrorBand(p10=-0.18, p90=0.49, cases=24)


def _with_curve(machine: Machine, precision: str, curve: DeviceEfficiency) -> Machine:
    acc = machine.accelerator
    assert acc is not None
    return machine.evolve(accelerator=acc.evolve(
        efficiency_by_precision=acc.efficiency_by_precision.evolve(**{precision: curve.to_dict()})))


def fit_precision_efficiency(net: Network | str, cluster: Cluster, dataset: Any, config: Configuration,
                             measured_samples_per_s: float,
                             band: ErrorBand | None = ONE_ROW_FIT_BAND) -> tuple[Machine, dict[str, Any]]:
    """The cluster's worker with ``config.precision``'s efficiency scaled so that ``predict`` gives
    ``measured_samples_per_s`` for ``config``, and a report (the factor, the predictions before and
    after). A measurement faster than the device can reach with efficiency 1 leaves the efficiencies at
    1 and says so (``"bound": "memory, overhead or narrow layers"``). The worker carries ``band`` as its
    compute error band (None: the worker's own, if any)."""
    from scipy.optimize import brentq

    from ..model import predict

    worker = cluster.worker
    acc = worker.accelerator
    if acc is None:
        raise SpecError("worker.accelerator", None, "an accelerator (a CPU machine is calibrated by dnnbench "
                                                    "calibrate)")
    if not measured_samples_per_s > 0:
        raise SpecError("measured_samples_per_s", measured_samples_per_s, "a positive throughput")
    precision = config.precision
    acc.peak_macs_per_s(precision)  # one line naming precision when the device lacks it
    base = acc.efficiency(precision)
    top = 1.0 / max(base.conv, base.fc)

    def curve_at(f: float) -> DeviceEfficiency:
        return DeviceEfficiency(conv=min(1.0, base.conv * f), fc=min(1.0, base.fc * f),
                                half_efficiency_macs=base.half_efficiency_macs,
                                half_efficiency_channels=base.half_efficiency_channels)

    def rate(f: float) -> float:
        fitted = cluster.evolve(worker=_with_curve(worker, precision, curve_at(f)))
        return float(predict(net, fitted, dataset, config).samples_per_s)

    before = rate(1.0)
    lo, hi = 1e-4, top
    report: dict[str, Any] = {"precision": precision, "measured_samples_per_s": float(measured_samples_per_s),
                              "predicted_before_samples_per_s": before, "bound": None}
    if rate(hi) < measured_samples_per_s:
        f = hi
        report["bound"] = "memory, overhead or narrow layers"
    elif rate(lo) > measured_samples_per_s:
        f = lo
        report["bound"] = "efficiency floor"
    else:
        f = float(brentq(lambda x: rate(x) / measured_samples_per_s - 1.0, lo, hi, xtol=1e-6, rtol=1e-6))
    curve = curve_at(f)
    fitted_worker = _with_curve(worker, precision, curve)
    report.update(factor=f, efficiency=curve.to_dict(),
                  predicted_after_samples_per_s=rate(f))
    if band is not None:
        fitted_worker = fitted_worker.evolve(compute_error=band)
        report["compute_error"] = band.to_dict()
    return fitted_worker, report
