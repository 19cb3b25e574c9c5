"""The configuration: how one network is trained on one cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Spec, fail
from .cluster import Precision


class Compression(Spec):
    """Gradient compression of PS pushes (docs/esgd.md). ``none`` sends dense fp32 values.

    ``method`` is ``none`` or one of :data:`dnnbench.compression.methods.METHODS`; ``encoding`` one of
    :data:`dnnbench.compression.wire.ENCODINGS`. The model charges the encoding's exact bits per element and
    the method's selection work (docs/model.md §6).
    """

    method: str = Field(default="none", description="none, or a compression method of dnnbench.compression.methods.")
    density: float = Field(default=1.0, gt=0, le=1, description="Fraction of coordinates sent (1 - drop ratio).")
    encoding: str = Field(default="pairs32",
                          description="How sparse values go on the wire (dnnbench.compression.wire).")
    compress_pull: bool = Field(default=False, description="Pulls send the union of the workers' supports "
                                                           "instead of dense weights.")

    @model_validator(mode="after")
    def _known_names(self) -> Compression:
        from ..compression.methods import METHODS, SHARED_INDEX_METHODS
        from ..compression.wire import ENCODINGS

        if self.method != "none" and self.method not in METHODS:
            fail("method", self.method, f"is not a compression method; expected one of none, {', '.join(METHODS)}")
        if self.encoding not in ENCODINGS:
            fail("encoding", self.encoding, f"is not an encoding; expected one of {', '.join(ENCODINGS)}")
        if self.encoding == "values_only" and self.method not in SHARED_INDEX_METHODS:
            fail("encoding", self.encoding, "needs indices from a shared seed (method 'randk')")
        return self


#: PyTorch DDP's default gradient bucket (``bucket_cap_mb=25``), in bytes.
DDP_BUCKET_BYTES = 25 * 2**20


class AllReduce(Spec):
    """How replicas reduce their gradients among themselves when ``data_parallel`` is ``allreduce``
    (docs/model.md §10): each of a replica's W machines all-reduces its slice with the same slice of
    the other R − 1 replicas, in buckets, as PyTorch DDP does."""

    algorithm: Literal["ring", "tree", "hierarchical"] = Field(
        default="ring", description="ring: reduce-scatter then all-gather, 2(p−1) steps of n/p each; tree: "
                                    "NCCL's double binary tree, about 2·log2(p) latencies and 2·n per machine; "
                                    "hierarchical: inside each node, then n/g between nodes, then inside again.")
    bucket_bytes: int = Field(default=DDP_BUCKET_BYTES, gt=0,
                              description="Gradient bytes per bucket: one all-reduce each (PyTorch DDP: 25 MiB).")
    overlap_backward: bool = Field(default=True, description="Buckets are reduced while backward still runs "
                                                             "(DDP); the last bucket never overlaps.")


class Configuration(Spec):
    """How one network is trained on one cluster: the split (W, R, P) and the choices of the run."""

    workers_per_replica: int = Field(default=1, gt=0, le=100_000,
                                     description="W: machines each model replica is partitioned over.")
    replicas: int = Field(default=1, gt=0, le=10_000_000, description="R: model replicas training on different data.")
    ps_machines: int = Field(default=0, ge=0, le=10_000_000, description="P: parameter-server machines.")
    push_interval_samples: int = Field(default=32, gt=0, description="k_push: samples between pushes to the PS.")
    pull_interval_samples: int = Field(default=1024, gt=0, description="k_pull: samples between weight fetches.")
    threads: int | None = Field(default=None, gt=0, le=4096, description="Threads per machine (None: one per core).")
    samples_per_message: int = Field(default=1, gt=0, description="Samples batched in one model-parallel message.")
    local_batch_samples: int = Field(default=16, gt=0, description="b: local weights are updated every b samples "
                                                                   "(Hogwild-style).")
    partitioning: Literal["feature-map", "spatial", "auto"] = Field(
        default="feature-map", description="How conv layers split over W machines: by feature maps, by image "
                                           "rows (halo exchanges), or whichever moves less.")
    fc_update: Literal["auto", "activations", "deltas"] = Field(
        default="auto", description="What FC layers push: activations and errors (the PS computes the weight "
                                    "gradient, Adam), weight deltas, or whichever is fewer values.")
    mode: Literal["async", "sync"] = Field(default="async", description="async: replicas update the PS when ready; "
                                                                        "sync: in rounds.")
    ps_exchange: Literal["overlapped", "request_reply"] = Field(
        default="overlapped", description="async: overlapped (pushes and pulls beside compute; the PS's ports and "
                                          "CPU are throughput bounds) or request_reply (a replica waits for the PS; "
                                          "replicas queue at it).")
    overlap: float = Field(default=0.0, ge=0, le=1, description="Overlap of compute and communication: 0 adds them, "
                                                                "1 takes the larger.")
    compression: Compression = Field(default=Compression(), description="Gradient compression of PS pushes.")
    value_bits: int = Field(default=32, gt=0, le=64, description="Bits per activation, error or weight value.")
    data_parallel: Literal["ps", "allreduce"] = Field(
        default="ps", description="How replicas share their updates: through the parameter server (ps), or "
                                  "by all-reducing their gradients every k_push samples, synchronously and "
                                  "without PS machines (allreduce).")
    allreduce: AllReduce = Field(default=AllReduce(), description="The all-reduce's algorithm and buckets "
                                                                  "(read when data_parallel is allreduce).")
    precision: Precision = Field(default="fp32", description="Arithmetic of the layers: fp32, tf32, or mixed "
                                                             "precision fp16 / bf16 (an accelerator's modes; CPU "
                                                             "machines compute in fp32).")
    optimizer: Literal["sgd", "momentum", "adam"] = Field(
        default="sgd", description="The training optimizer: its state per weight (none, a momentum, Adam's two "
                                   "moments) counts in memory.")
    zero_stage: int = Field(default=0, ge=0, le=3,
                            description="ZeRO sharding over the data-parallel group (all-reduce only): 1 shards "
                                        "optimizer state, 2 also gradients, 3 also weights (1.5x the traffic).")

    @model_validator(mode="after")
    def _ps_needed(self) -> Configuration:
        if self.zero_stage and self.data_parallel != "allreduce":
            fail("zero_stage", self.zero_stage, "needs data_parallel 'allreduce' (ZeRO shards over the replicas "
                                                "that all-reduce)")
        if self.data_parallel == "allreduce":
            if self.ps_machines:
                fail("ps_machines", self.ps_machines, "must be 0 when data_parallel is 'allreduce' (the replicas "
                                                      "reduce their gradients among themselves)")
            return self
        if self.replicas > 1 and self.ps_machines == 0:
            fail("ps_machines", 0,
                 f"must be >= 1 when replicas is {self.replicas} (replicas share weights through the PS)")
        return self
