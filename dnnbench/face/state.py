"""The whole workbench as one frozen spec: network, cluster, data set, configuration and machine budget.

Saved and loaded as JSON through :mod:`dnnbench.specs.io` (atomic writes, field-path errors), so a
workbench file is checked like any other spec: ``dnnbench check-spec my-bench.json``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from ..specs import Cluster, Configuration, Dataset, Network
from ..specs.base import Spec


class WorkbenchState(Spec):
    """What the workbench shows: the problem (network, cluster, data set), the configuration being
    looked at, and the machine budget the optimizer and the heatmap use."""

    network: Network = Field(description="The network being trained.")
    cluster: Cluster = Field(description="The cluster it trains on.")
    dataset: Dataset = Field(description="The data set (samples per epoch).")
    configuration: Configuration = Field(default=Configuration(), description="The configuration looked at.")
    budget_machines: int = Field(gt=0, le=10_000_000, description="The machine budget of the optimizer and "
                                                                  "the heatmap.")

    @classmethod
    def from_presets(cls, network: str | os.PathLike[str] | Network = "imagenet22k-adam",
                     cluster: str | os.PathLike[str] | Cluster = "adam-2014",
                     dataset: str | os.PathLike[str] | Dataset | None = None,
                     configuration: Configuration | None = None,
                     budget_machines: int | None = None) -> WorkbenchState:
        """A state from preset names or spec files; the data set defaults to the network's own and
        the budget to the cluster's ``machines``."""
        from .. import presets

        net = presets.network(network)
        cl = presets.cluster(cluster)
        ds = presets.default_dataset_for(net) if dataset is None else presets.dataset(dataset)
        return cls(network=net, cluster=cl, dataset=ds, configuration=configuration or Configuration(),
                   budget_machines=cl.machines if budget_machines is None else budget_machines)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the state as JSON, atomically."""
        from ..specs import io

        return io.save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WorkbenchState:
        """Read a state written by :meth:`save` (or by hand); errors name the file and the field."""
        from ..specs import io

        return io.load(cls, path)


__all__ = ["WorkbenchState"]
