"""ESGD as a PyTorch DDP communication hook (esgd.md §3: ``hook(state, bucket) -> Future[Tensor]``).

DDP hands the hook one flat gradient bucket at a time and no loss; ESGD decides from the loss, so
the state has an explicit loss channel. Per step on every rank::

    model = DistributedDataParallel(net)
    state = ESGDHookState(drop_ratio=0.875)          # any dnnbench.esgd method: method="topk_ef", ...
    model.register_comm_hook(state, esgd_hook)
    loss = criterion(model(x), y)
    state.observe_loss(loss)                         # this rank's mini-batch loss, before backward()
    loss.backward()                                  # the hook runs per bucket: sparsify, all-gather, average

The hook compresses the bucket with the bucket's own compressor (state is kept per bucket), all-gathers
the (index, value) pairs of every rank (one all-gather of the counts, then one of the padded payloads;
fp32 values travel bit-exact inside int64 words), scatters them into a dense tensor in rank order and
divides by the world size: every rank gets the same average, so the replicas stay identical. With
drop ratio 0 this is plain all-reduce averaging.

torch is imported inside the functions only (``import dnnbench.esgd`` stays light).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import checks as v
from .compressor import Compressor
from .methods import METHODS, NO_DROP_RATIO_METHODS, QUANTISER_METHODS
from .methods import drop_ratio as checked_drop_ratio
from .registry import make_compressor
from .sparse import SparseUpdate


class ESGDHookState:
    """Per-bucket compressors, the loss channel and counters for :func:`esgd_hook`.

    ``method`` is any sparsifying method of :data:`dnnbench.compression.METHODS` (default ESGD); ``options`` go
    to its compressor (``variant``, ``beta``, ``tau``, ...). ``process_group`` None means the world.
    A bucket is keyed by (DDP bucket index, size): DDP rebuilds its buckets after the first step, and a
    rebuilt bucket starts with fresh compressor state.
    """

    def __init__(self, drop_ratio: float | None = 0.5, *, method: str = "esgd", process_group: Any = None,
                 seed: int = 0, **options: Any) -> None:
        v.choice("method", method, METHODS)
        if method in QUANTISER_METHODS:
            raise v.fail("method", method, "is a quantiser; this hook all-gathers sparse (index, value) pairs")
        self.method = method
        self.drop_ratio = None if method in NO_DROP_RATIO_METHODS else checked_drop_ratio(drop_ratio)
        self.seed = v.integer("seed", seed, low=0)
        self.options = dict(options)
        make_compressor(method, self.drop_ratio, seed=self.seed, **self.options)  # check the options now
        self.process_group = process_group
        self._compressors: dict[tuple[int, int], Compressor] = {}
        self._told: dict[tuple[int, int], int] = {}  # the loss step each compressor last heard
        self._loss: float | None = None
        self._loss_step = 0
        self.elements_seen = 0  # gradient elements compressed on this rank, all buckets and steps
        self.elements_sent = 0  # of those, (index, value) pairs sent

    def observe_loss(self, loss: Any) -> None:
        """Record this rank's mini-batch loss (a float or a scalar tensor); call once per step before backward."""
        value = float(loss.detach()) if hasattr(loss, "detach") else loss
        self._loss = v.number("loss", value)
        self._loss_step += 1

    @property
    def density(self) -> float:
        """Fraction of the gradient elements sent so far (0 before the first step)."""
        return self.elements_sent / self.elements_seen if self.elements_seen else 0.0

    def compress(self, bucket_index: int, flat: np.ndarray) -> SparseUpdate:
        """The sparse update of bucket ``bucket_index`` this step (tells its compressor the loss first)."""
        key = (int(bucket_index), int(flat.size))
        comp = self._compressors.get(key)
        if comp is None:
            comp = self._compressors[key] = make_compressor(self.method, self.drop_ratio, seed=self.seed,
                                                            **self.options)
        if self._loss is not None and self._told.get(key) != self._loss_step:
            comp.observe_loss(self._loss)
            self._told[key] = self._loss_step
        update = comp.compress(flat, f"bucket{key[0]}")
        self.elements_seen += update.size
        self.elements_sent += update.nnz
        return update


def esgd_hook(state: ESGDHookState, bucket):  # bucket and return not annotated: see the docstring
    """DDP communication hook: ESGD-sparsify the bucket, all-gather (indices, values), average.

    ``bucket`` is a ``torch.distributed.GradBucket``; returns a ``torch.futures.Future[torch.Tensor]`` of
    the dense averaged gradient (the bucket's shape and dtype). Those two are not annotated: DDP rejects
    any annotation but the torch objects themselves, and torch must not be imported at module import.
    """
    import torch
    import torch.distributed as dist

    tensor = bucket.buffer()
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    grad = tensor.detach().to(device="cpu", dtype=torch.float32).numpy()
    update = state.compress(bucket.index(), grad)
    k = update.nnz
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([k], dtype=torch.int64), group=group)
    sizes = [int(c.item()) for c in counts]
    k_max = max(sizes)
    payload = torch.zeros(2 * k_max, dtype=torch.int64)  # [indices | fp32 value bits], zero-padded
    payload[:k] = torch.from_numpy(np.array(update.indices, dtype=np.int64))
    values = torch.from_numpy(np.array(update.values, dtype=np.float32))
    payload[k_max:k_max + k] = values.view(torch.int32).to(torch.int64)
    gathered = [torch.empty_like(payload) for _ in range(world)]
    work = dist.all_gather(gathered, payload, group=group, async_op=True)

    def average(_: Any) -> Any:
        out = torch.zeros(tensor.numel(), dtype=torch.float32)
        for rank, p in enumerate(gathered):  # rank order: every rank sums identically
            n = sizes[rank]
            out.index_add_(0, p[:n], p[k_max:k_max + n].to(torch.int32).view(torch.float32))
        out /= world
        return out.to(device=tensor.device, dtype=tensor.dtype)

    return work.get_future().then(average)


__all__ = ["ESGDHookState", "esgd_hook"]
