"""The configuration: how one network is trained on one cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Spec, fail


class Compression(Spec):
    """Gradient compression of PS pushes (docs/esgd.md). ``none`` sends dense fp32 values.

    ``method`` is ``none`` or one of :data:`dnnbench.esgd.methods.METHODS`; ``encoding`` one of
    :data:`dnnbench.esgd.wire.ENCODINGS`. The model charges the encoding's exact bits per element and
    the method's selection work (docs/model.md §6).
    """

    method: str = "none"
    density: float = Field(default=1.0, gt=0, le=1)  # fraction of coordinates sent (1 - drop ratio)
    encoding: str = "pairs32"
    compress_pull: bool = False  # pulls send the union of the workers' supports instead of dense

    @model_validator(mode="after")
    def _known_names(self) -> Compression:
        from ..esgd.methods import METHODS, SHARED_INDEX_METHODS
        from ..esgd.wire import ENCODINGS

        if self.method != "none" and self.method not in METHODS:
            fail("method", self.method, f"is not a compression method; expected one of none, {', '.join(METHODS)}")
        if self.encoding not in ENCODINGS:
            fail("encoding", self.encoding, f"is not an encoding; expected one of {', '.join(ENCODINGS)}")
        if self.encoding == "values_only" and self.method not in SHARED_INDEX_METHODS:
            fail("encoding", self.encoding, "needs indices from a shared seed (method 'randk')")
        return self


class Configuration(Spec):
    workers_per_replica: int = Field(default=1, gt=0, le=100_000)  # W
    replicas: int = Field(default=1, gt=0, le=10_000_000)  # R
    ps_machines: int = Field(default=0, ge=0, le=10_000_000)  # P
    push_interval_samples: int = Field(default=32, gt=0)  # k_push: samples between PS pushes
    pull_interval_samples: int = Field(default=1024, gt=0)  # k_pull: samples between weight fetches
    threads: int | None = Field(default=None, gt=0, le=4096)  # None: one per core
    samples_per_message: int = Field(default=1, gt=0)  # model-parallel messages batch samples
    local_batch_samples: int = Field(default=16, gt=0)  # local weights applied every b samples (Hogwild)
    partitioning: Literal["feature-map", "spatial", "auto"] = "feature-map"
    fc_update: Literal["auto", "activations", "deltas"] = "auto"
    mode: Literal["async", "sync"] = "async"
    # async: how a replica exchanges with the PS. "overlapped": pushes and pulls run beside compute and
    # the PS's ports and CPU are throughput bounds (Adam). "request_reply": a replica pushes, waits for
    # the PS and pulls before it goes on, and the replicas share the PS's ports and CPU as queues
    # (a closed queueing network, docs/model.md §6).
    ps_exchange: Literal["overlapped", "request_reply"] = "overlapped"
    overlap: float = Field(default=0.0, ge=0, le=1)  # 0: compute + network; 1: max of them
    compression: Compression = Compression()
    value_bits: int = Field(default=32, gt=0, le=64)  # bits per activation, error or weight value

    @model_validator(mode="after")
    def _ps_needed(self) -> Configuration:
        if self.replicas > 1 and self.ps_machines == 0:
            fail("ps_machines", 0,
                 f"must be >= 1 when replicas is {self.replicas} (replicas share weights through the PS)")
        return self
