"""A simulated edge cluster that really trains (esgd.md §2, "PS (synchronous rounds)").

N workers, each with its own shard, compute a gradient on a local mini-batch, tell their
compressor the loss, compress every tensor and push the sparse updates. The parameter server
averages the updates, applies SGD (heavy-ball momentum optional) and broadcasts the averaged
sparse gradient over the union of the supports; every worker applies the same step, so all
replicas hold the server's weights. Bits are counted exactly per message and encoding.
Everything is seeded: the same config gives the same run, bit for bit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import checks as v
from ..compression import wire
from ..compression.methods import METHODS, NO_DROP_RATIO_METHODS, QUANTISER_METHODS, SHARED_INDEX_METHODS
from ..compression.methods import drop_ratio as checked_drop_ratio
from ..compression.registry import make_compressor
from ..compression.sparse import average
from .data import DATASETS, SPLITS, BatchStream, load_dataset, shard_indices
from .models import MODELS, build_model


@dataclass(frozen=True)
class ClusterConfig:
    """One training run of the simulated cluster. Make variants with ``dataclasses.replace``."""

    method: str = "esgd"
    drop_ratio: float | None = 0.5  # fraction of coordinates not sent; None for dense / threshold
    options: Mapping[str, Any] | tuple[tuple[str, Any], ...] = ()  # compressor keyword arguments
    dataset: str = "mnist"
    n_workers: int = 4
    rounds: int = 300  # synchronous rounds = steps per worker
    batch_size: int = 32  # samples per worker per round
    learning_rate: float = 0.05
    server_momentum: float = 0.9  # heavy-ball momentum of the PS optimizer (0: plain SGD)
    model: str = "mlp"
    hidden_units: int = 128
    split: str = "iid"
    eval_every: int = 10  # rounds between test-accuracy evaluations
    test_fraction: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        v.choice("method", self.method, METHODS)
        if self.method in NO_DROP_RATIO_METHODS:
            if self.drop_ratio not in (None, 0, 0.0):
                raise v.fail("drop_ratio", self.drop_ratio, f"must be None for method {self.method!r}")
            object.__setattr__(self, "drop_ratio", None)
        else:
            object.__setattr__(self, "drop_ratio", checked_drop_ratio(self.drop_ratio))
        items = self.options.items() if isinstance(self.options, Mapping) else self.options
        options = tuple(sorted((str(k), val) for k, val in items))
        if any(k in ("seed", "drop_ratio") for k, _ in options):
            raise v.fail("options", dict(options), "must not set 'seed' or 'drop_ratio' (set them on the config)")
        object.__setattr__(self, "options", options)
        v.choice("dataset", self.dataset, DATASETS)
        v.integer("n_workers", self.n_workers, low=1, high=1024)
        v.integer("rounds", self.rounds, low=1)
        v.integer("batch_size", self.batch_size, low=1)
        v.number("learning_rate", self.learning_rate, low=0.0, low_open=True)
        v.number("server_momentum", self.server_momentum, low=0.0, high=1.0, high_open=True)
        if self.method == "dgc" and self.server_momentum != 0:
            raise v.fail("server_momentum", self.server_momentum,
                         "must be 0 for method 'dgc' (momentum correction keeps the momentum on the workers)")
        v.choice("model", self.model, MODELS)
        v.integer("hidden_units", self.hidden_units, low=1)
        v.choice("split", self.split, SPLITS)
        v.integer("eval_every", self.eval_every, low=1)
        v.number("test_fraction", self.test_fraction, low=0.0, high=1.0, low_open=True, high_open=True)
        v.integer("seed", self.seed, low=0)

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class TrainingRun:
    """What one run recorded, per round (index t = 0 .. rounds-1) and per evaluation."""

    config: ClusterConfig
    tensor_sizes: dict[str, int]  # d per tensor name
    train_loss: np.ndarray  # (rounds,) mean of the workers' mini-batch losses
    eval_rounds: np.ndarray  # (n_eval,) rounds completed at each evaluation (0 = initial weights)
    test_accuracy: np.ndarray  # (n_eval,)
    nnz_up: np.ndarray  # (rounds, workers, tensors) coordinates each worker sent
    nnz_down: np.ndarray  # (rounds, tensors) union support the PS broadcast
    shared_indices: bool  # indices from a shared seed (values_only applies, up and down)
    wall_time_s: float
    compress_time_s: float  # of wall_time_s, spent in the workers' compress calls
    diverged: bool = False  # a loss went non-finite; the run stopped there
    extra: dict[str, Any] = field(default_factory=dict)
    #: quantisers only: format -> (rounds, workers) exact bits each worker pushed in that format
    quantised_bits_up: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def rounds_done(self) -> int:
        return int(self.train_loss.size)

    @property
    def n_params(self) -> int:
        return int(sum(self.tensor_sizes.values()))

    @property
    def final_accuracy(self) -> float:
        return float(self.test_accuracy[-1])

    @property
    def density_up(self) -> np.ndarray:
        """(rounds,) mean over workers of the fraction of all parameters sent."""
        return self.nnz_up.sum(axis=2).mean(axis=1) / self.n_params

    @property
    def density_down(self) -> np.ndarray:
        """(rounds,) fraction of all parameters in the broadcast union support."""
        return self.nnz_down.sum(axis=1) / self.n_params

    @property
    def encodings(self) -> tuple[str, ...]:
        """Encodings that apply to this run's messages (a quantiser's: its formats and "dense")."""
        if self.quantised_bits_up:
            return (*self.quantised_bits_up, "dense")
        return tuple(e for e in wire.ENCODINGS if e != "values_only" or self.shared_indices)

    def bits_up(self, encoding: str) -> np.ndarray:
        """(rounds, workers) bits each worker pushed.

        "best_lossless" takes, per message, the cheapest of :data:`dnnbench.compression.wire.LOSSLESS_ENCODINGS`
        (quantisers: of their formats and "dense").
        """
        if encoding in self.quantised_bits_up:
            return self.quantised_bits_up[encoding]
        if encoding == "best_lossless" and self.quantised_bits_up:
            return np.min([self.bits_up(e) for e in self.encodings], axis=0)
        return self._bits(encoding, self.nnz_up, axis=2)

    def bits_down(self, encoding: str) -> np.ndarray:
        """(rounds,) bits the PS broadcast to each worker (quantisers: dense fp32, in any of their encodings).

        The average of quantised updates is not quantised, so the PS of a quantiser run broadcasts it dense.
        """
        if self.quantised_bits_up:
            self._check(encoding)
            encoding = "dense"
        return self._bits(encoding, self.nnz_down, axis=1)

    def _check(self, encoding: str) -> None:
        if encoding != "best_lossless" and encoding not in self.encodings:
            raise v.fail("encoding", encoding, f"does not apply to method {self.config.method!r}; "
                         f"expected one of {self.encodings + ('best_lossless',)}")

    def _bits(self, encoding: str, nnz: np.ndarray, axis: int) -> np.ndarray:
        sizes = np.array(list(self.tensor_sizes.values()), dtype=np.int64)
        if encoding == "best_lossless":
            choices = [e for e in wire.LOSSLESS_ENCODINGS if e in self.encodings]
            return np.min([self._bits(e, nnz, axis) for e in choices], axis=0)
        self._check(encoding)
        return wire.message_bits(encoding, nnz, sizes, shared_indices=self.shared_indices).sum(axis=axis)

    def cumulative_bits_up_at_evals(self, encoding: str) -> np.ndarray:
        """(n_eval,) bits one worker (the mean worker) had pushed when each evaluation was taken."""
        cumulative = np.concatenate([[0.0], np.cumsum(self.bits_up(encoding).mean(axis=1))])
        return cumulative[self.eval_rounds]


def _seed_int(seq: np.random.SeedSequence) -> int:
    return int(seq.generate_state(1)[0])


def simulate(config: ClusterConfig) -> TrainingRun:
    """Train with ``config`` on the simulated cluster and record loss, accuracy and message sizes.

    BLAS runs single-threaded meanwhile: the matrices are small (32 x 784 x 128), and OpenBLAS
    threads spinning on a busy 2-core machine made a step 100 times slower.
    """
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    # a diverging run overflows on its way to a non-finite loss, which stops it and marks it diverged
    with threadpool_limits(limits=1, user_api="blas"), np.errstate(over="ignore", invalid="ignore"):
        return _simulate(config)


def _simulate(config: ClusterConfig) -> TrainingRun:
    start = time.perf_counter()
    data = load_dataset(config.dataset, test_fraction=config.test_fraction, seed=config.seed)
    model = build_model(config.model, data.n_features, data.image_side, data.n_classes, config.hidden_units)
    seq_init, seq_shards, seq_comp, *seq_workers = np.random.SeedSequence(config.seed).spawn(3 + config.n_workers)
    params = model.init_params(np.random.default_rng(seq_init))
    names = list(params)
    shards = shard_indices(data.y_train, config.n_workers, config.split, np.random.default_rng(seq_shards))
    streams = [BatchStream(shard, min(config.batch_size, shard.size), np.random.default_rng(s))
               for shard, s in zip(shards, seq_workers, strict=True)]
    shared = config.method in SHARED_INDEX_METHODS
    comp_seeds = [_seed_int(s) for s in seq_comp.spawn(config.n_workers)]
    compressors = [make_compressor(config.method, config.drop_ratio, seed=config.seed if shared else comp_seeds[w],
                                   **config.options_dict) for w in range(config.n_workers)]
    velocity = {n: np.zeros_like(p) for n, p in params.items()}
    n_rounds, n_workers, n_tensors = config.rounds, config.n_workers, len(names)
    train_loss = np.full(n_rounds, np.nan)
    nnz_up = np.zeros((n_rounds, n_workers, n_tensors), dtype=np.int64)
    nnz_down = np.zeros((n_rounds, n_tensors), dtype=np.int64)
    quantised = config.method in QUANTISER_METHODS
    formats = wire.QUANTISED_ENCODINGS.get(config.method, ())
    q_bits = {f: np.zeros((n_rounds, n_workers), dtype=np.int64) for f in formats}
    eval_rounds, accuracy = [0], [model.accuracy(params, data.x_test, data.y_test)]
    compress_s = 0.0
    diverged = False
    lr, mom = np.float32(config.learning_rate), np.float32(config.server_momentum)
    done = 0
    for t in range(n_rounds):
        updates = []
        losses = []
        for w in range(n_workers):
            batch = streams[w].next()
            loss, grads = model.loss_and_grads(params, data.x_train[batch], data.y_train[batch])
            if not np.isfinite(loss):
                diverged = True
                break
            losses.append(loss)
            tic = time.perf_counter()
            compressors[w].observe_loss(loss)
            updates.append([compressors[w].compress(grads[n], n) for n in names])
            compress_s += time.perf_counter() - tic
            nnz_up[t, w] = [u.nnz for u in updates[-1]]
            for f in formats:
                q_bits[f][t, w] = sum(compressors[w].bits(u, f) for u in updates[-1])
        if diverged:
            break
        train_loss[t] = float(np.mean(losses))
        for j, n in enumerate(names):
            mean, union = average([updates[w][j] for w in range(n_workers)])
            nnz_down[t, j] = union
            buf = velocity[n]
            buf *= mom
            buf += mean.reshape(buf.shape)
            params[n] -= lr * buf
        done = t + 1
        if done % config.eval_every == 0 or done == n_rounds:
            eval_rounds.append(done)
            accuracy.append(model.accuracy(params, data.x_test, data.y_test))
    return TrainingRun(
        config=config,
        tensor_sizes={n: int(params[n].size) for n in names},
        train_loss=train_loss[:done],
        eval_rounds=np.array(eval_rounds, dtype=np.int64),
        test_accuracy=np.array(accuracy),
        nnz_up=nnz_up[:done],
        nnz_down=nnz_down[:done],
        shared_indices=shared,
        wall_time_s=time.perf_counter() - start,
        compress_time_s=compress_s,
        diverged=diverged,
        extra={"compressor_stats": _mean_stats([c.stats() for c in compressors])},
        quantised_bits_up={f: b[:done] for f, b in q_bits.items()} if quantised else {},
    )


def _mean_stats(stats: list[dict[str, float]]) -> dict[str, float]:
    """The workers' compressor counters, averaged."""
    keys = stats[0].keys() if stats else ()
    return {k: float(np.mean([s[k] for s in stats])) for k in keys}


__all__ = ["ClusterConfig", "TrainingRun", "simulate"]
