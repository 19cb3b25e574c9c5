"""Sweeps over many networks x clusters x budgets: local by default, on Dask distributed on request.

Each task is one (network, cluster, budget) optimisation; tasks are sent to Dask in chunks (its
per-task overhead is ~ms). Long local sweeps show a tqdm progress bar.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ..specs import Configuration


def _one(network: str, cluster: str, budget: int, config: dict[str, Any] | None) -> dict[str, Any]:
    from .. import presets
    from .exact import optimize

    net, cl = presets.network(network), presets.cluster(cluster)
    res = optimize(net, cl, presets.default_dataset_for(net), budget, Configuration.build(config or {}), top_k=1)
    return {"network": network, "cluster": cluster, "budget_machines": budget, **res.best.to_dict(),
            "evaluated": res.evaluated}


def _chunk(tasks: list[tuple[str, str, int]], config: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [_one(n, c, b, config) for n, c, b in tasks]


def sweep(networks: Sequence[str], clusters: Sequence[str], budgets: Sequence[int],
          config: Configuration | None = None, *, scheduler: Any = None, chunk_size: int = 16,
          progress: bool = True) -> list[dict[str, Any]]:
    """The optimizer's best configuration for every (network, cluster, budget).

    ``networks`` and ``clusters`` are preset names or spec-file paths (strings travel to Dask workers
    cheaply). ``scheduler`` is None (run here), a scheduler address, or a ``distributed.Client``.
    Results come back in task order.
    """
    tasks = list(itertools.product(networks, clusters, (int(b) for b in budgets)))
    cfg = config.to_dict() if config is not None else None
    chunks = [tasks[i: i + chunk_size] for i in range(0, len(tasks), chunk_size)]
    if scheduler is None:
        from tqdm.auto import tqdm

        out: list[dict[str, Any]] = []
        for chunk in tqdm(chunks, desc="sweep", unit="chunk", disable=not progress):
            out.extend(_chunk(chunk, cfg))
        return out
    from distributed import Client, as_completed

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futures = client.map(_chunk, chunks, config=cfg, pure=False)
        if progress:
            from tqdm.auto import tqdm

            for _ in tqdm(as_completed(futures), total=len(futures), desc="sweep", unit="chunk"):
                pass
        return [row for part in client.gather(futures) for row in part]
    finally:
        if client is not scheduler:
            client.close()
